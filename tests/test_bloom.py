"""dedup.bloom: sizing, no false negatives, measured FP rate, files, merge, pybloom-live interop."""

from __future__ import annotations

import hashlib
import math
import struct

import numpy as np
import pytest

from dedup import bloom_native
from dedup.bloom import (
    FORMAT_VERSION,
    MAGIC,
    BloomFileError,
    BloomFilter,
    BloomMismatchError,
    fp_upper_bound,
    from_pybloom_file,
    ngram_meta,
    optimal_parameters,
    partition_of,
    split_by_part,
    to_pybloom,
)


def random_keys(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 64, size=n, dtype=np.uint64)


def theoretical_fp(bloom: BloomFilter, n: int) -> float:
    return (1.0 - math.exp(-bloom.k * n / bloom.m)) ** bloom.k


# -- sizing ---------------------------------------------------------------------------------


def test_optimal_parameters_at_1e_8_match_gpt2_arithmetic():
    m, k = optimal_parameters(10**9, 1e-8)
    assert abs(m / 10**9 - 38.34) <= 0.01
    assert k == 27
    assert m % 64 == 0
    assert abs(m / 8 / 1e9 - 4.79) < 0.005  # 4.79 GB for 1e9 n-grams
    m10, _ = optimal_parameters(10**10, 1e-8)
    assert abs(m10 / 8 / 1e9 - 47.9) < 0.05  # 47.9 GB for 1e10


@pytest.mark.parametrize(
    "error_rate, bits_per_element, k",
    [(1e-2, 9.5851, 7), (1e-3, 14.3776, 10), (1e-4, 19.1702, 13), (1e-6, 28.7552, 20)],
)
def test_optimal_parameters_other_rates(error_rate, bits_per_element, k):
    m, got_k = optimal_parameters(1_000_000, error_rate)
    assert got_k == k
    assert m % 64 == 0
    assert abs(m / 1_000_000 - bits_per_element) < 0.0001


def test_optimal_parameters_rounds_m_up_to_64_bits_and_rejects_bad_input():
    assert optimal_parameters(1, 0.5) == (64, 1)
    with pytest.raises(ValueError):
        optimal_parameters(0, 1e-3)
    with pytest.raises(ValueError):
        optimal_parameters(10, 1.0)


def test_memory_is_the_optimum_bits_per_element():
    bloom = BloomFilter(1_000_000, 1e-8)
    assert bloom.nbytes == bloom.m // 8 == bloom.bits.nbytes
    assert abs(bloom.bits_per_element() - 38.34) < 0.01


# -- probes ---------------------------------------------------------------------------------


