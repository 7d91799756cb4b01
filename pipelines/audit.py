"""The train/test overlap audit (GPT-2 paper, section 4) and decontamination, as Beam jobs.

    corpusforge audit --corpus 'c4-out/c4-train.*.json.gz' --benchmark wikitext2:wiki.test.raw \
        ptb:ptb.test.txt lambada:lambada_test.jsonl --output audit/ [--mode both|bloom|exact] [--n 8]
    corpusforge decontaminate --corpus 'c4-out/*.parquet' --benchmark lambada:lambada_test.jsonl \
        --output clean/ [--mode spans|drop|mask] [--n 13]

Audit: (1) count the corpus's n-grams (capacity); (2) build a Bloom filter at p <= 1e-8,
partitioned by hash prefix, each part a GroupByKey of the n-gram hashes of its prefix;
(3) stream the corpus once against an exact index of every benchmark's n-grams (which
document, which span, how many documents per n-gram); (4) per benchmark: % of its
n-grams found (unique and token-weighted, GPT-2 Table 6), dirty/clean examples, longest
match, the filter's false-positive evidence, and whether the Bloom and exact paths agree;
written as JSON, Markdown and an HTML page with a bar chart.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from common import storage
from corpus.inputs import InputError
from corpus.records import Document
from corpus.shards import FORMATS, find_shards, one_format_per_shard, read_documents, shard_split
from pipelines import progress
from pipelines.options import add_overwrite_argument, non_negative_int, open_probability, positive_int, power_of_two, split_job_args, stage_setup_file, unit_fraction
from pipelines.jobs import begin_job, counters_of, finish_job, write_json
from pipelines.sources import WriteShards

log = logging.getLogger(__name__)

AUDIT = "audit"
DECONTAMINATE = "decontaminate"
MODES = ("both", "bloom", "exact")


# --- shared ------------------------------------------------------------------------------
def ngram_config(args):
    from dedup.ngrams import NgramConfig

    return NgramConfig(n=args.n, apostrophes=args.apostrophes, unicode=not args.ascii)


def load_benchmarks(specs: list[str]):
    from dedup.benchmark_sets import BenchmarkSpecError, load_benchmark

    sets = []
    for spec in specs:
        try:
            sets.append(load_benchmark(spec))
        except (BenchmarkSpecError, OSError, ValueError) as exc:
            raise InputError(f"--benchmark {spec}: {exc}") from exc
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise InputError(f"two benchmarks share a name: {names}")
    return sets


def build_indexes(sets, config) -> dict:
    from dedup.overlap import BenchmarkIndex

    return {s.name: BenchmarkIndex.build([(e.id, e.text) for e in s.examples], config, s.name) for s in sets}


def corpus_files(specs: list[str]) -> list[str]:
    """The shard files to read, each document once: when a shard is present in several
    formats (``c4-train.00000-of-00002.json.gz`` and ``.parquet``), one of them is read."""
    files = one_format_per_shard(find_shards(specs))
    if not files:
        raise InputError(f"no corpus shards found for {specs}")
    return files


def _doc_id(path: str, number: int, doc: Document) -> str:
    return doc.url or f"{os.path.basename(path)}#{number}"


# --- audit: the Bloom filter -------------------------------------------------------------
def _count_ngrams(path, config):
    from dedup.ngrams import ngram_hashes

    total = 0
    for doc in read_documents(path):
        total += len(ngram_hashes(doc.text, config))
    Metrics.counter(AUDIT, "documents").inc(0)
    progress.tally("files")
    return total


def _hashes_by_part(path, config, parts):
    from dedup.bloom import split_by_part
    from dedup.ngrams import ngram_hashes

    chunks, docs = [], 0
    for doc in read_documents(path):
        docs += 1
        chunks.append(ngram_hashes(doc.text, config))
    Metrics.counter(AUDIT, "documents").inc(docs)
    keys = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)
    Metrics.counter(AUDIT, "ngrams").inc(len(keys))
    progress.tally("files")
    for index, part_keys in enumerate(split_by_part(keys, parts)):
        yield index, part_keys


def _build_part(keyed, *, capacity, parts, error_rate, seed, meta, folder):
    from dedup.bloom import BloomFilter
    from dedup.partitioned import part_capacity, part_path

    index, arrays = keyed
    bloom = BloomFilter(part_capacity(capacity, parts), error_rate, seed, meta)
    for keys in arrays:
        if keys is not None and len(keys):
            bloom.add(keys)
    path = part_path(folder, index, parts)
    bloom.save(path)
    return path


def build_filter(files, config, args, folder, beam_args) -> dict:
    """Two Beam runs: count the corpus's n-grams (the capacity), then build every part."""
    from dedup.bloom import ngram_meta

    capacity = args.capacity
    if capacity is None:
        count_path = storage.staging_path(args.output, "capacity.json")
        with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: counting n-grams", len(files)) as p:
            (p | "Shards" >> beam.Create(files) | "Spread" >> beam.Reshuffle()
             | "Count n-grams" >> beam.Map(_count_ngrams, config)
             | "Sum" >> beam.CombineGlobally(sum)
             | "Write count" >> beam.Map(lambda n: write_json(count_path, {"ngrams": int(n)})))
        capacity = max(1, json.loads(storage.read_text(count_path))["ngrams"])
    parts, meta = args.filter_parts, ngram_meta(config)
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: building the Bloom filter", len(files)) as p:
        every = p | "Every part" >> beam.Create([(i, None) for i in range(parts)])
        keyed = (p | "Shard files" >> beam.Create(files) | "Spread files" >> beam.Reshuffle()
                 | "N-gram hashes by part" >> beam.FlatMap(_hashes_by_part, config, parts))
        ((keyed, every) | "Merge parts" >> beam.Flatten() | "Group by part" >> beam.GroupByKey()
         | "Build and save part" >> beam.Map(_build_part, capacity=capacity, parts=parts, error_rate=args.error_rate,
                                               seed=args.seed, meta=meta, folder=folder))
    return {"capacity": capacity, "parts": parts, "counters": counters_of(p.result)}


