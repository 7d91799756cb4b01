"""What the audit and decontamination do to one shard file and one filter part, for every
engine: Beam's steps (``pipelines.audit.job``) and Spark's (``pipelines.spark.audit``) call the
same functions, so both write the same bytes.

- ``count_ngrams`` / ``shard_hashes``: a shard file's n-grams counted (the filter's capacity)
  and hashed (the keys of the filter's parts); ``build_part`` / ``finish_filter``: one part of
  the partitioned Bloom filter saved, then its manifest.
- ``shard_texts`` / ``matched_documents``: a shard file's documents for the exact scan and for
  decontamination; ``write_removed``: decontamination's ``_removed.jsonl``.

Beam-free: a Spark worker loads this, not Beam. Tests: ``tests/test_audit_pipeline.py``.
"""

from __future__ import annotations

import json
import os

import numpy as np

from common import storage
from common.decision import DOCUMENTS, OTHER
from corpus import native
from corpus.records import Document
from corpus.shards import read_documents
from dedup.bloom import BloomFilter, ngram_meta
from dedup.decontaminate import match_documents
from dedup.ngrams import ngram_hashes
from dedup.partitioned import corpus_fingerprint, part_capacity, part_path, write_filter_manifest
from pipelines import progress

AUDIT = "audit"
DECONTAMINATE = "decontaminate"
REMOVED_FILE = "_removed.jsonl"  # decontaminate: one row per document a benchmark matched (bookkeeping, not data)
# The audit's tallies (namespace AUDIT): documents hashed into the filter, their n-grams, documents scanned exactly.
DOCUMENTS_HASHED, NGRAMS_HASHED, DOCUMENTS_SCANNED = "documents", "ngrams", "scanned_documents"
FILTER_UNITS = {DOCUMENTS_HASHED: DOCUMENTS, NGRAMS_HASHED: OTHER}


# --- reading a shard file ---------------------------------------------------------------------
def _doc_id(path: str, number: int, doc: Document) -> str:
    return doc.url or f"{os.path.basename(path)}#{number}"


def shard_texts(path: str):
    """``(doc_id, text)`` of every document of a shard file."""
    return ((_doc_id(path, number, doc), doc.text) for number, doc in enumerate(read_documents(path)))


def matched_documents(path, indexes):
    """A shard file -> every document with where the benchmarks matched it (``dedup.decontaminate.match_documents``)."""
    yield from match_documents(indexes, ((_doc_id(path, number, doc), doc) for number, doc in enumerate(read_documents(path))))
    progress.tally("files")


# --- the Bloom filter ----------------------------------------------------------------------
def count_ngrams(path, config) -> int:
    """The n-grams of a shard file's documents (the filter's capacity, summed over shards)."""
    total = 0
    for doc in read_documents(path):
        total += len(ngram_hashes(doc.text, config))
    progress.tally("files")
    return total


def shard_hashes(path, config) -> tuple[dict, np.ndarray]:
    """A shard file -> (its ``FILTER_UNITS`` tallies, the n-gram hashes of all its documents)."""
    chunks, docs = [], 0
    for doc in read_documents(path):
        docs += 1
        chunks.append(ngram_hashes(doc.text, config))
    keys = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
    progress.tally("files")
    return {DOCUMENTS_HASHED: docs, NGRAMS_HASHED: len(keys)}, keys


def build_part(keyed, *, capacity, parts, error_rate, seed, meta, folder):
    """``(part index, arrays of its keys)`` -> the part's filter, saved; returns its path and
    which C kernels building it ran (``corpus.native.take_used``)."""
    index, arrays = keyed
    bloom = BloomFilter(part_capacity(capacity, parts), error_rate, seed, dict(meta, part=index, parts=parts))
    for keys in arrays:
        if keys is not None and len(keys):
            bloom.add(keys)
    path = part_path(folder, index, parts)
    bloom.save(path)
    return path, native.take_used()


def filter_capacity(args, count_corpus) -> int:
    """``--capacity``, else the corpus's n-grams as ``count_corpus()`` counts them (at least 1)."""
    return args.capacity if args.capacity is not None else max(1, count_corpus())


def finish_filter(files, config, parts: int, folder: str, capacity: int, counters: dict, kernels: dict) -> dict:
    """The filter's manifest (``bloom.json``) once every part is saved; audit.json's ``filter``
    (``kernels``: ``pipelines.tally.kernels_document`` of the part builders)."""
    write_filter_manifest(folder, parts, ngram_meta(config), corpus_fingerprint(files))
    return {"capacity": capacity, "parts": parts, "counters": counters, "kernels": kernels}


# --- decontamination's bookkeeping -----------------------------------------------------------
def write_removed(rows, path):
    rows = sorted(rows, key=lambda r: (r["url"], r["reason"]))
    storage.write_atomically(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
