"""What the tokenize job does to one shard file, one document, one digest range and one
planned shard, for every engine: Beam's steps (``pipelines.tokenize.job``) and Spark's
(``pipelines.spark.tokenize``) call the same functions, so both write the same bytes.

- ``worker_tokenizer``: the tokenizer on a worker, or one line naming the library it lacks.
- ``file_texts``: a shard file's texts, each unreadable row as its error row.
- ``document_digest`` / ``encode_document``: the blake2b-128 digest that orders and splits the
  documents, and a document's EOT + token ids with its (split, digest range).
- ``write_part``: one digest range of one split as a raw uint16 file, in digest order.
- ``plan_and_record`` / ``write_planned_shard``: the cut into shards of ``--shard_tokens`` and
  each shard written from its slices of the parts.

Beam-free: a Spark worker loads this, not Beam. Tests: ``tests/test_tokenize_pipeline.py``.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter

import numpy as np

from common import storage
from common.decision import DOCUMENTS
from corpus.shards import read_texts
from model.token_shards import shard_name, write_token_shard
from model.tokenizer import BPETokenizer, require_tokenize_libraries, text_bytes
from pipelines import progress
from pipelines.jobs import write_json

NAMESPACE = "tokenize"
SPLITS = ("val", "train")  # val first: it holds the smallest digests
DIGEST_BYTES = 16  # blake2b-128 of the text's UTF-8 (surrogatepass) bytes
SHARDS_WRITTEN = "shards_written"  # counter: token shards written (unit: other)


# --- the tokenizer on a worker ---------------------------------------------------------------
def worker_tokenizer(vocab: dict, merges: list) -> BPETokenizer:
    """The job's tokenizer, built on a worker from its vocabulary and merges. A worker that
    cannot import a tokenizer library fails here, before it encodes: its task's error is
    ``model.tokenizer.MissingLibraryError``, the library and the pip command in one line."""
    require_tokenize_libraries("a worker")
    return BPETokenizer(vocab, merges)


# --- documents ----------------------------------------------------------------------------
def document_digest(text: str) -> bytes:
    return hashlib.blake2b(text_bytes(text), digest_size=DIGEST_BYTES).digest()


def in_val_fraction(digest: bytes, fraction: float) -> bool:
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def bucket_of(digest: bytes, buckets: int) -> int:
    """The digest range of a document: monotonic in the digest, so ranges in order are the
    documents in digest order whatever ``buckets`` is."""
    return (int.from_bytes(digest[:8], "big") * buckets) >> 64


def file_texts(path: str, field: str, errors: Counter):
    """A shard file -> its texts (``corpus.shards.read_texts``), and each unreadable row as
    its error row, counted in ``errors`` (``error:<reason>``). One file's reading for every engine."""
    for item in read_texts(path, field):
        if isinstance(item, dict):
            errors[f"error:{item['reason']}"] += 1
            yield item
        else:
            yield item[1]
    progress.tally("files")


class ShardTextReader:
    """Each shard file's texts (``file_texts``), unreadable rows as error dicts counted in
    ``tokenize`` (``error:<reason>``, documents): a ``pipelines.plan.FileReader``."""

    def __init__(self, field: str):
        self.field = field

    def read(self, index: int, path: str, counted):
        errors: Counter = Counter()
        try:
            yield from file_texts(path, self.field, errors)
        finally:
            counted.add(NAMESPACE, errors, DOCUMENTS)

    def close(self) -> None:
        pass


def last_val_digest(smallest: list[bytes], val_docs: int | None) -> bytes | None:
    """``--val_docs``: the largest digest of validation, from the ``max(val_docs, 1)``
    smallest digests in order (None when no document goes to validation)."""
    return smallest[-1] if smallest and val_docs else None


def encode_document(tokenizer, digest: bytes, text: str, buckets: int, val_fraction: float | None, val_last: bytes | None,
                    documents: Counter, tokens: Counter):
    """(digest, text) -> ((split, range), (digest, EOT + ids as uint16 bytes)), the document
    and its tokens counted per split (``<split>_documents``, ``<split>_tokens``)."""
    if val_last is not None or val_fraction is None:
        split = "val" if val_last is not None and digest <= val_last else "train"
    else:
        split = "val" if in_val_fraction(digest, val_fraction) else "train"
    ids = tokenizer.encode(text)
    encoded = np.empty(len(ids) + 1, dtype="<u2")
    encoded[0] = tokenizer.eot_id
    encoded[1:] = ids
    documents[f"{split}_documents"] += 1
    tokens[f"{split}_tokens"] += len(encoded)
    return (split, bucket_of(digest, buckets)), (digest, encoded.tobytes())


def write_part(keyed, parts_dir: str) -> dict:
    """One digest range of one split, sorted by digest, as a raw uint16 file."""
    (split, bucket), docs = keyed
    docs = sorted(docs)
    path = storage.join(parts_dir, f"{split}-{bucket:06d}.u16")
    with storage.open_write(path) as f:
        for _, tokens in docs:
            f.write(tokens)
    return {"split": split, "bucket": bucket, "path": path, "tokens": sum(len(t) for _, t in docs) // 2, "documents": len(docs)}


def plan_shards(parts: list[dict], shard_tokens: int, out_dir: str, prefix: str) -> dict:
    """Cut each split's parts, in digest order, into shards of ``shard_tokens``: for each shard
    its path and the (part, start, stop) slices it copies."""
    plan = {"splits": {}, "shards": []}
    for split in SPLITS:
        mine = sorted((p for p in parts if p["split"] == split), key=lambda p: p["bucket"])
        total = sum(p["tokens"] for p in mine)
        names = []
        part_index, part_offset = 0, 0
        for index in range(math.ceil(total / shard_tokens)):
            size = min(shard_tokens, total - index * shard_tokens)
            pieces, need = [], size
            while need:
                part = mine[part_index]
                take = min(need, part["tokens"] - part_offset)
                pieces.append((part["path"], part_offset, part_offset + take))
                need -= take
                part_offset += take
                if part_offset == part["tokens"]:
                    part_index, part_offset = part_index + 1, 0
            name = shard_name(prefix, split, index)
            names.append(name)
            plan["shards"].append({"path": storage.join(out_dir, name), "tokens": size, "pieces": pieces})
        plan["splits"][split] = {"shards": len(names), "tokens": total, "documents": sum(p["documents"] for p in mine),
                                 "files": names}
    return plan


def plan_and_record(parts, shard_tokens, out_dir, prefix, plan_path) -> list[dict]:
    """The shards to write (``plan_shards``); the whole plan staged at ``plan_path`` for ``run``."""
    plan = plan_shards(list(parts), shard_tokens, out_dir, prefix)
    write_json(plan_path, plan)
    return plan["shards"]


def write_planned_shard(shard: dict) -> str:
    tokens = np.empty(shard["tokens"], dtype="<u2")
    at = 0
    for path, start, stop in shard["pieces"]:
        with storage.open_read(path) as part:
            part.seek(2 * start)
            tokens[at:at + stop - start] = np.frombuffer(part.read(2 * (stop - start)), dtype="<u2")
        at += stop - start
    write_token_shard(shard["path"], tokens)
    return shard["path"]
