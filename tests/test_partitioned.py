"""dedup/partitioned.py: a Bloom filter split by hash prefix into part files, loaded and
queried as one filter."""

from __future__ import annotations

import numpy as np
import pytest

from dedup.bloom import BloomFileError, BloomFilter, ngram_meta, partition_of, split_by_part
from dedup.partitioned import (
    CAPACITY_SLACK,
    FILTER_MANIFEST,
    PartitionedBloom,
    part_capacity,
    part_path,
    write_filter_manifest,
)


def keys(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 64, size=n, dtype=np.uint64)


def write_parts(folder, added: np.ndarray, parts: int, capacity: int, error_rate: float = 1e-6) -> list[str]:
    """The parts and their bloom.json, as the audit writes them (for a made-up corpus)."""
    paths, meta = [], ngram_meta()
    for index, part_keys in enumerate(split_by_part(added, parts)):
        bloom = BloomFilter(part_capacity(capacity, parts), error_rate, seed=11, meta=dict(meta, part=index, parts=parts))
        bloom.add(part_keys)
        path = part_path(str(folder), index, parts)
        bloom.save(path)
        paths.append(path)
    write_filter_manifest(str(folder), parts, meta, "sha256:" + "0" * 64)
    return paths


def test_part_capacity_is_the_share_with_slack_and_never_zero():
    assert part_capacity(1_000_000, 4) == int(250_000 * CAPACITY_SLACK) + 1
    assert part_capacity(1_000_000, 1) == int(1_000_000 * CAPACITY_SLACK) + 1
    assert part_capacity(0, 8) == 1


def test_part_files_are_named_index_of_parts(tmp_path):
    assert part_path(str(tmp_path), 3, 16).endswith("bloom-part-00003-of-00016.bin")


@pytest.mark.parametrize("parts", [1, 4, 3])
def test_loaded_parts_answer_like_one_filter_and_report_their_evidence(tmp_path, parts):
    added = keys(20_000, seed=1)
    write_parts(tmp_path, added, parts, capacity=len(added))
    bloom = PartitionedBloom.load(str(tmp_path))
    assert bloom.parts == parts
    assert bloom.contains(added).all()  # no false negative, whichever part a key went to
    others = keys(50_000, seed=2)
    assert bloom.contains(others).sum() <= 5  # p = 1e-6 per key: about 0.05 expected
    evidence = bloom.evidence(100_000, seed=3)
    assert evidence["parts"] == parts and evidence["empirical_queries"] == 100_000
    assert evidence["estimated_fp_rate"] < 1e-6 and evidence["empirical_upper_95"] > evidence["empirical_found"] / 100_000
    assert evidence["bits"] == sum(f.m for f in bloom.filters) and evidence["k"] == bloom.filters[0].k
    assert 0 < evidence["fill_ratio"] < 1


def test_a_key_is_looked_up_in_its_own_part_only(tmp_path):
    added = keys(1_000, seed=4)
    write_parts(tmp_path, added, 2, capacity=len(added))
    bloom = PartitionedBloom.load(str(tmp_path))
    first = added[partition_of(added, 2) == 0]
    assert bloom.filters[0].contains(first).all()
    assert bloom.filters[1].contains(first).sum() <= 1  # the other part never saw them


def test_an_incomplete_or_missing_set_of_parts_is_refused(tmp_path):
    paths = write_parts(tmp_path, keys(1_000, seed=5), 4, capacity=1_000)
    (tmp_path / paths[2].rsplit("/", 1)[-1]).unlink()
    with pytest.raises(BloomFileError, match=r"part bloom-part-00002-of-00004\.bin is missing .*the filter is partial"):
        PartitionedBloom.load(str(tmp_path))
    (tmp_path / FILTER_MANIFEST).unlink()
    with pytest.raises(BloomFileError, match=f"no {FILTER_MANIFEST}: not a complete corpusforge filter"):
        PartitionedBloom.load(str(tmp_path))
    with pytest.raises(BloomFileError, match="no Bloom filter there"):
        PartitionedBloom.load(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="no filter parts"):
        PartitionedBloom([])
