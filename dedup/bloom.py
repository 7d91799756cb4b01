"""A Bloom filter over 64-bit n-gram hashes, for GPT-2-style train/test overlap audits.

GPT-2 (section 4) kept every 8-gram of WebText in Bloom filters with a false-positive rate
bounded by 1e-8. Here the keys are already 64-bit hashes (``dedup.ngrams.ngram_hashes``:
one stable hash per word n-gram), so the filter never sees a string, and every operation
is a batch over a ``np.ndarray[uint64]``.

Sizing (``optimal_parameters``; Bloom 1970, the textbook optimum):
``m = -n ln p / (ln 2)^2`` bits and ``k = round(m / n * ln 2)`` probes. At ``p = 1e-8``
that is 38.34 bits (4.79 bytes) per element and ``k = 27`` (26.58 rounded). ``m`` is then
rounded UP to a multiple of 64 bits, so the bit array is a whole number of uint64 words
(and of bytes): at most 63 bits over the optimum.

    n-grams   bits/element   filter
    1e8       38.34          479 MB
    1e9       38.34          4.79 GB
    1e10      38.34          47.9 GB   (WebText: ~8e9 word 8-grams)

Beyond one machine's RAM, partition by hash prefix: ``partition_of(keys, parts)`` gives
each key's part from the top bits of the key (exactly the top ``log2(parts)`` bits when
``parts`` is a power of two). Build one filter per part, each with capacity ``n / parts``
(the same bits per element, so the same FP rate), in parallel (e.g. keyed by part in a
Beam ``GroupByKey``), and either keep them partitioned (a query goes to the filter of its
part: ``partition_of`` again) or, when one part is itself built over several shards,
``merge`` the shard filters of one part by OR. Because probe positions come from a
seed-mixed copy of the key (below), keys of one part still spread over all of its bits.
``split_by_part`` groups a key array by part.

Probes (triple hashing, Dillinger & Manolios 2004, "Bloom filters in probabilistic
verification"; the k-probes-from-few-hashes idea of Kirsch & Mitzenmacher 2006): from ONE
64-bit key, ``h1 = fmix(key ^ s1) mod m``, ``h2 = (fmix(key ^ s2) mod m) | 1`` (odd; ``m``
is even so ``h2 < m``) and ``h3 = ((a3 * key + c3) mod 2^64) >> (64 - b)`` with ``b =
floor(log2 m)`` (multiply-shift, Dietzfelbinger et al. 1997: two keys get the same ``h3``
with chance <= 2/2^b, and ``h3 < 2^b <= m``), where ``fmix`` is the SplitMix64 finaliser
and ``s1, s2, c3`` and the odd ``a3`` are derived from ``seed``. ``h3`` needs neither a
finaliser nor a modulo (~1 ns a key instead of ~9): only its collisions matter, the
position comes from ``h1`` and ``h2``. Probe ``i < k`` is bit

    (h1 + i * h2 + i(i-1)/2 * h3) mod m

computed incrementally: ``pos_0 = h1``, ``stride_1 = h2``, ``pos_i = pos_(i-1) +
stride_i`` and ``stride_(i+1) = stride_i + h3``, each reduced below ``m`` by one
subtraction (no modulo). Why not plain double hashing ``(h1 + i * h2) mod m`` (format
version 1): two keys with the same ``h2`` (chance ~2/m) whose ``h1`` differ by ``s * h2``
for a small ``s`` share ``k - |s|`` of their probes, so a pair of added keys can cover most
probes of a third key and the real false-positive rate gains a term of order ``n / m^2``
that ``fill^k`` does not see — negligible for 1e9 keys, dominant for small filters.
Measured with version 1 at p = 1e-8 (n random keys added, 4M random queries): 1,500 keys
(m = 57,536) 34 hits = 8.5e-6, 20,000 keys 3 hits = 7.5e-7; at p = 1e-5 and 1,500 keys
110 hits = 2.8e-5 (2.6x fill^k). With triple hashing, two keys share more than two probes
only when their ``h3`` agree AND their ``h2`` align (chance of order 1/m^2 per pair:
probe positions are a quadratic in i), and the same shapes give 0 hits in 40M queries at 1e-8
for both sizes (rule-of-three bound 7.5e-8; fill^k 9.4e-9 and 1.0e-8) and 36 hits in 4M
= 9.0e-6 at 1e-5 (fill^k 1.02e-5); ``tests/test_bloom.py`` checks these shapes.
Exactness needs ``m < 2^53`` (``contains`` finishes the last keys with ``pos + j * stride
+ j(j-1)/2 * h3``, below ``2017 m`` for ``j < 64``): 2^50 bytes, far beyond any audit.

Bit layout: bit ``j`` is bit ``j % 8`` (least significant first) of byte ``j // 8``, which
is also bit ``j % 64`` of little-endian uint64 word ``j // 64``.

Speed: where a C compiler is present, ``add`` and ``contains`` run these probe loops
compiled (``dedup.bloom_native``: per key, the three hashes, then each probe's bit set or
tested, 16 keys interleaved), which sets the same bits as the numpy path below
(``tests/test_bloom.py`` builds with both and against integer arithmetic) at 2-5x its
speed; ``_add_numpy`` / ``_contains_numpy`` are that path, used without a compiler.

The numpy path (one core): ``add`` computes all ``k`` probes of a step of keys as one
``(k, step)`` matrix (``step = min(block, 2^17 // k)`` keys), each probe row from the
previous one by two adds and two wraps (``min(p, p - m)`` in uint64, no modulo: the
stride, then the position), and writes the whole matrix with one fancy-indexed OR; the few
probes whose byte another probe of the same step overwrote with a different bit are
written again until none is left. Its work arrays (~1 MB) are allocated once per call and
reused by every step: fresh temporaries of that size are new pages from the kernel each
time, and their page faults cost more than the probes. ``contains`` (``block`` keys at a
time, default 2^15) checks probe 0 for all keys, computes ``h2`` only for the keys that
pass it, then checks probe 1 only for the keys still possibly present, computes ``h3``
only for those that pass probe 1, and so on (survivors carry their position and stride;
probe ``i`` from probe ``i - 1``); once at most 256 keys are left it checks all their
remaining probes as one matrix. A key that is
absent (most n-grams of a test set) costs about 2 probes, not 27.

``count`` is the number of keys passed to ``add`` (duplicates included, so an upper bound
on the distinct keys; ``merge`` adds the counts). ``estimated_count()`` is the
bits-set estimate of distinct keys, ``-(m/k) ln(1 - fill)`` (Swamidass & Baldi 2007).
``estimated_fp_rate()`` is ``fill_ratio() ** k`` — the better evidence at 1e-8;
``empirical_fp_rate`` queries random never-added keys and reports found / N with a 95%
upper bound (3/N when none found: 1M queries with none found only show FPR < 3e-6).

File format, version 2 (all little-endian; ``FILE_HEADER``). Version 1 had the same
layout but plain double hashing, so its bits mean other positions: ``load`` refuses it
with a message to rebuild the filter from its keys.

    offset  size  field
    0       8     magic b"CFBLOOM\\0"
    8       4     format version (uint32) = 2 (the probe scheme above)
    12      4     header size = offset of the bit array (uint32, multiple of 4096)
    16      8     m, bits (uint64, multiple of 64)
    24      4     k (uint32)
    28      4     meta length in bytes (uint32)
    32      8     seed (uint64)
    40      8     count (uint64)
    48      8     capacity (uint64, as requested at construction)
    56      8     error rate (float64, as requested at construction)
    64      32    checksum: blake2b (32-byte digest) of the whole header with these 32
                  bytes zeroed, followed by the bit array
    96      L     meta: JSON, UTF-8, sorted keys (hash id and normalisation settings)
    96+L    ...   zero padding up to the header size
    H       m/8   the bit array

The bit array starts on a 4096-byte boundary, so ``load(mmap=True)`` maps it read-only
(``np.memmap``): no copy, pages are read on demand, RAM is not doubled. ``verify=True``
computes the checksum, i.e. reads the whole file once (blake2b runs at roughly 1 GB/s on
one core: ~5 s per 1e9 n-grams at 1e-8, plus the disk read); ``verify=False`` checks
magic, version, sizes and meta only. ``save`` writes under a temporary name and renames
(``common.storage``), so a file under its final name is always complete.

pybloom-live interop (the package users named): its filter hashes each key's UTF-8 text
with salted hashlib/xxhash digests into ``k`` slices of ``m/k`` bits; ours probes one
64-bit n-gram hash. A bit of one filter says nothing about where the same n-gram's bits
are in the other, and neither filter keeps its keys, so bit arrays cannot be converted in
either direction — only rebuilt from the keys. What is possible: ``from_pybloom_file``
opens a pybloom-live ``tofile`` file and answers membership by asking pybloom-live itself;
``to_pybloom`` builds a pybloom-live filter from string keys (optionally writing its
file). Note pybloom-live's own quirk: a ``str`` key is hashed as its UTF-8 bytes but any
other key as ``str(key)``, so the bytes ``b"a b"`` is the key ``"b'a b'"``, not ``"a b"``:
query with the same Python type that was added.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pybloom_live

from common.errors import InputError
from common.storage import atomic_path
from dedup import bloom_native, ngrams

MAGIC = b"CFBLOOM\x00"
FORMAT_VERSION = 2  # 2: triple hashing; 1: plain double hashing (refused: rebuild)
FILE_HEADER = struct.Struct("<8sIIQIIQQQd32s")  # fixed part; meta JSON follows
_CHECKSUM_OFFSET = 64
_ALIGN = 4096  # bit array starts on a page boundary, for np.memmap
_MAX_BITS = 1 << 53  # contains' finish: pos + j*stride + j(j-1)/2*h3 < 2017 m < 2**64 for j <= 63
_MAX_K = 64
_HASH_CHUNK = 1 << 26  # bytes per blake2b / popcount step over a (memory-mapped) array
DEFAULT_ERROR_RATE = 1e-8  # GPT-2 section 4: "false positive rate upper-bounded by 1/10^8"
DEFAULT_BLOCK = 1 << 15  # keys per step of contains (arrays of 256 KB: reused memory, no fresh pages)
_FINISH_KEYS = 256  # contains: with this few keys left, check all their remaining probes at once
_ADD_PROBES = 1 << 17  # probes per step of add: a 1 MiB uint64 matrix (larger is slower)

_M64 = (1 << 64) - 1
_FMIX_C1 = np.uint64(0xBF58476D1CE4E5B9)  # SplitMix64 finaliser (Steele et al. 2014)
_FMIX_C2 = np.uint64(0x94D049BB133111EB)
_THREE, _SEVEN = np.uint64(3), np.uint64(7)
_BIT = np.array([1 << b for b in range(8)], dtype=np.uint8)  # bit b of a byte, as a mask


class BloomFileError(InputError):
    """A Bloom filter file that is not ours, of another version, truncated or corrupted."""


class BloomMismatchError(InputError):
    """Two filters that cannot be merged: different m, k, seed or hashing settings."""


def optimal_parameters(capacity: int, error_rate: float) -> tuple[int, int]:
    """(m bits, k probes) minimising memory for ``capacity`` keys at ``error_rate``:
    ``m = -n ln p / (ln 2)^2`` rounded up to a multiple of 64, ``k = round(m/n ln 2)``
    (``k`` from the unrounded ``m``, i.e. ``round(-log2 p)``)."""
    if not capacity >= 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"error_rate must be in (0, 1), got {error_rate}")
    exact_bits = -capacity * math.log(error_rate) / (math.log(2) ** 2)
    m = max(64, -(-math.ceil(exact_bits) // 64) * 64)
    k = max(1, round(exact_bits / capacity * math.log(2)))
    return m, k


def _fmix_scalar(x: int) -> int:
    x &= _M64
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _fmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, vectorised (uint64 arithmetic wraps mod 2**64); overwrites x."""
    x ^= x >> np.uint64(30)
    x *= _FMIX_C1
    x ^= x >> np.uint64(27)
    x *= _FMIX_C2
    x ^= x >> np.uint64(31)
    return x


