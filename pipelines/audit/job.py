"""The audit and decontamination jobs on Apache Beam (or native Spark with ``--engine spark``:
``pipelines.spark.audit``, the same output bytes). What they do, their options and their
``--help``: ``pipelines.audit.options``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
from collections import Counter

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.utils.shared import Shared

from common import storage
from common.decision import DOCUMENTS
from corpus.inputs import InputError
from corpus.shards import shard_files, shard_split
from dedup.audit import (
    benchmark_rows,
    build_indexes,
    load_benchmarks,
    merge_counters,
    own_train_overlap,
    scan_documents,
)
from dedup.bloom import BloomFileError, ngram_meta, split_by_part
from dedup.decontaminate import decontaminate
from dedup.ngrams import NgramConfig
from dedup.partitioned import FILTER_MANIFEST, PartitionedBloom, corpus_fingerprint
from dedup.report import render_html, render_json, render_markdown
from pipelines import progress, staging
from pipelines.audit.options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.audit.shards import (
    AUDIT,
    DECONTAMINATE,
    DOCUMENTS_SCANNED,
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
from pipelines.beam_package import stage_setup_file
from pipelines.cli import run_job
from pipelines.engines import spark_engine
from pipelines.jobs import begin_job, counters_of, finish_job, write_json
from pipelines.sources import WriteShards
from pipelines.steps import Steps, collect_examples, count, kernels_of, record_kernels, units_of
from pipelines.tally import kernels_document

log = logging.getLogger(__name__)

# The benchmark indexes reach the workers by reference: written once to a staged file in this
# folder under <out>/_temporary/stage/, loaded once per worker process. Passed as a DoFn's
# argument they were pickled and compressed into the job's graph and unpickled for every bundle
# (an audit against WikiText-2, PTB and LAMBADA spent most of its time doing that).
INDEX_STAGE = "benchmark-index"


# --- shared ------------------------------------------------------------------------------
def ngram_config(args) -> NgramConfig:
    return NgramConfig(n=args.n, apostrophes=args.apostrophes, unicode=not args.ascii)


# --- the benchmark indexes, by reference ----------------------------------------------------
def stage_indexes(out_dir: str, indexes: dict) -> str:
    """``indexes`` (benchmark name -> ``BenchmarkIndex``) written once to a staged file under
    ``<out_dir>/_temporary/stage/benchmark-index/`` (gone when the job commits); its path."""
    path = staging.staged_file(staging.stage_folder(out_dir, INDEX_STAGE), staging.new_file_id())
    staging.write_staged(path, indexes.items())
    return path


def read_staged_indexes(path: str) -> dict:
    """The indexes ``stage_indexes`` wrote to ``path``, by name, in their order."""
    return dict(item for _, item in staging.read_staged(path))


class _LoadedIndexes:
    """The indexes of one staged file, as ``Shared`` holds them (a weak reference needs an object)."""

    def __init__(self, path: str):
        self.indexes = read_staged_indexes(path)


class WithIndexes(beam.DoFn):
    """``fn(element, indexes)``'s outputs, ``indexes`` loaded from the staged file ``path`` in
    ``setup``: once per worker process for every DoFn given the same ``shared`` handle (a bundle,
    a thread or another step of the job reuses the loaded copy)."""

    def __init__(self, fn, path: str, shared: Shared):
        self.fn, self.path, self.shared = fn, path, shared
        self.indexes = None

    def setup(self):
        self.loaded = self.shared.acquire(functools.partial(_LoadedIndexes, self.path), tag=self.path)
        self.indexes = self.loaded.indexes

    def process(self, element):
        yield from self.fn(element, self.indexes)


# --- audit: the Bloom filter -------------------------------------------------------------
def _hashes_by_part(path, config, parts):
    counts, keys = shard_hashes(path, config)
    count(AUDIT, counts, FILTER_UNITS)
    yield from enumerate(split_by_part(keys, parts))


def build_filter(files, config, args, folder, beam_args) -> dict:
    """Two Beam runs: count the corpus's n-grams (the capacity), then build every part."""
    def count_corpus() -> int:
        count_path = storage.staging_path(args.output, "capacity.json")
        with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: counting n-grams", len(files)) as p:
            (p | "Shards" >> beam.Create(files) | "Spread" >> beam.Reshuffle()
             | "Count n-grams" >> beam.Map(count_ngrams, config)
             | "Sum" >> beam.CombineGlobally(sum)
             | "Write count" >> beam.Map(lambda n: write_json(count_path, {"ngrams": int(n)})))
        return json.loads(storage.read_text(count_path))["ngrams"]

    capacity = filter_capacity(args, count_corpus)
    parts, meta = args.filter_parts, ngram_meta(config)
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: building the Bloom filter", len(files)) as p:
        every = p | "Every part" >> beam.Create([(i, None) for i in range(parts)])
        keyed = (p | "Shard files" >> beam.Create(files) | "Spread files" >> beam.Reshuffle()
                 | "N-gram hashes by part" >> beam.FlatMap(_hashes_by_part, config, parts))
        ((keyed, every) | "Merge parts" >> beam.Flatten() | "Group by part" >> beam.GroupByKey()
         | "Build and save part" >> beam.Map(build_part, capacity=capacity, parts=parts, error_rate=args.error_rate,
                                               seed=args.seed, meta=meta, folder=folder)
         | "Kernels" >> beam.Map(lambda built: record_kernels(built[1])))
    return finish_filter(files, config, parts, folder, capacity, counters_of(p.result), kernels_of(p.result))


