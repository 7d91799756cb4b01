"""Beam steps shared by the recipes: run a pure rule over elements, count its verdicts in
the stage's counter namespace, sample a few dropped examples per reason, and print the
counters as one table.

A rule is any picklable callable ``rule(element) -> verdict`` where the verdict has
``page`` (the element to pass on, or None), ``counts`` (counter name -> n) and
``dropped`` ((counter name, example text) pairs), like ``corpus.c4.Verdict``.
"""

from __future__ import annotations

import heapq
import json
import zlib
from collections import Counter

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from common import storage

EXAMPLES_PER_REASON = 5
EXAMPLE_CHARS = 400
EXAMPLES_FILE = "examples.json"  # staged under the output's _temporary/ until the job commits


class ReasonExamples:
    """Up to ``n`` examples per counter name, the ones with the smallest CRC-32: the same
    sample whatever the bundling, so stats.json is reproducible."""

    def __init__(self, n: int = EXAMPLES_PER_REASON):
        self.n = n
        self.heaps: dict[str, list] = {}

    def add(self, reason: str, text: str) -> None:
        excerpt = text[:EXAMPLE_CHARS]
        item = (-zlib.crc32(excerpt.encode("utf-8", "surrogatepass")), excerpt)
        heap = self.heaps.setdefault(reason, [])
        if len(heap) < self.n:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)

    def items(self):
        for reason, heap in self.heaps.items():
            for negative_crc, excerpt in heap:
                yield reason, (-negative_crc, excerpt)


class _StepFn(beam.DoFn):
    """Runs one rule over pages: counts its verdicts in its namespace(s), samples drops."""

    def __init__(self, namespaces: tuple[str, ...], rule):
        self.namespaces, self.rule = namespaces, rule

    def start_bundle(self):
        self.counts, self.examples = Counter(), ReasonExamples()

    def process(self, page):
        verdict = self.rule(page)
        self.counts.update(verdict.counts)
        for reason, text in verdict.dropped:
            self.examples.add(reason, text)
        if verdict.page is not None:
            yield verdict.page

    def finish_bundle(self):
        yield from flush_counts(self.namespaces, self.counts, self.examples)


def flush_counts(namespaces, counts: Counter, examples: ReasonExamples, windowed: bool = True):
    """Counters to Beam metrics; sampled examples to the ``examples`` output (windowed
    values when called from ``finish_bundle``)."""
    for name, value in counts.items():
        for namespace in namespaces:
            Metrics.counter(namespace, name).inc(value)
    for reason, example in examples.items():
        value = (f"{namespaces[0]}/{reason}", example)
        if windowed:
            value = WindowedValue(value, MIN_TIMESTAMP, [GlobalWindow()])
        yield beam.pvalue.TaggedOutput("examples", value)


def step(label: str, namespaces: str | tuple[str, ...], rule) -> beam.PTransform:
    namespaces = (namespaces,) if isinstance(namespaces, str) else namespaces
    return label >> beam.ParDo(_StepFn(namespaces, rule)).with_outputs("examples", main="pages")


class Steps:
    """Applies rule steps to PCollections and keeps each step's examples output, so a
    pipeline reads one labelled step per line and hands all examples to WriteExamples."""

    def __init__(self):
        self.examples = []

    def __call__(self, pcoll, label: str, namespaces, rule):
        out = pcoll | step(label, namespaces, rule)
        self.examples.append(out.examples)
        return out.pages

    def add(self, examples) -> None:
        self.examples.append(examples)

    def write_examples(self, out_dir: str):
        merged = tuple(self.examples) | "Merge examples" >> beam.Flatten()
        return merged | "Examples to stats" >> WriteExamples(out_dir)


class WriteExamples(beam.PTransform):
    """Sampled examples (flattened from every step) -> ``<out>/_temporary/examples.json`` (5 per reason)."""

    def __init__(self, out_dir: str):
        super().__init__()
        self.out_dir = out_dir

    def expand(self, examples):
        return (
            examples
            | "Keep 5 per reason" >> beam.combiners.Top.SmallestPerKey(EXAMPLES_PER_REASON)
            | "Collect examples" >> beam.combiners.ToList()
            | "Write examples" >> beam.Map(_write_examples, self.out_dir)
        )


def _write_examples(rows, out_dir: str) -> None:
    examples: dict[str, dict[str, list[str]]] = {}
    for key, items in sorted(rows):
        namespace, reason = key.split("/", 1)
        examples.setdefault(namespace, {})[reason] = [excerpt for _, excerpt in items]
    storage.write_atomically(storage.staging_path(out_dir, EXAMPLES_FILE), json.dumps(examples, indent=2, ensure_ascii=False) + "\n")


def collect_examples(out_dir: str) -> dict:
    """Read the examples file a finished pipeline staged (the job's commit removes it)."""
    path = storage.staging_path(out_dir, EXAMPLES_FILE)
    if not storage.is_file(path):
        return {}
    return json.loads(storage.read_text(path))


def format_counter_table(title: str, counters: dict, stages) -> str:
    """One screen: each stage's counters, with each page counter's share of the pages the
    stage decided on and each line/span counter's share of the lines/spans it looked at."""
    rows = [title, f"{'stage':22} {'counter':38} {'count':>12} {'share':>8}"]
    for namespace in stages:
        values = counters.get(namespace)
        if not values:
            continue
        totals = Counter()
        for name, value in values.items():
            totals[_unit(namespace, name)] += value
        for name, value in values.items():
            total = totals[_unit(namespace, name)]
            share = f"{100 * value / total:7.2f}%" if total and _unit(namespace, name) != "other" else ""
            rows.append(f"{namespace:22} {name:38} {value:>12,} {share:>8}")
    return "\n".join(rows)


READ_NAMESPACE = "read-archive"  # the archive reader's counters (records, errors by reason)


def format_read_errors(counters: dict) -> str:
    """The input problems of a run, one line per reason (``errors/errors.jsonl`` has each
    one), or a line saying that no record could be read at all; '' when all went well."""
    read = counters.get(READ_NAMESPACE, {})
    errors = {k.split(":", 1)[1]: v for k, v in read.items() if k.startswith("error:")}
    rows = [f"{'read errors':22} {reason:38} {count:>12,}" for reason, count in sorted(errors.items())]
    if read_nothing(counters):
        rows.append("no record could be read from any input file: see errors/errors.jsonl")
    return "\n".join(rows)


def read_nothing(counters: dict) -> bool:
    """Whether the run found input problems and not a single WARC record."""
    read = counters.get(READ_NAMESPACE, {})
    records = sum(v for k, v in read.items() if k.startswith("records:"))
    return records == 0 and any(k.startswith("error:") for k in read)


def _unit(namespace: str, name: str) -> str:
    """What a counter counts: ``pages`` (one decision per page), ``lines``/``spans``, or ``other``."""
    if name.startswith("line-"):
        return "lines"
    if name.startswith("span-"):
        return "spans"
    if name in ("wet-file", "sentence-removed", "examples", "missing-page", "candidate_pairs", "verified_pairs") \
            or name.startswith(("filtered:ignored_language-", "extractor:")):
        return "other"
    return "pages"


