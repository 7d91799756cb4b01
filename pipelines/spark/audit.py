"""``corpusforge audit`` and ``decontaminate`` on Spark: ``pipelines.audit.job``'s stages as RDD operations.

The per-shard work is the Beam wiring's own, from the Beam-free ``pipelines.audit.shards``
(``count_ngrams``, ``shard_hashes``, ``build_part``, ``shard_texts``, ``matched_documents``:
a Python worker never loads Beam), the rules and
merges are ``dedup/``'s (``scan_documents``, ``merge_counters``, ``decontaminate``), and the
driver's part (loading the filter, the reports, ``audit.json``, ``_SUCCESS``) is
``pipelines.audit.job.audit_corpus`` itself; only the plumbing is Spark's:

- capacity: one partition per shard file, ``count_ngrams`` each, ``sum()``;
- the Bloom filter: each shard's n-gram hashes split by part (``split_by_part``), shuffled
  to one partition per part (``partitionBy``), where ``build_part`` adds them to that part's
  filter and saves it. Adding keys only sets bits, so the part has the same bits in any
  order (the filter of the keys' union); the shuffle carries 8 bytes per n-gram, where
  OR-ing a filter per shard file would carry a whole-filter-sized bit array per file;
- the exact scan: ``scan_documents`` per shard file, the per-benchmark counters merged with
  ``treeAggregate`` (``OverlapCounter.merge`` keeps the smallest ids: any order, same counter);
- decontamination: ``matched_documents`` per shard file, the ``decontaminate`` rule as a
  ``SparkJob.step``, the pieces to ``SparkJob.write_shards`` (one shard set per split), the
  ``_removed.jsonl`` rows gathered by an accumulator while the pieces stream to the writer.

The benchmark indexes reach the workers once, as a broadcast variable.
"""

from __future__ import annotations

from common import storage
from dedup.audit import merge_counters, scan_documents
from dedup.bloom import ngram_meta, split_by_part
from pipelines.audit.shards import (
    AUDIT,
    DECONTAMINATE,
    FILTER_UNITS,
    REMOVED_FILE,
    build_part,
    count_ngrams,
    filter_capacity,
    finish_filter,
    matched_documents,
    shard_hashes,
    shard_texts,
    write_removed,
)
from pipelines.spark.engine import SparkJob, keyed_values, on_worker, tally_of
from pipelines.tally import kernel_states, kernels_document


# --- audit: the Bloom filter ---------------------------------------------------------------
def _ngram_counts(config, beam_args):
    def run(items):
        on_worker(beam_args)
        yield sum(count_ngrams(path, config) for _, path in items)
    return run


def _hashes_by_part(config, parts, tallies, errors, beam_args):
    """Each shard file -> ``(part index, its keys)`` for every part; its ``FILTER_UNITS`` tallies."""
    def run(items):
        on_worker(beam_args)
        for _, path in items:
            counts, keys = shard_hashes(path, config)
            tallies.add(tally_of((AUDIT,), counts, FILTER_UNITS))
            yield from enumerate(split_by_part(keys, parts))
    return run


def _part_index(index: int) -> int:
    return index


def _part_builder(beam_args, **settings):
    def build(index, keyed):
        on_worker(beam_args)
        return [build_part((index, (keys for _, keys in keyed)), **settings)]
    return build


def build_filter(spark, files, config, args, folder, beam_args) -> dict:
    """``pipelines.audit.job.build_filter`` on Spark: the capacity, then every part, then ``bloom.json``."""
    job = SparkJob(spark, beam_args)
    capacity = filter_capacity(args, lambda: job.files(files).mapPartitions(_ngram_counts(config, job.beam_args)).sum())
    parts = args.filter_parts
    keyed = job.over_partitions(job.files(files), _hashes_by_part, config, parts)
    builder = _part_builder(job.beam_args, capacity=capacity, parts=parts, error_rate=args.error_rate, seed=args.seed,
                            meta=ngram_meta(config), folder=folder)
    built = keyed.partitionBy(parts, _part_index).mapPartitionsWithIndex(builder).collect()  # every part index, keys or not
    return finish_filter(files, config, parts, folder, capacity, job.counters(), kernels_document(kernel_states(status for _, status in built)))


# --- audit: the exact stream ---------------------------------------------------------------
def _scanned(indexes, beam_args):
    """Each shard file -> ``{benchmark: OverlapCounter.to_dict()}`` (``scan_documents``)."""
    def run(items):
        on_worker(beam_args)
        for _, path in items:
            yield {name: counter.to_dict() for name, counter in scan_documents(indexes.value, shard_texts(path)).items()}
    return run


def _merged(indexes):
    """Two ``{benchmark: counter dict}`` -> their sum (``merge_counters``), benchmark by benchmark."""
    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for name, counter in b.items():
            out[name] = merge_counters(indexes.value[name], [out[name], counter]).to_dict() if name in out else counter
        return out
    return merge


def scan_exact(spark, files, indexes, beam_args, out_dir) -> dict:
    """``pipelines.audit.job.scan_exact`` on Spark: benchmark -> the whole corpus's counter, as a dict."""
    job = SparkJob(spark, beam_args)
    shared = job.sc.broadcast(dict(indexes))
    try:
        merge = _merged(shared)
        return job.files(files).mapPartitions(_scanned(shared, job.beam_args)).treeAggregate({}, merge, merge)
    finally:
        shared.unpersist()


# --- decontamination -----------------------------------------------------------------------
def _matched(indexes, beam_args):
    def run(items):
        on_worker(beam_args)
        for _, path in items:
            yield from matched_documents(path, indexes.value)
    return run


def _pieces(position: int, removed):
    """Each outcome -> ``(split position, piece)`` for the shard writer; its ``removed`` row to the accumulator."""
    def run(outcomes):
        rows = []
        for outcome in outcomes:
            if outcome.removed:
                rows.append(outcome.removed)
            for piece in outcome.pieces:
                yield position, piece
        removed.add(rows)
    return run


def decontaminate(spark, by_split: dict[str, list[str]], indexes, rule, args, beam_args) -> dict:
    """``pipelines.audit.job.decontaminate_on_beam`` on Spark: the same shards, ``_removed.jsonl``,
    counters, units and examples (namespace ``DECONTAMINATE``)."""
    job = SparkJob(spark, beam_args)
    shared = job.sc.broadcast(dict(indexes))
    removed, removed_rows = job.rows()
    try:
        pieces = []
        for position, split_files in enumerate(by_split.values()):  # every split keeps its own shard set
            matched = job.files(split_files).mapPartitions(_matched(shared, job.beam_args))
            outcomes = job.step(matched, DECONTAMINATE, rule)
            pieces.append(outcomes.mapPartitions(_pieces(position, removed_rows())))
        job.write_shards(job.sc.union(pieces), args.output, args.format, args.name, [(split, args.num_shards) for split in by_split])
    finally:
        shared.unpersist()
    write_removed([row for rows in keyed_values(removed) for row in rows], storage.join(args.output, REMOVED_FILE))
    return {"counters": job.counters().get(DECONTAMINATE, {}), "units": job.units().get(DECONTAMINATE, {}),
            "examples": job.examples().get(DECONTAMINATE, {}), "kernels": job.kernels()}
