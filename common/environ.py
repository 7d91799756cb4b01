"""Environment variables set for the length of a block, then put back as they were
(``environment_with``): for the processes a block starts (a Spark session's JVM and its
Python workers), never for what this process runs later. Tests: ``tests/test_environ.py``."""

from __future__ import annotations

import contextlib
import os


def prepended(name: str, first: str) -> str:
    """The ``os.pathsep`` list in variable ``name`` with ``first`` put in front of it; as it is
    when it holds ``first`` already."""
    paths = [p for p in (os.environ.get(name) or "").split(os.pathsep) if p]
    return os.environ[name] if first in paths else os.pathsep.join([first, *paths])


@contextlib.contextmanager
def environment_with(values: dict[str, str]):
    """``os.environ`` with ``values`` set while the block runs; afterwards each variable is
    what it was before, or unset if it was."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