# --- audit: the exact stream ---------------------------------------------------------------
class _ScanShardFn(beam.DoFn):
    """A shard file -> (benchmark, OverlapCounter as a dict) for every benchmark."""

    def __init__(self, indexes: dict):
        self.indexes = indexes

    def process(self, path):
        from dedup.ngrams import ngram_hashes_batch
        from dedup.overlap import OverlapCounter

        counters = {name: OverlapCounter(index) for name, index in self.indexes.items()}
        docs = 0
        config = _shared_config(self.indexes)
        for batch in _batches(((_doc_id(path, number, doc), doc.text) for number, doc in enumerate(read_documents(path))),
                              SCAN_BATCH):
            docs += len(batch)
            hashed = ngram_hashes_batch([text for _, text in batch], config)  # once for every benchmark
            for counter in counters.values():
                counter.add_many(batch, hashed)
        Metrics.counter(AUDIT, "scanned_documents").inc(docs)
        progress.tally("files")
        for name, counter in counters.items():
            yield name, counter.to_dict()


SCAN_BATCH = 256  # documents hashed together: one numpy pass instead of a fixed cost per document


def _shared_config(indexes: dict):
    """The one n-gram config of the audit's indexes (they are built together, ``build_indexes``)."""
    configs = {index.config for index in indexes.values()}
    if len(configs) != 1:
        raise ValueError(f"the benchmark indexes disagree on their n-gram settings: {configs}")
    return configs.pop()


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _merge_counters(keyed, indexes):
    from dedup.overlap import OverlapCounter

    name, parts = keyed
    merged = OverlapCounter(indexes[name])
    for data in parts:
        merged.merge(OverlapCounter.from_dict(indexes[name], data))
    return name, merged.to_dict()


def scan_exact(files, indexes, beam_args, out_dir) -> dict:
    """One Beam run streaming the corpus against the exact benchmark indexes."""
    path = storage.staging_path(out_dir, "exact.json")
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "audit: exact scan", len(files)) as p:
        (p | "Shards" >> beam.Create(files) | "Spread" >> beam.Reshuffle()
         | "Scan against benchmarks" >> beam.ParDo(_ScanShardFn(indexes))
         | "Group by benchmark" >> beam.GroupByKey()
         | "Merge counters" >> beam.Map(_merge_counters, indexes)
         | "Collect" >> beam.combiners.ToDict()
         | "Write" >> beam.Map(lambda d: write_json(path, d)))
    return json.loads(storage.read_text(path))


