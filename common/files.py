"""Files on any store: reading and listing, one file written atomically (a hidden temporary
beside the final name, renamed when the block succeeds), local copies and mirrors of remote
files, the hashing writer behind the output manifest, and the disk-full messages.

Part of the IO layer that ``common.storage`` gathers (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import hashlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from common.paths import basename, is_local, join, local_path, split
from common.stores import beam_filesystem, filesystems

STAGING_DIR = "_temporary"


COPY_CHUNK = 8 << 20


# OS errors that mean "the disk (or the quota, or the file-size limit) is full": a job that
# meets one stops with one line naming the path and the space, and commits nothing.
DISK_FULL_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
                    errno.EFBIG: "file too large for the file-size limit"}


_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]")


class DiskFullError(OSError):
    """A write that ran out of space; ``needed``: the bytes the write needed, when known."""

    def __init__(self, code: int, path: str, needed: int | None = None):
        super().__init__(code, os.strerror(code), path)
        self.needed = needed


def disk_full_cause(exc: BaseException | None) -> OSError | None:
    """The disk-full OSError behind ``exc`` (itself, its cause or context, or one a runner
    re-raised as text, e.g. Beam's ``RuntimeError: OSError: [Errno 28] ...``), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return exc
        match = _ERRNO_TEXT.search(str(exc)[:2000])
        if match and int(match.group(1)) in DISK_FULL_ERRNOS:
            return OSError(int(match.group(1)), os.strerror(int(match.group(1))))
        exc = exc.__cause__ or exc.__context__
    return None


def free_bytes(path: str) -> int | None:
    """Free bytes on the local file system holding ``path`` (its nearest existing folder); None on an object store."""
    if not is_local(path):
        return None
    folder = os.path.abspath(local_path(path))
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def disk_full_message(error: OSError, path: str | None) -> str:
    """One line: what ran out, where, the free space there and what the write needed."""
    path = getattr(error, "filename", None) or path or "the output"
    reason = DISK_FULL_ERRNOS.get(error.errno or 0, error.strerror or "write failed")
    free = free_bytes(path)
    where = f"{free:,} bytes free there" if free is not None else "free space unknown"
    needed = getattr(error, "needed", None)
    if error.errno == errno.EFBIG:
        ask = "raise the file-size limit (ulimit -f) or write elsewhere, and run it again"
    elif needed:
        short = max(needed - (free or 0), 0)
        ask = f"this write needs {needed:,} bytes: free at least {short:,} more bytes, or write elsewhere"
    else:
        ask = "free more space than that (or write elsewhere) and run it again"
    return f"{path}: {reason} ({where}); {ask}. Nothing partial was committed"


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(local_path(path))
    return filesystems(path).exists(path)


def is_file(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(local_path(path))
    return filesystems(path).exists(path)


def is_folder(path: str) -> bool:
    """A local directory, or a remote prefix with at least one object under ``path/``."""
    if is_local(path):
        return os.path.isdir(local_path(path))
    prefix = path.rstrip("/") + "/"
    return bool(match_files(prefix + "**", limit=1))


def size(path: str) -> int:
    if is_local(path):
        return os.path.getsize(local_path(path))
    fs = filesystems(path)
    return fs.get_filesystem(path).size(path)


def open_read(path: str) -> BinaryIO:
    """A binary stream of the file (seekable on disk, ``memory://``, S3 and GCS)."""
    if is_local(path):
        return open(local_path(path), "rb")
    return filesystems(path).open(path, compression_type=beam_filesystem().CompressionTypes.UNCOMPRESSED)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def match_files(pattern: str, limit: int | None = None) -> list[tuple[str, int]]:
    try:
        (result,) = filesystems(pattern).match([pattern], limits=[limit])
    except beam_filesystem().BeamIOError:
        return []
    return [(m.path, m.size_in_bytes) for m in result.metadata_list]


def list_files(folder: str) -> list[str]:
    """The files directly in ``folder`` (not in sub-folders), sorted by path."""
    if is_local(folder):
        folder = local_path(folder)
        return sorted(os.path.join(folder, n) for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    return sorted(path for path, _ in match_files(folder.rstrip("/") + "/*"))


def glob(pattern: str) -> list[str]:
    """Files matching ``pattern`` (``*``, ``?``, ``[...]``; ``**`` crosses folders), sorted."""
    if is_local(pattern):
        return sorted(p for p in _glob.glob(local_path(pattern), recursive=True) if os.path.isfile(p))
    return sorted(path for path, _ in match_files(pattern))


def has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def makedirs(folder: str) -> None:
    """Create a local folder (and its parents); a no-op on object stores, which have none."""
    if is_local(folder):
        os.makedirs(local_path(folder) or ".", exist_ok=True)


def temporary_path(final_path: str | os.PathLike) -> str:
    """A hidden name beside ``final_path`` that listings skip."""
    folder, name = split(os.fspath(final_path))
    return join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}") if folder else f".{name}.tmp-{os.getpid()}"


def rename(source: str, destination: str) -> None:
    if is_local(source) and is_local(destination):
        os.replace(local_path(source), local_path(destination))
        return
    fs = filesystems(destination)
    if fs.exists(destination):  # object stores overwrite, but Beam's local and HDFS renames refuse
        fs.delete([destination])
    fs.rename([source], [destination])


def delete(paths: Iterable[str]) -> None:
    """Delete files (and, for a folder or prefix, everything under it); missing ones are fine."""
    for path in paths:
        if is_local(path):
            local = local_path(path)
            if os.path.isdir(local):
                shutil.rmtree(local, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(local)
            continue
        found = [p for p, _ in match_files(path.rstrip("/") + "/**")] + ([path] if exists(path) else [])
        if found:
            with contextlib.suppress(beam_filesystem().BeamIOError):
                filesystems(path).delete(found)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _finish_empty_upload(stream) -> None:
    """Beam's S3 writer (2.77) completes a multipart upload with the parts it sent, and S3
    rejects a completion with none (``MalformedXML``): an empty object gets one empty part."""
    stream.flush()
    uploader = getattr(getattr(stream, "raw", None), "_uploader", None)
    if uploader is not None and hasattr(uploader, "_write_to_s3") and not uploader.parts and not uploader.buffer:
        uploader._write_to_s3(b"")


class AtomicFile:
    """A binary stream under a temporary name beside ``final_path``: ``commit()`` makes it
    ``final_path``, ``discard()`` removes it and leaves ``final_path`` untouched."""

    def __init__(self, final_path: str | os.PathLike):
        self.final_path = os.fspath(final_path)
        folder = split(self.final_path)[0]
        if folder:
            makedirs(folder)
        self.temporary = temporary_path(self.final_path)
        if is_local(self.final_path):
            self.stream = open(local_path(self.temporary), "wb")
        else:
            self.stream = filesystems(self.temporary).create(self.temporary, compression_type=beam_filesystem().CompressionTypes.UNCOMPRESSED)

    def commit(self) -> None:
        try:
            if not is_local(self.temporary):
                _finish_empty_upload(self.stream)
            self.stream.close()
            if is_local(self.temporary):
                _fsync(local_path(self.temporary))
            rename(self.temporary, self.final_path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.stream.close()
        with contextlib.suppress(Exception):
            delete([self.temporary])


@contextlib.contextmanager
def open_write(final_path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``final_path`` when the block ends without an error."""
    target = AtomicFile(final_path)
    try:
        yield target.stream
    except BaseException:
        target.discard()
        raise
    target.commit()


@contextlib.contextmanager
def atomic_path(final_path: str | os.PathLike) -> Iterator[str]:
    """A local path to write (for libraries that want a file name); it becomes
    ``final_path`` (local or remote) when the block ends without an error."""
    final_path = os.fspath(final_path)
    if is_local(final_path):
        final_path = local_path(final_path)
        makedirs(os.path.dirname(final_path))
        temporary = temporary_path(final_path)
        try:
            yield temporary
            os.replace(temporary, final_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
            raise
        return
    with tempfile.TemporaryDirectory(prefix="corpusforge-upload-") as folder:
        local = os.path.join(folder, basename(final_path))
        yield local
        with open(local, "rb") as source, open_write(final_path) as target:
            shutil.copyfileobj(source, target, COPY_CHUNK)


def write_atomically(path: str | os.PathLike, data: bytes | str) -> None:
    with open_write(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def copy_file(source: str, destination: str) -> None:
    with open_read(source) as src, open_write(destination) as dst:
        shutil.copyfileobj(src, dst, COPY_CHUNK)


_DOWNLOADS: list = []


def localize(path: str) -> str:
    """A local path holding ``path``'s bytes: the path itself when local, else a download
    into a temporary folder that lives as long as the process (for memory-mapped reads)."""
    if is_local(path):
        return local_path(path)
    if not _DOWNLOADS:
        _DOWNLOADS.append(tempfile.TemporaryDirectory(prefix="corpusforge-download-"))
    local = os.path.join(_DOWNLOADS[0].name, uuid.uuid4().hex[:8] + "-" + basename(path))
    with open_read(path) as source, open(local, "wb") as target:
        shutil.copyfileobj(source, target, COPY_CHUNK)
    return local


_COPIES: dict[str, str] = {}


def _download_folder() -> str:
    if not _DOWNLOADS:
        _DOWNLOADS.append(tempfile.TemporaryDirectory(prefix="corpusforge-download-"))
    return tempfile.mkdtemp(dir=_DOWNLOADS[0].name)


def local_copy(path: str) -> str:
    """A local path with ``path``'s content, for readers that need files on disk (memory-mapped
    token shards, checkpoints): the path itself when local; else a file, a glob's matches (the
    glob is returned, rooted locally) or a whole folder (``_temporary/`` skipped; its
    ``_SUCCESS`` comes along, so readers check the copy as they would the original), downloaded once per process into a
    temporary folder that lives as long as the process."""
    if is_local(path):
        return local_path(path)
    if path in _COPIES:
        return _COPIES[path]
    target = _download_folder()
    if has_magic(path):
        for source in glob(path):
            copy_file(source, os.path.join(target, basename(source)))
        local = os.path.join(target, basename(path))
    elif is_file(path):
        local = os.path.join(target, basename(path))
        copy_file(path, local)
    else:
        root = path.rstrip("/") + "/"
        for source in sorted(sizes_under(path)):
            name = source[len(root):]
            if not name.startswith(STAGING_DIR + "/"):
                copy_file(source, os.path.join(target, *name.split("/")))
        local = target
    _COPIES[path] = local
    return local


class RunMirror:
    """A local folder that stands for a remote one: ``sync()`` uploads each file that is new or
    changed since the last sync, each atomically (``copy_file``), hidden temporaries skipped."""

    def __init__(self, remote: str, local: str):
        self.remote, self.local = remote, local
        self._sent: dict[str, tuple[int, int]] = {}

    def _files(self) -> Iterator[tuple[str, str, tuple[int, int]]]:
        for folder, dirs, names in os.walk(self.local):
            dirs.sort()
            for name in sorted(names):
                if name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                stat = os.stat(path)
                yield path, os.path.relpath(path, self.local).replace(os.sep, "/"), (stat.st_size, stat.st_mtime_ns)

    def sync(self) -> None:
        present = set()
        for path, name, mark in self._files():
            present.add(name)
            if self._sent.get(name) != mark:
                copy_file(path, join(self.remote, name))
                self._sent[name] = mark
        gone = sorted(set(self._sent) - present)  # e.g. a kept checkpoint past --keep_checkpoints
        delete([join(self.remote, name) for name in gone])
        for name in gone:
            del self._sent[name]

    def download(self) -> None:
        root = self.remote.rstrip("/") + "/"
        for source in sorted(sizes_under(self.remote)):
            copy_file(source, os.path.join(self.local, *source[len(root):].split("/")))
        self._sent = {name: mark for _, name, mark in self._files()}


_MIRRORS: dict[str, RunMirror] = {}


@contextlib.contextmanager
def mirrored_folder(folder: str, download: bool = False) -> Iterator[str]:
    """A local folder to write a run into (training, fine-tuning): ``folder`` itself when local;
    for a remote ``folder``, a temporary one whose files are uploaded at each ``sync_mirror``
    (a checkpoint) and when the block ends without an error. ``download`` fetches what the
    remote folder holds first (``--resume``)."""
    if is_local(folder):
        yield local_path(folder)
        return
    with tempfile.TemporaryDirectory(prefix="corpusforge-run-") as local:
        mirror = RunMirror(folder, local)
        if download:
            mirror.download()
        _MIRRORS[local] = mirror
        try:
            yield local
            mirror.sync()
        finally:
            del _MIRRORS[local]


def sync_mirror(path: str) -> None:
    """Upload the run folder that ``path`` (just written) is in, when it stands for a remote one."""
    path = os.path.abspath(path)
    for local, mirror in list(_MIRRORS.items()):
        if path.startswith(os.path.abspath(local) + os.sep):
            mirror.sync()


class HashingWriter:
    """Wraps a binary stream; counts the bytes written and their sha256 as they pass."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def write(self, data) -> int:
        self._stream.write(data)
        self.sha256.update(data)
        self.bytes += len(data)
        return len(data)

    def tell(self) -> int:
        return self.bytes

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        pass  # the owner closes the underlying stream

    @property
    def closed(self) -> bool:
        return self._stream.closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def info(self, name: str) -> dict:
        return {"name": name, "bytes": self.bytes, "sha256": self.sha256.hexdigest()}


def file_info(path: str, name: str) -> dict:
    """Manifest entry for an existing file: its size and sha256, read back."""
    digest, total = hashlib.sha256(), 0
    with open_read(path) as f:
        while chunk := f.read(COPY_CHUNK):
            digest.update(chunk)
            total += len(chunk)
    return {"name": name, "bytes": total, "sha256": digest.hexdigest()}


def sizes_under(folder: str) -> dict[str, int]:
    """Every file under ``folder`` (sub-folders included) -> its size: one listing, so
    checking a manifest of thousands of shards on an object store costs no request per file."""
    if is_local(folder):
        sizes = {}
        for d, _, names in os.walk(local_path(folder)):
            for n in names:
                path = os.path.join(d, n)
                try:
                    sizes[path] = os.path.getsize(path)
                except FileNotFoundError:
                    pass  # gone between the listing and the look (another job's temporary file, renamed)
        return sizes
    return dict(match_files(folder.rstrip("/") + "/**"))