def _fmix_reference(x: int) -> int:
    # SplitMix64 finaliser over Python ints (Steele et al. 2014), independent of numpy.
    mask = (1 << 64) - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & mask
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def test_probe_positions_are_pinned_triple_hashing():
    bloom = BloomFilter(1000, 1e-3, seed=0)
    assert (bloom.m, bloom.k) == (14400, 10)
    keys = [0, 1, 2**64 - 1, 123456789]
    pos = bloom.positions(np.array(keys, dtype=np.uint64))
    assert pos.shape == (4, 10)
    m = bloom.m
    for key, row in zip(keys, pos.tolist(), strict=True):
        # (h1 + i*h2 + i(i-1)/2 * h3) mod m in exact integer arithmetic, from the three
        # seeded hashes of the key.
        h1 = _fmix_reference(key ^ int(bloom._s1)) % m
        h2 = (_fmix_reference(key ^ int(bloom._s2)) % m) | 1
        h3 = ((key * int(bloom._a3) + int(bloom._c3)) % 2**64) >> (64 - (m.bit_length() - 1))
        assert row == [(h1 + i * h2 + i * (i - 1) // 2 * h3) % m for i in range(10)]
        assert len({h1, h2, h3}) == 3
    assert pos[0].tolist() == PINNED_KEY0_SEED0
    assert not np.array_equal(BloomFilter(1000, 1e-3, seed=1).positions([0]), pos[:1])


def test_probes_are_not_plain_double_hashing():
    # The defect of format version 1: probe i = (h1 + i*h2) mod m, a constant stride.
    # Triple hashing's stride grows by h3, so second differences are h3 (almost never 0).
    bloom = BloomFilter(50_000, 1e-8, seed=4)
    pos = bloom.positions(random_keys(1000, seed=13)).astype(np.int64)
    second = np.diff(pos, n=2, axis=1) % bloom.m
    assert (second == second[:, :1]).all()  # the same h3 at every probe of a key
    assert np.count_nonzero(second[:, 0]) >= 999
    assert len(np.unique(second[:, 0])) >= 990  # a different h3 per key


PINNED_KEY0_SEED0 = [11071, 10110, 13922, 8107, 7065, 10796, 4900, 3777, 7427, 1450]


def test_add_sets_exactly_the_probe_bits():
    bloom = BloomFilter(100_000, 1e-8)
    key = np.array([123456789], dtype=np.uint64)
    bloom.add(key)
    pos = bloom.positions(key)[0]
    assert bloom.bits_set() == len(set(pos.tolist())) == 27
    unpacked = np.unpackbits(bloom.bits, bitorder="little")
    assert sorted(np.flatnonzero(unpacked).tolist()) == sorted(pos.tolist())
    assert bloom.count == 1 and 123456789 in bloom and 987654321 not in bloom


def test_no_false_negatives_on_a_million_random_keys():
    keys = random_keys(1_000_000, seed=1)
    bloom = BloomFilter(1_000_000, 1e-8)
    bloom.add(keys)
    assert bloom.count == 1_000_000
    assert bloom.contains(keys).all()
    assert bloom.contains(keys.view(np.int64)).all()  # int64 hashes are the same bits
    assert bloom.contains(keys[::-1]).all()


@pytest.mark.parametrize(
    "capacity, error_rate, block",
    [(5000, 1e-8, 1 << 15), (5000, 1e-3, 777), (300, 1e-2, 64), (2000, 0.3, 1 << 15), (2000, 0.6, 100)],
)
def test_add_and_contains_agree_with_the_probe_positions(capacity, error_rate, block):
    # add (reused buffers, partial last step) sets exactly the probe bits; contains (early
    # exit, compressed survivors, the all-at-once finish) says True exactly when all k are set.
    bloom = BloomFilter(capacity, error_rate, seed=9, block=block)
    added = random_keys(capacity, seed=10)
    bloom.add(added[: capacity // 3])
    bloom.add(added[capacity // 3 :])
    expected = np.zeros(bloom.m, dtype=bool)
    expected[bloom.positions(added).astype(np.int64).ravel()] = True
    assert np.array_equal(np.unpackbits(bloom.bits, bitorder="little").astype(bool), expected)
    queries = np.concatenate([added, random_keys(4 * capacity, seed=11)])
    np.random.default_rng(12).shuffle(queries)
    truth = expected[bloom.positions(queries).astype(np.int64)].all(axis=1)
    assert np.array_equal(bloom.contains(queries), truth)
    assert truth.sum() >= capacity and not truth.all()


def test_no_false_negatives_in_a_tiny_overfull_filter():
    # Many keys share a byte in one probe row: the rewrite loop must set every bit.
    keys = random_keys(50_000, seed=2)
    bloom = BloomFilter(100, 1e-2)
    bloom.add(keys)
    assert bloom.contains(keys).all()
    assert bloom.fill_ratio() == 1.0 and bloom.estimated_count() == math.inf


def test_add_accepts_duplicates_and_empty_batches():
    bloom = BloomFilter(1000, 1e-4)
    bloom.add(np.zeros(0, dtype=np.uint64))
    bloom.add([])
    assert bloom.count == 0 and bloom.bits_set() == 0
    bloom.add(np.array([7, 7, 7], dtype=np.uint64))
    assert bloom.count == 3  # keys passed to add, duplicates included
    assert round(bloom.estimated_count()) == 1  # the bits-set estimate sees one key
    bloom.add(np.array([-1], dtype=np.int64))  # int64 hashes are reinterpreted bit for bit
    assert (1 << 64) - 1 in bloom
    with pytest.raises(ValueError, match="negative"):
        bloom.add(np.array([-1], dtype=np.int32))
    with pytest.raises(TypeError):
        bloom.add(np.array([1.5]))


# -- the compiled kernel against the numpy path ---------------------------------------------


def kernel_or_skip():
    kernel = bloom_native.kernel()
    if kernel is None:
        pytest.skip("no C compiler here: dedup.bloom runs its numpy path only")
    return kernel


def _bits_by_integer_arithmetic(bloom: BloomFilter, keys: list[int]) -> bytes:
    # The bit array in plain Python ints: probe i = (h1 + i*h2 + i(i-1)/2 * h3) mod m,
    # bit j = bit j % 8 of byte j // 8; no numpy, no C.
    m, k, bits = bloom.m, bloom.k, bytearray(bloom.m // 8)
    for key in keys:
        h1 = _fmix_reference(key ^ int(bloom._s1)) % m
        h2 = (_fmix_reference(key ^ int(bloom._s2)) % m) | 1
        h3 = ((key * int(bloom._a3) + int(bloom._c3)) % 2**64) >> (64 - (m.bit_length() - 1))
        for i in range(k):
            position = (h1 + i * h2 + i * (i - 1) // 2 * h3) % m
            bits[position // 8] |= 1 << (position % 8)
    return bytes(bits)


@pytest.mark.parametrize(
    "capacity, error_rate, seed",
    [(1, 0.5, 0), (300, 1e-2, 1), (1500, 1e-8, 2), (20_000, 1e-5, 3), (190_444, 1e-8, 0), (2000, 0.6, 2**64 - 1)],
)
def test_kernel_and_numpy_build_byte_identical_filters(capacity, error_rate, seed):
    kernel_or_skip()
    keys = random_keys(3 * capacity + 7, seed=capacity)  # overfull too: more keys than capacity
    compiled, reference = BloomFilter(capacity, error_rate, seed=seed), BloomFilter(capacity, error_rate, seed=seed)
    compiled.add(keys[:capacity])
    compiled.add(keys[capacity:])
    reference._add_numpy(keys[:capacity])
    reference._add_numpy(keys[capacity:])
    assert compiled.bits.tobytes() == reference.bits.tobytes()
    assert compiled.bits_set() > 0
    queries = np.concatenate([keys, random_keys(200_000, seed=capacity + 1)])
    found = compiled.contains(queries)
    assert np.array_equal(found, reference._contains_numpy(queries))
    assert found[: keys.size].all()


def test_both_paths_give_the_bits_computed_in_integer_arithmetic():
    kernel_or_skip()
    keys = random_keys(2000, seed=30)
    compiled, reference = BloomFilter(2000, 1e-6, seed=5), BloomFilter(2000, 1e-6, seed=5)
    compiled.add(keys)
    reference._add_numpy(keys)
    expected = _bits_by_integer_arithmetic(compiled, keys.tolist())
    assert compiled.bits.tobytes() == expected == reference.bits.tobytes()
    assert 0.4 < compiled.fill_ratio() < 0.6


def test_kernel_queries_a_memory_mapped_filter_like_numpy(tmp_path):
    kernel_or_skip()
    bloom = BloomFilter(50_000, 1e-6, seed=8)
    bloom.add(random_keys(50_000, seed=31))
    bloom.save(tmp_path / "f.bloom")
    mapped = BloomFilter.load(tmp_path / "f.bloom", mmap=True)
    queries = np.concatenate([random_keys(50_000, seed=31)[:5000], random_keys(500_000, seed=32)])
    found = mapped.contains(queries)
    assert np.array_equal(found, mapped._contains_numpy(queries))
    assert found[:5000].all() and 0 < found[5000:].sum() < 50


def test_kernel_and_numpy_measure_the_same_false_positive_rate():
    kernel_or_skip()
    bloom = BloomFilter(100_000, 1e-4, seed=3)
    bloom.add(random_keys(100_000, seed=4))
    queries = random_keys(1_000_000, seed=5)
    compiled, reference = bloom.contains(queries), bloom._contains_numpy(queries)
    assert np.array_equal(compiled, reference)
    assert 0 < int(compiled.sum()) <= 1e-4 * 1_000_000 + 4 * math.sqrt(1e-4 * 1_000_000)


# -- false-positive rate --------------------------------------------------------------------


@pytest.mark.parametrize("error_rate", [1e-3, 1e-4])
def test_measured_fp_rate_within_bound_and_close_to_fill_estimate(error_rate):
    n, queries = 100_000, 1_000_000
    bloom = BloomFilter(n, error_rate, seed=3)
    bloom.add(random_keys(n, seed=4))
    measured = bloom.empirical_fp_rate(queries, seed=5)
    assert measured.queries == queries and measured.rate == measured.found / queries
    # Bound: the target p plus 4 binomial standard deviations of a 1M-query sample
    # (sqrt(p/N): 3.2e-5 at p = 1e-3, 1e-5 at 1e-4).
    assert measured.rate <= error_rate + 4 * math.sqrt(error_rate / queries)
    assert measured.found > 0
    # The fill-ratio estimate fill**k agrees with the measurement within sampling error,
    # and with the textbook (1 - e^(-kn/m))^k.
    estimate = bloom.estimated_fp_rate()
    assert abs(measured.rate - estimate) <= 4 * math.sqrt(estimate / queries)
    assert abs(estimate - theoretical_fp(bloom, n)) <= 0.05 * estimate
    assert measured.upper_95 > measured.rate
    assert abs(bloom.estimated_count() - n) < 0.01 * n


def wilson_interval(found: int, queries: int, z: float) -> tuple[float, float]:
    """Two-sided Wilson score interval of a binomial rate (Wilson 1927)."""
    p, n = found / queries, queries
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n), (centre + spread) / (1 + z * z / n)


# Queries sized to what each case proves: plain double hashing's excess (below) must stand
# out of the interval, so 1M queries where it is 27-81 hits per million, 4M where it is 9.
@pytest.mark.parametrize("n, error_rate, queries", [(300, 1e-5, 1_000_000), (1500, 1e-5, 1_000_000), (1500, 1e-6, 4_000_000)])
def test_small_filters_meet_their_bound_with_no_excess_over_fill_k(n, error_rate, queries):
    # Plain double hashing (format version 1) fails this: two keys with equal h2 and
    # aligned h1 share most probes, an excess of order n/m^2 over fill^k that is large in
    # small filters (measured on 4M queries: 325 hits at n=300, 110 at n=1500, p=1e-5; 35 at p=1e-6).
    bloom = BloomFilter(n, error_rate, seed=3)
    bloom.add(random_keys(n, seed=21))
    measured = bloom.empirical_fp_rate(queries, seed=8)
    low, high = wilson_interval(measured.found, queries, z=3.0)
    assert measured.found > 0  # countable at this p
    assert low < error_rate  # the observed rate is consistent with the bound
    estimate = bloom.estimated_fp_rate()  # ... and with fill^k (no hidden excess)
    assert low < estimate < high


@pytest.mark.parametrize("n, queries", [(1500, 1_000_000), (20_000, 4_000_000)])
def test_no_false_positive_at_1e_8_in_small_filters(n, queries):
    # Plain double hashing: 34 hits / 4M at 1,500 keys (about 8 in the 1M asked here), 3 / 4M at 20,000 keys.
    bloom = BloomFilter(n, 1e-8, seed=6)
    bloom.add(random_keys(n, seed=22))
    measured = bloom.empirical_fp_rate(queries, seed=9)
    assert (measured.found, measured.queries) == (0, queries)
    assert bloom.estimated_fp_rate() < 2e-8


def test_empirical_fp_rate_with_strings_and_zero_found():
    bloom = BloomFilter(10_000, 1e-8)
    bloom.add(random_keys(10_000, seed=6))

    def blake(strings):
        return np.array(
            [int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little") for s in strings],
            dtype=np.uint64,
        )

    result = bloom.empirical_fp_rate(20_000, seed=7, strings_to_keys=blake)
    assert (result.found, result.queries, result.rate) == (0, 20_000, 0.0)
    assert result.upper_95 == 3 / 20_000  # rule of three
    assert bloom.estimated_fp_rate() < 1.1e-8


def test_fp_upper_bound():
    assert fp_upper_bound(0, 1_000_000) == 3e-6
    bound = fp_upper_bound(1000, 1_000_000)
    assert 1.05e-3 < bound < 1.06e-3  # 1e-3 + 1.645 * sqrt(1e-3 / 1e6) ~ 1.052e-3


# -- files ----------------------------------------------------------------------------------

META = {"hash_id": "test-hash-v1", "ngram_config": {"n": 8, "apostrophes": "split", "unicode": True}}


@pytest.fixture
def saved(tmp_path):
    bloom = BloomFilter(20_000, 1e-6, seed=9, meta=META)
    keys = random_keys(20_000, seed=10)
    bloom.add(keys)
    path = tmp_path / "filter.bloom"
    bloom.save(path)
    return bloom, keys, path


def test_file_round_trip_memory_mapped(saved, tmp_path):
    bloom, keys, path = saved
    loaded = BloomFilter.load(path)
    assert isinstance(loaded.bits, np.memmap) and not loaded.bits.flags.writeable
    assert (loaded.m, loaded.k, loaded.seed, loaded.count, loaded.meta) == (bloom.m, bloom.k, 9, 20_000, META)
    assert (loaded.capacity, loaded.error_rate) == (20_000, 1e-6)
    assert np.array_equal(loaded.bits, bloom.bits) and loaded == bloom
    queries = np.concatenate([keys, random_keys(20_000, seed=11)])
    assert np.array_equal(loaded.contains(queries), bloom.contains(queries))
    # The bit array is page-aligned and the file is header + m/8 bytes.
    raw = path.read_bytes()
    header_size = struct.unpack_from("<I", raw, 12)[0]
    assert header_size % 4096 == 0 and len(raw) == header_size + bloom.m // 8
    assert raw[:8] == MAGIC and raw[header_size:] == bloom.bits.tobytes()
    # Saving the loaded filter again gives the same bytes.
    again = tmp_path / "again.bloom"
    loaded.save(again)
    assert again.read_bytes() == raw
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # mmap=False reads it into writable memory.
    in_memory = BloomFilter.load(path, mmap=False)
    assert not isinstance(in_memory.bits, np.memmap) and in_memory == bloom
    in_memory.add(np.array([1], dtype=np.uint64))


def test_memory_mapped_filter_is_read_only_until_copied(saved):
    _, _, path = saved
    loaded = BloomFilter.load(path)
    with pytest.raises(ValueError, match="read-only"):
        loaded.add(np.array([1], dtype=np.uint64))
    writable = loaded.copy()
    writable.add(np.array([1], dtype=np.uint64))
    assert 1 in writable and writable.count == 20_001


def _rewrite(path, change):
    raw = bytearray(path.read_bytes())
    change(raw)
    path.write_bytes(bytes(raw))


def test_flipped_bit_byte_is_refused(saved):
    bloom, _, path = saved

    def flip(raw):
        raw[-100] ^= 0x10

    _rewrite(path, flip)
    with pytest.raises(BloomFileError, match="checksum mismatch") as error:
        BloomFilter.load(path)
    assert str(path) in str(error.value)
    unchecked = BloomFilter.load(path, verify=False)  # the documented escape hatch
    assert unchecked.bits_set() != bloom.bits_set()


def test_truncated_file_is_refused(saved):
    _, _, path = saved
    _rewrite(path, lambda raw: raw.__delitem__(slice(-1, None)))
    with pytest.raises(BloomFileError, match="truncated") as error:
        BloomFilter.load(path, verify=False)
    assert str(path) in str(error.value)
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(BloomFileError, match="truncated header"):
        BloomFilter.load(path)


def test_wrong_magic_and_version_are_refused(saved, tmp_path):
    _, _, path = saved
    original = path.read_bytes()
    _rewrite(path, lambda raw: raw.__setitem__(slice(0, 8), b"NOTBLOOM"))
    with pytest.raises(BloomFileError, match="not a corpusforge Bloom filter file"):
        BloomFilter.load(path)
    path.write_bytes(original)
    _rewrite(path, lambda raw: raw.__setitem__(slice(8, 12), struct.pack("<I", FORMAT_VERSION + 1)))
    with pytest.raises(BloomFileError, match=f"format version {FORMAT_VERSION + 1}, this code reads version 2"):
        BloomFilter.load(path)
    # Version 1 (plain double hashing) has the same layout but other probe positions.
    assert FORMAT_VERSION == 2
    path.write_bytes(original)
    _rewrite(path, lambda raw: raw.__setitem__(slice(8, 12), struct.pack("<I", 1)))
    with pytest.raises(BloomFileError, match="older probe scheme.*rebuild the filter") as error:
        BloomFilter.load(path, verify=False)
    assert str(path) in str(error.value)
    empty = tmp_path / "empty.bloom"
    empty.write_bytes(b"")
    with pytest.raises(BloomFileError, match="magic"):
        BloomFilter.load(empty)
    with pytest.raises(BloomFileError, match="cannot read"):
        BloomFilter.load(tmp_path / "missing.bloom")


def test_header_corruption_is_caught_by_the_checksum(saved):
    _, _, path = saved
    _rewrite(path, lambda raw: raw.__setitem__(slice(40, 48), struct.pack("<Q", 5)))  # count
    with pytest.raises(BloomFileError, match="checksum mismatch"):
        BloomFilter.load(path)


def test_meta_must_be_json():
    with pytest.raises(TypeError):
        BloomFilter(10, meta={"x": object()})


# -- merge ----------------------------------------------------------------------------------


def test_filters_built_over_shards_merge_to_the_filter_over_everything():
    keys = random_keys(200_000, seed=12)
    whole = BloomFilter(200_000, 1e-8, seed=5, meta=META)
    whole.add(keys)
    first = BloomFilter(200_000, 1e-8, seed=5, meta=META)
    second = BloomFilter(200_000, 1e-8, seed=5, meta=META)
    first.add(keys[:100_000])
    second.add(keys[100_000:])
    merged = first | second  # a new filter
    assert merged.bits.tobytes() == whole.bits.tobytes()
    assert merged.count == 200_000 and merged == whole
    assert first.count == 100_000  # | left its operands alone
    # Four shards, in place.
    shards = [BloomFilter(200_000, 1e-8, seed=5, meta=META) for _ in range(4)]
    for shard, part in zip(shards, np.array_split(keys[::-1], 4), strict=True):
        shard.add(part)
    total = shards[0]
    for shard in shards[1:]:
        total |= shard
    assert total.bits.tobytes() == whole.bits.tobytes()


@pytest.mark.parametrize(
    "other, reason",
    [
        (dict(capacity=2000), "m differs"),
        (dict(error_rate=1e-4), "m differs"),
        (dict(seed=1), "seed differs"),
        (dict(meta={"hash_id": "other"}), "meta"),
    ],
)
def test_merge_refused_on_mismatched_parameters(other, reason):
    base = dict(capacity=1000, error_rate=1e-3, seed=0, meta=META)
    a = BloomFilter(**base)
    b = BloomFilter(**{**base, **other})
    with pytest.raises(BloomMismatchError, match=f"cannot merge Bloom filters: {reason}"):
        a.merge(b)
    with pytest.raises(BloomMismatchError):
        a |= b


def test_merge_refuses_k_alone():
    # Same m, different k: only possible through the file or internals; construct it.
    a = BloomFilter(1000, 1e-3)
    b = a.copy()
    b.k = a.k + 1
    with pytest.raises(BloomMismatchError, match="k differs"):
        a.merge(b)


# -- partitioning ---------------------------------------------------------------------------


def test_partition_of_uses_top_bits():
    keys = np.array([0, 1 << 62, 1 << 63, (1 << 64) - 1, 0x3FFFFFFFFFFFFFFF], dtype=np.uint64)
    assert partition_of(keys, 4).tolist() == [0, 1, 2, 3, 0]
    assert partition_of(keys, 1).tolist() == [0] * 5
    assert partition_of(keys, 3).tolist() == [0, 0, 1, 2, 0]
    many = random_keys(100_000, seed=13)
    parts = partition_of(many, 10)
    assert parts.min() == 0 and parts.max() == 9
    assert np.all(np.abs(np.bincount(parts) - 10_000) < 500)
    assert np.array_equal(partition_of(many, 256), (many >> np.uint64(56)).astype(np.int64))


def test_partitioned_filters_answer_like_one_filter():
    keys = random_keys(50_000, seed=14)
    queries = np.concatenate([keys[:10_000], random_keys(10_000, seed=15)])
    parts = 4
    filters = [BloomFilter(50_000 // parts, 1e-8) for _ in range(parts)]
    for bloom, part_keys in zip(filters, split_by_part(keys, parts), strict=True):
        bloom.add(part_keys)
    assert sum(b.count for b in filters) == 50_000
    answer = np.zeros(queries.size, dtype=bool)
    which = partition_of(queries, parts)
    for p, bloom in enumerate(filters):
        answer[which == p] = bloom.contains(queries[which == p])
    assert answer[:10_000].all() and not answer[10_000:].any()
    assert all(abs(b.fill_ratio() - 0.5) < 0.02 for b in filters)  # top bits don't bias probes


# -- pybloom-live interop -------------------------------------------------------------------


def test_to_pybloom_and_from_pybloom_file(tmp_path):
    pytest.importorskip("pybloom_live")
    grams = [f"the {i} quick brown fox jumps over {i % 7}" for i in range(2000)]
    others = [f"a {i} lazy dog sleeps under the {i}" for i in range(2000)]
    path = tmp_path / "py.bloom"
    built = to_pybloom(grams, capacity=2000, error_rate=1e-6, path=path)
    assert len(built) == 2000 and grams[0] in built
    opened = from_pybloom_file(path)
    assert (opened.capacity, opened.error_rate, opened.count) == (2000, 1e-6, 2000)
    assert opened.contains(grams).all()
    assert not opened.contains(others).any()
    assert grams[5] in opened
    # pybloom-live hashes a bytes key as str(key): b"..." is not the same key as "...".
    assert grams[5].encode() not in opened
    bytes_built = to_pybloom([g.encode() for g in grams[:10]], capacity=10, error_rate=1e-6)
    assert grams[0].encode() in bytes_built and grams[0] not in bytes_built
    assert str(grams[0].encode()) in bytes_built


def test_from_pybloom_file_refuses_garbage(tmp_path):
    pytest.importorskip("pybloom_live")
    path = tmp_path / "garbage"
    path.write_bytes(b"abc")
    with pytest.raises(BloomFileError, match="pybloom-live"):
        from_pybloom_file(path)


def test_ngram_meta_round_trips_through_a_file(tmp_path):
    ngrams = pytest.importorskip("dedup.ngrams")

    config = ngrams.NgramConfig(n=8, apostrophes="join", unicode=False)
    meta = ngram_meta(config)
    assert meta == {"hash_id": ngrams.HASH_ID, "ngram_config": config.to_dict()}
    bloom = BloomFilter(1000, 1e-8, meta=meta)
    keys = ngrams.ngram_hashes("the quick brown fox jumps over the lazy dog again", config)
    bloom.add(keys)
    bloom.save(tmp_path / "f.bloom")
    loaded = BloomFilter.load(tmp_path / "f.bloom")
    assert ngrams.NgramConfig.from_dict(loaded.meta["ngram_config"]) == config
    assert loaded.contains(keys).all()
    with pytest.raises(BloomMismatchError, match="meta"):
        loaded.copy().merge(BloomFilter(1000, 1e-8, meta=ngram_meta()))