# --- audit: reports --------------------------------------------------------------------------
def benchmark_rows(indexes, args, *, exact=None, bloom=None, evidence=None, own_train=None) -> list[dict]:
    """One report row per benchmark (the schema of dedup.report), Bloom and exact compared."""
    from dedup.overlap import OverlapCounter, compute_report

    rows = []
    for name, index in indexes.items():
        bloom_found = bloom.contains(index.hashes) if bloom is not None else None
        if exact is not None:
            counter = OverlapCounter.from_dict(index, exact[name])
            report = counter.report(max_doc_count=args.max_doc_count, dirty_threshold=args.dirty_threshold)
            exact_found = counter.doc_counts > 0
        else:
            report = compute_report(index, bloom_found, dirty_threshold=args.dirty_threshold)
            exact_found = None
        extra = {"corpus": args.corpus_name, "source": "exact" if exact is not None else "bloom"}
        if bloom_found is not None and exact_found is not None:
            extra["agreement"] = {
                "exact_found": int(exact_found.sum()), "bloom_found": int(bloom_found.sum()),
                "false_negatives": int((exact_found & ~bloom_found).sum()),  # must be 0
                "bloom_only": int((bloom_found & ~exact_found).sum()),  # Bloom false positives
            }
        if own_train and name in own_train:
            extra["own_train_percent"] = own_train[name]
        row = report.to_report_row(evidence or {}, **extra)
        row["dirty_ids"] = list(report.dirty_ids)
        # Localisation of every dirty example: the matched character spans in the example and
        # (exact mode) a few training documents that hold its n-grams.
        by_id = {e.id: e for e in report.examples}
        for example in row["per_example"]:
            if example["dirty"]:
                found = by_id[example["id"]]
                example["spans"] = [list(span) for span in found.spans]
                example["training_docs"] = list(found.training_docs)
        rows.append(row)
    return rows


def own_train_overlap(pairs: list[str], indexes, config) -> dict[str, float]:
    """``NAME=SPEC``: % of benchmark NAME's n-grams found in its own training split (exact)."""
    from dedup.overlap import OverlapCounter

    result = {}
    for pair in pairs or []:
        name, _, spec = pair.partition("=")
        if name not in indexes or not spec:
            raise InputError(f"--own_train {pair}: expected NAME=SPEC with NAME one of {sorted(indexes)}")
        train = load_benchmarks([spec])[0]
        counter = OverlapCounter(indexes[name])
        for example in train.examples:
            counter.add(example.id, example.text)
        result[name] = counter.report().percent_found
    return result


def write_reports(rows, out_dir: str, title: str) -> dict[str, str]:
    from dedup.report import render_html, render_json, render_markdown

    paths = {"json": storage.join(out_dir, "report.json"), "markdown": storage.join(out_dir, "report.md"),
             "html": storage.join(out_dir, "report.html")}
    render_json(rows, paths["json"])
    storage.write_atomically(paths["markdown"], render_markdown(rows, title=title))
    render_html(rows, paths["html"], title=title)
    return paths


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", nargs="+", required=True, help="training shards: files, globs or folders (.json.gz, .jsonl, .parquet)")
    parser.add_argument("--benchmark", nargs="+", action="extend", required=True, help="KIND:PATH[:OPTION], e.g. wikitext2:wiki.test.raw lambada:lambada_test.jsonl jsonl:file.jsonl:text")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--n", type=positive_int, default=8, help="words per n-gram (GPT-2: 8; GPT-3 / harness: 13)")
    parser.add_argument("--apostrophes", choices=("split", "join"), default="split", help="don't -> 'don t' (split, default) or 'dont'")
    parser.add_argument("--ascii", action="store_true", help="only ASCII letters and digits are word characters")


