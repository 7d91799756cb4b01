"""``corpusforge tokenize`` on Spark: ``pipelines.tokenize.job``'s chain as RDD operations.

The same functions, names and counters as the Beam wiring (``pipelines.tokenize.job``), from
the Beam-free ``pipelines.tokenize.shards``, so a Python worker never loads Beam:
one partition per shard file read by ``ShardTextReader`` (``read_files``, every job's reader loop), ``nonempty_text`` as a step, the
blake2b-128 digest, ``encode_document`` per partition (one tokenizer per partition,
``worker_tokenizer``), ``groupByKey`` by (split, digest range) and ``write_part`` for
each range, the plan cut by ``plan_and_record`` on the driver, then each planned shard written by
``write_planned_shard`` in its own partition. ``--val_docs`` takes the smallest digests
with ``takeOrdered`` over the documents, which are stored first (``SparkJob.once``) so
their counters are added once. Before any of it (``pipelines.tokenize.job`` calls it first),
``check_workers`` has the executors import the tokenizer libraries.
"""

from __future__ import annotations

import functools
from collections import Counter

from common.decision import DOCUMENTS, OTHER
from corpus.shards import nonempty_text
from model.tokenizer import require_tokenize_libraries
from pipelines.shard_io import write_errors
from pipelines.spark.engine import SparkJob, on_worker, ship_project, tally_of
from pipelines.spark.plan import read_files
from pipelines.tokenize.shards import (
    NAMESPACE,
    SHARDS_WRITTEN,
    ShardTextReader,
    document_digest,
    encode_document,
    last_val_digest,
    plan_and_record,
    worker_tokenizer,
    write_part,
    write_planned_shard,
)


def _require_on_worker(_partition) -> None:
    require_tokenize_libraries("a worker")


def check_workers(spark) -> None:
    """Before any work: every task slot of the session (``defaultParallelism`` tasks, spread
    over the executors) imports the tokenizer libraries; one that cannot fails the job with
    ``model.tokenizer.MissingLibraryError``'s line. Executors that join later are checked by
    ``worker_tokenizer`` when they encode."""
    sc = spark.sparkContext
    ship_project(sc)  # on a cluster the check itself needs the project on the executors
    slots = max(1, sc.defaultParallelism)
    sc.parallelize(range(slots), slots).foreachPartition(_require_on_worker)


def _encode(vocab, merges, buckets, val_fraction, val_last, tallies, beam_args):
    def run(docs):
        on_worker(beam_args)
        tokenizer = worker_tokenizer(vocab, merges)
        documents, tokens = Counter(), Counter()
        for digest, text in docs:
            yield encode_document(tokenizer, digest, text, buckets, val_fraction, val_last, documents, tokens)
        tallies.add(tally_of((NAMESPACE,), documents, DOCUMENTS))
        tallies.add(tally_of((NAMESPACE,), tokens, OTHER))
    return run


def _write_shards(tallies, beam_args):
    def run(shards):
        on_worker(beam_args)
        written = [write_planned_shard(shard) for shard in shards]
        tallies.add(tally_of((NAMESPACE,), {SHARDS_WRITTEN: len(written)} if written else {}, OTHER))
        return written
    return run


def run(spark, files: list[str], tokenizer, args, parts_dir: str, plan_path: str, beam_args=()) -> dict:
    """Tokenize ``files`` into ``args.output`` (claimed, tokenizer saved and ``args.buckets``
    set by the caller); stages the plan at ``plan_path`` as the Beam job does. Returns
    _stats.json's ``counters``, ``units`` and ``examples``."""
    job = SparkJob(spark, beam_args)
    texts = read_files(job, files, functools.partial(ShardTextReader, args.field))
    texts = job.step(texts, NAMESPACE, nonempty_text)
    docs = texts.map(lambda text: (document_digest(text), text))
    val_last = None
    if args.val_docs is not None:
        docs = job.once(docs)
        val_last = last_val_digest(docs.keys().takeOrdered(max(args.val_docs, 1)), args.val_docs)
    encoded = docs.mapPartitions(_encode(tokenizer.vocab, tokenizer.merges, args.buckets, args.val_fraction, val_last, job.tallies, job.beam_args))
    parts = encoded.groupByKey(job.partitions).map(lambda keyed: write_part(keyed, parts_dir)).collect()
    job.release()
    shards = plan_and_record(parts, args.shard_tokens, args.output, args.prefix, plan_path)
    job.sc.parallelize(shards, max(1, len(shards))).mapPartitions(_write_shards(job.tallies, job.beam_args)).collect()
    write_errors(job.error_rows(), args.output)
    return {"counters": job.counters(), "units": job.units(), "examples": job.examples(), "kernels": job.kernels()}
