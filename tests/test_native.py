"""corpus.native: C kernels compiled once per machine, cached, and None where they cannot be had."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from corpus import native
from corpus.inputs import cache_dir
from pipelines.jobs import STATS_FILE
from pipelines.tally import kernel_states, kernels_document, slow_kernels

ROOT = Path(__file__).resolve().parent.parent

SOURCE = """
#include <stdint.h>
int64_t cf_test_sum(const int64_t *values, long n) {
    int64_t total = 0;
    for (long i = 0; i < n; i++) total += values[i] * (i + 1);
    return total;
}
"""


def needs_compiler():
    if shutil.which(os.environ.get("CC") or "cc") is None:
        pytest.skip("no C compiler on PATH")


def call(library: ctypes.CDLL, values: list[int]) -> int:
    function = library.cf_test_sum
    function.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_long]
    function.restype = ctypes.c_int64
    return function((ctypes.c_int64 * len(values))(*values), len(values))


def test_compiles_once_then_loads_the_cached_library(tmp_path, monkeypatch):
    needs_compiler()
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv(native.NO_NATIVE_ENV, raising=False)
    library = native.load("test-sum", SOURCE)
    assert library is not None and call(library, [5, -3, 10]) == 5 - 6 + 30
    path = native.library_path("test-sum", SOURCE)
    assert os.path.dirname(path) == str(tmp_path) and os.path.isfile(path)
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(path)]  # no temporary or .c left
    stamp = os.stat(path).st_mtime_ns
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))  # a second load needs no compiler
    again = native.load("test-sum", SOURCE)
    assert again is not None and call(again, list(range(10))) == sum(v * (v + 1) for v in range(10))
    assert os.stat(path).st_mtime_ns == stamp
    assert native.library_path("test-sum", SOURCE + "\n") != path  # another source, another file


def test_no_compiler_or_broken_source_gives_none(tmp_path, monkeypatch):
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv(native.NO_NATIVE_ENV, raising=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert native.load("test-sum", SOURCE) is None
    monkeypatch.delenv("CC")
    needs_compiler()
    assert native.load("test-broken", "this is not C;") is None
    assert list(tmp_path.iterdir()) == []  # nothing half-written is left


def test_switched_off_by_the_environment(tmp_path, monkeypatch):
    needs_compiler()
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    monkeypatch.setenv(native.NO_NATIVE_ENV, "1")
    assert native.load("test-sum", SOURCE) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("package, name", native.SOURCES)
def test_every_shipped_kernel_compiles_without_a_warning(package, name, tmp_path):
    """The C sources as the package ships them (``<package>/data/``), compiled as ``load``
    compiles them plus ``-Wall -Wextra -Werror``: a warning fails the test."""
    needs_compiler()
    source = tmp_path / name
    source.write_text(native.source(package, name), encoding="ascii")
    command = [shutil.which(os.environ.get("CC") or "cc"), *native.COMPILE_FLAGS, *native.WARNING_FLAGS, "-Werror",
               "-o", str(tmp_path / "kernel.so"), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ctypes.CDLL(str(tmp_path / "kernel.so"))


def test_a_kernel_that_cannot_be_built_is_one_warning_per_process_and_its_status_says_why(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv(native.NO_NATIVE_ENV, raising=False)
    monkeypatch.setattr(native, "_status", {})
    needs_compiler()
    with caplog.at_level("WARNING", logger="corpus.native"):
        for _ in range(3):
            assert native.load("test-broken", "this is not C;") is None
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "test-broken unavailable" in warnings[0].getMessage() and "error" in warnings[0].getMessage()  # the compiler's words
    assert native.status()["test-broken"].startswith("unavailable: ")
    assert native.load("test-sum", SOURCE) is not None
    assert native.status()["test-sum"] == "native"
    monkeypatch.setenv(native.NO_NATIVE_ENV, "1")
    caplog.clear()
    with caplog.at_level("INFO", logger="corpus.native"):
        assert native.load("test-sum", SOURCE) is None
    assert [r.levelname for r in caplog.records] == ["INFO"]  # asked for: not a warning
    assert native.status()["test-sum"].startswith("off")


def test_defines_reach_the_compiler_and_name_the_cached_library(tmp_path, monkeypatch):
    needs_compiler()
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    monkeypatch.delenv(native.NO_NATIVE_ENV, raising=False)
    source = "long cf_test_value(void) { return VALUE; }\n"
    values = []
    for value in (3, 11):
        library = native.load("test-define", source, {"VALUE": value})
        library.cf_test_value.restype = ctypes.c_long
        values.append(library.cf_test_value())
    assert values == [3, 11]
    assert len(list(tmp_path.glob("test-define-*.so"))) == 2


def test_the_bloom_kernel_refuses_arrays_it_would_overrun():
    import numpy as np

    from dedup import bloom_native

    kernel = bloom_native.kernel()
    if kernel is None:
        pytest.skip("no C kernel here")
    params = (4096, 7, 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03, 0x8CB92BA72F3D8DD7, 0x2545F4914F6CDD1D, 64 - 12)
    keys = np.arange(1, 10, dtype=np.uint64)
    for bad, error in ((np.zeros(4096 // 8, np.uint16), TypeError), (np.zeros(4096 // 4, np.uint8)[::2], TypeError),
                       (np.zeros(100, np.uint8), ValueError), (np.zeros((2, 256), np.uint8), TypeError)):
        with pytest.raises(error):
            kernel.add(bad, keys, params)
        with pytest.raises(error):
            kernel.contains(bad, keys, params)
    frozen = np.zeros(4096 // 8, np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        kernel.add(frozen, keys, params)
    bits = np.zeros(4096 // 8, np.uint8)
    kernel.add(bits, keys, params)
    assert kernel.contains(bits, keys, params).all()


def _c4_in_a_fresh_process(small_crawl, out, env_changes: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_changes}
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "c4", "--input", *small_crawl.wet_paths,
                           "--badwords", small_crawl.badwords_path, "--output", str(out)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)


@pytest.mark.pipeline  # two c4 jobs, each in a CLI subprocess
def test_stats_record_which_kernel_the_workers_ran_and_the_launcher_warns_of_a_fallback(small_crawl, tmp_path):
    # A worker that cannot build the compiled trial (no compiler, nothing cached) takes the
    # Python path: _stats.json says so, with why, and the launcher says it in one warning. In
    # fresh processes: this one's kernel state is already settled.
    cache = tmp_path / "cache"
    cache.mkdir()
    for table in Path(cache_dir()).glob("langid-model-*.pickle"):  # the language tables, not the compiled kernels
        (cache / table.name).symlink_to(table)
    done = _c4_in_a_fresh_process(small_crawl, tmp_path / "no-cc", {"CC": str(tmp_path / "no-such-cc"), "CORPUSFORGE_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    kernels = json.loads((tmp_path / "no-cc" / STATS_FILE).read_text())["kernels"]
    assert kernels == {"langid-trial": "unavailable: no C compiler (cc) on PATH"}
    assert "C kernel langid-trial did not run everywhere (unavailable: no C compiler (cc) on PATH)" in done.stderr
    done = _c4_in_a_fresh_process(small_crawl, tmp_path / "off", {native.NO_NATIVE_ENV: "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "off" / STATS_FILE).read_text())["kernels"] == {"langid-trial": f"off ({native.NO_NATIVE_ENV} is set)"}
    assert "did not run everywhere" not in done.stderr  # asked for: no warning


def test_kernel_states_of_several_workers_are_one_entry_or_a_list_of_what_differed():
    declared = kernel_states([{"a": "native"}, {"a": "native", "b": "off (x)"}, {"b": "unavailable: no cc"}])
    assert kernels_document(declared, launcher={"a": "native"}) == {"a": "native", "b": ["off (x)", "unavailable: no cc"]}
    assert slow_kernels({"a": "native", "b": ["off (x)", "unavailable: no cc"], "c": "off (x)"}) == {"b": ["off (x)", "unavailable: no cc"]}


def test_take_used_reports_what_this_threads_work_ran_once(tmp_path, monkeypatch):
    # A reused worker (Spark's Python workers, a Beam worker pool) runs several jobs: each job's
    # tallies report the kernels its own work ran, not every kernel the process ever loaded.
    monkeypatch.setattr(native, "_status", {"test-sum": "native", "test-other": "unavailable: no cc"})
    native.take_used()
    native.mark_used("test-sum")
    native.mark_used("test-sum")
    elsewhere = threading.Thread(target=native.mark_used, args=("test-other",))
    elsewhere.start()
    elsewhere.join()
    assert native.take_used() == {"test-sum": "native"}  # not the other thread's
    assert native.take_used() == {}  # taken
