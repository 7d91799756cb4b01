"""Token shards: the llm.c / modded-nanogpt interchange format, and nanoGPT's flat ``.bin``.

A shard is a header of 256 little-endian int32 -- ``[MAGIC, VERSION, token count, 0, ...]``
-- followed by the tokens as little-endian uint16. Documents are separated by the
end-of-text token (each document is preceded by it, as llm.c's writers do). A nanoGPT
``train.bin``/``val.bin`` is the same uint16 stream with no header.

Readers memory-map the file and check the header against the file size, so a wrong file
or a truncated copy is refused with a message that says which and by how much, before
a single token is served.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

import numpy as np

from common import storage
from common.errors import InputError
from common.storage import atomic_path

MAGIC = 20240520  # llm.c dev/data/data_common.py: the uint16 GPT-2 token-shard magic
VERSION = 1  # llm.c: version 1 = uint16 tokens
HEADER_INTS = 256  # llm.c: a 256 x int32 header (1,024 bytes)
HEADER_BYTES = HEADER_INTS * 4
DEFAULT_SHARD_TOKENS = 100_000_000  # llm.c fineweb.py: 1e8 tokens per shard
TOKEN_DTYPE = np.dtype("<u2")
MAX_TOKEN_ID = 2**16 - 1


class TokenShardError(InputError):
    """A file that is not a valid token shard: wrong magic or version, truncated, too long."""


@dataclass(frozen=True)
class ShardHeader:
    magic: int
    version: int
    tokens: int


def write_token_shard(path: str | os.PathLike, tokens) -> int:
    """Write ``tokens`` (any integer sequence or array) as one shard, atomically. Returns the count."""
    array = np.asarray(tokens)
    if array.ndim != 1:
        raise ValueError(f"tokens must be one-dimensional, got shape {array.shape}")
    if array.size and (array.min() < 0 or array.max() > MAX_TOKEN_ID):
        raise ValueError(f"token ids must lie in 0..{MAX_TOKEN_ID} for uint16 shards "
                         f"(got {int(array.min())}..{int(array.max())})")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, array.size
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            f.write(header.tobytes())
            f.write(array.astype(TOKEN_DTYPE, copy=False).tobytes())
    return int(array.size)


def read_header(path: str | os.PathLike) -> ShardHeader:
    """The shard's header, checked against the file's size."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size < HEADER_BYTES:
        raise TokenShardError(f"{path}: {size} bytes is shorter than the {HEADER_BYTES}-byte token-shard header "
                              "(truncated, or not a token shard)")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    magic, version, count = (int(v) for v in header[:3])
    if magic != MAGIC:
        hint = " (a headerless nanoGPT .bin? read it with read_flat_bin)" if path.endswith(".bin") else ""
        raise TokenShardError(f"{path}: magic number {magic} is not the token-shard magic {MAGIC}{hint}")
    if version != VERSION:
        raise TokenShardError(f"{path}: token-shard version {version} is not supported (expected {VERSION}: uint16 tokens)")
    if count < 0:
        raise TokenShardError(f"{path}: negative token count {count} in the header")
    expected = HEADER_BYTES + count * TOKEN_DTYPE.itemsize
    if size != expected:
        held = (size - HEADER_BYTES) // TOKEN_DTYPE.itemsize
        what = "truncated" if size < expected else "has trailing bytes"
        raise TokenShardError(f"{path}: {what}: the header says {count:,} tokens ({expected:,} bytes) "
                              f"but the file holds {held:,} tokens ({size:,} bytes)")
    return ShardHeader(magic, version, count)


def read_token_shard(path: str | os.PathLike) -> np.ndarray:
    """The shard's tokens as a read-only memory-mapped uint16 array (header validated first)."""
    header = read_header(path)
    if header.tokens == 0:
        return np.zeros(0, dtype=TOKEN_DTYPE)
    return np.memmap(path, dtype=TOKEN_DTYPE, mode="r", offset=HEADER_BYTES, shape=(header.tokens,))


def read_flat_bin(path: str | os.PathLike) -> np.ndarray:
    """A nanoGPT headerless ``train.bin``/``val.bin`` (uint16 tokens), memory-mapped."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size % TOKEN_DTYPE.itemsize:
        raise TokenShardError(f"{path}: {size} bytes is not a whole number of uint16 tokens (truncated?)")
    if size == 0:
        return np.zeros(0, dtype=TOKEN_DTYPE)
    return np.memmap(path, dtype=TOKEN_DTYPE, mode="r")


def read_tokens(path: str | os.PathLike, flat: bool | None = None) -> np.ndarray:
    """Either format. ``flat=None`` treats nanoGPT's names (``train.bin``, ``val.bin``) as headerless."""
    path = os.fspath(path)
    if flat is None:
        flat = os.path.basename(path) in ("train.bin", "val.bin")
    return read_flat_bin(path) if flat else read_token_shard(path)


def find_token_shards(where: str | os.PathLike, split: str | None = None) -> list[str]:
    """Shard files under a folder (``*_<split>_*.bin`` when ``split`` is given), or a glob, sorted."""
    where = os.fspath(where)
    if storage.is_folder(where):
        pattern = f"*{split}_*.bin" if split else "*.bin"
        paths = storage.folder_files(where, lambda name: fnmatch.fnmatch(name, pattern))
    else:
        paths = storage.glob(where)
    paths = sorted(p for p in paths if not storage.basename(p).startswith("."))
    if not paths:
        what = f" for split {split!r}" if split else ""
        raise FileNotFoundError(f"no token shards{what} at {where}")
    return paths


def shard_name(prefix: str, split: str, index: int) -> str:
    """llm.c's naming: ``<prefix>_<split>_<index:06d>.bin`` (e.g. ``c4_train_000001.bin``)."""
    return f"{prefix}_{split}_{index:06d}.bin"
