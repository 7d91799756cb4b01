"""Where crawl files come from: paths, globs, folders, Common Crawl manifests, remote URLs.

``expand_inputs`` turns what a user typed into a sorted list of files, of one of two kinds
(``INPUT_KINDS``): crawl files (WARC/WET, the default) or Pushshift submission dumps
(``kind="dumps"``, WebText's ``--submissions``); ``open_input``
opens one of them as a binary stream (local files directly, ``http(s)://`` with the
standard library, ``gs://``/``s3://`` and any other scheme through Beam's FileSystems,
then fsspec). Nothing here decompresses: the WARC reader sees the raw bytes, so it can
report compressed offsets and survive a damaged gzip member.
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable
from typing import BinaryIO

from common import storage
from common.errors import InputError  # noqa: F401  (raised here; imported from here by the jobs)
from common.storage import write_atomically

# Common Crawl's public data host; relative paths in wet.paths.gz / warc.paths.gz join to it.
COMMON_CRAWL_BASE_URL = "https://data.commoncrawl.org/"
CRAWL_FILE_SUFFIXES = (".warc.gz", ".wet.gz", ".warc", ".wet", ".warc.wet.gz", ".arc.gz")
MANIFEST_SUFFIXES = (".paths.gz", ".paths")
DUMP_PREFIX = "RS_"  # Pushshift submission dumps (RS_2019-04.zst): the files of a --submissions folder
CRAWL_FILES, SUBMISSION_DUMPS = "crawl", "dumps"
INPUT_KINDS = (CRAWL_FILES, SUBMISSION_DUMPS)
USER_AGENT = "corpusforge/0.1 (+https://github.com/corpusforge/corpusforge)"


class ManifestPathError(InputError):
    """A manifest entry that would leave its base (``..``, an absolute path, another scheme)."""


EXCERPT_CHARS = 80


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped excerpt of untrusted input, safe to put in a log or an error."""
    if isinstance(text, bytes):
        text = text[: limit * 4].decode("utf-8", "replace")
    short = text[:limit]
    return ascii(short)[1:-1] + ("..." if len(text) > limit else "")


def is_remote(path: str) -> bool:
    scheme = urllib.parse.urlsplit(path).scheme
    return len(scheme) > 1  # one letter is a Windows drive, not a scheme


def is_manifest(path: str) -> bool:
    return path.endswith(MANIFEST_SUFFIXES)


def join_base(base: str, relative: str, *, allow_any: bool = True) -> str:
    """Join a manifest's relative path to a base URL or a local folder.

    With ``allow_any=False`` (how manifests are read) the path must stay under ``base``:
    no ``..`` segment, no absolute path, no scheme of its own, and, for a local folder,
    no symbolic link on the way that resolves outside it (``os.path.realpath``), all
    ``ManifestPathError``.
    """
    escapes = (is_remote(relative) or os.path.isabs(relative) or relative.startswith(("/", "\\"))
               or ".." in relative.replace("\\", "/").split("/") or "\x00" in relative)
    if escapes and not allow_any:
        raise ManifestPathError(f"{excerpt(relative)}: a manifest path must be relative and stay under the base "
                                f"{excerpt(base)} (pass --allow_any_manifest_path to open it anyway)")
    if is_remote(relative) or os.path.isabs(relative):
        return relative
    if is_remote(base):
        return base.rstrip("/") + "/" + relative.lstrip("/")
    joined = os.path.join(base, relative)
    if not allow_any:
        root = os.path.realpath(base)
        resolved = os.path.realpath(joined)
        if os.path.commonpath([root, resolved]) != root:
            raise ManifestPathError(f"{excerpt(relative)}: a manifest path must stay under the base {excerpt(base)}, and a "
                                    f"symbolic link on its way resolves outside it (to {excerpt(resolved)}; pass "
                                    "--allow_any_manifest_path to open it anyway)")
    return joined


# A manifest is a list of paths: Common Crawl's largest (warc.paths.gz) is ~100k lines of
# ~140 characters (14 MB). Past any of these caps a manifest is refused before its lines are
# split (63 million one-character entries took ``inspect`` past 6 GB; 255 MiB of newlines, 2.8 GB).
MAX_MANIFEST_BYTES = 64 << 20
MAX_MANIFEST_LINES = 1 << 20  # every line counts, empty ones too
MAX_MANIFEST_LINE_CHARS = 4096  # longer than any URL a server accepts