def _wrap(p: np.ndarray, m: np.uint64) -> np.ndarray:
    """``p mod m`` for uint64 ``p < 2m``: ``p - m`` wraps above 2**63 > m when p < m."""
    return np.minimum(p, p - m)


def _as_keys(keys: Any) -> np.ndarray:
    """A 1-d uint64 array of keys; int64 hashes are reinterpreted bit for bit."""
    array = np.asarray(keys)
    if array.dtype == np.uint64:
        return array.reshape(-1)
    if array.dtype == np.int64:
        return array.reshape(-1).view(np.uint64)
    if array.size == 0:
        return np.zeros(0, np.uint64)
    if array.dtype.kind in "iu":
        if array.dtype.kind == "i" and array.size and array.min() < 0:
            raise ValueError("negative keys: pass 64-bit hashes as uint64 (or int64, reinterpreted)")
        return array.reshape(-1).astype(np.uint64)
    raise TypeError(f"keys must be an integer array of 64-bit hashes, got dtype {array.dtype}")


def _bit_is_set(bits: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Bit ``positions`` (uint64) of the byte array ``bits``, as a bool array."""
    hit = bits[(positions >> _THREE).view(np.int64)]
    hit >>= (positions & _SEVEN).astype(np.uint8)
    hit &= np.uint8(1)
    return hit.view(bool)


def _popcount(bits: np.ndarray) -> int:
    total = 0
    for start in range(0, bits.size, _HASH_CHUNK):
        chunk = np.asarray(bits[start : start + _HASH_CHUNK])
        if chunk.size % 8 == 0:
            chunk = chunk.view(np.uint64)
        if hasattr(np, "bitwise_count"):
            total += int(np.bitwise_count(chunk).sum(dtype=np.uint64))
        else:  # numpy < 2.0
            total += int(np.unpackbits(chunk.view(np.uint8)).sum(dtype=np.uint64))
    return total


@dataclass(frozen=True)
class FalsePositiveEstimate:
    """``found`` of ``queries`` never-added keys were reported present."""

    found: int
    queries: int
    rate: float  # found / queries
    upper_95: float  # one-sided 95% upper bound: 3/N at 0 found, else Wilson score (z = 1.645)


def fp_upper_bound(found: int, queries: int) -> float:
    """One-sided 95% upper bound on a rate after ``found`` hits in ``queries`` trials:
    the rule of three (``3/N``, from ``-ln 0.05 = 2.996``) when none was found, otherwise
    the Wilson score bound with ``z = 1.645``."""
    if queries <= 0:
        raise ValueError("queries must be > 0")
    if found == 0:
        return 3.0 / queries
    z, n = 1.645, queries
    p = found / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


class BloomFilter:
    """Bloom filter over uint64 keys; see the module docstring for sizing, probes, format.

    ``meta`` (JSON-serialisable) should hold what decides the keys — the hash scheme id and
    normalisation settings (``ngram_meta(config)``); it is stored in the file and two
    filters merge only when their metas are equal.
    """

    def __init__(
        self,
        capacity: int,
        error_rate: float = DEFAULT_ERROR_RATE,
        seed: int = 0,
        meta: dict | None = None,
        *,
        block: int = DEFAULT_BLOCK,
    ) -> None:
        m, k = optimal_parameters(capacity, error_rate)
        self._setup(m, k, seed, meta, capacity, error_rate, block)
        self._bits = np.zeros(m // 8, dtype=np.uint8)
        self.count = 0

    def _setup(self, m: int, k: int, seed: int, meta: dict | None, capacity: int, error_rate: float, block: int) -> None:
        if m % 64 or not 64 <= m < _MAX_BITS:
            raise ValueError(f"m must be a multiple of 64 in [64, 2^53), got {m}")
        if not 1 <= k <= _MAX_K:
            raise ValueError(f"k must be in [1, {_MAX_K}], got {k}")
        if not 0 <= seed <= _M64:
            raise ValueError(f"seed must be in [0, 2^64), got {seed}")
        meta = dict(meta or {})
        json.dumps(meta, sort_keys=True)  # fail now, not at save time
        self.m, self.k, self.seed, self.meta = int(m), int(k), int(seed), meta
        self.capacity, self.error_rate, self.block = int(capacity), float(error_rate), int(block)
        self._m64 = np.uint64(self.m)
        self._s1 = np.uint64(_fmix_scalar(self.seed ^ 0x9E3779B97F4A7C15))
        self._s2 = np.uint64(_fmix_scalar(self.seed ^ 0xD1B54A32D192ED03))
        self._a3 = np.uint64(_fmix_scalar(self.seed ^ 0x8CB92BA72F3D8DD7) | 1)  # odd multiplier
        self._c3 = np.uint64(_fmix_scalar(self.seed ^ 0x2545F4914F6CDD1D))
        self._shift3 = np.uint64(64 - (self.m.bit_length() - 1))  # h3 < 2^floor(log2 m) <= m
        self._params = (self.m, self.k, int(self._s1), int(self._s2), int(self._a3), int(self._c3), int(self._shift3))

    # -- probes ---------------------------------------------------------------------------

    def _h1(self, keys: np.ndarray) -> np.ndarray:
        h1 = _fmix(keys ^ self._s1)
        h1 %= self._m64
        return h1

    def _h2(self, keys: np.ndarray) -> np.ndarray:
        h2 = _fmix(keys ^ self._s2)
        h2 %= self._m64
        h2 |= np.uint64(1)
        return h2

    def _h3(self, keys: np.ndarray) -> np.ndarray:
        # Multiply-shift (Dietzfelbinger et al. 1997): the top b bits of a3 * key + c3 mod
        # 2^64, a3 odd; two keys agree with chance <= 2/2^b. No fmix, no modulo: ~1 ns a key.
        h3 = keys * self._a3
        h3 += self._c3
        h3 >>= self._shift3
        return h3

    def positions(self, keys: Any) -> np.ndarray:
        """The k bit positions of each key, shape (len(keys), k) — for inspection and tests:
        probe ``i`` is ``(h1 + i*h2 + i(i-1)/2 * h3) mod m``."""
        keys = _as_keys(keys)
        h1, h2, h3 = self._h1(keys), self._h2(keys), self._h3(keys)
        out = np.empty((keys.size, self.k), dtype=np.uint64)
        out[:, 0] = h1
        step = h2
        for i in range(1, self.k):
            out[:, i] = _wrap(out[:, i - 1] + step, self._m64)
            step = _wrap(step + h3, self._m64)
        return out

    def add(self, keys: Any) -> None:
        """Add a batch of uint64 keys (int64 reinterpreted); ``count`` grows by len(keys).
        The compiled kernel (``dedup.bloom_native``) sets the bits where it is available,
        else ``_add_numpy``: the same bits either way."""
        keys = _as_keys(keys)
        if not self._bits.flags.writeable:
            raise ValueError("this filter is read-only (memory-mapped by load): add to filter.copy()")
        kernel = bloom_native.kernel()
        if kernel is None:
            self._add_numpy(keys)
        else:
            kernel.add(self._bits, keys, self._params)
        self.count += int(keys.size)

    def _add_numpy(self, keys: np.ndarray) -> None:
        """``add``'s bit writes in numpy (the path without the compiled kernel)."""
        bits, m, k = self._bits, self._m64, self.k
        step = max(1, min(self.block, _ADD_PROBES // k, keys.size))  # keys per (k, step) probe matrix
        # Work buffers reused by every step (fresh ~1 MB temporaries would be new pages,
        # each touched page a fault): probes, their byte index, bit mask, gathered bytes.
        probes = np.empty(k * step, dtype=np.uint64)
        spare = np.empty(step, dtype=np.uint64)
        index = np.empty(k * step, dtype=np.uint64)
        mask = np.empty(k * step, dtype=np.uint8)
        got = np.empty(k * step, dtype=np.uint8)
        missing = np.empty(k * step, dtype=bool)
        for start in range(0, keys.size, step):
            chunk = keys[start : start + step]
            h1, stride, h3 = self._h1(chunk), self._h2(chunk), self._h3(chunk)
            size, total = h1.size, h1.size * k
            # All k probe rows of the step at once, without a modulo: row i is row i-1 plus
            # the stride, and the stride grows by h3 after each row. All are < m, so in
            # uint64 ``p - m`` wraps above 2**63 > m exactly when p < m, and min(p, p - m)
            # is p mod m for p < 2m.
            pos: np.ndarray = probes[:total].reshape(k, size)
            pos[0] = h1
            wrapped = spare[:size]
            for i in range(1, k):
                row = pos[i]
                np.add(pos[i - 1], stride, out=row)
                np.subtract(row, m, out=wrapped)
                np.minimum(row, wrapped, out=row)
                if i + 1 < k:
                    stride += h3
                    np.subtract(stride, m, out=wrapped)
                    np.minimum(stride, wrapped, out=stride)
            pos = pos.reshape(-1)
            byte = np.right_shift(pos, _THREE, out=index[:total]).view(np.int64)  # < 2**50: a valid index
            bit = np.bitwise_and(pos, _SEVEN, out=pos).view(np.int64)
            bit_mask = np.take(_BIT, bit, out=mask[:total], mode="clip")
            gathered = got[:total]
            np.take(bits, byte, out=gathered, mode="clip")
            gathered |= bit_mask
            bits[byte] = gathered
            # A fancy-indexed write keeps only the last of several writes to one byte (two
            # probes of the step in the same byte): write again those whose bit is missing.
            np.take(bits, byte, out=gathered, mode="clip")
            gathered &= bit_mask
            lost = np.equal(gathered, 0, out=missing[:total])
            if lost.any():
                byte, bit_mask = byte[lost], bit_mask[lost]
                while byte.size:
                    bits[byte] |= bit_mask
                    lost = (bits[byte] & bit_mask) == 0
                    byte, bit_mask = byte[lost], bit_mask[lost]

    def contains(self, keys: Any) -> np.ndarray:
        """Membership of each key (np.ndarray[bool]); never False for an added key. The
        compiled kernel (``dedup.bloom_native``) where available, else ``_contains_numpy``."""
        keys = _as_keys(keys)
        kernel = bloom_native.kernel()
        if kernel is None:
            return self._contains_numpy(keys)
        return kernel.contains(self._bits, keys, self._params)

    def _contains_numpy(self, keys: np.ndarray) -> np.ndarray:
        """``contains`` in numpy, ``block`` keys at a time (the path without the kernel)."""
        out = np.zeros(keys.size, dtype=bool)
        for start in range(0, keys.size, self.block):
            found = self._contains_block(keys[start : start + self.block])
            out[start : start + found.size] = found
        return out

    def _contains_block(self, keys: np.ndarray) -> np.ndarray:
        """``contains`` for one block: probe 0 for every key, then each next probe only for
        the keys whose probes so far were all set (compressing the arrays each time); ``h2``
        is only computed for the keys that pass probe 0 and ``h3`` for those that pass
        probe 1. Once few keys are left, all their remaining probes are checked at once
        (``(k - i, alive)`` matrix)."""
        bits, m, k = self._bits, self._m64, self.k
        out = np.zeros(keys.size, dtype=bool)
        pos = self._h1(keys)
        hit = _bit_is_set(bits, pos)
        if hit.all():
            alive, stride = np.arange(keys.size), self._h2(keys)
        else:
            alive = np.flatnonzero(hit)
            pos, stride = pos[alive], self._h2(keys[alive])
        h3 = None  # computed after probe 1, for its survivors only
        for i in range(1, k):
            # Here pos is probe i-1 and stride the step to probe i (h2 + (i-1)*h3 mod m).
            if alive.size <= _FINISH_KEYS:
                if h3 is None:
                    h3 = self._h3(keys[alive])
                # probe i-1+j = pos + j*stride + j(j-1)/2 * h3, j = 1..k-i: below 2017 m < 2^64.
                j = np.arange(1, k - i + 1, dtype=np.uint64)[:, None]
                triangle = (j * (j - np.uint64(1))) >> np.uint64(1)
                rest = (pos[None, :] + j * stride[None, :] + triangle * h3[None, :]) % m
                alive = alive[_bit_is_set(bits, rest.reshape(-1)).reshape(rest.shape).all(axis=0)]
                break
            pos += stride  # probe i, kept below m by subtracting m (see add)
            np.minimum(pos, pos - m, out=pos)
            hit = _bit_is_set(bits, pos)
            if not hit.all():
                keep = np.flatnonzero(hit)
                alive, pos, stride = alive[keep], pos[keep], stride[keep]
                if h3 is not None:
                    h3 = h3[keep]
            if i + 1 < k:
                if h3 is None:
                    h3 = self._h3(keys[alive])
                stride += h3
                np.minimum(stride, stride - m, out=stride)
        out[alive] = True
        return out

    def __contains__(self, key: int) -> bool:
        return bool(self.contains(np.array([key], dtype=np.uint64))[0])

    # -- statistics -----------------------------------------------------------------------

    @property
    def bits(self) -> np.ndarray:
        """The bit array as uint8 bytes (see the layout in the module docstring)."""
        return self._bits

    @property
    def nbytes(self) -> int:
        return self.m // 8

    def bits_per_element(self) -> float:
        return self.m / self.capacity

    def bits_set(self) -> int:
        return _popcount(self._bits)

    def fill_ratio(self) -> float:
        """Fraction of bits set."""
        return self.bits_set() / self.m

    def estimated_fp_rate(self) -> float:
        """``fill_ratio() ** k``: the chance that k probes of a never-added key all hit set
        bits (the k probes treated as independent positions)."""
        return self.fill_ratio() ** self.k

    def estimated_count(self) -> float:
        """Distinct keys estimated from bits set: ``-(m/k) ln(1 - fill)`` (inf when full)."""
        fill = self.fill_ratio()
        return math.inf if fill >= 1.0 else -self.m / self.k * math.log1p(-fill)

    def empirical_fp_rate(
        self,
        queries: int = 1_000_000,
        seed: int = 12345,
        strings_to_keys: Callable[[list[str]], np.ndarray] | None = None,
        chunk: int = 1 << 20,
    ) -> FalsePositiveEstimate:
        """Query ``queries`` random keys that were (almost surely) never added and count hits.

        Keys are uniform 64-bit values from ``np.random.default_rng(seed)`` — one equals an
        added key with probability ``count * queries / 2^64`` (1e-4 at 1e9 x 1e6), which is
        ignored. With ``strings_to_keys`` the queries are instead random strings
        (``"fp-probe <32 hex digits>"``) turned into keys by that function (e.g. the n-gram
        hasher), which also tests the hash scheme."""
        if queries <= 0:
            raise ValueError("queries must be > 0")
        rng = np.random.default_rng(seed)
        found, done = 0, 0
        while done < queries:
            n = min(chunk, queries - done)
            if strings_to_keys is None:
                keys = rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)
            else:
                raw = rng.integers(0, 1 << 64, size=(n, 2), dtype=np.uint64)
                keys = _as_keys(strings_to_keys([f"fp-probe {a:016x}{b:016x}" for a, b in raw.tolist()]))
            found += int(self.contains(keys).sum())
            done += n
        return FalsePositiveEstimate(found, queries, found / queries, fp_upper_bound(found, queries))

    # -- combining ------------------------------------------------------------------------

    def compatible_with(self, other: BloomFilter) -> str | None:
        """None when ``other`` can be merged into this filter, else the reason."""
        if not isinstance(other, BloomFilter):
            return f"not a BloomFilter: {type(other).__name__}"
        for name in ("m", "k", "seed"):
            if getattr(self, name) != getattr(other, name):
                return f"{name} differs: {getattr(self, name)} != {getattr(other, name)}"
        if self.meta != other.meta:
            return f"meta (hash id / normalisation) differs: {self.meta!r} != {other.meta!r}"
        return None

    def merge(self, other: BloomFilter) -> BloomFilter:
        """OR ``other`` into this filter (in place; returns self). The result equals, bit
        for bit, one filter built over both key sets. ``count`` becomes the sum."""
        reason = self.compatible_with(other)
        if reason is not None:
            raise BloomMismatchError(f"cannot merge Bloom filters: {reason}")
        if not self._bits.flags.writeable:
            raise ValueError("this filter is read-only (memory-mapped by load): merge into filter.copy()")
        for start in range(0, self._bits.size, _HASH_CHUNK):
            np.bitwise_or(
                self._bits[start : start + _HASH_CHUNK],
                other._bits[start : start + _HASH_CHUNK],
                out=self._bits[start : start + _HASH_CHUNK],
            )
        self.count += other.count
        return self

    def __ior__(self, other: BloomFilter) -> BloomFilter:
        return self.merge(other)

    def __or__(self, other: BloomFilter) -> BloomFilter:
        return self.copy().merge(other)

    def copy(self) -> BloomFilter:
        """An in-memory, writable copy (also of a memory-mapped filter)."""
        new = BloomFilter.__new__(BloomFilter)
        new._setup(self.m, self.k, self.seed, self.meta, self.capacity, self.error_rate, self.block)
        new._bits = np.array(self._bits, dtype=np.uint8, copy=True)
        new.count = self.count
        return new

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return self.compatible_with(other) is None and bool(np.array_equal(self._bits, other._bits))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"BloomFilter(m={self.m}, k={self.k}, seed={self.seed}, count={self.count}, "
            f"capacity={self.capacity}, error_rate={self.error_rate:g}, meta={self.meta!r})"
        )

    # -- files ----------------------------------------------------------------------------

    def _header(self, checksum: bytes = bytes(32)) -> bytes:
        meta = json.dumps(self.meta, sort_keys=True, separators=(",", ":")).encode("utf-8")
        size = -(-(FILE_HEADER.size + len(meta)) // _ALIGN) * _ALIGN
        fixed = FILE_HEADER.pack(
            MAGIC, FORMAT_VERSION, size, self.m, self.k, len(meta), self.seed, self.count,
            self.capacity, self.error_rate, checksum,
        )
        return (fixed + meta).ljust(size, b"\x00")

    def checksum(self) -> bytes:
        """blake2b-256 of the header (checksum field zeroed) and the bit array."""
        return _checksum(self._header(), self._bits)

    def save(self, path: str | os.PathLike) -> None:
        """Write the filter to ``path`` atomically (temporary name, then rename)."""
        header = self._header(self.checksum())
        with atomic_path(path) as temporary:
            with open(temporary, "wb") as f:
                f.write(header)
                for start in range(0, self._bits.size, _HASH_CHUNK):
                    f.write(np.ascontiguousarray(self._bits[start : start + _HASH_CHUNK]).data)

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = True, verify: bool = True) -> BloomFilter:
        """Open a file written by ``save``. ``mmap=True`` maps the bit array read-only (no
        copy; ``add``/``merge`` need ``copy()``); ``mmap=False`` reads it into memory.
        ``verify=True`` recomputes the checksum (one full read of the file). Any problem
        raises ``BloomFileError`` naming the file."""
        path = os.fspath(path)

        def fail(problem: str) -> BloomFileError:
            return BloomFileError(f"{path}: {problem}")

        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                fixed = f.read(FILE_HEADER.size)
                if len(fixed) < len(MAGIC) or fixed[: len(MAGIC)] != MAGIC:
                    raise fail(f"not a corpusforge Bloom filter file (magic {fixed[:8]!r}, expected {MAGIC!r})")
                if len(fixed) < FILE_HEADER.size:
                    raise fail(f"truncated header: {size} bytes, the fixed header alone is {FILE_HEADER.size}")
                (_, version, header_size, m, k, meta_len, seed, count, capacity, error_rate, stored) = (
                    FILE_HEADER.unpack(fixed)
                )
                if version == 1:
                    raise fail(
                        f"format version 1 was written by an older probe scheme (plain double hashing, "
                        f"whose real false-positive rate exceeds its bound in small filters); this code "
                        f"reads version {FORMAT_VERSION}: rebuild the filter from its keys"
                    )
                if version != FORMAT_VERSION:
                    raise fail(f"format version {version}, this code reads version {FORMAT_VERSION}")
                if header_size < FILE_HEADER.size + meta_len or header_size % _ALIGN:
                    raise fail(f"corrupt header: header size {header_size} with {meta_len} bytes of meta")
                if m % 64 or not 64 <= m < _MAX_BITS or not 1 <= k <= _MAX_K:
                    raise fail(f"corrupt header: m={m}, k={k}")
                expected = header_size + m // 8
                if size != expected:
                    what = "truncated" if size < expected else "trailing bytes"
                    raise fail(f"{what}: {size} bytes, expected {expected} ({header_size} header + {m // 8} bits)")
                f.seek(0)
                header = bytearray(f.read(header_size))
        except OSError as error:
            raise fail(f"cannot read: {error}") from error
        try:
            meta = json.loads(bytes(header[FILE_HEADER.size : FILE_HEADER.size + meta_len]).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise fail(f"corrupt meta JSON: {type(error).__name__}: {str(error)[:80]}") from None
        if not isinstance(meta, dict):
            raise fail(f"corrupt meta JSON: a {type(meta).__name__}, not an object")
        bits: np.ndarray
        if mmap:
            bits = np.memmap(path, dtype=np.uint8, mode="r", offset=header_size, shape=(m // 8,))
        else:
            bits = np.fromfile(path, dtype=np.uint8, count=m // 8, offset=header_size)
        if verify:
            header[_CHECKSUM_OFFSET : _CHECKSUM_OFFSET + 32] = bytes(32)
            actual = _checksum(bytes(header), bits)
            if actual != stored:
                raise fail(f"checksum mismatch (stored {stored.hex()[:16]}..., computed {actual.hex()[:16]}...): corrupted")
        bloom = cls.__new__(cls)
        bloom._setup(m, k, seed, meta, capacity, error_rate, DEFAULT_BLOCK)
        bloom._bits = bits
        bloom.count = count
        return bloom


def _checksum(header: bytes, bits: np.ndarray) -> bytes:
    digest = hashlib.blake2b(header, digest_size=32)
    for start in range(0, bits.size, _HASH_CHUNK):
        digest.update(np.ascontiguousarray(bits[start : start + _HASH_CHUNK]).data)
    return digest.digest()


# -- partitioning for WebText scale -------------------------------------------------------


def partition_of(keys: Any, parts: int) -> np.ndarray:
    """Each key's part in ``range(parts)`` from its top bits: ``((key >> 32) * parts) >> 32``
    (exactly the top ``log2(parts)`` bits when ``parts`` is a power of two), as int64."""
    if not 1 <= parts <= 1 << 32:
        raise ValueError(f"parts must be in [1, 2^32], got {parts}")
    keys = _as_keys(keys)
    if parts & (parts - 1) == 0:
        shift = 64 - (parts.bit_length() - 1)
        return (keys >> np.uint64(shift)).astype(np.int64) if shift < 64 else np.zeros(keys.size, np.int64)
    return (((keys >> np.uint64(32)) * np.uint64(parts)) >> np.uint64(32)).astype(np.int64)


def split_by_part(keys: Any, parts: int) -> list[np.ndarray]:
    """The keys of each part (``partition_of``), in their original order within a part."""
    keys = _as_keys(keys)
    part = partition_of(keys, parts)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(parts + 1))
    return [keys[order[bounds[i] : bounds[i + 1]]] for i in range(parts)]


def ngram_meta(config: Any = None) -> dict:
    """The ``meta`` for a filter of ``dedup.ngrams`` keys: hash scheme id and settings."""
    config = ngrams.DEFAULT if config is None else config
    return {"hash_id": ngrams.HASH_ID, "ngram_config": config.to_dict()}


# -- pybloom-live interop ------------------------------------------------------------------


class PybloomFile:
    """A pybloom-live filter read from its ``tofile`` file; membership is answered by
    pybloom-live itself (its own hashing), for keys of the type that were added."""

    def __init__(self, inner: Any, path: str) -> None:
        self.inner, self.path = inner, path

    def __contains__(self, key: str | bytes) -> bool:
        return key in self.inner

    def contains(self, keys: Iterable[str | bytes]) -> np.ndarray:
        inner = self.inner
        return np.fromiter((key in inner for key in keys), dtype=bool)

    @property
    def count(self) -> int:
        return int(self.inner.count)

    @property
    def capacity(self) -> int:
        return int(self.inner.capacity)

    @property
    def error_rate(self) -> float:
        return float(self.inner.error_rate)

    @property
    def num_bits(self) -> int:
        return int(self.inner.num_bits)

    @property
    def num_slices(self) -> int:
        return int(self.inner.num_slices)


def from_pybloom_file(path: str | os.PathLike) -> PybloomFile:
    """Open a ``pybloom_live.BloomFilter.tofile`` file (needs pybloom-live installed)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            inner = pybloom_live.BloomFilter.fromfile(f)
    except (ValueError, struct.error, EOFError) as error:
        raise BloomFileError(f"{path}: not a readable pybloom-live BloomFilter file: {error}") from error
    except OSError as error:
        raise BloomFileError(f"{path}: cannot read: {error}") from error
    return PybloomFile(inner, path)


def to_pybloom(
    keys: Iterable[str],
    capacity: int,
    error_rate: float = DEFAULT_ERROR_RATE,
    path: str | os.PathLike | None = None,
) -> Any:
    """Build a ``pybloom_live.BloomFilter`` from string keys (e.g. ``" ".join`` of an
    n-gram's normalised words) and, with ``path``, write it with ``tofile`` atomically.
    A rebuild from the keys: our bit arrays cannot be converted (module docstring).
    pybloom-live raises IndexError past ``capacity``."""
    bloom = pybloom_live.BloomFilter(capacity=capacity, error_rate=error_rate)
    add = bloom.add
    for key in keys:
        add(key, skip_check=True)
    if path is not None:
        with atomic_path(path) as temporary:
            with open(temporary, "wb") as f:
                bloom.tofile(f)
    return bloom
