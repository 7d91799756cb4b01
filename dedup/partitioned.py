"""A Bloom filter split by hash prefix into parts built in parallel (WebText scale).

At p = 1e-8 a filter costs 38.34 bits (4.79 bytes) per n-gram: 4.79 GB for 1e9 8-grams,
47.9 GB for 1e10. ``PartitionedBloom`` keeps ``parts`` filters, part ``i`` holding the
keys whose top bits say ``i`` (``dedup.bloom.partition_of``), each sized for its share of
the capacity, so parts are built by different workers and queried without ever loading
more than the parts a query touches (files are memory-mapped). With one part it is one
ordinary filter.

A filter folder is complete and known only with its manifest, ``bloom.json``
(``FILTER_MANIFEST``): the n-gram settings (the parts' shared ``meta``), the part count,
each part's size and header checksum (blake2b of the part, ``dedup.bloom``), and the
fingerprint of the corpus the filter was built from (``corpus_fingerprint``: the digest
of the corpus's ``_SUCCESS`` manifest). ``PartitionedBloom.load`` refuses, with
``BloomFileError`` naming the problem, a folder without it, a part missing, extra,
a folder, swapped from another build, truncated or corrupted, settings other than the
caller's, and another corpus than the caller's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

import numpy as np

from common import storage
from dedup.bloom import (
    FILE_HEADER,
    MAGIC,
    BloomFileError,
    BloomFilter,
    FalsePositiveEstimate,
    fp_upper_bound,
    partition_of,
)

PART_NAME = "bloom-part-{index:05d}-of-{parts:05d}.bin"
_PART_RE = re.compile(r"bloom-part-(\d{5})-of-(\d{5})\.bin$")
CAPACITY_SLACK = 1.05  # each part's share of the keys varies by a few sigma; size parts 5% up


def part_capacity(capacity: int, parts: int) -> int:
    """The capacity each part is sized for."""
    return max(1, int(capacity / parts * CAPACITY_SLACK) + 1)


def part_path(folder: str, index: int, parts: int) -> str:
    return storage.join(folder, PART_NAME.format(index=index, parts=parts))


FILTER_MANIFEST = "bloom.json"
FILTER_FORMAT = "corpusforge-bloom-v1"
MAX_FILTER_MANIFEST_BYTES = 1 << 20  # a few hundred bytes per part
MAX_PARTS = 1 << 16
_CHECKSUM_FIELD = -1  # the checksum is the last field of the fixed header


def corpus_fingerprint(files: list[str]) -> str:
    """What identifies a corpus: the sha256 of each shard folder's ``_SUCCESS`` manifest
    (which lists every file's sha256), or, for a folder without one, of its shard names
    and sizes; combined over the folders, sorted."""
    digests = []
    for folder in sorted({storage.split(f)[0] for f in files}):
        marker = storage.join(folder, storage.SUCCESS_FILE)
        if storage.is_file(marker):
            digests.append(hashlib.sha256(storage.read_bytes(marker)).hexdigest())
            continue
        listing = "\n".join(f"{storage.basename(f)}\t{storage.size(f)}" for f in sorted(files) if storage.split(f)[0] == folder)
        digests.append(hashlib.sha256(listing.encode("utf-8")).hexdigest())
    return "sha256:" + hashlib.sha256("\n".join(digests).encode("ascii")).hexdigest()


def _part_checksum(path: str) -> str:
    """The checksum a part file's header stores (hex), read from its fixed header only."""
    with storage.open_read(path) as f:
        fixed = f.read(FILE_HEADER.size)
    if len(fixed) < FILE_HEADER.size or fixed[: len(MAGIC)] != MAGIC:
        raise BloomFileError(f"{path}: not a corpusforge Bloom filter part")
    return FILE_HEADER.unpack(fixed)[_CHECKSUM_FIELD].hex()


def write_filter_manifest(folder: str, parts: int, meta: dict, corpus: str) -> str:
    """``bloom.json`` for the ``parts`` part files just built in ``folder``."""
    entries = []
    for index in range(parts):
        path = part_path(folder, index, parts)
        entries.append({"name": storage.basename(path), "bytes": storage.size(path), "checksum": _part_checksum(path)})
    manifest = {"format": FILTER_FORMAT, "parts": parts, "meta": meta, "corpus": corpus, "files": entries}
    path = storage.join(folder, FILTER_MANIFEST)
    storage.write_atomically(path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return path


def _settings(meta: dict) -> str:
    config = meta.get("ngram_config") if isinstance(meta, dict) else None
    if isinstance(config, dict):
        return ", ".join(f"{k}={config[k]}" for k in sorted(config)) + f", hash {meta.get('hash_id')}"
    return repr(meta)[:200]


def read_filter_manifest(folder: str) -> dict:
    """The folder's ``bloom.json``, its shape checked; ``BloomFileError`` for anything else."""
    path = storage.join(folder, FILTER_MANIFEST)
    if not storage.is_file(path):
        if not storage.exists(folder) or not storage.list_files(folder):
            raise BloomFileError(f"{folder}: no Bloom filter there (the folder is empty or missing)")
        raise BloomFileError(f"{folder}: no {FILTER_MANIFEST}: not a complete corpusforge filter (partial, or built by an "
                             "older version): rebuild it")
    with storage.open_read(path) as f:
        data = f.read(MAX_FILTER_MANIFEST_BYTES + 1)
    if len(data) > MAX_FILTER_MANIFEST_BYTES:
        raise BloomFileError(f"{path}: over {MAX_FILTER_MANIFEST_BYTES:,} bytes: not a filter manifest")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise BloomFileError(f"{path}: unreadable filter manifest ({type(exc).__name__}: {str(exc)[:80]})") from None
    parts = manifest.get("parts") if isinstance(manifest, dict) else None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (manifest.get("format") if isinstance(manifest, dict) else None) != FILTER_FORMAT or not isinstance(parts, int) \
            or isinstance(parts, bool) or not 1 <= parts <= MAX_PARTS or not isinstance(files, list) or len(files) != parts \
            or not isinstance(manifest.get("meta"), dict) or not isinstance(manifest.get("corpus"), str):
        raise BloomFileError(f"{path}: not a {FILTER_FORMAT} filter manifest")
    for index, entry in enumerate(files):
        expected = PART_NAME.format(index=index, parts=parts)
        if (not isinstance(entry, dict) or entry.get("name") != expected or not isinstance(entry.get("bytes"), int)
                or not isinstance(entry.get("checksum"), str)):
            raise BloomFileError(f"{path}: entry {index} is not the part {expected} with its size and checksum")
    return manifest


def _entries(folder: str) -> list[str]:
    """Names directly in ``folder``: files, and on a disk sub-folders too (a part that is a folder)."""
    if storage.is_local(folder) and os.path.isdir(folder):
        return sorted(os.listdir(folder))
    return [storage.basename(p) for p in storage.list_files(folder)]


class PartitionedBloom:
    """Query the parts of a filter written as ``bloom-part-NNNNN-of-MMMMM.bin`` files."""

    def __init__(self, filters: list[BloomFilter]):
        if not filters:
            raise ValueError("no filter parts")
        self.filters = filters
        self.parts = len(filters)

    @classmethod
    def load(cls, folder: str, mmap: bool = True, verify: bool = True, *, meta: dict | None = None,
             corpus: str | None = None) -> PartitionedBloom:
        """The filter in ``folder``, checked against its ``bloom.json`` (every part there,
        nothing else, each of its size and checksum) and, when given, against the n-gram
        ``meta`` and the ``corpus`` fingerprint the caller expects. ``BloomFileError`` else."""
        manifest = read_filter_manifest(folder)
        parts = manifest["parts"]
        if meta is not None and manifest["meta"] != meta:
            raise BloomFileError(f"{folder}: the filter was built with other n-gram settings ({_settings(manifest['meta'])}) "
                                 f"than this audit's ({_settings(meta)}): rebuild it, or audit with its settings")
        if corpus is not None and manifest["corpus"] != corpus:
            raise BloomFileError(f"{folder}: the filter was built from another corpus (fingerprint {manifest['corpus'][:23]}..., "
                                 f"this corpus {corpus[:23]}...): rebuild it for this corpus")
        listed = {entry["name"] for entry in manifest["files"]}
        strays = sorted(name for name in _entries(folder) if _PART_RE.search(name) and name not in listed)
        if strays:
            raise BloomFileError(f"{folder}: {len(strays)} part file(s) that {FILTER_MANIFEST} does not list ({strays[0]}): "
                                 "parts of another build mixed in")
        present = {storage.basename(p): p for p in storage.list_files(folder)}
        filters = []
        for index, entry in enumerate(manifest["files"]):
            path = present.get(entry["name"])
            if path is None:
                raise BloomFileError(f"{folder}: part {entry['name']} is missing (or not a file): the filter is partial")
            if storage.size(path) != entry["bytes"]:
                raise BloomFileError(f"{path}: {storage.size(path):,} bytes, {FILTER_MANIFEST} says {entry['bytes']:,}: "
                                     "truncated, or replaced by a part of another build")
            if _part_checksum(path) != entry["checksum"]:
                raise BloomFileError(f"{path}: not the part this filter was built with (its checksum differs from "
                                     f"{FILTER_MANIFEST}'s): a part swapped in from another build?")
            try:
                bloom = BloomFilter.load(storage.localize(path), mmap=mmap, verify=verify)
            except RecursionError:
                raise BloomFileError(f"{path}: corrupt meta JSON (nested too deep)") from None
            if bloom.meta != dict(manifest["meta"], part=index, parts=parts):
                raise BloomFileError(f"{path}: its settings ({_settings(bloom.meta)}) are not those of {FILTER_MANIFEST}")
            filters.append(bloom)
        return cls(filters)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.uint64)
        if self.parts == 1:
            return self.filters[0].contains(keys)
        out = np.zeros(len(keys), dtype=bool)
        part = partition_of(keys, self.parts)
        for index in np.unique(part):
            mask = part == index
            out[mask] = self.filters[int(index)].contains(keys[mask])
        return out

    def estimated_fp_rate(self) -> float:
        """Fill-ratio estimate: keys spread evenly over parts, so the mean of the parts'."""
        return float(np.mean([f.estimated_fp_rate() for f in self.filters]))

    def empirical_fp_rate(self, queries: int = 1_000_000, seed: int = 12345) -> FalsePositiveEstimate:
        """Query ``queries`` random 64-bit keys (never added, up to a 2^-64 chance each)."""
        rng = np.random.default_rng(seed)
        found, done = 0, 0
        while done < queries:
            batch = min(1 << 20, queries - done)
            found += int(self.contains(rng.integers(0, 2**64, size=batch, dtype=np.uint64)).sum())
            done += batch
        return FalsePositiveEstimate(found, queries, found / queries if queries else 0.0, fp_upper_bound(found, queries))

    def evidence(self, queries: int, seed: int = 12345) -> dict:
        """The false-positive evidence every report carries (both kinds, see spec audit.md)."""
        empirical = self.empirical_fp_rate(queries, seed)
        return {
            "estimated_fp_rate": self.estimated_fp_rate(),
            "empirical_found": empirical.found,
            "empirical_queries": empirical.queries,
            "empirical_upper_95": empirical.upper_95,
            "parts": self.parts,
            "bits": int(sum(f.m for f in self.filters)),
            "k": self.filters[0].k,
            "fill_ratio": float(np.mean([f.fill_ratio() for f in self.filters])),
        }