def load_filter(folder: str, config: NgramConfig, files: list[str]) -> PartitionedBloom:
    """The filter in ``folder`` if it is whole and was built with ``config`` from these
    ``files`` (``dedup.partitioned``); ``InputError`` with the one-line reason otherwise."""
    try:
        return PartitionedBloom.load(folder, meta=ngram_meta(config), corpus=corpus_fingerprint(files))
    except (BloomFileError, OSError) as exc:
        raise InputError(f"--filter {folder}: refused: {exc}") from None


# --- audit: the exact stream ---------------------------------------------------------------
def _scan_shard(path, indexes):
    """A shard file -> (benchmark, OverlapCounter as a dict) for every benchmark (``dedup.audit.scan_documents``)."""
    counters = scan_documents(indexes, shard_texts(path))
    count(AUDIT, {DOCUMENTS_SCANNED: next(iter(counters.values())).docs_scanned}, DOCUMENTS)
    progress.tally("files")
    for name, counter in counters.items():
        yield name, counter.to_dict()


def _merge_counters(keyed, indexes):
    name, parts = keyed
    yield name, merge_counters(indexes[name], parts).to_dict()


def exact_scan_steps(p, files, indexes, out_dir) -> str:
    """The exact scan's steps on pipeline ``p``, the indexes staged by reference (``stage_indexes``);
    the path its result (benchmark -> counter dict) is written to."""
    path, shared = storage.staging_path(out_dir, "exact.json"), Shared()
    index_path = stage_indexes(out_dir, indexes)
    (p | "Shards" >> beam.Create(files) | "Spread" >> beam.Reshuffle()
     | "Scan against benchmarks" >> beam.ParDo(WithIndexes(_scan_shard, index_path, shared))
     | "Group by benchmark" >> beam.GroupByKey()
     | "Merge counters" >> beam.ParDo(WithIndexes(_merge_counters, index_path, shared))
     | "Collect" >> beam.combiners.ToDict()
     | "Write" >> beam.Map(lambda d: write_json(path, d)))
    return path


def scan_exact(files, indexes, beam_args, out_dir) -> dict:
    """One Beam run streaming the corpus against the exact benchmark indexes."""
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: exact scan", len(files)) as p:
        path = exact_scan_steps(p, files, indexes, out_dir)
    return json.loads(storage.read_text(path))


# --- audit: reports --------------------------------------------------------------------------
def write_reports(rows, out_dir: str, title: str) -> dict[str, str]:
    paths = {"json": storage.join(out_dir, "report.json"), "markdown": storage.join(out_dir, "report.md"),
             "html": storage.join(out_dir, "report.html")}
    render_json(rows, paths["json"])
    storage.write_atomically(paths["markdown"], render_markdown(rows, title=title))
    render_html(rows, paths["html"], title=title)
    return paths


