"""Document shards -> llm.c token shards (train/val), as an Apache Beam job.

    corpusforge tokenize --input 'c4-out/c4-train.*.json.gz' --output tokens/ \
        [--tokenizer FOLDER | --vocab_size 50257 --train_docs 100000] \
        [--val_fraction 0.005 | --val_docs N] [--shard_tokens 100000000] [--prefix c4] \
        [--field text] [any Beam option, e.g. --direct_num_workers 4 --direct_running_mode multi_processing]
        [--engine spark --spark_master 'local[2]']   (native Spark, the same bytes: docs/spark.md)

The steps:

    (train or load the tokenizer; save it to OUTPUT/tokenizer/)
    read documents  ->  digest = blake2b-128(text)  ->  split by digest  ->  encode (EOT + ids)
    ->  group by (split, digest range)  ->  sort each range by digest, write it as one part
    ->  plan shards over the parts in digest order  ->  write each shard (in parallel)

Conventions (the output is byte-identical whatever the number of workers or ranges):
- Each document is PRECEDED by ``<|endoftext|>`` (llm.c ``fineweb.py``), so every shard
  of a split starts with it and a document's tokens run up to the next one.
- Documents are ordered by the digest of their text (a deterministic shuffle); two
  documents with the same text have the same tokens, so ties cannot change a byte.
- Validation takes the documents with the smallest digests: those whose first 8 digest
  bytes, read as a fraction of 2^64, are below ``--val_fraction``; or the ``--val_docs``
  smallest (more when duplicate texts tie). Exact duplicates never straddle the split.
- Shards hold ``--shard_tokens`` tokens (llm.c: 1e8) but the last of a split; a document
  may continue in the next shard, as in llm.c.
- Documents whose text is empty or only whitespace are dropped (counted).

Scale: no step holds the corpus. A document is grouped with the others of its digest
range (``--buckets``, by default one per 64 MB of input files), the range is sorted and
written to ``OUTPUT/.parts/``, and each shard is cut from those part files by its own
worker. Memory per worker: one digest range, or one shard (2 bytes per token).

Outputs: ``meta.json``, ``tokenizer/vocab.json`` + ``merges.txt``,
``<prefix>_<split>_<i:06d>.bin``, ``_stats.json`` (every counter), ``_errors/errors.jsonl``.

Workers (``--setup_file ./beam_setup.py``) install beam_setup.py's ``tokenize`` extra on top
of requirements.txt: the tokenizer libraries, never torch.
"""

from __future__ import annotations

import argparse

from model.token_shards import DEFAULT_SHARD_TOKENS
from pipelines.engines import add_engine_arguments
from pipelines.options import add_overwrite_argument, non_negative_int, positive_int, unit_fraction

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option
DEFAULT_VAL_FRACTION = 0.005
DEFAULT_TRAIN_DOCS = 100_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="+", required=True, help="document shards: files, globs or folders (C4 .json.gz, .jsonl, .parquet)")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--tokenizer", default=None, help="use this tokenizer (folder with vocab.json + merges.txt, or encoder.json + vocab.bpe)")
    parser.add_argument("--vocab_size", type=positive_int, default=50257, help="vocabulary of a trained tokenizer, end-of-text included (GPT-2: 50,257)")
    parser.add_argument("--train_docs", type=positive_int, default=DEFAULT_TRAIN_DOCS, help="train the tokenizer on the first N non-empty documents (file order)")
    parser.add_argument("--min_frequency", type=positive_int, default=2, help="merge only pairs seen at least this often")
    val = parser.add_mutually_exclusive_group()
    val.add_argument("--val_fraction", type=unit_fraction, default=None, help=f"share of documents for validation, by digest (default {DEFAULT_VAL_FRACTION})")
    val.add_argument("--val_docs", type=non_negative_int, default=None, help="exactly this many validation documents (the smallest digests)")
    parser.add_argument("--shard_tokens", type=positive_int, default=DEFAULT_SHARD_TOKENS, help="tokens per shard (llm.c: 100M)")
    parser.add_argument("--prefix", default="corpus", help="shard name prefix: <prefix>_<split>_<i:06d>.bin")
    parser.add_argument("--field", default="text", help="the JSON field / Parquet column holding the text")
    parser.add_argument("--buckets", type=positive_int, default=None, help="digest ranges sorted in parallel (default: one per 64 MB of input)")
    add_engine_arguments(parser)
