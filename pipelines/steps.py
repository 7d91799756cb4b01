"""Beam steps shared by the recipes: every stage runs a pure rule through one of them, so
every decision is counted under its declared unit and every drop is sampled.

The contract (``common.decision.Decision``): a rule in ``corpus/`` or ``dedup/`` is a plain
function that returns a ``Decision`` — ``record`` (the record passed on, or None),
``counts`` ((counter name, n) pairs), ``dropped`` ((counter name, example text) pairs) and
``units`` ((counter name, unit) pairs: what each counter counts). A rule never changes
the record it was given; it returns a new one (``dataclasses.replace``). Parameters are
bound with ``functools.partial``; no adapter sits between a step and its rule.

    step(label, namespaces, rule)        rule(element) -> Decision; passes on ``record``.
    keyed_step(label, namespaces, rule)  for ``(key, value)`` pairs as GroupByKey,
                                         CombinePerKey or CoGroupByKey yield them:
                                         rule(key, value) -> Decision; passes on
                                         ``(key, record)`` (``beam.Values()`` drops the key).

Both return a ParDo with a main output ``pages`` (the records passed on) and an
``examples`` output; ``Steps`` applies them and keeps every examples output for
``write_examples``::

    run_step = Steps()
    pages = run_step(pages, "1 Length filter", c4.TOO_LONG_FILTER, c4.length_filter)
    newest = run_step.keyed(combined, "3 Count URL duplicates", c4.DUPLICATE_URL_FILTER, c4.keep_newest)
    run_step.add(read.examples)          # a DoFn that tallies its own (a reader)
    run_step.write_examples(out_dir)

Counters are added up per bundle (``Tally``) and flushed once per bundle
(``flush_counts``): each counter to ``Metrics.counter(namespace, name)`` in every
namespace of the step, each declared unit to the string-set metric
``Metrics.string_set(namespace, "unit:" + name)`` (one metric per counter: runners that
keep one bundle's string set of a step rather than their union, as Beam's FnApiRunner
does with parallel workers, still keep every counter's unit), the examples (the ``n``
with the smallest CRC-32 per reason, so the same whatever the bundling) to ``examples``
under the first namespace. A DoFn that cannot run a rule per element (a file reader that
tallies records, a CombineFn's output) still counts through ``Tally``/``flush_counts``,
or ``count`` for a tally with no examples output, always with a declared unit.

After the run, ``units_of(result)`` gives ``{namespace: {counter: unit}}`` (written as
``_stats.json["units"]``) and ``format_counter_table`` computes each counter's share
within its unit (``pages``, ``lines``, ``spans``, ...); ``other`` counters, and counters
with no declared unit, get no share.
"""

from __future__ import annotations

import json
import logging
from collections import Counter

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from common import storage
from corpus import native
from pipelines.shard_io import ERRORS_FILE, READ_NAMESPACE, read_nothing  # noqa: F401  (also the steps' names)
from pipelines.tally import (  # noqa: F401  (the steps' own names; the formatters for the jobs that import them from here)
    EXAMPLES_PER_REASON,
    KERNELS_NAMESPACE,
    ReasonExamples,
    Tally,
    examples_document,
    format_counter_table,
    format_read_errors,
    kernels_document,
    resolve_units,
)

log = logging.getLogger(__name__)

EXAMPLES_FILE = "examples.json"  # staged under the output's _temporary/ until the job commits
UNIT_METRIC_PREFIX = "unit:"  # string-set metric "unit:<counter>" in the counter's namespace: {its unit}


def flush_tally(tally: Tally, namespaces: tuple[str, ...], windowed: bool = True):
    """``flush_counts`` of a ``Tally`` (examples as TaggedOutputs)."""
    return flush_counts(namespaces, tally.counts, tally.examples, windowed, units=tally.units)


def flush_counts(namespaces, counts: Counter, examples: ReasonExamples, windowed: bool = True, *, units=None):
    """Counters to Beam metrics, with each counter's declared unit (``units``: name -> unit);
    sampled examples to the ``examples`` output (windowed values when called from
    ``finish_bundle``)."""
    count(namespaces, counts, units)
    for reason, example in examples.items():
        value = (f"{namespaces[0]}/{reason}", example)
        if windowed:
            value = WindowedValue(value, MIN_TIMESTAMP, [GlobalWindow()])
        yield beam.pvalue.TaggedOutput("examples", value)


def count(namespaces, counts, units) -> None:
    """Add ``counts`` (name -> n) to the Beam counters of every namespace and declare each
    counter's unit: ``units`` is a name -> unit mapping, or one unit for all of them.
    The one place that increments a counter; call it once per bundle, not per element."""
    namespaces = (namespaces,) if isinstance(namespaces, str) else namespaces
    for name, value in counts.items():
        unit = units if isinstance(units, str) else (units or {}).get(name)
        for namespace in namespaces:
            Metrics.counter(namespace, name).inc(value)
            if unit is not None:
                Metrics.string_set(namespace, UNIT_METRIC_PREFIX + name).add(unit)
    record_kernels(native.take_used())


