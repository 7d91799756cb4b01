"""The IO layer: every file corpusforge reads or writes, on a disk or an object store.

Paths are Beam ``FileSystems`` paths: a local path (or ``file://``), ``gs://``,
``s3://``, ``hdfs://``, or ``memory://`` (``common.memfs``, for tests). Local paths take
the plain ``os`` route (no Beam import, fsync before rename); every other scheme goes
through ``apache_beam.io.filesystems.FileSystems``, configured by the job's pipeline
options (``--s3_endpoint_url``, ``--project``, ...). This module is the one place in
``corpus/`` that talks to Beam, and only to its FileSystems.

**One file, atomically.** ``open_write``/``write_atomically``/``atomic_path`` write under a
hidden temporary name beside the final one (``.<name>.tmp-<random>``) and rename it when
the block succeeds; on an error the temporary is removed and whatever stood under the
final name is untouched. On an object store the rename is Beam's copy + delete, so a
reader never sees a half-written object under a final name.

**A set of files, atomically: the output contract.** A job's output folder is complete
when it holds ``_SUCCESS``, written last, a JSON manifest of every file of the set (name
relative to the folder, size in bytes, sha256). A job first calls ``begin_output``, which
removes an old ``_SUCCESS`` and writes ``_temporary/job.json``; writers stage their files
under ``_temporary/``; ``commit_output`` writes ``_SUCCESS`` and only then deletes
``_temporary/``. Whatever point a job is killed at, the folder either has a ``_SUCCESS``
that matches its files or no ``_SUCCESS`` and a ``_temporary/job.json`` that says an
unfinished job wrote it. ``check_output`` is what readers use to tell them apart.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import glob as _glob
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from common.errors import InputError

log = logging.getLogger(__name__)

SUCCESS_FILE = "_SUCCESS"
STAGING_DIR = "_temporary"
JOB_FILE = "job.json"
MANIFEST_FORMAT = "corpusforge-output-v1"
COPY_CHUNK = 8 << 20


class IncompleteOutputError(InputError):
    """An output folder that a reader must not take as complete; the message says why."""


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
    folder = os.path.abspath(_local(path))
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


# ---------------------------------------------------------------------------------------
# Paths


def is_local(path: str | os.PathLike) -> bool:
    scheme = urllib.parse.urlsplit(os.fspath(path)).scheme
    return len(scheme) <= 1 or scheme == "file"  # one letter is a Windows drive


def _local(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if path.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlsplit(path).path)
    return path


def _filesystems(path: str | None = None):
    """Beam's FileSystems, with ``memory://`` registered and S3 clients shared; with a
    ``path``, after checking its store answers (``check_store``)."""
    # Beam takes about a second to import: only a path that is not local loads it (here and below).
    from apache_beam.io.filesystems import FileSystems

    import common.memfs  # noqa: F401  (registers the memory:// filesystem)

    _share_s3_clients()
    if path is not None:
        check_store(path)
    return FileSystems


def _beam_filesystem():
    """``apache_beam.io.filesystem`` (``CompressionTypes``, ``BeamIOError``), for paths that are not local."""
    from apache_beam.io import filesystem  # Beam: not for local paths (see _filesystems)

    return filesystem


def join(base: str | os.PathLike, *names: str) -> str:
    base = os.fspath(base)
    if is_local(base):
        return os.path.join(_local(base), *names)
    path = base
    for name in names:
        path = path.rstrip("/") + "/" + name.lstrip("/")
    return path


def split(path: str) -> tuple[str, str]:
    """(folder, name) of ``path``."""
    if is_local(path):
        return os.path.split(_local(path))
    head, _, tail = path.rstrip("/").rpartition("/")
    return head, tail


def basename(path: str) -> str:
    return split(path)[1]


# ---------------------------------------------------------------------------------------
# Stores: configured once per process, one client per store, failing fast

STORE_TIMEOUT_S = 30.0  # --store_timeout_s: how long a store may stay silent before the job ends
STORE_TIMEOUT_OPTION = "--store_timeout_s"
# The Beam FileSystems options (S3, GCS/GCP, HDFS) that every command accepts, and corpusforge's timeout.
STORE_OPTION_PREFIXES = ("--s3_", "--gcs_", "--hdfs_", "--project", STORE_TIMEOUT_OPTION)
_FLAG_STORE_OPTIONS = ("--s3_disable_ssl", "--hdfs_full_urls")  # take no value


class StoreError(InputError):
    """A store that cannot be used (unreachable, silent, refusing the credentials, a missing
    library): one line naming the store and what to check."""


_STORE: dict[str, Any] = {"options": None, "timeout_s": STORE_TIMEOUT_S}
_CHECKED: dict[tuple, StoreError | None] = {}
_S3_CLIENTS: dict[tuple, object] = {}


def split_store_args(argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the store options of ``argv`` with their values, the rest): for the commands that are
    no Beam job (``stats``, ``train``, ``eval``, ``finetune``, ``sample``)."""
    store, rest, argv = [], [], list(argv)
    i = 0
    while i < len(argv):
        token = argv[i]
        flag = token.split("=", 1)[0]
        if token.startswith(STORE_OPTION_PREFIXES):
            store.append(token)
            if "=" not in token and flag not in _FLAG_STORE_OPTIONS and i + 1 < len(argv):
                store.append(argv[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return store, rest


def store_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{STORE_TIMEOUT_OPTION}: not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"{STORE_TIMEOUT_OPTION}: must be a positive number of seconds, not {text}")
    return value


def configure(beam_args: Iterable[str] | None, timeout_s: float | None = None) -> None:
    """The one place a process gives FileSystems its store options (S3 endpoint and
    credentials, GCP project, HDFS namenode) and the store timeout, before it lists or reads
    anything. Every job calls it through ``pipelines.options.split_job_args``, the other
    commands after ``split_store_args``. Beam is imported only when options are given."""
    beam_args = list(beam_args or [])
    store, _ = split_store_args(beam_args)
    rest = []
    i = 0
    while i < len(beam_args):  # --store_timeout_s is corpusforge's, not a Beam option
        flag, _, value = beam_args[i].partition("=")
        if flag == STORE_TIMEOUT_OPTION:
            if not value and i + 1 < len(beam_args):
                value = beam_args[i + 1]
                i += 1
            timeout_s = store_timeout(value)
        else:
            rest.append(beam_args[i])
        i += 1
    _STORE["timeout_s"] = float(timeout_s or STORE_TIMEOUT_S)
    _CHECKED.clear()
    if not rest:
        return
    from apache_beam.options.pipeline_options import PipelineOptions  # Beam: only when remote options are given

    options = PipelineOptions(rest)
    _STORE["options"] = options
    _filesystems().set_options(options)


def _store_options():
    """The options FileSystems works with: the configured ones, or the running pipeline's (on a worker)."""
    fs = _filesystems()
    if fs._pipeline_options is not None:
        return fs._pipeline_options
    from apache_beam.options.value_provider import RuntimeValueProvider  # Beam: remote paths only

    return RuntimeValueProvider.runtime_options or _STORE["options"]


_OPTION_VALUES: dict[int, tuple] = {}


def _option(options, name: str):
    """One store option of ``options`` (Beam ``PipelineOptions`` or the dict a worker may get);
    a PipelineOptions object is read once (parsing it costs more than a file operation)."""
    if options is None:
        return None
    if isinstance(options, dict):
        return options.get(name)
    cached = _OPTION_VALUES.get(id(options))
    if cached is None or cached[0] is not options:
        cached = _OPTION_VALUES[id(options)] = (options, options.get_all_options(retain_unknown_options=True))
    return cached[1].get(name)


S3_SETTINGS = ("s3_endpoint_url", "s3_access_key_id", "s3_secret_access_key", "s3_session_token", "s3_region_name",
               "s3_api_version", "s3_verify", "s3_disable_ssl")


def s3_client(options, timeout_s: float | None = None, attempts: int = 3):
    """The boto3 S3 client of this process for these options: built once (about 0.1 s of CPU
    each), then shared by every file operation, by the launcher and by each worker."""
    settings = tuple(_option(options, name) for name in S3_SETTINGS)
    timeout_s = timeout_s or _STORE["timeout_s"]
    key = (os.getpid(), settings, timeout_s, attempts)
    client = _S3_CLIENTS.get(key)
    if client is None:
        import boto3  # apache-beam[aws]: only for s3:// paths
        from botocore.config import Config

        endpoint, key_id, secret, token, region, api_version, verify, disable_ssl = settings
        client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, aws_access_key_id=key_id, aws_secret_access_key=secret, aws_session_token=token,
            region_name=region, api_version=api_version, verify=verify, use_ssl=not disable_ssl,
            config=Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": attempts, "mode": "standard"}))
        _S3_CLIENTS[key] = client
    return client


def _share_s3_clients() -> None:
    """Make Beam's S3 filesystem (which builds a boto3 client for every file operation) take
    this process's shared client (``s3_client``)."""
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client  # apache-beam[aws]: absent without it
    except ImportError:
        return
    if getattr(boto3_client.Client, "shared_client", False):
        return

    class SharedClient(boto3_client.Client):
        shared_client = True

        def __init__(self, options):  # Beam's Client, with the process's client instead of a new one
            self.client = s3_client(options)
            self._download_request = None
            self._download_stream = None
            self._download_pos = 0

    boto3_client.Client = SharedClient  # type: ignore[misc]  # replaces Beam's class on purpose


def _store_of(path: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(path)
    return parts.scheme, parts.netloc


def check_store(path: str) -> None:
    """Raise ``StoreError`` (one line) when the store of ``path`` does not answer within the
    store timeout, refuses the credentials, or lacks its library; checked once per store and
    process, before the first operation on it."""
    scheme, name = _store_of(path)
    options = _store_options()
    key = (scheme, name, _option(options, "s3_endpoint_url"), _option(options, "hdfs_host"), _option(options, "hdfs_port"))
    if key not in _CHECKED:
        _CHECKED[key] = _probe(scheme, name, options, _STORE["timeout_s"])
    error = _CHECKED[key]
    if error is not None:
        raise error


def _probe(scheme: str, name: str, options, timeout_s: float) -> StoreError | None:
    """The store's first answer, within ``timeout_s`` of wall time whatever a client library
    retries or redirects (the check runs in a thread that is left behind when silent)."""
    import threading  # standard library; only for remote paths

    found: list = []
    thread = threading.Thread(target=lambda: found.append(_probe_store(scheme, name, options, timeout_s)),
                              name=f"check {scheme}://{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not found:
        return StoreError(f"{scheme}://{name}: {_address(scheme, options)} did not answer within {timeout_s:g} s: "
                          f"check {_SETTINGS_TO_CHECK.get(scheme, 'the store options')} or raise {STORE_TIMEOUT_OPTION}")
    return found[0]


_SETTINGS_TO_CHECK = {"s3": "--s3_endpoint_url (is the server up, is it an S3 port?)",
                      "hdfs": "--hdfs_host and --hdfs_port (the namenode's WebHDFS address)",
                      "gs": "the network and the Google Cloud credentials"}


def _address(scheme: str, options) -> str:
    if scheme == "s3":
        return _option(options, "s3_endpoint_url") or "the AWS endpoint"
    if scheme == "hdfs":
        return f"the namenode {_option(options, 'hdfs_host')}:{_option(options, 'hdfs_port')}"
    return "the store"


def _probe_store(scheme: str, name: str, options, timeout_s: float) -> StoreError | None:
    store = f"{scheme}://{name}"
    if scheme == "s3":
        return _probe_s3(store, name, options, timeout_s)
    if scheme == "gs":
        return _probe_gcs(store)
    if scheme == "hdfs":
        return _probe_hdfs(store, options, timeout_s)
    return None


def _probe_s3(store: str, bucket: str, options, timeout_s: float) -> StoreError | None:
    try:
        import botocore.exceptions as errors  # apache-beam[aws]
    except ImportError:
        return StoreError(f"{store}: S3 needs apache-beam[aws] (boto3): pip install 'apache-beam[aws]'")
    endpoint = _address("s3", options)
    try:
        s3_client(options, timeout_s, attempts=1).head_bucket(Bucket=bucket)
    except (errors.ConnectTimeoutError, errors.ReadTimeoutError):
        return StoreError(f"{store}: {endpoint} did not answer within {timeout_s:g} s: check {_SETTINGS_TO_CHECK['s3']} "
                          f"or raise {STORE_TIMEOUT_OPTION}")
    except errors.EndpointConnectionError as exc:
        return StoreError(f"{store}: cannot connect to {endpoint} ({exc.kwargs.get('error', exc)}): check --s3_endpoint_url "
                          "and that the server is running")
    except errors.NoCredentialsError:
        return StoreError(f"{store}: no S3 credentials: pass --s3_access_key_id and --s3_secret_access_key "
                          "(or set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
    except errors.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (401, 403) or "Denied" in code or "Signature" in code or "InvalidAccessKey" in code:
            return StoreError(f"{store}: {endpoint} refused the credentials ({code or status}): check --s3_access_key_id, "
                              "--s3_secret_access_key (and --s3_session_token)")
        if status == 404:
            return StoreError(f"{store}: no such bucket at {endpoint}: check the path and --s3_endpoint_url")
        return StoreError(f"{store}: {endpoint} answered {code or status}: check the bucket and the S3 options")
    except errors.BotoCoreError as exc:
        return StoreError(f"{store}: {endpoint}: {exc}: check the S3 options")
    return None


def _probe_gcs(store: str) -> StoreError | None:
    try:
        import google.auth  # apache-beam[gcp]
        from apache_beam.io.gcp import gcsfilesystem  # noqa: F401  (apache-beam[gcp])
    except ImportError:
        return StoreError(f"{store}: Google Cloud Storage needs apache-beam[gcp]: pip install 'apache-beam[gcp]'")
    try:
        google.auth.default()
    except google.auth.exceptions.DefaultCredentialsError:
        return StoreError(f"{store}: no Google Cloud credentials: run `gcloud auth application-default login` "
                          "or set GOOGLE_APPLICATION_CREDENTIALS")
    return None


def _probe_hdfs(store: str, options, timeout_s: float) -> StoreError | None:
    import http.client  # standard library; only for hdfs:// paths

    host, port = _option(options, "hdfs_host"), _option(options, "hdfs_port")
    if not host or not port:
        return StoreError(f"{store}: HDFS needs --hdfs_host and --hdfs_port (the namenode's WebHDFS address)")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    try:
        connection.request("GET", "/webhdfs/v1/?op=GETFILESTATUS")
        connection.getresponse().read()
    except TimeoutError:
        return StoreError(f"{store}: the namenode {host}:{port} did not answer within {timeout_s:g} s: check "
                          f"{_SETTINGS_TO_CHECK['hdfs']} or raise {STORE_TIMEOUT_OPTION}")
    except OSError as exc:
        return StoreError(f"{store}: cannot reach the namenode {host}:{port} ({exc}): check --hdfs_host and --hdfs_port")
    finally:
        connection.close()
    return None


# ---------------------------------------------------------------------------------------
# Reading and listing


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(_local(path))
    return _filesystems(path).exists(path)


def is_file(path: str) -> bool:
    if is_local(path):
        return os.path.isfile(_local(path))
    return _filesystems(path).exists(path)


def is_folder(path: str) -> bool:
    """A local directory, or a remote prefix with at least one object under ``path/``."""
    if is_local(path):
        return os.path.isdir(_local(path))
    prefix = path.rstrip("/") + "/"
    return bool(_match(prefix + "**", limit=1))


def size(path: str) -> int:
    if is_local(path):
        return os.path.getsize(_local(path))
    fs = _filesystems(path)
    return fs.get_filesystem(path).size(path)


def open_read(path: str) -> BinaryIO:
    """A binary stream of the file (seekable on disk, ``memory://``, S3 and GCS)."""
    if is_local(path):
        return open(_local(path), "rb")
    return _filesystems(path).open(path, compression_type=_beam_filesystem().CompressionTypes.UNCOMPRESSED)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def _match(pattern: str, limit: int | None = None) -> list[tuple[str, int]]:
    try:
        (result,) = _filesystems(pattern).match([pattern], limits=[limit])
    except _beam_filesystem().BeamIOError:
        return []
    return [(m.path, m.size_in_bytes) for m in result.metadata_list]


def list_files(folder: str) -> list[str]:
    """The files directly in ``folder`` (not in sub-folders), sorted by path."""
    if is_local(folder):
        folder = _local(folder)
        return sorted(os.path.join(folder, n) for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    return sorted(path for path, _ in _match(folder.rstrip("/") + "/*"))


def glob(pattern: str) -> list[str]:
    """Files matching ``pattern`` (``*``, ``?``, ``[...]``; ``**`` crosses folders), sorted."""
    if is_local(pattern):
        return sorted(p for p in _glob.glob(_local(pattern), recursive=True) if os.path.isfile(p))
    return sorted(path for path, _ in _match(pattern))


def has_magic(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


# ---------------------------------------------------------------------------------------
# Writing


def makedirs(folder: str) -> None:
    """Create a local folder (and its parents); a no-op on object stores, which have none."""
    if is_local(folder):
        os.makedirs(_local(folder) or ".", exist_ok=True)


def temporary_path(final_path: str | os.PathLike) -> str:
    """A hidden name beside ``final_path`` that listings skip."""
    folder, name = split(os.fspath(final_path))
    return join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}") if folder else f".{name}.tmp-{os.getpid()}"


def rename(source: str, destination: str) -> None:
    if is_local(source) and is_local(destination):
        os.replace(_local(source), _local(destination))
        return
    fs = _filesystems(destination)
    if fs.exists(destination):  # object stores overwrite, but Beam's local and HDFS renames refuse
        fs.delete([destination])
    fs.rename([source], [destination])


def delete(paths: Iterable[str]) -> None:
    """Delete files (and, for a folder or prefix, everything under it); missing ones are fine."""
    for path in paths:
        if is_local(path):
            local = _local(path)
            if os.path.isdir(local):
                shutil.rmtree(local, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(local)
            continue
        found = [p for p, _ in _match(path.rstrip("/") + "/**")] + ([path] if exists(path) else [])
        if found:
            with contextlib.suppress(_beam_filesystem().BeamIOError):
                _filesystems(path).delete(found)


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
            self.stream = open(_local(self.temporary), "wb")
        else:
            self.stream = _filesystems(self.temporary).create(self.temporary, compression_type=_beam_filesystem().CompressionTypes.UNCOMPRESSED)

    def commit(self) -> None:
        try:
            if not is_local(self.temporary):
                _finish_empty_upload(self.stream)
            self.stream.close()
            if is_local(self.temporary):
                _fsync(_local(self.temporary))
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
        final_path = _local(final_path)
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
        return _local(path)
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
        return _local(path)
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
        for source in sorted(_sizes_under(path)):
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
        for source in sorted(_sizes_under(self.remote)):
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
        yield _local(folder)
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


# ---------------------------------------------------------------------------------------
# The output contract: _temporary/ while a job runs, _SUCCESS when it is complete


def staging_path(folder: str, *names: str) -> str:
    return join(folder, STAGING_DIR, *names)


class OutputExistsError(InputError):
    """The output folder already holds files and the job was not told to replace them."""


# Names of data files that a shard set is made of (``c4-train.00003-of-01024.json.gz``,
# ``links/links-00000-of-00001.parquet``, token shards ``c4_train_000001.bin``): the ones
# a commit removes when the new manifest does not list them.
_SHARD_NAME = re.compile(r"\d{5}-of-\d{5}|_\d{6}\.bin$")


def existing_output(folder: str, keep: tuple[str, ...] = ()) -> list[str]:
    """Files already under ``folder`` (relative names; ``_temporary/`` and ``keep`` prefixes aside)."""
    if is_local(folder):
        if not os.path.exists(_local(folder)):
            return []
        if not os.path.isdir(_local(folder)):
            raise OutputExistsError(f"{folder} is a file, not a folder: choose another --output")
    root = folder.rstrip("/") + "/" if not is_local(folder) else _local(folder).rstrip(os.sep) + os.sep
    names = [path[len(root):].replace(os.sep, "/") for path in _sizes_under(folder)]
    return sorted(n for n in names if not n.startswith((STAGING_DIR + "/", *keep)))


class OutputClaimError(OutputExistsError):
    """Another job holds the output folder (its ``_temporary/job.json`` claim), or took it over
    while this job ran: this job writes nothing more and commits nothing."""


# On an object store without a create-if-absent write, a claim is a lease taken in three
# steps: absent -> write -> read back after this many seconds; a job whose id is not the one
# read back lost the race. The claim is checked again before the commit.
CLAIM_SETTLE_SECONDS = 1.0
# Claims this process holds: output folder -> job id (what commit_output checks).
_CLAIMS: dict[str, str] = {}


def _claim_holder_gone(claim: dict) -> bool:
    """Whether a claim was left by a job that no longer runs: one that ended without a
    commit (``abandon_output``), one whose process is gone (on this host) or is this very
    process (an earlier job of it that failed), or a marker without a job id (written by
    an older version, or garbage): only such a claim is taken over."""
    if claim.get("failed") or not claim.get("id"):
        return True
    if claim.get("host") != socket.gethostname() or not isinstance(claim.get("pid"), int):
        return False
    pid = claim["pid"]
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def read_claim(folder: str) -> dict | None:
    """The folder's ``_temporary/job.json`` (a dict, ``{}`` when unreadable), or None when absent."""
    path = staging_path(folder, JOB_FILE)
    if not is_file(path):
        return None
    try:
        text = read_text(path)
    except FileNotFoundError:
        return None
    try:
        claim = json.loads(text)
    except ValueError:
        return {}
    return claim if isinstance(claim, dict) else {}


def _describe_claim(folder: str, claim: dict) -> str:
    return (f"{folder} is being written by another {claim.get('job', 'corpusforge')} job (id {claim.get('id', '?')}, "
            f"pid {claim.get('pid', '?')} on {claim.get('host', '?')}, started {claim.get('started', '?')}): "
            f"wait for it to finish, choose another --output, or remove {staging_path(folder)} if that job is no longer running")


def _try_claim(folder: str, body: str) -> bool:
    """Create ``_temporary/job.json`` if absent (atomically); whether this call created it."""
    path = staging_path(folder, JOB_FILE)
    if is_local(path):
        local = _local(path)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        temporary = temporary_path(local)
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, local)  # create-if-absent, with its content already complete
            return True
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
    if exists(path):
        return False
    write_atomically(path, body)
    if not path.startswith("memory://"):  # one process's store: nobody else writes between
        time.sleep(CLAIM_SETTLE_SECONDS)
    return read_text(path) == body if exists(path) else False


def _take_over(folder: str, stale: dict) -> None:
    """Move a dead job's claim aside (only one job can), then its staged files."""
    path = staging_path(folder, JOB_FILE)
    if is_local(path):
        aside = temporary_path(_local(path))
        try:
            os.rename(_local(path), aside)
        except FileNotFoundError:
            return  # another job moved it first
        with contextlib.suppress(FileNotFoundError):
            os.remove(aside)
        return
    if read_claim(folder) == stale:
        delete([path])


def _is_leftover(name: str, recorded: set[str]) -> bool:
    """Whether ``name`` (relative to the output folder) is a file a corpusforge job writes
    there on its way to a commit: bookkeeping (``_stats.json``, ``_errors/...``: a ``_``
    name), a hidden temporary (``.<name>.tmp-<random>``), a shard of a set, or a file the
    job recorded under ``_temporary/written-*.json``."""
    parts = name.split("/")
    return (name in recorded or any(part.startswith("_") for part in parts)
            or (parts[-1].startswith(".") and ".tmp-" in parts[-1]) or bool(_SHARD_NAME.search(name)))


def failed_job_claim(folder: str) -> dict | None:
    """The claim of a job that ended without a commit into a folder that held nothing when
    it started (its ``job.json`` says ``fresh``): killed, out of disk space, or failed.
    Whatever such a folder holds, that job wrote (or something wrote after it), and no
    committed set is there (no ``_SUCCESS``): its rerun may reclaim the folder without
    ``--overwrite``. None for any other folder."""
    if is_file(join(folder, SUCCESS_FILE)):
        return None
    claim = read_claim(folder)
    if not claim or claim.get("fresh") is not True or not claim.get("id") or not _claim_holder_gone(claim):
        return None
    return claim


def _recorded_names(folder: str) -> set[str]:
    """The file names a job recorded under ``_temporary/written-*.json`` (unreadable records aside)."""
    names: set[str] = set()
    for path in glob(staging_path(folder, "written-*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            names.update(str(info["name"]) for info in json.loads(read_text(path)))
    return names


def begin_output(folder: str, job: str, *, overwrite: bool = False, keep: tuple[str, ...] = ()) -> str:
    """Claim ``folder`` for ``job`` and mark it as being written: returns the job id.

    The claim is ``_temporary/job.json``, created only if absent (a hard link on a disk; on
    an object store a write read back after ``CLAIM_SETTLE_SECONDS``), so of two jobs started
    at once on one folder exactly one goes on; the other gets ``OutputClaimError`` before it
    changes anything. A claim whose process is gone (same host) is taken over, with a
    warning. Then the old ``_SUCCESS`` goes, so a reader never takes a half-replaced set as
    the old complete one, and so do the files a dead job staged.

    A folder that already holds files (other than ``_temporary/`` and ``keep``, e.g. the
    fetch logs a WebText rerun resumes from) is refused with ``OutputExistsError`` unless
    ``overwrite``: then the old files stay until ``commit_output``, which removes the
    shard files the new manifest does not list, so old and new sets never mix. The one
    exception is the rerun of a failed job (``failed_job_claim``: no ``_SUCCESS``, and the
    claim of a job that is gone and found the folder empty): it goes on without
    ``overwrite``, and removes that job's leftovers (``_is_leftover``) once it holds the
    claim, so what it commits equals a run into an empty folder.
    """
    found = existing_output(folder, keep)
    failed = failed_job_claim(folder) if found else None
    if found and not overwrite and failed is None:
        raise OutputExistsError(f"{folder} already holds {len(found)} file(s) ({found[0]}{', ...' if len(found) > 1 else ''}): "
                                f"pass --overwrite to replace them with this {job} job's output, or choose another --output")
    recorded = _recorded_names(folder) if failed else set()
    leftovers = [name for name in found if _is_leftover(name, recorded)] if failed else []
    makedirs(folder)
    job_id = uuid.uuid4().hex
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    # "fresh": nothing here but a failed job's leftovers, so this job's own failure leaves a folder its rerun reclaims
    body = json.dumps({"job": job, "id": job_id, "host": socket.gethostname(), "pid": os.getpid(), "started": started,
                       "fresh": not found or failed is not None}) + "\n"
    taken = None
    for attempt in range(2):
        if _try_claim(folder, body):
            break
        claim = read_claim(folder)
        if claim is None and attempt == 0:
            continue  # the holder committed or moved it in between: try once more
        if claim is None or not _claim_holder_gone(claim) or attempt:
            raise OutputClaimError(_describe_claim(folder, claim or {}))
        log.warning("%s: taking over the claim of a %s job that is no longer running (pid %s, started %s)",
                    folder, claim.get("job", "corpusforge"), claim.get("pid"), claim.get("started"))
        _take_over(folder, claim)
        taken = claim
    if failed is not None and (taken or {}).get("id") != failed["id"]:
        # The failed job's claim went between the look and the claim (another job took the folder
        # over, and may have committed into it): what was judged its leftovers may not be.
        if read_claim(folder) == json.loads(body):
            delete([staging_path(folder, JOB_FILE)])
        raise OutputClaimError(f"{folder}: another job claimed the folder while this {job} job took over the failed "
                               f"{failed.get('job', 'corpusforge')} job's claim: nothing was changed; run it again")
    _CLAIMS[folder] = job_id
    if leftovers:
        assert failed is not None  # leftovers are found only for a failed job
        log.info("%s: removing %d file(s) that a %s job left when it failed (started %s, pid %s): %s%s", folder,
                    len(leftovers), failed.get("job", "corpusforge"), failed.get("started"), failed.get("pid"),
                    leftovers[0], ", ..." if len(leftovers) > 1 else "")
    # What a dead job staged goes; claims other jobs are writing now (``.job.json.tmp-*``) stay.
    staged = [p for p in _sizes_under(staging_path(folder)) if not basename(p).startswith((JOB_FILE, "." + JOB_FILE))]
    delete([join(folder, SUCCESS_FILE)] + [join(folder, *name.split("/")) for name in leftovers] + staged)
    return job_id


def check_claim(folder: str) -> None:
    """Raise ``OutputClaimError`` unless this process's claim on ``folder`` still stands."""
    job_id = _CLAIMS.get(folder)
    if job_id is None:
        return  # not claimed by this process (a caller that manages the folder itself)
    claim = read_claim(folder)
    if not claim or claim.get("id") != job_id:
        raise OutputClaimError(
            f"{folder}: not committed: this job's claim ({staging_path(folder, JOB_FILE)}, id {job_id}) was removed or taken "
            f"by {('another ' + str(claim.get('job')) + ' job (id ' + str(claim.get('id')) + ')') if claim else 'someone else'} "
            "while it ran; its staged files cannot be trusted. Rerun it alone")


def record_written(folder: str, label: str, infos: list[dict]) -> str:
    """Called by the writer of a file set (a pipeline step): its manifest entries, staged."""
    path = staging_path(folder, f"written-{label}.json")
    write_atomically(path, json.dumps(sorted(infos, key=lambda i: i["name"]), ensure_ascii=False) + "\n")
    return path


def abandon_output(folder: str, reason: str) -> None:
    """End this process's job on ``folder`` without a commit: its claim stays, marked with
    ``reason``, so readers refuse the folder and say why; the next job takes it over."""
    claim = read_claim(folder) or {}
    if claim.get("id") == _CLAIMS.pop(folder, None):
        claim["failed"] = reason
        write_atomically(staging_path(folder, JOB_FILE), json.dumps(claim) + "\n")


class EmptyOutputError(IncompleteOutputError):
    """A job that wrote documents found no shard recorded at its commit: nothing is committed."""


def commit_output(folder: str, job: str, extra_files: Iterable[str] = (), *, expect_written: bool = False,
                  replaces: Iterable[str] = ()) -> dict:
    """Write ``_SUCCESS`` (the manifest of every file written) and remove ``_temporary/``.

    The manifest holds the entries the writers recorded with ``record_written`` and the
    ``extra_files`` (names relative to ``folder``, e.g. ``_stats.json``) that exist, read
    back for their size and sha256. The job's claim is checked first (``check_claim``);
    with ``expect_written`` (the job's writers ran), a commit that finds no recorded
    file is refused (``EmptyOutputError``) rather than taken as an empty set. Shard files
    of an earlier set that the manifest does not list are removed, and so are the names
    in ``replaces`` (an older layout's bookkeeping files) that it does not list.
    """
    check_claim(folder)
    entries: dict[str, dict] = {}
    recorded = glob(staging_path(folder, "written-*.json"))
    if expect_written and not recorded:
        raise EmptyOutputError(f"{folder}: not committed: no shard file was recorded under {staging_path(folder)} "
                               "although the job's writers ran (its staging was removed while it ran?)")
    for path in recorded:
        for info in json.loads(read_text(path)):
            entries[info["name"]] = info
    for name in extra_files:
        path = join(folder, name)
        if is_file(path):
            entries[name] = file_info(path, name)
    manifest = {
        "format": MANIFEST_FORMAT,
        "job": job,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "files": [entries[name] for name in sorted(entries)],
    }
    check_claim(folder)
    write_atomically(join(folder, SUCCESS_FILE), json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    delete([staging_path(folder)])
    _CLAIMS.pop(folder, None)
    listed = set(entries)
    replaced = set(replaces)
    stale = [name for name in existing_output(folder) if name not in listed and (_SHARD_NAME.search(name) or name in replaced)]
    if stale:
        log.info("%s: removing %d file(s) of an earlier set that this one replaces (%s%s)",
                 folder, len(stale), stale[0], ", ..." if len(stale) > 1 else "")
        delete([join(folder, *name.split("/")) for name in stale])
    return manifest


def read_success(folder: str) -> dict | None:
    """The folder's manifest, or None when it has no ``_SUCCESS``."""
    path = join(folder, SUCCESS_FILE)
    if not is_file(path):
        return None
    try:
        manifest = json.loads(read_text(path))
    except ValueError as exc:
        raise IncompleteOutputError(f"{path}: not a corpusforge manifest ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise IncompleteOutputError(f"{path}: not a corpusforge manifest (no file list)")
    return manifest


_WARNED: set[str] = set()


def _sizes_under(folder: str) -> dict[str, int]:
    """Every file under ``folder`` (sub-folders included) -> its size: one listing, so
    checking a manifest of thousands of shards on an object store costs no request per file."""
    if is_local(folder):
        sizes = {}
        for d, _, names in os.walk(_local(folder)):
            for n in names:
                path = os.path.join(d, n)
                try:
                    sizes[path] = os.path.getsize(path)
                except FileNotFoundError:
                    pass  # gone between the listing and the look (another job's temporary file, renamed)
        return sizes
    return dict(_match(folder.rstrip("/") + "/**"))


def check_output(folder: str) -> list[str] | None:
    """The files (paths) a complete output folder's ``_SUCCESS`` lists, after checking that
    each exists with its recorded size. Raises ``IncompleteOutputError`` for a folder that
    an unfinished or failed job left, or whose files no longer match the manifest. Returns
    None, with a warning, for a folder without any corpusforge marker (files from
    elsewhere, e.g. a C4 download): completeness cannot be told there.
    """
    manifest = read_success(folder)
    if manifest is None:
        job_file = staging_path(folder, JOB_FILE)
        if is_file(job_file):
            try:
                job = json.loads(read_text(job_file))
            except ValueError:
                job = {}
            ended = f"ended without a commit because {job['failed']}" if job.get("failed") else "never finished"
            raise IncompleteOutputError(
                f"{folder}: incomplete output: a {job.get('job', 'corpusforge')} job started "
                f"{job.get('started', '')} into it and {ended} (no {SUCCESS_FILE}; "
                f"{STAGING_DIR}/{JOB_FILE} is still there). Rerun the job."
            )
        if folder not in _WARNED:
            _WARNED.add(folder)
            log.warning("%s has no %s marker: reading every shard in it; corpusforge cannot tell whether "
                        "the set is complete", folder, SUCCESS_FILE)
        return None
    present = _sizes_under(folder)
    paths = []
    for entry in manifest["files"]:
        path = join(folder, entry["name"])
        if path not in present:
            raise IncompleteOutputError(f"{folder}: {entry['name']} is listed in {SUCCESS_FILE} but missing")
        if present[path] != entry["bytes"]:
            raise IncompleteOutputError(
                f"{folder}: {entry['name']} has {present[path]:,} bytes, {SUCCESS_FILE} says {entry['bytes']:,}: "
                "the file changed after the job finished")
        paths.append(path)
    return paths


def folder_files(folder: str, wanted, subfolders: Iterable[str] = ()) -> list[str]:
    """The files a reader takes directly in ``folder`` and in its ``subfolders`` (names, e.g.
    one per shard format), sorted: those its ``_SUCCESS`` lists (checked by
    ``check_output``; a wanted file it does not list is named in a warning and skipped),
    or, without a marker, every file there. ``wanted(name)`` filters by file name."""
    listed = check_output(folder)
    folders = [folder] + [join(folder, name) for name in subfolders]
    parents = {split(join(where, "-"))[0].rstrip("/").rstrip(os.sep) for where in folders}  # as listings spell them

    def taken(path: str) -> bool:  # directly in one of the folders (a store's "*" may match across "/")
        return split(path)[0].rstrip("/").rstrip(os.sep) in parents and wanted(basename(path))

    present = sorted({p for where in folders if not is_local(where) or os.path.isdir(_local(where))
                      for p in list_files(where) if taken(p)})
    if listed is None:
        return present
    own = sorted(p for p in listed if taken(p))
    unlisted = sorted(set(present) - set(own))
    if unlisted:
        log.warning("%s: ignoring %d file(s) that its %s does not list (another run's?): %s",
                    folder, len(unlisted), SUCCESS_FILE, ", ".join(map(basename, unlisted[:5])))
    return own
