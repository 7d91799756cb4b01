"""Contamination built into evaluation: every benchmark example marked clean or dirty by
n-gram overlap with the training corpus, and every metric reported on all, clean and
dirty examples with counts and bootstrap confidence intervals.

Marking (``mark_benchmarks`` / ``mark_examples``) runs the audit's one core
(``dedup.audit``: the indexes, the scan and the reports of ``corpusforge audit``), so an
example is dirty here exactly when the audit calls it dirty; nothing here cuts text into
n-grams. The training corpus is given as one of

- a Bloom filter: a ``CFBLOOM`` file (``dedup.bloom``) or a folder of
  ``bloom-part-*.bin`` parts (``dedup.partitioned``), e.g. ``<audit>/bloom``. Its stored
  n-gram settings must equal the ones asked for. The report carries the filter's
  false-positive evidence (fill-ratio estimate ``fill^k`` and an empirical count over
  random never-added keys, as the audit does).
- training shards (files, globs or folders that ``corpus.shards`` reads): every document
  is streamed once against one exact index of every benchmark's n-grams
  (``dedup.overlap.BenchmarkIndex`` / ``OverlapCounter``); no false positives beyond
  64-bit hash collisions, and a few matching training documents per dirty example.
- an audit output folder (``corpusforge audit --output DIR``): its per-example overlap
  (``report.json``) is reused when the benchmark matches (same name, n-gram settings,
  example ids and per-example n-gram counts); otherwise its Bloom filter (``DIR/bloom``)
  is queried.

Per example: ``fraction`` = found n-gram positions / n-gram positions, ``dirty`` when at
least one is found and ``fraction >= threshold`` (the audit's rule, ``dedup.overlap``;
threshold 0 = any overlap, GPT-2's LAMBADA study and GPT-3 Table C.1), and the longest
run of consecutive found positions. An example of ``1 <= k < n`` words has one whole-text
key (``dedup.ngrams``), so it is dirty only if some training text is exactly those ``k``
words; an example without words is never dirty.

Aggregation (``summarize_benchmark``): for each metric (``model.eval.metrics.compute_metric``)
its value on all / clean / dirty examples, the counts, a percentile bootstrap interval
(resample the examples of the subset with replacement, recompute the metric from the
resampled sums; Efron & Tibshirani 1993), the GPT-3 Table C.1 relative difference
``(clean - all) / all`` in percent, and the metric per overlap-fraction bucket.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from tqdm import tqdm

from common import storage
from common.errors import InputError
from corpus.shards import find_shards, read_documents
from dedup.audit import bloom_report, build_indexes, exact_report, scan_documents
from dedup.bloom import MAGIC, BloomFileError, BloomFilter
from dedup.ngrams import HASH_ID, NgramConfig
from dedup.partitioned import PartitionedBloom
from dedup.report import load_json
from model.eval.metrics import LN2, ExampleScore, compute_metric

log = logging.getLogger(__name__)

DEFAULT_N = 8  # GPT-2 section 4: 8-grams (GPT-3 appendix C / lm-evaluation-harness: 13)
DEFAULT_THRESHOLD = 0.0  # dirty with any overlap (GPT-2 LAMBADA study, GPT-3 Table C.1)
DEFAULT_RESAMPLES = 1000  # bootstrap resamples
DEFAULT_CONFIDENCE = 0.95
DEFAULT_FP_QUERIES = 1_000_000  # GPT-2 section 4 checked its filters with 1M generated strings
# Overlap-fraction buckets: (label, low, high) meaning low < fraction <= high; the first is fraction == 0.
BUCKETS = (("0", -1.0, 0.0), ("(0, 0.25]", 0.0, 0.25), ("(0.25, 0.5]", 0.25, 0.5),
           ("(0.5, 0.75]", 0.5, 0.75), ("(0.75, 1]", 0.75, 1.0))
_BOOTSTRAP_CHUNK = 1 << 22  # resampled example indices drawn at once (32 MiB of int64)


class ContaminationError(InputError):
    """A training source that cannot be used: missing, unknown, or built with other n-gram settings."""


# ----------------------------------------------------------------------------- marks

@dataclass
class ExampleMark:
    id: str
    words: int
    ngrams: int  # n-gram positions (1 for a shorter-than-n example with words, 0 without)
    found: int  # positions whose n-gram is in the training corpus
    fraction: float  # found / ngrams (0 when ngrams == 0)
    dirty: bool
    longest_run: int  # most consecutive found positions
    longest_run_words: int  # words covered by that run (run + n - 1, capped at the example's words)
    spans: list[tuple[int, int]] = field(default_factory=list)  # matched character spans in the example text
    training_docs: list[str] = field(default_factory=list)  # a few training documents holding them (exact only)


@dataclass
class ContaminationMarks:
    """The clean/dirty marking of one benchmark against one training corpus."""

    benchmark: str
    source_kind: str  # "exact", "bloom" or "audit"
    source: str  # the path (or a description) of the training corpus
    config: dict  # dedup.ngrams.NgramConfig settings
    threshold: float
    percent_found: float  # % of the benchmark's unique n-grams found (GPT-2 Table 6)
    examples: list[ExampleMark]
    fp_evidence: dict = field(default_factory=dict)  # Bloom sources only
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.config["n"])

    @property
    def dirty_ids(self) -> list[str]:
        return [e.id for e in self.examples if e.dirty]

    @property
    def dirty_count(self) -> int:
        return sum(1 for e in self.examples if e.dirty)

    def by_id(self) -> dict[str, ExampleMark]:
        return {e.id: e for e in self.examples}

    def to_dict(self, per_example: bool = True) -> dict:
        data = asdict(self)
        data["n"] = self.n
        data["examples_marked"] = len(self.examples)
        data["dirty_examples"] = self.dirty_count
        data["dirty_ids"] = self.dirty_ids
        if per_example:
            for example in data["examples"]:
                example["spans"] = [list(span) for span in example["spans"]]
        else:
            del data["examples"]
        return data


def ngram_config(n: int = DEFAULT_N, apostrophes: str = "split", unicode: bool = True):
    return NgramConfig(n=n, apostrophes=apostrophes, unicode=unicode)


def _marks_from_report(report, *, kind: str, source: str, threshold: float, fp_evidence=None,
                       notes=None) -> ContaminationMarks:
    examples = [ExampleMark(e.id, e.words, e.ngrams, e.found, e.fraction, e.dirty, e.longest_run,
                            e.longest_run_words, list(e.spans), list(e.training_docs)) for e in report.examples]
    return ContaminationMarks(report.benchmark, kind, source, dict(report.config), threshold, report.percent_found,
                              examples, dict(fp_evidence or {}), list(notes or []))


# ----------------------------------------------------------------------------- sources

@dataclass
class TrainingSource:
    """A resolved ``--training`` argument: what kind of thing it is and how to query it."""

    kind: str  # "exact" (shards), "bloom" or "audit"
    path: str
    files: list[str] = field(default_factory=list)  # shards
    bloom: object = None  # a PartitionedBloom (one part for a single filter file)
    audit_rows: dict = field(default_factory=dict)  # audit: benchmark name -> report row
    audit_config: dict | None = None
    audit_bloom_path: str | None = None


def _is_bloom_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _has_bloom_parts(folder: str) -> bool:
    return bool(glob.glob(os.path.join(folder, "bloom-part-*-of-*.bin")))


def _load_bloom(path: str):
    try:
        if os.path.isdir(path):
            return PartitionedBloom.load(path)
        return PartitionedBloom([BloomFilter.load(path)])
    except (BloomFileError, ValueError, OSError) as exc:
        raise ContaminationError(f"--training {path}: cannot open the Bloom filter: {exc}") from exc


def _read_audit(folder: str) -> tuple[dict, dict | None]:
    """(benchmark name -> report row, the audit's n-gram config) of an audit output folder."""
    rows = {}
    report = os.path.join(folder, "report.json")
    if os.path.isfile(report):
        try:
            rows = {row["name"]: row for row in load_json(report)}
        except (ValueError, KeyError, OSError) as exc:
            raise ContaminationError(f"--training {folder}: unreadable audit report {report}: {exc}") from exc
    config = None
    summary = os.path.join(folder, "audit.json")
    if os.path.isfile(summary):
        try:
            with open(summary, encoding="utf-8") as f:
                config = json.load(f).get("config")
        except (ValueError, OSError) as exc:
            raise ContaminationError(f"--training {folder}: unreadable {summary}: {exc}") from exc
    return rows, config


def open_source(source) -> TrainingSource:
    """Resolve a training corpus: a Bloom file/folder, an audit folder, or shards (a path,
    glob or list of them). A ``BloomFilter``/``PartitionedBloom`` object is taken as is."""
    if isinstance(source, BloomFilter):
        return TrainingSource("bloom", repr(source), bloom=PartitionedBloom([source]))
    if isinstance(source, PartitionedBloom):
        return TrainingSource("bloom", f"{source.parts}-part Bloom filter", bloom=source)
    if isinstance(source, (list, tuple)):
        paths = [os.fspath(p) for p in source]
        label = ", ".join(paths)
    else:
        paths = [os.fspath(source)]
        label = paths[0]
    if len(paths) == 1 and not glob.has_magic(paths[0]):
        path = paths[0]
        if not storage.is_local(path) and (storage.is_file(path) or storage.glob(storage.join(path, "bloom-part-*-of-*.bin"))
                                           or any(storage.is_file(storage.join(path, n)) for n in ("audit.json", "report.json"))):
            path = storage.local_copy(path)  # a Bloom filter or an audit on an object store; shards are streamed from it
        if storage.is_local(path) and not os.path.exists(path):
            raise ContaminationError(f"--training {path}: no such file or folder")
        if os.path.isfile(path) and _is_bloom_file(path):
            return TrainingSource("bloom", path, bloom=_load_bloom(path))
        if os.path.isdir(path):
            if os.path.isfile(os.path.join(path, "audit.json")) or os.path.isfile(os.path.join(path, "report.json")):
                rows, config = _read_audit(path)
                bloom_dir = os.path.join(path, "bloom")
                return TrainingSource("audit", path, audit_rows=rows, audit_config=config,
                                      audit_bloom_path=bloom_dir if _has_bloom_parts(bloom_dir) else None)
            if _has_bloom_parts(path):
                return TrainingSource("bloom", path, bloom=_load_bloom(path))
    try:
        files = find_shards(paths)
    except (FileNotFoundError, ValueError) as exc:
        raise ContaminationError(f"--training {label}: {exc}") from exc
    if not files:
        raise ContaminationError(f"--training {label}: no training shards, Bloom filter or audit report there")
    return TrainingSource("exact", label, files=files)


def _check_bloom_config(bloom, config, where: str) -> None:
    meta = bloom.filters[0].meta
    stored = meta.get("ngram_config")
    if stored is None:
        log.warning("%s: the Bloom filter stores no n-gram settings; assuming %s", where, config.to_dict())
        return
    if meta.get("hash_id") not in (None, HASH_ID):
        raise ContaminationError(f"{where}: the Bloom filter uses hash scheme {meta['hash_id']!r}, this code {HASH_ID!r}")
    if dict(stored) != config.to_dict():
        raise ContaminationError(f"{where}: mismatched n-gram settings: the Bloom filter holds {stored}, "
                                 f"the evaluation asks for {config.to_dict()} (pass --ngram {stored.get('n')})")


def _audit_marks(bench, index, source: TrainingSource, config, threshold: float) -> ContaminationMarks | None:
    """Marks from an audit's report row when it is about this very benchmark, else None."""
    row = source.audit_rows.get(bench.name)
    if row is None or "per_example" not in row:
        return None
    if int(row.get("n", config.n)) != config.n:
        raise ContaminationError(f"--training {source.path}: mismatched n-gram settings: the audit used "
                                 f"n={row['n']}, the evaluation asks for n={config.n}")
    per_example = row["per_example"]
    counts = np.diff(index.pos_indptr)
    if [r["id"] for r in per_example] != list(index.example_ids) or \
            [int(r["ngrams"]) for r in per_example] != counts.tolist():
        log.warning("%s: the audit's %s rows are about another version of the benchmark (ids or n-gram counts "
                    "differ); not reused", source.path, bench.name)
        return None
    n = config.n
    examples = []
    for e, r in enumerate(per_example):
        found, fraction, run = int(r["found"]), float(r["fraction"]), int(r["longest_run"])
        words = int(index.word_counts[e])
        examples.append(ExampleMark(
            r["id"], words, int(r["ngrams"]), found, fraction, found > 0 and fraction >= threshold, run,
            0 if run == 0 else min(run + n - 1, words), [tuple(s) for s in r.get("spans", [])],
            list(r.get("training_docs", []))))
    kind = row.get("source", "exact")
    return ContaminationMarks(bench.name, "audit", source.path, config.to_dict(), threshold,
                              float(row["percent_found"]), examples, dict(row.get("fp_evidence") or {}),
                              [f"per-example overlap reused from the audit in {source.path} ({kind} path)"])


def mark_benchmarks(benches: Sequence, source, *, n: int = DEFAULT_N, threshold: float = DEFAULT_THRESHOLD,
                    apostrophes: str = "split", unicode: bool = True, max_doc_count: int | None = None,
                    fp_queries: int = DEFAULT_FP_QUERIES, progress: bool = True) -> dict[str, ContaminationMarks]:
    """Mark every example of every benchmark (``dedup.benchmark_sets.BenchmarkSet``) clean or
    dirty against ``source`` (see the module docstring). Shards are read once for all
    benchmarks. ``max_doc_count`` (GPT-3: 10) needs the exact path."""
    if not 0.0 <= threshold <= 1.0:
        raise ContaminationError(f"threshold must be in [0, 1], got {threshold}")
    config = ngram_config(n, apostrophes, unicode)
    names = [b.name for b in benches]
    if len(set(names)) != len(names):
        raise ContaminationError(f"two benchmarks share a name: {names}")
    src = source if isinstance(source, TrainingSource) else open_source(source)
    if src.bloom is not None:  # refuse other n-gram settings before any hashing
        _check_bloom_config(src.bloom, config, f"--training {src.path}")
    if src.kind == "audit" and src.audit_config is not None and dict(src.audit_config) != config.to_dict():
        raise ContaminationError(f"--training {src.path}: mismatched n-gram settings: the audit used "
                                 f"{src.audit_config}, the evaluation asks for {config.to_dict()} "
                                 f"(pass --ngram {src.audit_config.get('n')})")
    indexes = build_indexes(benches, config)
    marks: dict[str, ContaminationMarks] = {}
    pending = list(benches)
    if src.kind == "audit":
        pending = []
        for bench in benches:
            reused = _audit_marks(bench, indexes[bench.name], src, config, threshold)
            if reused is not None:
                marks[bench.name] = reused
            else:
                pending.append(bench)
        if pending and src.bloom is None:
            if src.audit_bloom_path is None:
                raise ContaminationError(
                    f"--training {src.path}: the audit has no usable rows for {', '.join(b.name for b in pending)} "
                    "and kept no Bloom filter; rerun the audit with these benchmarks or pass the training shards")
            src.bloom = _load_bloom(src.audit_bloom_path)
    if not pending:
        return {name: marks[name] for name in names}
    if src.bloom is not None:
        where = f"--training {src.audit_bloom_path or src.path}"
        _check_bloom_config(src.bloom, config, where)
        if max_doc_count is not None:
            raise ContaminationError("max_doc_count needs per-n-gram training document counts: pass training shards")
        evidence = src.bloom.evidence(fp_queries) if fp_queries > 0 else {
            "estimated_fp_rate": src.bloom.estimated_fp_rate()}
        kind = "bloom"
        for bench in pending:
            index = indexes[bench.name]
            report = bloom_report(index, src.bloom, dirty_threshold=threshold)
            notes = [f"Bloom filter {src.audit_bloom_path or src.path}: "
                     f"fill^k false-positive estimate {evidence['estimated_fp_rate']:.2e}"]
            marks[bench.name] = _marks_from_report(report, kind=kind, source=src.audit_bloom_path or src.path,
                                                   threshold=threshold, fp_evidence=evidence, notes=notes)
    else:
        docs = tqdm(read_documents(src.files), desc="contamination (exact)", unit="doc", disable=not progress)
        counters = scan_documents({b.name: indexes[b.name] for b in pending},
                                  ((doc.url or f"doc-{number}", doc.text) for number, doc in enumerate(docs)))
        for bench in pending:
            counter = counters[bench.name]
            report = exact_report(counter, max_doc_count=max_doc_count, dirty_threshold=threshold)
            notes = [f"exact index streamed over {counter.docs_scanned:,} training documents in {len(src.files)} shard(s)"]
            if max_doc_count is not None:
                notes.append(f"n-grams found in more than {max_doc_count} training documents ignored "
                             f"({report.ignored_frequent} of them)")
            marks[bench.name] = _marks_from_report(report, kind="exact", source=src.path, threshold=threshold,
                                                   notes=notes)
    return {name: marks[name] for name in names}


def mark_examples(bench, source, *, n: int = DEFAULT_N, threshold: float = DEFAULT_THRESHOLD,
                  **options) -> ContaminationMarks:
    """``mark_benchmarks([bench], source, ...)`` for one benchmark."""
    return mark_benchmarks([bench], source, n=n, threshold=threshold, **options)[bench.name]


# ----------------------------------------------------------------------------- aggregation

_FIELDS = ("nll", "tokens", "words", "bytes", "chars")
_DENOMINATORS = {"token_ppl": "tokens", "word_ppl": "words", "bpb": "bytes", "bpc": "chars"}


def _is_vectorised(metric: str) -> bool:
    return metric in _DENOMINATORS or metric in ("lastword_ppl", "mean_nll") or metric.startswith("acc:")


def _columns(scores: Sequence[ExampleScore], metrics: Sequence[str]) -> dict[str, np.ndarray]:
    columns = {name: np.array([getattr(s, name) for s in scores], dtype=np.float64) for name in _FIELDS}
    for metric in metrics:
        if metric.startswith("acc:"):
            protocol = metric[4:]
            columns[f"has:{protocol}"] = np.array([protocol in s.correct for s in scores], dtype=np.float64)
            columns[f"ok:{protocol}"] = np.array([bool(s.correct.get(protocol, False)) for s in scores], dtype=np.float64)
    return columns


def metric_from_sums(metric: str, sums: Mapping[str, np.ndarray], count: np.ndarray | int) -> np.ndarray:
    """``compute_metric`` from per-set sums (arrays: one value per resample), vectorised:
    the same formulas as ``model.eval.metrics`` (NaN where the denominator is 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        count = np.asarray(count, dtype=np.float64)
        nll = sums["nll"]
        if metric.startswith("acc:"):
            protocol = metric[4:]
            has = sums[f"has:{protocol}"]
            return np.where(has > 0, sums[f"ok:{protocol}"] / np.where(has > 0, has, 1), np.nan)
        if metric in _DENOMINATORS:
            total = sums[_DENOMINATORS[metric]]
            ratio = np.where(total > 0, nll / np.where(total > 0, total, 1), np.nan)
            return np.exp(ratio) if metric.endswith("ppl") else ratio / LN2
        if metric == "lastword_ppl":
            return np.where(count > 0, np.exp(nll / np.where(count > 0, count, 1)), np.nan)
        if metric == "mean_nll":
            return np.where(count > 0, nll / np.where(count > 0, count, 1), np.nan)
    raise ValueError(f"unknown metric {metric!r}")


def bootstrap_replicates(scores: Sequence[ExampleScore], metrics: Sequence[str], *,
                         resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, np.ndarray]:
    """Per metric, its value on ``resamples`` resamples (with replacement, same size) of
    ``scores``; the same resampled index sets serve every metric (seeded, deterministic)."""
    m = len(scores)
    if m == 0 or resamples <= 0:
        return {metric: np.zeros(0) for metric in metrics}
    rng = np.random.default_rng(seed)
    columns = _columns(scores, metrics)
    out = {metric: np.empty(resamples) for metric in metrics}
    step = max(1, _BOOTSTRAP_CHUNK // m)
    fallback = [metric for metric in metrics if not _is_vectorised(metric)]
    for start in range(0, resamples, step):
        stop = min(resamples, start + step)
        idx = rng.integers(0, m, size=(stop - start, m))
        sums = {name: column[idx].sum(axis=1) for name, column in columns.items()}
        for metric in metrics:
            if metric in fallback:
                out[metric][start:stop] = [compute_metric([scores[i] for i in row], metric) for row in idx]
            else:
                out[metric][start:stop] = metric_from_sums(metric, sums, m)
    return out


def percentile_interval(replicates: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The percentile bootstrap interval; NaN when there are no finite replicates."""
    finite = np.asarray(replicates, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_ci(scores: Sequence[ExampleScore], metric: str, *, resamples: int = DEFAULT_RESAMPLES,
                 confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """The seeded percentile bootstrap ``confidence`` interval of ``metric`` over ``scores``."""
    return percentile_interval(bootstrap_replicates(scores, [metric], resamples=resamples, seed=seed)[metric],
                               confidence)


@dataclass
class SubsetValue:
    count: int
    value: float
    ci_low: float
    ci_high: float


@dataclass
class MetricSplit:
    metric: str
    all: SubsetValue
    clean: SubsetValue | None  # None when there is no training corpus to mark against
    dirty: SubsetValue | None
    relative_difference: float | None  # GPT-3 Table C.1: 100 * (clean - all) / all
    buckets: list[dict] = field(default_factory=list)  # {"bucket", "count", "value", "ci_low", "ci_high"}


@dataclass
class BenchmarkSummary:
    name: str
    metrics: list[str]
    examples: int
    results: list[MetricSplit]
    marks: ContaminationMarks | None
    resamples: int
    confidence: float
    seed: int

    def result(self, metric: str) -> MetricSplit:
        return next(r for r in self.results if r.metric == metric)

    def to_dict(self) -> dict:
        return {"name": self.name, "metrics": list(self.metrics), "examples": self.examples,
                "resamples": self.resamples, "confidence": self.confidence, "seed": self.seed,
                "results": [asdict(r) for r in self.results],
                "contamination": None if self.marks is None else self.marks.to_dict(per_example=False)}


def _subset_seed(seed: int, benchmark: str, subset: str) -> list[int]:
    """The bootstrap seed of one subset: the same for every subset of a benchmark, so a
    subset holding the same examples as another (clean == all) gets the same interval."""
    del subset
    return [int(seed), zlib.crc32(benchmark.encode("utf-8"))]


def _subset_values(scores: Sequence[ExampleScore], metrics: Sequence[str], *, resamples: int, confidence: float,
                   seed) -> dict[str, SubsetValue]:
    replicates = bootstrap_replicates(scores, metrics, resamples=resamples, seed=seed)
    out = {}
    for metric in metrics:
        low, high = percentile_interval(replicates[metric], confidence)
        out[metric] = SubsetValue(len(scores), compute_metric(scores, metric), low, high)
    return out


def bucket_of(fraction: float) -> str:
    for label, low, high in BUCKETS:
        if low < fraction <= high:
            return label
    raise ValueError(f"overlap fraction {fraction} is outside [0, 1]")


def summarize_benchmark(name: str, scores: Sequence[ExampleScore], metrics: Sequence[str],
                        marks: ContaminationMarks | None = None, *, resamples: int = DEFAULT_RESAMPLES,
                        confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> BenchmarkSummary:
    """Every metric on all / clean / dirty examples (counts, bootstrap CIs, clean-vs-all
    relative difference) and per overlap bucket. Scores are joined to marks by example id;
    a scored example without a mark is an error."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    scores = list(scores)
    options = {"resamples": resamples, "confidence": confidence}
    every = _subset_values(scores, metrics, seed=_subset_seed(seed, name, "all"), **options)
    splits = {metric: MetricSplit(metric, every[metric], None, None, None) for metric in metrics}
    if marks is not None:
        by_id = marks.by_id()
        missing = [s.id for s in scores if s.id not in by_id]
        if missing:
            raise ContaminationError(f"{name}: {len(missing)} scored example(s) have no contamination mark "
                                     f"(first: {missing[0]!r}); the marking is about another benchmark")
        clean = [s for s in scores if not by_id[s.id].dirty]
        dirty = [s for s in scores if by_id[s.id].dirty]
        clean_values = _subset_values(clean, metrics, seed=_subset_seed(seed, name, "clean"), **options)
        dirty_values = _subset_values(dirty, metrics, seed=_subset_seed(seed, name, "dirty"), **options)
        grouped: dict[str, list[ExampleScore]] = {label: [] for label, _, _ in BUCKETS}
        for s in scores:
            grouped[bucket_of(by_id[s.id].fraction)].append(s)
        bucket_values = {label: _subset_values(group, metrics, seed=_subset_seed(seed, name, label), **options)
                         for label, group in grouped.items()}
        for metric, split in splits.items():
            split.clean, split.dirty = clean_values[metric], dirty_values[metric]
            a, c = split.all.value, split.clean.value
            split.relative_difference = 100.0 * (c - a) / a if math.isfinite(a) and math.isfinite(c) and a else None
            split.buckets = [{"bucket": label, **asdict(bucket_values[label][metric])} for label, _, _ in BUCKETS]
    return BenchmarkSummary(name, list(metrics), len(scores), list(splits.values()), marks, resamples, confidence, seed)


def per_example_rows(scores: Iterable[ExampleScore], marks: ContaminationMarks | None) -> list[dict]:
    """One JSON-ready row per scored example: its score record and, when marked, its overlap."""
    by_id = marks.by_id() if marks is not None else {}
    rows = []
    for s in scores:
        row = s.to_dict()
        mark = by_id.get(s.id)
        if mark is not None:
            row.update({"fraction": mark.fraction, "dirty": mark.dirty, "longest_run": mark.longest_run,
                        "longest_run_words": mark.longest_run_words})
        rows.append(row)
    return rows
