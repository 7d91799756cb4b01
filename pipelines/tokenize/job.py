"""The tokenize job on Apache Beam (or native Spark with ``--engine spark``: ``pipelines.spark.tokenize``,
the same bytes). Its steps, conventions, options and ``--help``: ``pipelines.tokenize.options``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import os
import sys
from collections import Counter

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from tqdm import tqdm

from common import storage
from common.decision import DOCUMENTS, OTHER
from corpus.inputs import InputError
from corpus.shards import first_texts, nonempty_text, shard_files
from model.token_shards import MAX_TOKEN_ID, find_token_shards
from model.tokenizer import (
    BPETokenizer,
    MissingLibraryError,
    TokenizerFileError,
    missing_library_line,
    require_tokenize_libraries,
    train_tokenizer,
)
from pipelines import progress
from pipelines.beam.plan import read_files
from pipelines.beam_package import stage_setup_file
from pipelines.cli import run_job
from pipelines.engines import spark_engine
from pipelines.jobs import begin_job, counters_of, error_examples, finish_job, write_json
from pipelines.sources import WriteErrors
from pipelines.steps import ERRORS_FILE, Steps, collect_examples, count, kernels_of, units_of
from pipelines.tokenize.options import DEFAULT_VAL_FRACTION, EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.tokenize.shards import (
    NAMESPACE,
    SHARDS_WRITTEN,
    SPLITS,
    ShardTextReader,
    document_digest,
    encode_document,
    last_val_digest,
    plan_and_record,
    worker_tokenizer,
    write_part,
    write_planned_shard,
)

log = logging.getLogger(__name__)

BUCKET_INPUT_BYTES = 64 * 2**20  # one digest range per 64 MB of input files
MAX_BUCKETS = 65_536
TOKENIZER_FOLDER = "tokenizer"
PARTS_FOLDER = "parts"  # under the output's _temporary/ while the job runs
PLAN_FILE = "plan.json"


# --- Beam steps -----------------------------------------------------------------------------
class _EncodeFn(beam.DoFn):
    """(digest, text) -> ((split, range), (digest, EOT + ids as uint16 bytes)); the tokenizer
    travels as its vocabulary and merges and is built once per worker."""

    def __init__(self, vocab: dict, merges: list, buckets: int, val_fraction: float):
        self.vocab, self.merges = vocab, merges
        self.buckets, self.val_fraction = buckets, val_fraction
        self.tokenizer = None

    def setup(self):
        self.tokenizer = worker_tokenizer(self.vocab, self.merges)

    def start_bundle(self):
        self.documents, self.tokens = Counter(), Counter()

    def finish_bundle(self):
        count(NAMESPACE, self.documents, DOCUMENTS)
        count(NAMESPACE, self.tokens, OTHER)

    def process(self, element, val_last=None):
        digest, text = element
        progress.tally("records")
        yield encode_document(self.tokenizer, digest, text, self.buckets, self.val_fraction, val_last, self.documents, self.tokens)


def _write_counted_shard(shard: dict) -> str:
    path = write_planned_shard(shard)
    count(NAMESPACE, {SHARDS_WRITTEN: 1}, OTHER)
    return path


# --- the job --------------------------------------------------------------------------------
def check_arguments(args) -> None:
    if args.val_fraction is None and args.val_docs is None:
        args.val_fraction = DEFAULT_VAL_FRACTION
    if args.val_fraction is not None and not 0 <= args.val_fraction < 1:
        raise InputError(f"--val_fraction must be in [0, 1), got {args.val_fraction}")
    if args.val_docs is not None and args.val_docs < 0:
        raise InputError(f"--val_docs must be >= 0, got {args.val_docs}")
    if args.shard_tokens < 1:
        raise InputError(f"--shard_tokens must be >= 1, got {args.shard_tokens}")
    if args.buckets is not None and not 1 <= args.buckets <= MAX_BUCKETS:
        raise InputError(f"--buckets must be in 1..{MAX_BUCKETS}, got {args.buckets}")
    if not args.prefix or os.sep in args.prefix:
        raise InputError(f"--prefix must be a non-empty file name prefix (shards are <prefix>_<split>_<i:06d>.bin), got {args.prefix!r}")
    if args.tokenizer is None and args.train_docs < 1:
        raise InputError(f"--train_docs must be >= 1, got {args.train_docs}")


def prepare_tokenizer(args, files: list[str]):
    """Load ``--tokenizer`` or train one on the first ``--train_docs`` documents; either way a
    copy goes to OUTPUT/tokenizer, so the token shards travel with their vocabulary."""
    if args.tokenizer:
        try:
            tokenizer = BPETokenizer.load(args.tokenizer)
        except (TokenizerFileError, OSError) as exc:
            raise InputError(f"--tokenizer: {exc}") from exc
    else:
        if args.vocab_size > MAX_TOKEN_ID + 1:
            raise InputError(f"--vocab_size {args.vocab_size}: token shards hold uint16 ids, so at most {MAX_TOKEN_ID + 1}")
        texts = tqdm(first_texts(files, args.train_docs, args.field), total=args.train_docs, desc="tokenizer training text", unit="doc")
        try:
            tokenizer = train_tokenizer(texts, vocab_size=args.vocab_size, min_frequency=args.min_frequency)
        except ValueError as exc:
            raise InputError(f"training the tokenizer: {exc}") from exc
    if tokenizer.vocab_size > MAX_TOKEN_ID + 1:
        raise InputError(f"the tokenizer has {tokenizer.vocab_size:,} tokens: token shards hold uint16 ids, so at most {MAX_TOKEN_ID + 1:,}")
    tokenizer.save(storage.join(args.output, TOKENIZER_FOLDER))
    return tokenizer


def default_buckets(files: list[str]) -> int:
    size = sum(storage.size(f) for f in files)
    return max(1, min(MAX_BUCKETS, math.ceil(size / BUCKET_INPUT_BYTES)))


def build(p: beam.Pipeline, files: list[str], tokenizer, args, parts_dir: str, plan_path: str) -> None:
    read = read_files(p, files, "Read texts", functools.partial(ShardTextReader, args.field), what="Shard files")
    run_step = Steps()
    texts = run_step(read.records, "Drop empty texts", NAMESPACE, nonempty_text)
    docs = (texts | "Digest" >> beam.Map(lambda text: (document_digest(text), text))
            | "Spread documents" >> beam.Reshuffle())
    encode = _EncodeFn(tokenizer.vocab, tokenizer.merges, args.buckets, args.val_fraction)
    if args.val_docs is not None:
        val_last = (docs | "Digests" >> beam.Keys()
                    | "Smallest digests" >> beam.combiners.Top.Smallest(max(args.val_docs, 1))
                    | "Last val digest" >> beam.Map(last_val_digest, args.val_docs))
        encoded = docs | "Split and encode" >> beam.ParDo(encode, val_last=beam.pvalue.AsSingleton(val_last))
    else:
        encoded = docs | "Split and encode" >> beam.ParDo(encode)
    (encoded
     | "Group by digest range" >> beam.GroupByKey()
     | "Sort and write range" >> beam.Map(write_part, parts_dir)
     | "Collect parts" >> beam.combiners.ToList()
     | "Plan shards" >> beam.FlatMap(plan_and_record, args.shard_tokens, args.output, args.prefix, plan_path)
     | "Spread shards" >> beam.Reshuffle()
     | "Write shards" >> beam.Map(_write_counted_shard))
    read.errors | "Write errors" >> WriteErrors(args.output)
    run_step.write_examples(args.output)


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge tokenize ARGV`, errors raised
        return run_job("tokenize", sys.argv[1:] if args is None else args)
    beam_args = args.beam_args
    check_arguments(args)
    try:  # before any work: the launcher trains or loads the tokenizer with them
        require_tokenize_libraries("the launcher")
    except MissingLibraryError as exc:
        raise InputError(str(exc)) from exc
    files = shard_files(args.input)
    spark = spark_engine(args) if args.engine == "spark" else None  # on a cluster: --output made absolute first
    parts_dir = storage.staging_path(args.output, PARTS_FOLDER)
    plan_path = storage.staging_path(args.output, PLAN_FILE)
    if spark is not None:
        with spark.engine.job_session_for(args) as session, _missing_worker_library_in_one_line():
            spark.tokenize.check_workers(session)  # before the output is claimed
            tokenizer = _begin(args, files)
            counted = spark.tokenize.run(session, files, tokenizer, args, parts_dir, plan_path, beam_args)
    else:
        tokenizer = _begin(args, files)
        with (_missing_worker_library_in_one_line(),
              progress.pipeline(PipelineOptions(stage_setup_file(beam_args, extras=("tokenize",))), "tokenize", len(files)) as p):
            build(p, files, tokenizer, args, parts_dir, plan_path)
        counted = {"counters": counters_of(p.result), "units": units_of(p.result), "examples": collect_examples(args.output),
                   "kernels": kernels_of(p.result)}
    counters = counted["counters"].get(NAMESPACE, {})
    if storage.is_file(plan_path):
        splits = json.loads(storage.read_text(plan_path))["splits"]
    else:  # no document at all: nothing was grouped, so nothing was planned
        splits = {split: {"shards": 0, "tokens": 0, "documents": 0, "files": []} for split in SPLITS}
    _remove_stale_shards(args.output, args.prefix, splits)
    meta = {
        "vocab_size": tokenizer.vocab_size, "eot_id": tokenizer.eot_id, "tokenizer": TOKENIZER_FOLDER,
        "prefix": args.prefix, "shard_tokens": args.shard_tokens,
        "format": "llm.c: 256 x int32 header (magic 20240520, version 1, token count), then uint16 tokens",
        "documents": "each document is preceded by the end-of-text token; documents in blake2b-128(text) order",
        "val": {"fraction": args.val_fraction} if args.val_docs is None else {"documents": args.val_docs},
        "splits": {split: splits[split] for split in ("train", "val")},
    }
    write_json(storage.join(args.output, "meta.json"), meta)
    for split in SPLITS:
        if not splits[split]["files"]:
            log.warning("the %s split is empty", split)
    stats = {"files": len(files), "buckets": args.buckets, "counters": counters, "splits": meta["splits"],
             "errors": error_examples(args.output), "units": counted["units"].get(NAMESPACE, {}),
             "examples": counted["examples"].get(NAMESPACE, {}), "kernels": counted["kernels"]}
    token_files = [name for split in splits.values() for name in split["files"]]
    tokenizer_files = [f"{TOKENIZER_FOLDER}/{name}" for name in ("vocab.json", "merges.txt")]
    finish_job(args.output, "tokenize", stats, extra_files=tuple(token_files + tokenizer_files + ["meta.json"]))
    if splits["train"]["files"]:
        find_token_shards(args.output, "train")  # the shards are where readers look
    return {"meta": meta, "stats": stats, "output": args.output}


@contextlib.contextmanager
def _missing_worker_library_in_one_line():
    """A job that failed because a worker cannot import a tokenizer library (its task's
    ``MissingLibraryError``, inside Spark's or Beam's report) ends in that error's one line."""
    try:
        yield
    except Exception as exc:
        line = None if isinstance(exc, InputError) else missing_library_line(exc)
        if line is None:
            raise
        raise InputError(line) from exc


