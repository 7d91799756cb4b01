"""A stage's decisions added up, for every engine: ``Tally`` (counts, declared units, sampled
drops of one bundle or partition), ``examples_document`` (_stats.json's ``examples``) and
``resolve_units`` (each counter's unit). Beam's steps flush a tally to Beam metrics
(``pipelines.steps``), Spark's to an accumulator (``pipelines.spark.engine``).

Beam-free: a Spark worker loads this, not Beam (``pipelines.spark``). Tests: ``tests/test_steps.py``.
"""

from __future__ import annotations

import heapq
import logging
import zlib
from collections import Counter

from common.decision import OTHER, Decision
from corpus import native
from pipelines.shard_io import ERRORS_FILE, READ_NAMESPACE, read_nothing

log = logging.getLogger(__name__)

EXAMPLES_PER_REASON = 5  # _stats.json: examples sampled per counter (the TFDS c4 counters have none; ours, a few to read)
EXAMPLE_CHARS = 400  # _stats.json: characters kept of each example
# Beside the counters, never among them: {C kernel: {state}} of what each piece of work ran
# (``corpus.native.take_used``), gathered with every tally; _stats.json's ``kernels``.
KERNELS_NAMESPACE = "native-kernels"


class ReasonExamples:
    """Up to ``n`` examples per counter name, the ones with the smallest CRC-32: the same
    sample whatever the bundling, so _stats.json is reproducible."""

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


class Tally:
    """One bundle's decisions for one stage: counts, declared units, sampled drops."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.examples = ReasonExamples()
        self.units: dict[str, str] = {}
        self._last_units = None

    def add(self, decision: Decision) -> None:
        counts = self.counts
        for name, n in decision.counts:
            counts[name] += n
        for reason, text in decision.dropped:
            self.examples.add(reason, text)
        units = decision.units
        if units is not self._last_units:  # rules return constant unit tuples: one update per change
            self.units.update(units)
            self._last_units = units


def examples_document(rows) -> dict[str, dict[str, list[str]]]:
    """_stats.json's ``examples`` from ``("<namespace>/<reason>", [(crc, excerpt), ...])``
    rows, each list the ``EXAMPLES_PER_REASON`` smallest: the same document on every engine."""
    examples: dict[str, dict[str, list[str]]] = {}
    for key, items in sorted(rows):
        namespace, reason = key.split("/", 1)
        examples.setdefault(namespace, {})[reason] = [excerpt for _, excerpt in items]
    return examples


def resolve_units(declared: dict[str, dict[str, set]]) -> dict[str, dict[str, str]]:
    """``{namespace: {counter: unit}}`` from every unit each counter was declared with
    (``{namespace: {counter: {units}}}``), whichever engine gathered them."""
    units: dict[str, dict[str, str]] = {}
    for namespace, names in sorted(declared.items()):
        for name, found in sorted(names.items()):
            if len(found) > 1:
                log.warning("counter %s/%s is declared with units %s: shown without a share", namespace, name, sorted(found))
            units.setdefault(namespace, {})[name] = found.pop() if len(found) == 1 else OTHER
    return units


def kernels_document(declared: dict[str, set], launcher: dict[str, str] | None = None) -> dict[str, str | list[str]]:
    """_stats.json's ``kernels``: each C kernel the job's work ran, ``native`` or why it took
    the numpy/Python path (``corpus.native.take_used``), the launcher's own (this thread's,
    by default) included; a sorted list where the workers differed (an image without ``cc``)."""
    found = {name: set(states) for name, states in declared.items()}
    for name, state in (native.take_used() if launcher is None else launcher).items():
        found.setdefault(name, set()).add(state)
    return {name: next(iter(states)) if len(states) == 1 else sorted(states) for name, states in sorted(found.items())}


def kernel_states(statuses) -> dict[str, set]:
    """``corpus.native.take_used()`` dicts (one per piece of work) as ``kernels_document``'s ``declared``."""
    declared: dict[str, set] = {}
    for status in statuses:
        for name, state in status.items():
            declared.setdefault(name, set()).add(state)
    return declared


def slow_kernels(kernels: dict) -> dict[str, list[str]]:
    """The kernels of ``kernels_document`` that some process could not run (not ``native``,
    not switched ``off`` by the user): name -> its states."""
    slow = {}
    for name, state in kernels.items():
        states = state if isinstance(state, list) else [state]
        if any(s != "native" and not s.startswith("off") for s in states):
            slow[name] = states
    return slow


# --- the summary table ---------------------------------------------------------------
def format_counter_table(title: str, counters: dict, stages, units: dict | None = None) -> str:
    """One screen: each stage's counters, each with its share of the counters of the same
    declared unit in its stage (a page counter's share of the pages the stage decided on,
    a line counter's share of the lines it looked at); ``other`` and undeclared counters
    get no share. ``units`` is ``units_of(result)`` (``_stats.json["units"]``)."""
    units = units or {}
    rows = [title, f"{'stage':22} {'counter':38} {'count':>12} {'share':>8}"]
    for namespace in stages:
        values = counters.get(namespace)
        if not values:
            continue
        declared = units.get(namespace, {})
        totals: Counter = Counter()
        for name, value in values.items():
            totals[declared.get(name, OTHER)] += value
        for name, value in values.items():
            unit = declared.get(name, OTHER)
            total = totals[unit]
            share = f"{100 * value / total:7.2f}%" if total and unit != OTHER else ""
            rows.append(f"{namespace:22} {name:38} {value:>12,} {share:>8}")
    return "\n".join(rows)


def format_read_errors(counters: dict) -> str:
    """The input problems of a run, one line per reason (``ERRORS_FILE`` has each
    one), or a line saying that no record could be read at all; '' when all went well."""
    read = counters.get(READ_NAMESPACE, {})
    errors = {k.split(":", 1)[1]: v for k, v in read.items() if k.startswith("error:")}
    rows = [f"{'read errors':22} {reason:38} {count:>12,}" for reason, count in sorted(errors.items())]
    if read_nothing(counters):
        rows.append(f"no record could be read from any input file: see {ERRORS_FILE}")
    return "\n".join(rows)
