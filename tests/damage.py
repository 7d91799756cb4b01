"""The damage generator: seeded damage on real archives, and for each variant the
records that must survive it, computed from the intact file alone (used by
tests/test_damage.py and benchmarks/damage.py).

A file written one gzip member per record (as Common Crawl writes them) gets:

- ``zeroed``: 4 KiB overwritten with zeros (a bad disk block); every record whose member
  lies wholly outside those bytes must come out;
- ``flipped``: one byte inverted; every record whose member does not hold that byte;
- ``length``: one record's Content-Length made huge, +1000, or its blank line removed;
  every other record.

A one-stream file (``gzip`` of the whole archive) gets a flipped byte; every record that
decompresses wholly from before it must come out.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import zlib


class Unseekable(io.RawIOBase):
    """A stream that cannot go back (an HTTP body, say)."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self._inner.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def gzip_members(data: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, decompressed) of every gzip member of an intact file."""
    out, pos = [], 0
    while pos < len(data):
        inflater = zlib.decompressobj(31)
        text = inflater.decompress(data[pos:])
        end = len(data) - len(inflater.unused_data)
        out.append((pos, end, text))
        pos = end
    return out


def ids_in(text: bytes) -> list[str]:
    return [m.decode() for m in re.findall(rb"WARC-Record-ID: (<[^>]+>)", text)]


def intact_records_before(data: bytes, damage_at: int) -> list[str]:
    """Records of a one-stream file whose bytes all decompress from before ``damage_at``."""
    prefix = zlib.decompressobj(31).decompress(data[:damage_at])
    starts = [m.start() for m in re.finditer(rb"WARC/1\.0\r\n", prefix)]
    ends = starts[1:]  # a record is whole when the next one has begun
    return [ids_in(prefix[s:e])[0] for s, e in zip(starts, ends, strict=False)]


def damaged_variants(data: bytes, seed: int, count: int):
    """Seeded variants of a one-member-per-record file: (name, damaged bytes, required ids)."""
    rng = random.Random(seed)
    members = gzip_members(data)
    for _ in range(count):
        start = rng.randrange(members[1][0], len(data) - 4096)
        damaged = data[:start] + b"\x00" * 4096 + data[start + 4096 :]
        required = [i for s, e, text in members if e <= start or s >= start + 4096 for i in ids_in(text)[:1]]
        yield f"zeroed@{start}", damaged, required
    for _ in range(count):
        at = rng.randrange(members[1][0], len(data))
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        required = [i for s, e, text in members if not s <= at < e for i in ids_in(text)[:1]]
        yield f"flipped@{at}", bytes(damaged), required


LENGTH_EDITS = {
    "huge": lambda t: re.sub(rb"Content-Length: \d+", b"Content-Length: 999999999999", t, count=1),
    "plus-1000": lambda t: re.sub(rb"Content-Length: (\d+)", lambda m: b"Content-Length: %d" % (int(m[1]) + 1000), t, count=1),
    "no-blank-line": lambda t: t.rstrip(b"\r\n"),
}


def with_member_replaced(data: bytes, index: int, edit) -> tuple[bytes, list[str]]:
    """The file with member ``index`` edited (decompressed, ``edit``, recompressed), and
    the ids of every other record."""
    out, ids = [], []
    for i, (start, end, text) in enumerate(gzip_members(data)):
        if i == index:
            out.append(gzip.compress(edit(text), mtime=0))
        else:
            out.append(data[start:end])
            ids.extend(ids_in(text)[:1])
    return b"".join(out), ids


def length_variants(data: bytes, seed: int, count: int):
    """Seeded wrong Content-Lengths and missing blank lines: (name, damaged bytes, required ids)."""
    rng = random.Random(seed)
    members = len(gzip_members(data))
    for _ in range(count):
        index = rng.randrange(1, members)
        kind = rng.choice(sorted(LENGTH_EDITS))
        damaged, required = with_member_replaced(data, index, LENGTH_EDITS[kind])
        yield f"{kind}@record{index}", damaged, required


# -- what a job writes and reads back: Bloom filter folders and checkpoints ---------------------


def filter_variants(files: dict[str, bytes], other_build: dict[str, bytes], seed: int, count: int):
    """Seeded damage to a Bloom filter folder (``{name: bytes}`` of its parts and bloom.json):
    (name, damaged folder); every variant must be refused. ``other_build``: the same
    names from another build, for swapped parts."""
    import struct

    rng = random.Random(seed)
    parts = sorted(n for n in files if n.startswith("bloom-part-"))
    kinds = ("flip", "truncate", "missing", "extra", "folder", "deep-json", "huge-m", "swapped", "no-manifest")
    for number in range(count):
        kind = kinds[number % len(kinds)]
        damaged = dict(files)
        part = rng.choice(parts)
        if kind == "flip":
            data = bytearray(damaged[part])
            at = rng.randrange(64, len(data))  # the checksum field and everything after it
            data[at] ^= 1 << rng.randrange(8)
            damaged[part] = bytes(data)
        elif kind == "truncate":
            damaged[part] = damaged[part][: rng.randrange(0, len(damaged[part]))]
        elif kind == "missing":
            del damaged[part]
        elif kind == "extra":
            damaged[f"bloom-part-{len(parts):05d}-of-{2 * len(parts):05d}.bin"] = damaged[part]  # a part of another set
        elif kind == "folder":
            damaged[part] = None  # a folder under the part's name
        elif kind == "deep-json":
            damaged["bloom.json"] = b"[" * rng.randrange(10_000, 200_000)
        elif kind == "huge-m":
            data = bytearray(damaged[part])
            data[16:24] = struct.pack("<Q", 1 << rng.randrange(40, 53))
            damaged[part] = bytes(data)
        elif kind == "swapped":
            damaged[part] = other_build[part]
        elif kind == "no-manifest":
            del damaged["bloom.json"]
        yield f"{kind}:{part}", damaged


