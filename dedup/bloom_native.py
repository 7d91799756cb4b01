"""The Bloom filter's probe loops as a small C kernel, compiled once per machine.

``dedup.bloom`` sets and tests bits with numpy: every probe row of a batch is a handful of
whole-array passes (position, wrap, byte index, bit mask, gather, OR, scatter), ~6 ns a
probe, where a compiled loop spends ~1-2 ns. This module holds the same two loops in C
(``SOURCE``): ``add`` and ``contains`` over a uint64 key array, with the same probe scheme
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

SOURCE = r"""
#include <stdint.h>
#include <stddef.h>

#define GROUP %(group)d

/* x mod m without a division (Lemire, Kaser & Kurz 2019, "Faster remainder by direct
   computation"): with c = ceil(2^128 / m), x mod m is the top 64 bits of
   ((c * x) mod 2^128) * m, exact for every 64-bit x and m >= 2. */
typedef unsigned __int128 u128;
static inline uint64_t reduce(uint64_t x, u128 c, uint64_t m) {
    u128 fraction = c * x;  /* mod 2^128 */
    u128 low = ((u128)(uint64_t)fraction * m) >> 64;
    return (uint64_t)((low + (u128)(uint64_t)(fraction >> 64) * m) >> 64);
}

static inline uint64_t fmix(uint64_t x) {
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27; x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

void cf_bloom_add(uint8_t *bits, const uint64_t *keys, size_t n, uint64_t m, uint32_t k,
                  uint64_t s1, uint64_t s2, uint64_t a3, uint64_t c3, uint32_t shift3) {
    uint64_t pos[GROUP], stride[GROUP], h3[GROUP];
    u128 c = ~(u128)0 / m + 1;
    for (size_t start = 0; start < n; start += GROUP) {
        size_t size = n - start < GROUP ? n - start : GROUP;
        for (size_t j = 0; j < size; j++) {
            uint64_t key = keys[start + j];
            pos[j] = reduce(fmix(key ^ s1), c, m);
            stride[j] = reduce(fmix(key ^ s2), c, m) | 1;
            h3[j] = (key * a3 + c3) >> shift3;
        }
        for (uint32_t i = 0; i < k; i++) {
            for (size_t j = 0; j < size; j++) {
                uint64_t p = pos[j], s = stride[j];
                bits[p >> 3] |= (uint8_t)(1u << (p & 7));
                p += s; if (p >= m) p -= m;
                s += h3[j]; if (s >= m) s -= m;
                pos[j] = p; stride[j] = s;
            }
        }
    }
}

void cf_bloom_contains(const uint8_t *bits, const uint64_t *keys, size_t n, uint64_t m, uint32_t k,
                       uint64_t s1, uint64_t s2, uint64_t a3, uint64_t c3, uint32_t shift3, uint8_t *out) {
    uint64_t first[GROUP];
    u128 c = ~(u128)0 / m + 1;
    for (size_t start = 0; start < n; start += GROUP) {
        size_t size = n - start < GROUP ? n - start : GROUP;
        for (size_t j = 0; j < size; j++) {
            first[j] = reduce(fmix(keys[start + j] ^ s1), c, m);
            __builtin_prefetch(bits + (first[j] >> 3));
        }
        for (size_t j = 0; j < size; j++) {
            uint64_t p = first[j];
            uint8_t found = 0;
            if ((bits[p >> 3] >> (p & 7)) & 1) {
                uint64_t key = keys[start + j];
                uint64_t s = reduce(fmix(key ^ s2), c, m) | 1, h3 = (key * a3 + c3) >> shift3;
                uint32_t i = 1;
                for (; i < k; i++) {
                    p += s; if (p >= m) p -= m;
                    if (!((bits[p >> 3] >> (p & 7)) & 1)) break;
                    s += h3; if (s >= m) s -= m;
                }
                found = i == k;
            }
            out[start + j] = found;
        }
    }
}
""" % {"group": GROUP}

_U64, _U32, _SIZE, _PTR = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p
_lock = threading.Lock()
_loaded: list = []  # [kernel or None], filled once per process


class Kernel:
    """The compiled ``add`` / ``contains``; arguments are the filter's parameters."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._add, self._contains = library.cf_bloom_add, library.cf_bloom_contains
        params = [_U64, _U32, _U64, _U64, _U64, _U64, _U32]
        self._add.argtypes = [_PTR, _PTR, _SIZE] + params
        self._contains.argtypes = [_PTR, _PTR, _SIZE] + params + [_PTR]
        self._add.restype = self._contains.restype = None

    def add(self, bits: np.ndarray, keys: np.ndarray, params: tuple) -> None:
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        self._add(bits.ctypes.data, keys.ctypes.data, keys.size, *params)

    def contains(self, bits: np.ndarray, keys: np.ndarray, params: tuple) -> np.ndarray:
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
    if _loaded:
        return _loaded[0]
    with _lock:
        if not _loaded:
            _loaded.append(_load())
    return _loaded[0]


def _load() -> Kernel | None:
    library = native.load("bloom-kernel", SOURCE)
    if library is None:
        return None
    loaded = Kernel(library)
    if not _self_check(loaded):
        log.warning("the Bloom filter C kernel failed its self-check: numpy path")
        return None
    return loaded