def _begin(args, files: list[str]):
    """Claim the output (``begin_job``), then its tokenizer (``prepare_tokenizer``) and digest ranges."""
    begin_job(args.output, "tokenize", args.overwrite)
    tokenizer = prepare_tokenizer(args, files)
    if args.buckets is None:
        args.buckets = default_buckets(files)
    return tokenizer


def _remove_stale_shards(out_dir: str, prefix: str, splits: dict) -> None:
    """Shards of an earlier run with more shards would be read as part of this one."""
    keep = {name for split in splits.values() for name in split["files"]}
    for path in storage.list_files(out_dir):
        name = storage.basename(path)
        if name.startswith(f"{prefix}_") and name.endswith(".bin") and name not in keep:
            if any(name.startswith(f"{prefix}_{split}_") for split in SPLITS):
                storage.delete([path])


def format_summary(result: dict) -> str:
    meta, counters = result["meta"], result["stats"]["counters"]
    lines = [f"tokenized {counters.get('documents_read', 0):,} documents into {result['output']} "
             f"(vocabulary {meta['vocab_size']:,}, end-of-text {meta['eot_id']}; {counters.get('empty_dropped', 0):,} empty dropped)"]
    for split in ("train", "val"):
        info = meta["splits"][split]
        lines.append(f"  {split:5} {info['documents']:>12,} documents {info['tokens']:>15,} tokens {info['shards']:>5} shards")
    errors = {k: v for k, v in counters.items() if k.startswith("error:")}
    if errors:
        lines.append("  errors: " + ", ".join(f"{k[6:]} {v:,}" for k, v in sorted(errors.items())) + f" (see {ERRORS_FILE})")
    return "\n".join(lines)


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["tokenize", *sys.argv[1:]]))
