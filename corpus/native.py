"""Small C kernels for hot loops, compiled once per machine and loaded with ``ctypes``.

A few loops cost far more in numpy or Python than in C because they are sequential (one
small step after another: langdetect's trials, ``corpus.langid``) or scatter single bits
(the Bloom filter, ``dedup.bloom_native``). Their C source lives next to the Python code
that falls back on it; ``load(name, source)`` compiles the source with the C compiler
(``$CC``, else ``cc``; ``-O2 -shared -fPIC -ffp-contract=off``, so a floating-point
expression is computed exactly as written, one IEEE operation at a time, never fused)
into ``corpus.inputs.cache_dir()`` under a name made from the source and the machine,
written atomically (processes that race write the same file; the last rename wins), and
returns the loaded library; a later process loads the cached file (~1 ms).

Without a compiler, on a read-only cache or when the library does not load, ``load``
returns ``None`` (logged at debug level) and the caller keeps its own numpy or Python path,
which gives the same results (each caller's tests compare both). Setting
``CORPUSFORGE_NO_NATIVE=1`` makes every ``load`` return ``None``.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess

from common.storage import atomic_path
from corpus.inputs import cache_dir

log = logging.getLogger(__name__)

NO_NATIVE_ENV = "CORPUSFORGE_NO_NATIVE"
COMPILE_FLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off")
COMPILE_TIMEOUT = 120  # seconds


def library_path(name: str, source: str) -> str:
    """Where the compiled ``source`` is kept: named by the source, flags and machine."""
    digest = hashlib.sha256(
        "\0".join([source, *COMPILE_FLAGS, platform.machine(), platform.system(), platform.python_implementation()]).encode()
    ).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{name}-{digest}.so")


def _compile(path: str, source: str) -> None:
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        raise OSError("no C compiler (cc) on PATH")
    with atomic_path(path) as temporary:
        source_path = temporary + ".c"
        try:
            with open(source_path, "w", encoding="ascii") as f:
                f.write(source)
            subprocess.run([compiler, *COMPILE_FLAGS, "-o", temporary, source_path],
                           check=True, capture_output=True, timeout=COMPILE_TIMEOUT)
        finally:
            if os.path.exists(source_path):
                os.remove(source_path)


def load(name: str, source: str) -> ctypes.CDLL | None:
    """The library compiled from ``source`` (cached), or ``None`` where it cannot be had."""
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None
    try:
        path = library_path(name, source)
        if not os.path.isfile(path):
            _compile(path, source)
        return ctypes.CDLL(path)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("C kernel %s unavailable (%s): the numpy/Python path is used", name, exc)
        return None