def write_folder(folder, files: dict[str, bytes | None]) -> None:
    """Write ``filter_variants``' folder (None: an empty sub-folder under that name)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if data is None:
            (folder / name).mkdir()
        else:
            (folder / name).write_bytes(data)


def checkpoint_variants(state: dict, seed: int, count: int):
    """Seeded crafted training states (written later with a matching checksum): (name,
    state); every one must be refused before use. ``state``: a real training state."""
    import copy

    import torch

    rng = random.Random(seed)
    names = sorted(state["model"])
    kinds = ("nan", "inf", "huge", "shape", "missing", "dtype", "block_size", "n_layer", "rng", "scheduler", "step", "optimizer",
             "cursor", "metrics", "world_size", "betas", "version")
    for number in range(count):
        kind = kinds[number % len(kinds)]
        crafted = copy.deepcopy(state)
        name = rng.choice(names)
        tensor = crafted["model"][name]
        if kind in ("nan", "inf", "huge"):
            flat = tensor.view(-1)
            flat[rng.randrange(flat.numel())] = {"nan": float("nan"), "inf": float("-inf"), "huge": 3e38}[kind]
        elif kind == "shape":
            crafted["model"][name] = torch.zeros(*[d + 1 for d in tensor.shape])
        elif kind == "missing":
            del crafted["model"][name]
        elif kind == "dtype":
            crafted["model"][name] = tensor.to(torch.int32)
        elif kind == "block_size":
            crafted["model_config"]["block_size"] = rng.choice([10_000_000, 1 << 24, 2**40])
        elif kind == "n_layer":
            crafted["model_config"]["n_layer"] = rng.choice([10_000, 1 << 20])
        elif kind == "rng":
            crafted["rng"][0]["torch"] = torch.zeros(rng.randrange(1, 64), dtype=torch.uint8)
        elif kind == "scheduler":
            crafted["scheduler"] = rng.choice([{"step": None}, {"step": "3"}, [], {"step": -1}])
        elif kind == "step":
            crafted["step"] = rng.choice([None, -5, "7", 1.5])
        elif kind == "optimizer":
            moments = crafted["optimizer"]["state"][rng.choice(sorted(crafted["optimizer"]["state"]))]
            moments["exp_avg"] = torch.zeros(moments["exp_avg"].numel() + rng.randrange(1, 100))
        elif kind == "cursor":  # the data cursor: a field that is no count, or a place no run reaches
            crafted["data"][rng.choice(["epoch", "position", "seed", "windows", "step_size"])] = rng.choice(["abc", None, -4, 1.5, [3]])
        elif kind == "metrics":
            crafted["metrics"] = rng.choice([["a"], "low", {"train_loss": "low"}])
        elif kind == "world_size":
            crafted["world_size"] = rng.choice([0, "two", len(crafted["rng"]) + 1])
        elif kind == "betas":
            crafted["optimizer"]["param_groups"][0]["betas"] = rng.choice([("a", "b"), (0.9,), (1.5, 0.9), None])
        elif kind == "version":
            crafted["version"] = rng.choice(["1", None, 0, 1.0])
        yield f"{kind}:{name}", crafted


def build_filter_folder(folder, seed: int, keys: int = 20_000, parts: int = 2) -> dict[str, bytes]:
    """A real partitioned Bloom filter of ``keys`` seeded n-gram hashes, as the audit writes
    it (parts + bloom.json, for a made-up corpus fingerprint); returns its files' bytes."""
    import numpy as np

    from dedup.bloom import BloomFilter, ngram_meta, split_by_part
    from dedup.partitioned import part_capacity, part_path, write_filter_manifest

    values = np.random.default_rng(seed).integers(0, 2**64, size=keys, dtype=np.uint64)
    meta = ngram_meta()
    for index, part_keys in enumerate(split_by_part(values, parts)):
        bloom = BloomFilter(part_capacity(keys, parts), 1e-8, 0, dict(meta, part=index, parts=parts))
        bloom.add(part_keys)
        bloom.save(part_path(str(folder), index, parts))
    write_filter_manifest(str(folder), parts, meta, f"sha256:{seed:064x}")
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def tiny_training_run(folder) -> str:
    """A real two-step training run of a tiny GPT on seeded tokens; its checkpoint's path."""
    import json

    import numpy as np

    from model.token_shards import shard_name, write_token_shard
    from pipelines.cli import main as corpusforge_main

    data = folder / "tokens"
    data.mkdir(parents=True)
    tokens = np.random.default_rng(0).integers(0, 64, size=4000)
    write_token_shard(data / shard_name("t", "train", 0), tokens)
    (data / "meta.json").write_text(json.dumps({"vocab_size": 64, "eot_id": 63, "splits": {"train": {"shards": 1}}}))
    run = folder / "run"
    code = corpusforge_main(["train", "--data", str(data), "--out", str(run), "--model", "gpt2", "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
                       "--block_size", "16", "--batch_tokens", "64", "--micro_batch", "4", "--max_steps", "2", "--ckpt_interval", "1",
                       "--no_hf_export", "-q"])
    assert code == 0, "the tiny training run failed"
    return str(run / "ckpt.pt")