def record_kernels(status: dict[str, str]) -> None:
    """Which C kernels this bundle ran (``corpus.native.take_used``), as string sets: one entry per state."""
    for kernel, state in status.items():
        Metrics.string_set(KERNELS_NAMESPACE, kernel).add(state)


class _StepFn(beam.DoFn):
    """Runs one rule over elements: counts its decisions in its namespace(s), samples drops."""

    def __init__(self, namespaces: tuple[str, ...], rule):
        self.namespaces, self.rule = namespaces, rule

    def start_bundle(self):
        self.tally = Tally()

    def process(self, element):
        decision = self.rule(element)
        self.tally.add(decision)
        if decision.record is not None:
            yield decision.record

    def finish_bundle(self):
        yield from flush_tally(self.tally, self.namespaces)


class _KeyedStepFn(_StepFn):
    """Runs one rule over ``(key, value)`` pairs; passes on ``(key, record)``."""

    def process(self, element):
        key, value = element
        decision = self.rule(key, value)
        self.tally.add(decision)
        if decision.record is not None:
            yield key, decision.record


def _namespaces(namespaces: str | tuple[str, ...]) -> tuple[str, ...]:
    return (namespaces,) if isinstance(namespaces, str) else tuple(namespaces)


def step(label: str, namespaces: str | tuple[str, ...], rule) -> beam.PTransform:
    """``rule(element) -> Decision`` over a PCollection: outputs ``pages`` and ``examples``."""
    return label >> beam.ParDo(_StepFn(_namespaces(namespaces), rule)).with_outputs("examples", main="pages")


def keyed_step(label: str, namespaces: str | tuple[str, ...], rule) -> beam.PTransform:
    """``rule(key, value) -> Decision`` over ``(key, value)`` pairs: outputs ``pages``
    (``(key, record)`` pairs) and ``examples``."""
    return label >> beam.ParDo(_KeyedStepFn(_namespaces(namespaces), rule)).with_outputs("examples", main="pages")


class Steps:
    """Applies rule steps to PCollections and keeps each step's examples output, so a
    pipeline reads one labelled step per line and hands all examples to WriteExamples."""

    def __init__(self):
        self.examples = []

    def __call__(self, pcoll, label: str, namespaces, rule):
        out = pcoll | step(label, namespaces, rule)
        self.examples.append(out.examples)
        return out.pages

    def keyed(self, pcoll, label: str, namespaces, rule):
        out = pcoll | keyed_step(label, namespaces, rule)
        self.examples.append(out.examples)
        return out.pages

    def add(self, examples) -> None:
        self.examples.append(examples)

    def write_examples(self, out_dir: str):
        merged = tuple(self.examples) | "Merge examples" >> beam.Flatten()
        return merged | "Examples to stats" >> WriteExamples(out_dir)


class WriteExamples(beam.PTransform):
    """Sampled examples (flattened from every step) -> ``<out>/_temporary/examples.json``
    (``EXAMPLES_PER_REASON`` per reason)."""

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
    storage.write_atomically(storage.staging_path(out_dir, EXAMPLES_FILE), json.dumps(examples_document(rows), indent=2, ensure_ascii=False) + "\n")


def collect_examples(out_dir: str) -> dict:
    """Read the examples file a finished pipeline staged (the job's commit removes it)."""
    path = storage.staging_path(out_dir, EXAMPLES_FILE)
    if not storage.is_file(path):
        return {}
    return json.loads(storage.read_text(path))


def kernels_of(result) -> dict:
    """_stats.json's ``kernels`` (``pipelines.tally.kernels_document``) of a finished pipeline."""
    declared: dict[str, set] = {}
    for metric in result.metrics().query().get("string_sets", []):
        if metric.key.metric.namespace == KERNELS_NAMESPACE:
            values = metric.committed if metric.committed is not None else metric.attempted
            declared.setdefault(metric.key.metric.name, set()).update(values or ())
    return kernels_document(declared)


def units_of(result) -> dict[str, dict[str, str]]:
    """Each counter's declared unit, ``{namespace: {counter: unit}}``, from a finished
    pipeline's ``unit:<counter>`` string sets. A counter declared with two units (a rule's
    bug) is logged and shown without a share (``other``)."""
    declared: dict[str, dict[str, set]] = {}
    for metric in result.metrics().query().get("string_sets", []):
        namespace, name = metric.key.metric.namespace, metric.key.metric.name
        if not name.startswith(UNIT_METRIC_PREFIX):
            continue
        values = metric.committed if metric.committed is not None else metric.attempted
        declared.setdefault(namespace, {}).setdefault(name[len(UNIT_METRIC_PREFIX):], set()).update(values or ())
    return resolve_units(declared)