def run_audit(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="corpusforge audit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--mode", choices=MODES, default="both", help="bloom filter, exact index, or both compared (default)")
    parser.add_argument("--error_rate", type=open_probability, default=1e-8, help="Bloom false-positive rate (GPT-2: <= 1e-8)")
    parser.add_argument("--capacity", type=positive_int, default=None, help="n-grams the filter is sized for (default: counted)")
    parser.add_argument("--filter_parts", type=power_of_two, default=1, help="Bloom parts by hash prefix, built in parallel (a power of two)")
    parser.add_argument("--filter", default=None, help="reuse the filter parts in this folder instead of building them")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="Bloom hash seed")
    parser.add_argument("--fp_queries", type=non_negative_int, default=1_000_000, help="random never-added keys queried for the empirical FP rate (paper: 1M)")
    parser.add_argument("--dirty_threshold", type=unit_fraction, default=0.0, help="an example is dirty when this share of its n-grams is found (0: any)")
    parser.add_argument("--max_doc_count", type=positive_int, default=None, help="ignore n-grams found in more training documents (GPT-3: 10)")
    parser.add_argument("--own_train", nargs="*", default=[], metavar="NAME=SPEC", help="a benchmark's own training split, for Table 6's first row")
    parser.add_argument("--corpus_name", default="training corpus", help="the corpus's name in the reports")
    args, beam_args = split_job_args(parser, argv)
    from dedup.partitioned import PartitionedBloom

    files = corpus_files(args.corpus)
    sets = load_benchmarks(args.benchmark)
    config = ngram_config(args)
    indexes = build_indexes(sets, config)
    own_train = own_train_overlap(args.own_train, indexes, config)
    storage.configure(beam_args)
    begin_job(args.output, "audit", args.overwrite)
    result = {"files": len(files), "benchmarks": [s.name for s in sets], "config": config.to_dict(), "mode": args.mode}
    bloom = evidence = exact = None
    if args.mode in ("both", "bloom"):
        folder = args.filter or storage.join(args.output, "bloom")
        if not args.filter:
            log.info("building the Bloom filter (p=%g, %d part(s)) over %d shard(s)", args.error_rate, args.filter_parts, len(files))
            result["filter"] = build_filter(files, config, args, folder, beam_args)
        bloom = PartitionedBloom.load(folder)
        evidence = bloom.evidence(args.fp_queries)
        result["fp_evidence"] = evidence
    if args.mode in ("both", "exact"):
        log.info("streaming %d shard(s) against the exact benchmark index", len(files))
        exact = scan_exact(files, indexes, beam_args, args.output)
    rows = benchmark_rows(indexes, args, exact=exact, bloom=bloom, evidence=evidence, own_train=own_train)
    result["reports"] = write_reports(rows, args.output, f"{args.n}-gram overlap of benchmarks with {args.corpus_name}")
    result["rows"] = rows
    write_json(storage.join(args.output, "audit.json"), {k: v for k, v in result.items() if k != "rows"})
    written = ["audit.json", "report.json", "report.md", "report.html"]
    if args.mode in ("both", "bloom") and not args.filter:
        written += [f"bloom/{storage.basename(p)}" for p in storage.glob(storage.join(folder, "bloom-part-*-of-*.bin"))]
    storage.commit_output(args.output, "audit", extra_files=written)
    return result


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


# --- decontamination -----------------------------------------------------------------------
class _DecontaminateFn(beam.DoFn):
    """A shard file -> the decontaminated documents (pieces in spans mode), counted by reason."""

    def __init__(self, indexes: dict, options: dict):
        self.indexes, self.options = indexes, options

    def process(self, path):
        from dedup.decontaminate import decontaminate_document
        from dedup.ngrams import ngram_hashes_batch

        for batch in _batches(((_doc_id(path, number, doc), doc) for number, doc in enumerate(read_documents(path))),
                              SCAN_BATCH):
            texts = [(doc_id, doc.text) for doc_id, doc in batch]
            hashed = ngram_hashes_batch([text for _, text in texts], _shared_config(self.indexes))
            scanned = {name: index.scan_many(texts, hashed) for name, index in self.indexes.items()}
            for i, (doc_id, doc) in enumerate(batch):
                yield from self._decontaminate(doc, [(name, hits[i]) for name, hits in scanned.items()], decontaminate_document)
        progress.tally("files")

    def _decontaminate(self, doc, hits_by_benchmark, decontaminate_document):
        spans, benchmarks = [], []
        for name, hits in hits_by_benchmark:
            if hits:
                spans += list(hits.spans)
                benchmarks.append(name)
        result = decontaminate_document(doc.text, spans, **self.options)
        Metrics.counter(DECONTAMINATE, result.reason).inc()
        Metrics.counter(DECONTAMINATE, "removed_chars").inc(result.removed_chars)
        if benchmarks:
            yield beam.pvalue.TaggedOutput("removed", {"url": doc.url, "benchmarks": benchmarks, "reason": result.reason,
                                                       "removed_chars": result.removed_chars, "spans": len(spans)})
        for piece_number, text in enumerate(result.pieces or []):
            meta = dict(doc.meta)
            if result.reason == "split":
                meta["piece"] = str(piece_number)
            yield Document(text=text, url=doc.url, timestamp=doc.timestamp, meta=meta)


