"""``memory://``: an in-process object store for Beam's FileSystems, for tests and dry runs.

Beam's Python SDK has no in-memory filesystem (Java's has one), so corpusforge registers
this one: importing the module makes ``memory://bucket/key`` paths work everywhere Beam's
``FileSystems`` does (``create``, ``open``, ``match``, ``rename``, ``delete``). It behaves
like an object store, not a disk: there are no folders, a listing is a prefix match, and
an object appears under its name only when its writer is closed, as an S3 or GCS upload
does. Objects live in this process only, so a pipeline that writes to ``memory://`` must
run its workers in the same process (the DirectRunner's default in-memory mode).
"""

from __future__ import annotations

import hashlib
import io
import threading
import time

from apache_beam.io.filesystem import BeamIOError, CompressedFile, CompressionTypes, FileMetadata, FileSystem

SCHEME = "memory"
PREFIX = SCHEME + "://"

_OBJECTS: dict[str, tuple[bytes, float]] = {}
_LOCK = threading.Lock()


class _ObjectWriter(io.BytesIO):
    """Collects bytes; the object is stored under its name on ``close``, not before."""

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            with _LOCK:
                _OBJECTS[self._path] = (data, time.time())
        super().close()


def clear() -> None:
    """Forget every object (tests call it between runs)."""
    with _LOCK:
        _OBJECTS.clear()


class InMemoryFileSystem(FileSystem):
    """Beam ``FileSystem`` for ``memory://`` paths, held in a dict of this process."""

    @classmethod
    def scheme(cls):
        return SCHEME

    def join(self, basepath, *paths):
        path = basepath
        for part in paths:
            path = path.rstrip("/") + "/" + part.lstrip("/")
        return path

    def split(self, path):
        if not path.startswith(PREFIX):
            raise ValueError(f"{path!r} is not a {PREFIX} path")
        head, _, tail = path.rpartition("/")
        return (head, tail) if len(head) > len(PREFIX) else (path, "")

    def mkdirs(self, path):
        pass  # an object store has no folders

    def has_dirs(self):
        return False

    def _list(self, dir_or_prefix):
        with _LOCK:
            items = [(p, len(d), t) for p, (d, t) in _OBJECTS.items() if p.startswith(dir_or_prefix)]
        for path, size, mtime in sorted(items):
            yield FileMetadata(path, size, mtime)

    def _open(self, path, mode, compression_type):
        raw: io.BytesIO
        if mode == "wb":
            raw = _ObjectWriter(path)
        else:
            with _LOCK:
                if path not in _OBJECTS:
                    raise BeamIOError(f"Open failed: no object {path}", {path: FileNotFoundError(path)})
                raw = io.BytesIO(_OBJECTS[path][0])
        compression_type = self._get_compression_type(path, compression_type)
        if compression_type == CompressionTypes.UNCOMPRESSED:
            return raw
        return CompressedFile(raw, compression_type=compression_type)

    def create(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        return self._open(path, "wb", compression_type)

    def open(self, path, mime_type="application/octet-stream", compression_type=CompressionTypes.AUTO):
        return self._open(path, "rb", compression_type)

    def copy(self, source_file_names, destination_file_names):
        errors = {}
        with _LOCK:
            for source, destination in zip(source_file_names, destination_file_names, strict=True):
                if source in _OBJECTS:
                    _OBJECTS[destination] = (_OBJECTS[source][0], time.time())
                else:
                    errors[(source, destination)] = FileNotFoundError(source)
        if errors:
            raise BeamIOError("Copy operation failed", errors)

    def rename(self, source_file_names, destination_file_names):
        errors = {}
        with _LOCK:
            for source, destination in zip(source_file_names, destination_file_names, strict=True):
                if source in _OBJECTS:
                    _OBJECTS[destination] = _OBJECTS.pop(source)
                else:
                    errors[(source, destination)] = FileNotFoundError(source)
        if errors:
            raise BeamIOError("Rename operation failed", errors)

    def exists(self, path):
        with _LOCK:
            return path in _OBJECTS

    def size(self, path):
        with _LOCK:
            return len(self._get(path)[0])

    def last_updated(self, path):
        with _LOCK:
            return self._get(path)[1]

    def checksum(self, path):
        with _LOCK:
            return hashlib.md5(self._get(path)[0]).hexdigest()

    def metadata(self, path):
        with _LOCK:
            data, mtime = self._get(path)
        return FileMetadata(path, len(data), mtime)

    def delete(self, paths):
        errors = {}
        with _LOCK:
            for path in paths:
                # A path that names a "folder" deletes everything under it, as S3's does.
                under = [p for p in _OBJECTS if p == path or p.startswith(path.rstrip("/") + "/")]
                if not under:
                    errors[path] = FileNotFoundError(path)
                for p in under:
                    del _OBJECTS[p]
        if errors:
            raise BeamIOError("Delete operation failed", errors)

    @staticmethod
    def _get(path):
        if path not in _OBJECTS:
            raise BeamIOError(f"no object {path}", {path: FileNotFoundError(path)})
        return _OBJECTS[path]