def run(args: argparse.Namespace) -> dict:
    """``corpusforge audit``: the n-gram overlap of the benchmarks with the corpus, reports in ``--output``."""
    beam_args = args.beam_args
    files = shard_files(args.corpus)
    sets = load_benchmarks(args.benchmark)
    config = ngram_config(args)
    indexes = build_indexes(sets, config)
    own_train = own_train_overlap(args.own_train, indexes)
    bloom = None
    if args.filter and args.mode in ("both", "bloom"):
        bloom = load_filter(args.filter, config, files)  # a filter that is not this corpus's is refused before work starts
    if args.engine == "spark":
        spark = spark_engine(args)
        with spark.engine.job_session_for(args) as session:
            return audit_corpus(args, files, sets, indexes, own_train, bloom, beam_args,
                                functools.partial(spark.audit.build_filter, session), functools.partial(spark.audit.scan_exact, session))
    return audit_corpus(args, files, sets, indexes, own_train, bloom, beam_args, build_filter, scan_exact)


def audit_corpus(args, files, sets, indexes, own_train, bloom, beam_args, build, scan) -> dict:
    """The audit after its inputs are checked, on the engine whose ``build`` (``build_filter``)
    and ``scan`` (``scan_exact``) it is given: the filter and the exact scan, then the reports."""
    config = ngram_config(args)
    evidence = exact = None
    begin_job(args.output, "audit", args.overwrite)
    result = {"files": len(files), "benchmarks": [s.name for s in sets], "config": config.to_dict(), "mode": args.mode}
    if args.mode in ("both", "bloom"):
        folder = args.filter or storage.join(args.output, "bloom")
        if not args.filter:
            log.info("building the Bloom filter (p=%g, %d part(s)) over %d shard(s)", args.error_rate, args.filter_parts, len(files))
            result["filter"] = build(files, config, args, folder, beam_args)
            bloom = load_filter(folder, config, files)
        evidence = bloom.evidence(args.fp_queries)
        result["fp_evidence"] = evidence
    if args.mode in ("both", "exact"):
        log.info("streaming %d shard(s) against the exact benchmark index", len(files))
        exact = scan(files, indexes, beam_args, args.output)
    rows = benchmark_rows(indexes, corpus_name=args.corpus_name, exact=exact, bloom=bloom, evidence=evidence,
                          own_train=own_train, max_doc_count=args.max_doc_count, dirty_threshold=args.dirty_threshold)
    result["reports"] = write_reports(rows, args.output, f"{args.n}-gram overlap of benchmarks with {args.corpus_name}")
    result["rows"] = rows
    built = result.get("filter", {}).get("kernels", {})  # the part builders', and this process's (the evidence, the rows)
    result["kernels"] = kernels_document({name: set(states if isinstance(states, list) else [states]) for name, states in built.items()})
    write_json(storage.join(args.output, "audit.json"), {k: v for k, v in result.items() if k != "rows"})
    written = ["audit.json", "report.json", "report.md", "report.html"]
    if args.mode in ("both", "bloom") and not args.filter:
        written += [f"bloom/{storage.basename(p)}" for p in storage.glob(storage.join(folder, "bloom-part-*-of-*.bin"))]
        written.append(f"bloom/{FILTER_MANIFEST}")
    storage.commit_output(args.output, "audit", extra_files=written)
    return result


def run_audit(argv: list[str]) -> dict:
    """``corpusforge audit ARGV``'s result, errors raised (the demo, benchmarks, tests)."""
    return run_job("audit", argv)


def format_audit(result: dict) -> str:
    lines = [f"{'benchmark':14} {'n-grams':>9} {'found %':>8} {'weighted %':>10} {'dirty':>7} {'of':>6} {'longest':>7}  agreement"]
    for row in result["rows"]:
        agree = row.get("agreement")
        agreement = (f"exact {agree['exact_found']} bloom {agree['bloom_found']} FN {agree['false_negatives']}" if agree else "-")
        lines.append(f"{row['name']:14} {row['unique_ngrams']:>9,} {row['percent_found']:>8.2f} {row['token_weighted_percent']:>10.2f} "
                     f"{row['dirty_examples']:>7,} {row['examples']:>6,} {row['longest_run']:>7}  {agreement}")
    ev = result.get("fp_evidence")
    if ev:
        lines.append(f"Bloom: {ev['bits']:,} bits, k={ev['k']}, fill {ev['fill_ratio']:.3f}, fill^k FP estimate {ev['estimated_fp_rate']:.2e}, "
                     f"empirical {ev['empirical_found']}/{ev['empirical_queries']:,} (95% upper {ev['empirical_upper_95']:.1e})")
    lines.append("reports: " + ", ".join(result["reports"].values()))
    return "\n".join(lines)


