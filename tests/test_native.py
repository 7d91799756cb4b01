"""corpus.native: C kernels compiled once per machine, cached, and None where they cannot be had."""

from __future__ import annotations

import ctypes
import os
import shutil

import pytest

from corpus import native

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
