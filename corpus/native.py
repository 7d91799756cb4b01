"""Small C kernels for hot loops, compiled once per machine and loaded with ``ctypes``.

A few loops cost far more in numpy or Python than in C because they are sequential (one
small step after another: langdetect's trials, ``corpus.langid``) or scatter single bits
(the Bloom filter, ``dedup.bloom_native``). Their C sources are package data
(``corpus/data/langid_trial.c``, ``dedup/data/bloom_kernel.c``: ``source(package, file)``
reads one, from a checkout, an installed wheel or a zip alike); ``load(name, source,
defines)`` compiles the source with the C compiler
(``$CC``, else ``cc``; ``-O2 -shared -fPIC -ffp-contract=off``, so a floating-point
expression is computed exactly as written, one IEEE operation at a time, never fused)
into ``corpus.inputs.cache_dir()`` under a name made from the source and the machine,
written atomically (processes that race write the same file; the last rename wins), and
returns the loaded library; a later process loads the cached file (~1 ms).

Without a compiler, on a read-only cache or when the library does not load, ``load``
returns ``None`` and the caller keeps its own numpy or Python path, which gives the same
results (each caller's tests compare both) several times slower: logged at WARNING once per
process and kernel, with the compiler's own message, and kept in ``status()`` (which
kernel runs in this process, and why not). Setting ``CORPUSFORGE_NO_NATIVE=1`` makes every
``load`` return ``None`` (logged at INFO: the user asked for it). ``tests/test_native.py``
compiles every source with ``WARNING_FLAGS`` and ``-Werror``.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import threading
from importlib import resources

from common.storage import atomic_path
from corpus.inputs import cache_dir

log = logging.getLogger(__name__)

NO_NATIVE_ENV = "CORPUSFORGE_NO_NATIVE"
COMPILE_FLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off")
COMPILE_TIMEOUT = 120  # seconds
WARNING_FLAGS = ("-Wall", "-Wextra")  # the test's (with -Werror); a user's compile shows none
SOURCES = (("corpus", "langid_trial.c"), ("dedup", "bloom_kernel.c"))  # every kernel, for the test

_status: dict[str, str] = {}  # kernel -> "native" or why not, for this process
_status_lock = threading.Lock()
_used = threading.local()  # .names: the kernels this thread's callers ran since take_used()


def source(package: str, name: str) -> str:
    """The C source ``name`` of ``package``'s data folder (``<package>/data/<name>``)."""
    return resources.files(package).joinpath("data", name).read_text(encoding="ascii")


def define_flags(defines: dict | None) -> list[str]:
    return [f"-D{key}={value}" for key, value in sorted((defines or {}).items())]


def status() -> dict[str, str]:
    """Which kernels this process loaded (``native``) and why the others fell back."""
    with _status_lock:
        return dict(_status)


def mark_used(name: str) -> None:
    """A caller ran kernel ``name`` (compiled, or its numpy/Python path) on this thread."""
    names = getattr(_used, "names", None)
    if names is None:
        names = _used.names = set()
    names.add(name)


def take_used() -> dict[str, str]:
    """``status()`` of the kernels this thread's callers ran since the last call, and forget
    them: a job's tally reports what its own work ran, not what a reused worker (or a test
    process) loaded for an earlier job."""
    names = getattr(_used, "names", None)
    if not names:
        return {}
    _used.names = set()
    with _status_lock:
        return {name: _status.get(name, "not loaded") for name in sorted(names)}


def _record(name: str, state: str) -> bool:
    """Record ``name``'s state; True where it was not already the same kind of state
    (``native``, ``off``, ``unavailable``, ``refused``): a fallback is logged once per process."""
    with _status_lock:
        first = _status.get(name, "").split(" ", 1)[0].rstrip(":") != state.split(" ", 1)[0].rstrip(":")
        _status[name] = state
    return first


def library_path(name: str, source: str, defines: dict | None = None) -> str:
    """Where the compiled ``source`` is kept: named by the source, flags and machine."""
    digest = hashlib.sha256(
        "\0".join([source, *COMPILE_FLAGS, *define_flags(defines), platform.machine(), platform.system(),
                   platform.python_implementation()]).encode()
    ).hexdigest()[:16]
    return os.path.join(cache_dir(), f"{name}-{digest}.so")


def _compile(path: str, source: str, defines: dict | None = None) -> None:
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        raise OSError("no C compiler (cc) on PATH")
    with atomic_path(path) as temporary:
        source_path = temporary + ".c"
        try:
            with open(source_path, "w", encoding="ascii") as f:
                f.write(source)
            done = subprocess.run([compiler, *COMPILE_FLAGS, *define_flags(defines), "-o", temporary, source_path],
                                  capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
            if done.returncode != 0:
                raise OSError(f"{os.path.basename(compiler)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        finally:
            if os.path.exists(source_path):
                os.remove(source_path)


def load(name: str, source: str, defines: dict | None = None) -> ctypes.CDLL | None:
    """The library compiled from ``source`` with ``defines`` (``-DKEY=VALUE``; cached), or
    ``None`` where it cannot be had (logged once per process, kept in ``status()``)."""
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        if _record(name, f"off ({NO_NATIVE_ENV} is set)"):
            log.info("C kernel %s off (%s is set): the numpy/Python path is used", name, NO_NATIVE_ENV)
        return None
    try:
        path = library_path(name, source, defines)
        if not os.path.isfile(path):
            _compile(path, source, defines)
        library = ctypes.CDLL(path)
    except (OSError, subprocess.SubprocessError) as exc:
        if _record(name, f"unavailable: {exc}"):
            log.warning("C kernel %s unavailable (%s): the numpy/Python path is used, the same results several times "
                        "slower; install a C compiler (cc, or set CC) on this machine or worker image", name, exc)
        return None
    _record(name, "native")
    return library


def fell_back(name: str, why: str) -> None:
    """A caller's own check refused a loaded kernel (``why``): recorded and logged once."""
    if _record(name, f"refused: {why}"):
        log.warning("C kernel %s refused (%s): the numpy/Python path is used", name, why)