def run_decontaminate(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="corpusforge decontaminate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(parser)
    parser.add_argument("--mode", choices=("spans", "drop", "mask"), default="spans", help="GPT-3 spans (default), drop documents, or mask matches")
    parser.add_argument("--margin", type=non_negative_int, default=200, help="characters removed either side of a match (GPT-3: 200)")
    parser.add_argument("--min_piece", type=non_negative_int, default=200, help="drop pieces shorter than this (GPT-3: 200)")
    parser.add_argument("--max_splits", type=positive_int, default=10, help="drop documents split into more pieces (GPT-3: 10)")
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=["parquet"], help="output shard formats")
    parser.add_argument("--num_shards", type=positive_int, default=1, help="output shards")
    parser.add_argument("--name", default="decontaminated", help="output shard name")
    args, beam_args = split_job_args(parser, argv)
    files = corpus_files(args.corpus)
    indexes = build_indexes(load_benchmarks(args.benchmark), ngram_config(args))
    options = {"mode": args.mode, "margin": args.margin, "min_piece": args.min_piece, "max_splits": args.max_splits}
    removed_path = storage.join(args.output, "removed.jsonl")
    storage.configure(beam_args)
    begin_job(args.output, "decontaminate", args.overwrite)
    by_split = files_by_split(files)
    with progress.pipeline(PipelineOptions(stage_setup_file(beam_args)), "decontaminate", len(files)) as p:
        removed = []
        for split, split_files in by_split.items():  # every split keeps its own shard set
            out = (p | f"Shards {split}" >> beam.Create(split_files) | f"Spread {split}" >> beam.Reshuffle()
                   | f"Decontaminate {split}" >> beam.ParDo(_DecontaminateFn(indexes, options)).with_outputs("removed", main="docs"))
            out.docs | f"Write shards {split}" >> WriteShards(args.output, formats=args.format, name=args.name, split=split,
                                                             num_shards=args.num_shards)
            removed.append(out.removed)
        (removed | "All removed" >> beam.Flatten() | "Collect removed" >> beam.combiners.ToList()
         | "Write removed" >> beam.Map(_write_removed, removed_path))
    counters = counters_of(p.result).get(DECONTAMINATE, {})
    stats = {"files": len(files), "splits": {split: len(f) for split, f in by_split.items()}, "benchmarks": sorted(indexes),
             "options": options, "counters": counters, "removed": removed_path}
    finish_job(args.output, "decontaminate", stats, extra_files=("removed.jsonl",))
    return stats


def files_by_split(files: list[str]) -> dict[str, list[str]]:
    """Shard files grouped by the split in their names (``train`` for names without one)."""
    groups: dict[str, list[str]] = {}
    for path in files:
        groups.setdefault(shard_split(path) or "train", []).append(path)
    return dict(sorted(groups.items()))


def _write_removed(rows, path):
    rows = sorted(rows, key=lambda r: (r["url"], r["reason"]))
    storage.write_atomically(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def format_decontaminate(stats: dict) -> str:
    counts = Counter(stats["counters"])
    return (f"decontaminated against {', '.join(stats['benchmarks'])} ({stats['options']['mode']}): "
            + ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) + f"; what was removed: {stats['removed']}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    print(format_audit(run_audit()))
