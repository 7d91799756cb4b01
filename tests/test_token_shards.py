"""The token-shard format (llm.c header + uint16 tokens) and nanoGPT's flat .bin: what is
written, and the clear refusal of wrong, truncated or padded files."""

from __future__ import annotations

import numpy as np
import pytest

from model.token_shards import (
    HEADER_BYTES,
    MAGIC,
    VERSION,
    TokenShardError,
    find_token_shards,
    read_flat_bin,
    read_header,
    read_token_shard,
    read_tokens,
    shard_name,
    write_token_shard,
)


def test_written_shard_has_llmc_layout(tmp_path):
    path = tmp_path / "x_train_000000.bin"
    tokens = [50256, 0, 1, 65535, 42]
    assert write_token_shard(path, tokens) == 5
    raw = path.read_bytes()
    assert len(raw) == HEADER_BYTES + 2 * len(tokens)
    header = np.frombuffer(raw[:HEADER_BYTES], dtype="<i4")
    assert (header[0], header[1], header[2]) == (MAGIC, VERSION, 5) == (20240520, 1, 5)
    assert not header[3:].any()
    assert np.frombuffer(raw[HEADER_BYTES:], dtype="<u2").tolist() == tokens
    read = read_token_shard(path)
    assert read.dtype == np.uint16 and read.tolist() == tokens and not read.flags.writeable
    assert read_header(path).tokens == 5


def test_empty_shard_reads_as_no_tokens(tmp_path):
    write_token_shard(tmp_path / "e.bin", [])
    assert read_token_shard(tmp_path / "e.bin").size == 0


def test_wrong_magic_is_refused_with_a_hint(tmp_path):
    path = tmp_path / "train.bin"
    path.write_bytes(np.arange(600, dtype="<u2").tobytes())
    with pytest.raises(TokenShardError, match=r"magic number .* is not the token-shard magic 20240520 .*read_flat_bin"):
        read_token_shard(path)
    assert read_tokens(path).tolist() == list(range(600))  # the nanoGPT name is read as a flat file


def test_wrong_version_is_refused(tmp_path):
    path = tmp_path / "v.bin"
    write_token_shard(path, [1, 2, 3])
    data = bytearray(path.read_bytes())
    data[4:8] = np.array([2], dtype="<i4").tobytes()
    path.write_bytes(bytes(data))
    with pytest.raises(TokenShardError, match="version 2 is not supported"):
        read_token_shard(path)


def test_truncated_and_padded_files_say_by_how_much(tmp_path):
    path = tmp_path / "t.bin"
    write_token_shard(path, list(range(100)))
    full = path.read_bytes()
    path.write_bytes(full[:-10])
    with pytest.raises(TokenShardError, match=r"truncated: the header says 100 tokens .* holds 95 tokens"):
        read_token_shard(path)
    path.write_bytes(full + b"\0\0")
    with pytest.raises(TokenShardError, match="has trailing bytes"):
        read_token_shard(path)
    path.write_bytes(full[:100])
    with pytest.raises(TokenShardError, match="shorter than the 1024-byte token-shard header"):
        read_header(path)


def test_negative_count_is_refused(tmp_path):
    header = np.zeros(256, dtype="<i4")
    header[:3] = MAGIC, VERSION, -1
    path = tmp_path / "n.bin"
    path.write_bytes(header.tobytes())
    with pytest.raises(TokenShardError, match="negative token count"):
        read_token_shard(path)


def test_ids_outside_uint16_are_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "big.bin"
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        write_token_shard(path, [1, 65536])
    with pytest.raises(ValueError, match="one-dimensional"):
        write_token_shard(path, [[1, 2]])
    assert list(tmp_path.iterdir()) == []


def test_flat_bin_with_odd_size_is_refused(tmp_path):
    path = tmp_path / "val.bin"
    path.write_bytes(b"\x01\x00\x02")
    with pytest.raises(TokenShardError, match="not a whole number of uint16 tokens"):
        read_flat_bin(path)


def test_find_token_shards_by_split_sorted(tmp_path):
    for split, index in (("train", 1), ("train", 0), ("val", 0)):
        write_token_shard(tmp_path / shard_name("c4", split, index), [index])
    (tmp_path / ".c4_train_000002.bin.tmp-1").write_bytes(b"")
    assert shard_name("c4", "train", 1) == "c4_train_000001.bin"
    assert [p.rsplit("/", 1)[1] for p in find_token_shards(tmp_path, "train")] == ["c4_train_000000.bin", "c4_train_000001.bin"]
    assert len(find_token_shards(tmp_path)) == 3
    with pytest.raises(FileNotFoundError, match="for split 'test'"):
        find_token_shards(tmp_path, "test")