def read_manifest(path: str, base: str = COMMON_CRAWL_BASE_URL, *, allow_any_path: bool = False) -> list[str]:
    """The files a ``*.paths.gz`` manifest lists, each joined to ``base``, in manifest order.

    Every entry must stay under ``base`` unless ``allow_any_path``; the first that does not
    is refused (``ManifestPathError``, with its line number and an escaped excerpt) before
    any file is opened. A manifest over ``MAX_MANIFEST_BYTES`` (decompressed),
    ``MAX_MANIFEST_LINES`` lines or with a line over ``MAX_MANIFEST_LINE_CHARS`` is refused
    (``InputError``) the same way.
    """
    with open_input(path) as raw:
        data = raw.read(MAX_MANIFEST_BYTES + 1)
    if data[:2] == b"\x1f\x8b":
        data = _gunzip_capped(data, MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise InputError(f"{path}: a manifest over {MAX_MANIFEST_BYTES:,} bytes is not a list of crawl paths")
    lines = data.count(b"\n") + 1
    if lines > MAX_MANIFEST_LINES:
        raise InputError(f"{path}: a manifest of {lines:,} lines (over {MAX_MANIFEST_LINES:,}) is not a list of crawl paths")
    files = []
    for number, raw_line in enumerate(data.split(b"\n"), 1):
        if len(raw_line) > MAX_MANIFEST_LINE_CHARS:
            raise InputError(f"{path}, line {number}: {len(raw_line):,} bytes, over the {MAX_MANIFEST_LINE_CHARS:,}-byte limit "
                             f"of a manifest line: {excerpt(raw_line)}")
        line = raw_line.decode("utf-8", "replace").strip()
        if not line or line.startswith("#"):
            continue
        try:
            files.append(join_base(base, line, allow_any=allow_any_path))
        except ManifestPathError as exc:
            raise ManifestPathError(f"{path}, line {number}: {exc}") from None
    return files


def manifest_location(spec: str, base: str) -> str:
    """Where the manifest ``spec`` is: as given when it exists here or names a URL, else
    under ``base`` (``crawl-data/CC-MAIN-2019-18/wet.paths.gz`` is a path on Common Crawl's
    host, as the manifest's own entries are)."""
    if is_remote(spec) or os.path.isabs(spec) or os.path.exists(spec):
        return spec
    return join_base(base, spec, allow_any=True)


def _gunzip_capped(data: bytes, limit: int) -> bytes:
    """Every gzip member of ``data`` (a concatenated .gz too), at most ``limit`` bytes out."""
    out = bytearray()
    while data and len(out) < limit:
        inflater = zlib.decompressobj(31)
        out += inflater.decompress(data, limit - len(out))
        data = inflater.unused_data if inflater.eof else b""
    return bytes(out)


def expand_inputs(specs: Iterable[str] | str, base: str = COMMON_CRAWL_BASE_URL, max_files: int | None = None,
                  *, allow_any_manifest_path: bool = False, kind: str = CRAWL_FILES) -> list[str]:
    """Expand paths, globs, folders and manifests into a list of input files.

    Order is stable: each spec's files in sorted (or manifest) order, specs in the order
    given, duplicates removed. ``kind`` says what the files are:

    - ``crawl`` (WARC/WET): a folder gives its crawl files (``CRAWL_FILE_SUFFIXES``, sub-folders
      too), a ``*.paths.gz`` manifest its entries joined to ``base``; ``InputError`` for a spec
      that matches nothing, ``ManifestPathError`` for a manifest entry outside ``base``.
    - ``dumps`` (Pushshift submission dumps): a folder gives its ``RS_*`` files, a glob its
      matches, any other spec (a URL too) is taken as named; ``InputError`` when nothing was
      found or a local file does not exist, naming the missing files.
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"kind must be one of {INPUT_KINDS}, not {kind!r}")
    specs = [specs] if isinstance(specs, str) else list(specs)
    files: list[str] = []
    for spec in specs:
        if kind == SUBMISSION_DUMPS:
            files.extend(_expand_dump_spec(spec))
        elif is_manifest(spec):
            files.extend(read_manifest(manifest_location(spec, base), base, allow_any_path=allow_any_manifest_path))
        else:
            files.extend(_expand_one(spec))
    if kind == SUBMISSION_DUMPS:
        missing = [f for f in files if "://" not in f and not os.path.exists(f)]
        if not files or missing:
            raise InputError(f"no submission dump found for {missing or specs}")
    unique = list(dict.fromkeys(files))
    return unique[:max_files] if max_files is not None else unique


def _expand_dump_spec(spec: str) -> list[str]:
    if os.path.isdir(spec):
        return sorted(os.path.join(spec, name) for name in os.listdir(spec) if name.startswith(DUMP_PREFIX))
    if glob.has_magic(spec):
        return sorted(glob.glob(spec))
    return [spec]


def _expand_one(spec: str) -> list[str]:
    scheme = urllib.parse.urlsplit(spec).scheme
    if is_remote(spec) and scheme not in ("http", "https", "file"):
        return _expand_object_store(spec)
    if is_remote(spec):
        return [spec]
    if os.path.isdir(spec):
        found = [
            os.path.join(root, name)
            for root, _, names in os.walk(spec)
            for name in names
            if name.endswith(CRAWL_FILE_SUFFIXES)
        ]
        if not found:
            raise InputError(f"{spec}: folder holds no WARC/WET files ({', '.join(CRAWL_FILE_SUFFIXES)})")
        return sorted(found)
    if glob.has_magic(spec):
        found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
        if not found:
            raise InputError(f"{spec}: the pattern matches no file")
        return found
    if not os.path.isfile(spec):
        raise InputError(f"{spec}: no such file")
    return [spec]


def _expand_object_store(spec: str) -> list[str]:
    """A ``gs://``/``s3://``/``memory://`` file, glob or folder, listed through Beam's FileSystems."""
    try:
        if storage.has_magic(spec):
            found = storage.glob(spec)
            if not found:
                raise InputError(f"{spec}: the pattern matches no file")
            return found
        if storage.is_file(spec):
            return [spec]
        if storage.is_folder(spec):
            found = [p for p in storage.glob(spec.rstrip("/") + "/**") if p.endswith(CRAWL_FILE_SUFFIXES)]
            if not found:
                raise InputError(f"{spec}: folder holds no WARC/WET files ({', '.join(CRAWL_FILE_SUFFIXES)})")
            return found
    except InputError:
        raise
    except Exception as exc:  # Beam lacks this scheme's extra (e.g. apache-beam[gcp])
        raise InputError(f"{spec}: cannot list it ({exc}); for gs:// install apache-beam[gcp], for s3:// apache-beam[aws]") from exc
    raise InputError(f"{spec}: no such file")


def open_input(path: str) -> BinaryIO:
    """Open a local path or URL for binary streaming reads."""
    if not is_remote(path):
        return open(path, "rb")
    scheme = urllib.parse.urlsplit(path).scheme
    if scheme == "file":
        return open(urllib.request.url2pathname(urllib.parse.urlsplit(path).path), "rb")
    if scheme in ("http", "https"):
        request = urllib.request.Request(path, headers={"User-Agent": USER_AGENT})
        return io.BufferedReader(urllib.request.urlopen(request, timeout=60), buffer_size=1 << 20)
    return _open_with_filesystems(path)


def _open_with_filesystems(path: str) -> BinaryIO:
    errors = []
    try:  # the IO layer's Beam FileSystems (it loads Beam only for a remote scheme)
        return storage.open_read(path)
    except Exception as exc:  # Beam lacks this scheme's extra (e.g. apache-beam[gcp])
        errors.append(f"Beam FileSystems: {exc}")
    try:  # optional: installed only where a user wants fsspec's schemes
        import fsspec

        return fsspec.open(path, "rb").open()
    except Exception as exc:
        errors.append(f"fsspec: {exc}")
    raise InputError(
        f"{path}: cannot open this URL ({'; '.join(errors)}). For gs:// install apache-beam[gcp] "
        "or gcsfs; for s3:// install apache-beam[aws] or s3fs."
    )


def cache_dir() -> str:
    """Where downloads of pinned, immutable files are kept: ``$CORPUSFORGE_CACHE``, else
    ``$XDG_CACHE_HOME/corpusforge``, else ``~/.cache/corpusforge``."""
    explicit = os.environ.get("CORPUSFORGE_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "corpusforge")


def read_pinned(url: str, option: str, folder: str | None = None) -> bytes:
    """The bytes at ``url``, a file pinned to a commit (it never changes): downloaded once into
    ``cache_dir()`` and read from there afterwards, so later runs work offline. Offline with
    no cached copy, an ``InputError`` says where to put a local copy."""
    name = cache_name(url)
    cached = os.path.join(folder or cache_dir(), name)
    if os.path.isfile(cached):
        with open(cached, "rb") as f:
            return f.read()
    try:
        with open_input(url) as f:
            data = f.read()
    except (OSError, ValueError) as exc:
        raise InputError(f"{option}: cannot download {url} ({exc}). Offline, pass a local copy with {option} FILE, "
                         f"or put the file at {cached}") from exc
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    write_atomically(cached, data)
    return data


def cache_name(url: str) -> str:
    """A cache file name for ``url``: its last path part and a hash of the whole URL."""
    tail = os.path.basename(urllib.parse.urlsplit(url).path) or "file"
    return f"{hashlib.sha256(url.encode('utf-8')).hexdigest()[:16]}-{tail}"
