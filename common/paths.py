"""Paths as the IO layer reads them: a local path (or ``file://``) or a store URL (``gs://``,
``s3://``, ``hdfs://``, ``memory://``), joined and split without touching any store.

Part of the IO layer that ``common.storage`` gathers (docs/architecture.md).
"""

from __future__ import annotations

import os
import urllib.parse


def is_local(path: str | os.PathLike) -> bool:
    scheme = urllib.parse.urlsplit(os.fspath(path)).scheme
    return len(scheme) <= 1 or scheme == "file"  # one letter is a Windows drive


def local_path(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if path.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlsplit(path).path)
    return path


def join(base: str | os.PathLike, *names: str) -> str:
    base = os.fspath(base)
    if is_local(base):
        return os.path.join(local_path(base), *names)
    path = base
    for name in names:
        path = path.rstrip("/") + "/" + name.lstrip("/")
    return path


def split(path: str) -> tuple[str, str]:
    """(folder, name) of ``path``."""
    if is_local(path):
        return os.path.split(local_path(path))
    head, _, tail = path.rstrip("/").rpartition("/")
    return head, tail


def basename(path: str) -> str:
    return split(path)[1]
