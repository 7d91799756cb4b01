"""The Bloom filter's probe loops as a small C kernel, compiled once per machine.

``dedup.bloom`` sets and tests bits with numpy: every probe row of a batch is a handful of
whole-array passes (position, wrap, byte index, bit mask, gather, OR, scatter), ~6 ns a
probe, where a compiled loop spends ~1-2 ns. This module holds the same two loops in C
(``dedup/data/bloom_kernel.c``, ``SOURCE``): ``add`` and ``contains`` over a uint64 key array, with the same probe scheme
(``h1 = fmix(key ^ s1) mod m``, ``h2 = (fmix(key ^ s2) mod m) | 1``, ``h3`` multiply-shift,
probe ``i`` = ``pos_(i-1) + stride_i`` reduced by one subtraction, ``stride_(i+1) =
stride_i + h3`` likewise), so a filter built either way has the same bits, byte for byte
(``tests/test_bloom.py`` builds with both and compares). Keys are handled in groups of
``GROUP`` interleaved: their probes are independent memory accesses, so on a filter larger
than the CPU caches several cache misses are in flight at once; ``contains`` first computes
and prefetches probe 0 of every key of a group, then tests each key's probes in order and
stops at the first clear bit (an absent key costs ~2 probes).

``kernel()`` compiles and loads it through ``corpus.native`` (once per machine, cached;
``None`` without a C compiler, and then ``dedup.bloom`` keeps its numpy path: the same
filters, slower), and checks it once per process on a small filter.
"""

from __future__ import annotations

import ctypes
import logging
import threading

import numpy as np

from corpus import native

log = logging.getLogger(__name__)

GROUP = 16  # keys whose probes are interleaved (memory-level parallelism)

SOURCE = native.source("dedup", "bloom_kernel.c")  # the C, package data (dedup/data/)
DEFINES = {"GROUP": GROUP}

_U64, _U32, _SIZE, _PTR = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p
_lock = threading.Lock()
_loaded: list = []  # [kernel or None], filled once per process


class Kernel:
    """The compiled ``add`` / ``contains``; arguments are the filter's parameters."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._add, self._contains = library.cf_bloom_add, library.cf_bloom_contains
        params = (_U64, _U32, _U64, _U64, _U64, _U64, _U32)
        self._add.argtypes = [_PTR, _PTR, _SIZE, *params]
        self._contains.argtypes = [_PTR, _PTR, _SIZE, *params, _PTR]
        self._add.restype = self._contains.restype = None

    @staticmethod
    def _check(bits: np.ndarray, params: tuple, writes: bool) -> None:
        """The C reads (and ``add`` writes) ``bits`` as m / 8 contiguous bytes: anything else
        would read or write out of bounds."""
        if not isinstance(bits, np.ndarray) or bits.dtype != np.uint8 or not bits.flags.c_contiguous or bits.ndim != 1:
            raise TypeError(f"bits must be a 1-d C-contiguous uint8 array, got {getattr(bits, 'dtype', type(bits))} "
                            f"{getattr(bits, 'shape', '')}")
        if writes and not bits.flags.writeable:
            raise ValueError("bits is read-only")
        m = int(params[0])
        if m < 2 or bits.size * 8 < m:
            raise ValueError(f"a filter of m = {m} bits needs {(m + 7) // 8} bytes, bits has {bits.size}")

    def add(self, bits: np.ndarray, keys: np.ndarray, params: tuple) -> None:
        self._check(bits, params, writes=True)
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        self._add(bits.ctypes.data, keys.ctypes.data, keys.size, *params)

    def contains(self, bits: np.ndarray, keys: np.ndarray, params: tuple) -> np.ndarray:
        self._check(bits, params, writes=False)
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        out = np.empty(keys.size, dtype=np.uint8)
        self._contains(bits.ctypes.data, keys.ctypes.data, keys.size, *params, out.ctypes.data)
        return out.view(bool)


def _self_check(kernel: Kernel) -> bool:
    """The kernel finds every key it added to a small filter, setting at most k bits each."""
    m, k = 4096, 7
    params = (m, k, 0x9E3779B97F4A7C15, 0xD1B54A32D192ED03, 0x8CB92BA72F3D8DD7, 0x2545F4914F6CDD1D, 64 - 12)
    keys = np.arange(1, 40, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    bits = np.zeros(m // 8, np.uint8)
    kernel.add(bits, keys, params)
    return bool(kernel.contains(bits, keys, params).all()) and int(np.unpackbits(bits).sum()) <= keys.size * k


def kernel() -> Kernel | None:
    """The compiled kernel, or ``None`` where it cannot be had (see the module docstring)."""
    native.mark_used("bloom-kernel")  # compiled or not: the job's _stats.json says which (corpus.native.take_used)
    if _loaded:
        return _loaded[0]
    with _lock:
        if not _loaded:
            _loaded.append(_load())
    return _loaded[0]


def _load() -> Kernel | None:
    library = native.load("bloom-kernel", SOURCE, DEFINES)
    if library is None:
        return None
    loaded = Kernel(library)
    if not _self_check(loaded):
        native.fell_back("bloom-kernel", "it failed its self-check")
        return None
    return loaded