format_summary = format_audit


# --- decontamination -----------------------------------------------------------------------
def decontaminate_shards(args: argparse.Namespace) -> dict:
    """``corpusforge decontaminate``: the shards without the benchmarks' overlaps, in ``--output``."""
    beam_args = args.beam_args
    files = shard_files(args.corpus)
    indexes = build_indexes(load_benchmarks(args.benchmark), ngram_config(args))
    options = {"mode": args.mode, "margin": args.margin, "min_piece": args.min_piece, "max_splits": args.max_splits}
    removed_path = storage.join(args.output, REMOVED_FILE)
    by_split = files_by_split(files)
    rule = functools.partial(decontaminate, **options)
    if args.engine == "spark":
        spark = spark_engine(args)
        with spark.engine.job_session_for(args) as session:
            begin_job(args.output, "decontaminate", args.overwrite)
            counted = spark.audit.decontaminate(session, by_split, indexes, rule, args, beam_args)
    else:
        begin_job(args.output, "decontaminate", args.overwrite)
        counted = decontaminate_on_beam(by_split, indexes, rule, args, beam_args)
    stats = {"files": len(files), "splits": {split: len(f) for split, f in by_split.items()}, "benchmarks": sorted(indexes),
             "options": options, "counters": counted["counters"], "removed": removed_path,
             "units": counted["units"], "examples": counted["examples"], "kernels": counted["kernels"]}
    finish_job(args.output, "decontaminate", stats, extra_files=(REMOVED_FILE,))
    return stats


def decontaminate_on_beam(by_split: dict[str, list[str]], indexes, rule, args, beam_args) -> dict:
    """The decontamination's Beam run: every split's shards, ``_removed.jsonl``; its counters,
    units and examples (namespace ``DECONTAMINATE``)."""
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "decontaminate", sum(map(len, by_split.values()))) as p:
        run_step, removed = Steps(), []
        index_path, shared = stage_indexes(args.output, indexes), Shared()
        for split, split_files in by_split.items():  # every split keeps its own shard set
            matched = (p | f"Shards {split}" >> beam.Create(split_files) | f"Spread {split}" >> beam.Reshuffle()
                       | f"Match benchmarks {split}" >> beam.ParDo(WithIndexes(matched_documents, index_path, shared)))
            outcomes = run_step(matched, f"Decontaminate {split}", DECONTAMINATE, rule)
            (outcomes | f"Pieces {split}" >> beam.FlatMap(lambda outcome: outcome.pieces)
             | f"Write shards {split}" >> WriteShards(args.output, formats=args.format, name=args.name, split=split,
                                                      num_shards=args.num_shards))
            removed.append(outcomes | f"Removed {split}" >> beam.FlatMap(lambda outcome: [outcome.removed] if outcome.removed else []))
        (removed | "All removed" >> beam.Flatten() | "Collect removed" >> beam.combiners.ToList()
         | "Write removed" >> beam.Map(write_removed, storage.join(args.output, REMOVED_FILE)))
        run_step.write_examples(args.output)
    return {"counters": counters_of(p.result).get(DECONTAMINATE, {}), "units": units_of(p.result).get(DECONTAMINATE, {}),
            "examples": collect_examples(args.output).get(DECONTAMINATE, {}), "kernels": kernels_of(p.result)}


def run_decontaminate(argv: list[str]) -> dict:
    """``corpusforge decontaminate ARGV``'s stats, errors raised (the demo, benchmarks, tests)."""
    return run_job("decontaminate", argv)


def files_by_split(files: list[str]) -> dict[str, list[str]]:
    """Shard files grouped by the split in their names (``train`` for names without one)."""
    groups: dict[str, list[str]] = {}
    for path in files:
        groups.setdefault(shard_split(path) or "train", []).append(path)
    return dict(sorted(groups.items()))


def format_decontaminate(stats: dict) -> str:
    counts = Counter(stats["counters"])
    return (f"decontaminated against {', '.join(stats['benchmarks'])} ({stats['options']['mode']}): "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) + f"; what was removed: {stats['removed']}")


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["audit", *sys.argv[1:]]))
