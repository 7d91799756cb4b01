"""The n-gram overlap audit's one core (GPT-2 paper, section 4): benchmarks in, one report per
benchmark out, from a Bloom filter of the training corpus or an exact scan of its documents.

Two callers, one set of numbers: the Beam audit job (``pipelines/audit/job.py``: every shard
scanned by ``scan_documents`` on its own worker, the counters merged) and evaluation
(``model.eval.contamination.mark_benchmarks``: one stream through ``scan_documents``). Both build
their indexes with ``build_indexes`` and their reports with ``exact_report`` /
``bloom_report``, so an example is dirty for one exactly when it is dirty for the other.

- ``load_benchmarks(specs)``: ``KIND:PATH[:OPTION]`` specs -> ``BenchmarkSet`` s (names distinct).
- ``build_indexes(sets, config)``: the exact index of every benchmark's n-grams, by name.
- ``scan_documents(indexes, docs)``: ``(doc_id, text)`` pairs -> one ``OverlapCounter`` per
  benchmark; each batch of ``SCAN_BATCH`` documents is hashed once for every benchmark.
  ``merge_counters`` adds up the counters of parts of the corpus (one per shard).
- ``exact_report`` / ``bloom_report``: a benchmark's ``BenchmarkReport`` from its counter
  (training documents per n-gram, a few of their ids) or from a Bloom filter's membership.
- ``benchmark_rows``: the report rows of ``dedup.report`` (Bloom and exact compared,
  the matched spans and training documents of every dirty example).
- ``own_train_overlap``: % of a benchmark's n-grams in its own training split (Table 6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from corpus.inputs import InputError
from dedup.benchmark_sets import BenchmarkSpecError, load_benchmark
from dedup.ngrams import NgramConfig, ngram_hashes_batch
from dedup.overlap import DEFAULT_DIRTY_THRESHOLD, BenchmarkIndex, BenchmarkReport, OverlapCounter, compute_report

SCAN_BATCH = 256  # documents hashed together: one numpy pass instead of a fixed cost per document


def load_benchmarks(specs: Iterable[str]) -> list:
    """The benchmark sets of ``KIND:PATH[:OPTION]`` specs; ``InputError`` for a bad spec or two sets of one name."""
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


def build_indexes(sets: Sequence, config: NgramConfig) -> dict[str, BenchmarkIndex]:
    """The exact n-gram index of every benchmark set, by name, all with ``config``."""
    return {s.name: BenchmarkIndex.build([(e.id, e.text) for e in s.examples], config, s.name) for s in sets}


def shared_config(indexes: Mapping[str, BenchmarkIndex]) -> NgramConfig:
    """The one n-gram config of indexes built together (``build_indexes``)."""
    configs = {index.config for index in indexes.values()}
    if len(configs) != 1:
        raise ValueError(f"the benchmark indexes disagree on their n-gram settings: {configs}")
    return configs.pop()


def batches(items: Iterable, size: int = SCAN_BATCH):
    """``items`` in lists of ``size`` (the last one shorter)."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def scan_documents(indexes: Mapping[str, BenchmarkIndex], docs: Iterable[tuple[str, str]]) -> dict[str, OverlapCounter]:
    """Stream ``(doc_id, text)`` pairs against every benchmark index: one ``OverlapCounter``
    per benchmark (training documents per n-gram and the smallest few ids). Counters of
    parts of a stream merge (``OverlapCounter.merge``) into the counter of the whole."""
    counters = {name: OverlapCounter(index) for name, index in indexes.items()}
    if not counters:
        return counters
    config = shared_config(indexes)
    for batch in batches(docs):
        hashed = ngram_hashes_batch([text for _, text in batch], config)  # once for every benchmark
        for counter in counters.values():
            counter.add_many(batch, hashed)
    return counters


def merge_counters(index: BenchmarkIndex, parts: Iterable[Mapping]) -> OverlapCounter:
    """One benchmark's counter over the whole corpus from its counters over parts
    (``OverlapCounter.to_dict()`` each, e.g. one per shard)."""
    merged = OverlapCounter(index)
    for data in parts:
        merged.merge(OverlapCounter.from_dict(index, data))
    return merged


def exact_report(counter: OverlapCounter, *, max_doc_count: int | None = None,
                 dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD) -> BenchmarkReport:
    """A benchmark's report from the exact scan: found = in at least one training document
    (n-grams in more than ``max_doc_count`` documents ignored, GPT-3's 10)."""
    return counter.report(max_doc_count=max_doc_count, dirty_threshold=dirty_threshold)


def bloom_report(index: BenchmarkIndex, bloom, *, dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD) -> BenchmarkReport:
    """A benchmark's report from a Bloom filter of the training corpus (``contains``)."""
    return compute_report(index, bloom.contains(index.hashes), dirty_threshold=dirty_threshold)


def benchmark_rows(indexes: Mapping[str, BenchmarkIndex], *, corpus_name: str, exact: Mapping | None = None,
                   bloom=None, evidence: Mapping | None = None, own_train: Mapping | None = None,
                   max_doc_count: int | None = None, dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD) -> list[dict]:
    """One report row per benchmark (the schema of ``dedup.report``), Bloom and exact compared.

    ``exact``: benchmark name -> ``OverlapCounter.to_dict()`` of the whole corpus (the row
    is the exact one); else the row is the Bloom filter's. With both, ``agreement`` says how
    many n-grams each found, the Bloom filter's false negatives (must be 0) and its extra finds.
    """
    rows = []
    for name, index in indexes.items():
        bloom_found = bloom.contains(index.hashes) if bloom is not None else None
        if exact is not None:
            counter = OverlapCounter.from_dict(index, exact[name])
            report = exact_report(counter, max_doc_count=max_doc_count, dirty_threshold=dirty_threshold)
            exact_found = counter.doc_counts > 0
        else:
            assert bloom_found is not None  # a row is the exact one or the Bloom filter's: one of them is given
            report = compute_report(index, bloom_found, dirty_threshold=dirty_threshold)
            exact_found = None
        extra: dict[str, object] = {"corpus": corpus_name, "source": "exact" if exact is not None else "bloom"}
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


def own_train_overlap(pairs: Iterable[str] | None, indexes: Mapping[str, BenchmarkIndex]) -> dict[str, float]:
    """``NAME=SPEC``: % of benchmark NAME's n-grams found in its own training split (exact)."""
    result = {}
    for pair in pairs or []:
        name, _, spec = pair.partition("=")
        if name not in indexes or not spec:
            raise InputError(f"--own_train {pair}: expected NAME=SPEC with NAME one of {sorted(indexes)}")
        train = load_benchmarks([spec])[0]
        counter = OverlapCounter(indexes[name])
        for example in train.examples:
            counter.add(example.id, example.text)
        result[name] = exact_report(counter).percent_found
    return result
