"""What every job run on Spark needs: the session, rule steps, counters, the shard writer.

- ``session(master)``: a SparkSession (the active one if there is one); workers run
  ``PYSPARK_PYTHON``, by default this interpreter, with this project on their path.
- ``SparkJob.step`` / ``SparkJob.keyed``: a rule over an RDD as ``mapPartitions``, the
  Spark twin of ``pipelines.steps.step`` / ``keyed_step``. Each partition adds its
  decisions up in a ``Tally`` and hands them, once, to one accumulator (``Tallies``): the
  counts per namespace, each counter's declared unit, the ``EXAMPLES_PER_REASON`` sampled
  drops with the smallest CRC-32. ``counters()``, ``units()`` and ``examples()`` read it
  after the job as Beam's ``counters_of``, ``units_of`` and ``collect_examples`` read a
  pipeline result, so _stats.json is the same document.
- ``SparkJob.write_shards``: documents keyed by split -> one Spark partition per shard,
  sorted in the shard's order (``shard_io.encode_row``: md5(url), url, timestamp,
  md5(text)) by ``repartitionAndSortWithinPartitions`` (which spills to disk), written by
  ``shard_io.write_shard``, the Beam writer's last step: the same bytes.

Spark applies an accumulator update made in a transformation once per task attempt that
succeeds, so a task that fails and is retried is counted once; a stage recomputed after
a lost executor (or with speculation on) would count twice. The jobs therefore compute
every RDD once: an RDD read twice (the pages during line dedup) is persisted first.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import sys
from collections import Counter

from pyspark import AccumulatorParam, StorageLevel
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from common import storage
from common.environ import environment_with, prepended
from common.decision import OTHER
from pipelines.options import SPARK_JAVA_HINT, SparkStartError, java_for_spark
from pipelines.shard_io import WRITE_NAMESPACE, WRITTEN_PARTS, encode_row, write_shard
from pipelines.tally import EXAMPLES_PER_REASON, Tally, examples_document, resolve_units

APP_NAME = "corpusforge"
# The session's settings: offline (loopback driver, no UI), quiet, Python workers reused.
SESSION_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
}
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PERSIST = StorageLevel.MEMORY_AND_DISK


def running_session() -> SparkSession | None:
    """The session already running in this process (a test's, or spark-submit's), if any."""
    return SparkSession.getActiveSession()


def session(master: str | None = None) -> tuple[SparkSession, bool]:
    """(the session, whether this call started it). A session that is already running (a
    test's, or spark-submit's) is used as it is. A JVM that does not start (a Java too old for
    this Spark, a broken JAVA_HOME) is one ``SparkStartError`` line; the launcher's own lines are
    above it on stderr."""
    active = running_session()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(APP_NAME)
    if master:
        builder = builder.master(master)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    with _worker_environment():
        try:
            spark = builder.getOrCreate()
        except PySparkRuntimeError as exc:
            if exc.getCondition() != "JAVA_GATEWAY_EXITED":
                raise
            raise SparkStartError(f"Spark's JVM did not start (java: {java_for_spark() or 'none found'}; its messages are above). "
                                  f"{SPARK_JAVA_HINT}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def _worker_environment():
    """PYSPARK_PYTHON (this interpreter, unless set) and PYTHONPATH (this project first) while
    Spark starts: local workers then import the project as the driver does. The JVM keeps the
    environment it started with, so both are put back after: nothing this process runs later
    (another command, a subprocess) inherits them."""
    return environment_with({"PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
                             "PYTHONPATH": prepended("PYTHONPATH", PROJECT_ROOT)})


@contextlib.contextmanager
def job_session(master: str | None = None):
    """The session a job runs on (``session``), stopped after the job if the job started it."""
    spark, started = session(master)
    try:
        yield spark
    finally:
        if started:
            spark.stop()


class Tallies(AccumulatorParam):
    """``{namespace: (counts, {counter: {units}}, {reason: [(crc, excerpt), ...]})}``, added up."""

    def zero(self, value):
        return {}

    def addInPlace(self, total, more):
        for namespace, (counts, units, examples) in more.items():
            mine = total.setdefault(namespace, (Counter(), {}, {}))
            mine[0].update(counts)
            for name, found in units.items():
                mine[1].setdefault(name, set()).update(found)
            for reason, items in examples.items():
                mine[2][reason] = sorted(mine[2].get(reason, []) + items)[:EXAMPLES_PER_REASON]
        return total


class Rows(AccumulatorParam):
    """A list of rows (the read errors), added up."""

    def zero(self, value):
        return []

    def addInPlace(self, total, more):
        total.extend(more)
        return total


def tally_of(namespaces: tuple[str, ...], counts, units, examples=None) -> dict:
    """One partition's counts for ``Tallies``, as ``pipelines.steps.count`` declares them
    to Beam: each counter in every namespace, its unit (one for all, or name -> unit),
    the sampled examples under the first namespace."""
    if not counts:
        return {}
    declared = {}
    for name in counts:
        unit = units if isinstance(units, str) else (units or {}).get(name)
        if unit is not None:
            declared[name] = {unit}
    sampled: dict[str, list] = {}
    for reason, item in (examples.items() if examples is not None else ()):
        sampled.setdefault(reason, []).append(item)
    return {namespace: (Counter(counts), declared, sampled if i == 0 else {}) for i, namespace in enumerate(namespaces)}


def add_tally(tallies, namespaces: tuple[str, ...], tally: Tally) -> None:
    tallies.add(tally_of(namespaces, tally.counts, tally.units, tally.examples))


_configured: set = set()


def on_worker(beam_args: tuple[str, ...]) -> None:
    """A worker's storage gets the job's store options (S3 endpoint, credentials) once."""
    if beam_args and beam_args not in _configured:
        storage.configure(list(beam_args))
        _configured.add(beam_args)


def _namespaces(namespaces) -> tuple[str, ...]:
    return (namespaces,) if isinstance(namespaces, str) else tuple(namespaces)


def _rule_over(namespaces, rule, keyed: bool, tallies, beam_args):
    def run(items):
        on_worker(beam_args)
        tally = Tally()
        for item in items:
            decision = rule(*item) if keyed else rule(item)
            tally.add(decision)
            if decision.record is not None:
                yield (item[0], decision.record) if keyed else decision.record
        add_tally(tallies, namespaces, tally)
    return run


def _shard_writer(out_dir: str, formats: tuple[str, ...], name: str, splits, offsets, tallies, beam_args):
    def write(partition: int, rows):
        on_worker(beam_args)
        position = bisect.bisect_right(offsets, partition) - 1
        split, count = splits[position]
        entries, _ = write_shard(out_dir, formats, name, split, partition - offsets[position], count, (line for _, line in rows))
        tallies.add(tally_of((WRITE_NAMESPACE,), {WRITTEN_PARTS: 1}, OTHER))
        return [(split, entry) for entry in entries]
    return write


class SparkJob:
    """One job's RDD wiring on a session: steps, counters, errors, shards."""

    def __init__(self, spark: SparkSession, beam_args=()):
        self.sc = spark.sparkContext
        self.tallies = self.sc.accumulator({}, Tallies())
        self.errors = self.sc.accumulator([], Rows())
        self.beam_args = tuple(beam_args)
        self.partitions = max(2, self.sc.defaultParallelism)
        self.persisted = []

    def files(self, files: list[str]):
        """``(index, file)`` pairs, one partition per file (a file is a unit of work, as in Beam)."""
        return self.sc.parallelize(list(enumerate(files)), max(1, len(files)))

    def over_partitions(self, rdd, make_fn, *args):
        """``rdd.mapPartitions(make_fn(*args, tallies, errors, beam_args))``: a reader's own partition function."""
        return rdd.mapPartitions(make_fn(*args, self.tallies, self.errors, self.beam_args))

    def step(self, rdd, namespaces, rule):
        """``rule(element) -> Decision`` over an RDD: the records passed on, counted and sampled."""
        return rdd.mapPartitions(_rule_over(_namespaces(namespaces), rule, False, self.tallies, self.beam_args))

    def keyed(self, rdd, namespaces, rule):
        """``rule(key, value) -> Decision`` over ``(key, value)`` pairs: ``(key, record)`` passed on."""
        return rdd.mapPartitions(_rule_over(_namespaces(namespaces), rule, True, self.tallies, self.beam_args))

    def write_shards(self, docs, out_dir: str, formats, name: str, splits: list[tuple[str, int]]) -> None:
        """``(split position, Document)`` pairs -> ``<name>-<split>.NNNNN-of-MMMMM.<ext>`` for
        every split of ``splits`` (``(split, number of shards)``), every index that holds a document, and
        their manifest entries staged for ``_SUCCESS`` (``storage.record_written``)."""
        counts = [count for _, count in splits]
        offsets = [sum(counts[:i]) for i in range(len(counts))]

        def encode(item):
            position, doc = item
            shard, _, key, line = encode_row(doc, counts[position])
            return (offsets[position] + shard, key), line

        ordered = docs.map(encode).repartitionAndSortWithinPartitions(sum(counts), partitionFunc=lambda key: key[0])
        entries = ordered.mapPartitionsWithIndex(
            _shard_writer(out_dir, tuple(formats), name, splits, offsets, self.tallies, self.beam_args)).collect()
        for split, _ in splits:
            storage.record_written(out_dir, f"{name}-{split}", [entry for s, entry in entries if s == split])

    def cogroup(self, named: dict):
        """``{name: RDD of (key, value)}`` -> ``(key, {name: values})`` for every key of any of
        them, as Beam's ``CoGroupByKey`` of a dict of PCollections yields it."""
        names = list(named)
        first, *rest = (named[name] for name in names)
        grouped = first.cogroup(rest[0], self.partitions) if len(rest) == 1 else first.groupWith(*rest)
        return grouped.map(lambda keyed: (keyed[0], dict(zip(names, keyed[1]))))

    def once(self, rdd):
        """``rdd`` persisted and computed now: steps that read it twice (two joins, a join and
        an action) find it stored, so the counters of the steps before it are added once."""
        rdd = rdd.persist(PERSIST)
        rdd.count()
        self.persisted.append(rdd)
        return rdd

    def release(self) -> None:
        """Drop what ``once`` stored (after the job's last action)."""
        while self.persisted:
            self.persisted.pop().unpersist()

    def counters(self) -> dict[str, dict[str, int]]:
        """Every counter, ``{namespace: {name: value}}`` sorted, as ``jobs.counters_of``."""
        return {namespace: dict(sorted(counts.items())) for namespace, (counts, _, _) in sorted(self.tallies.value.items()) if counts}

    def units(self) -> dict[str, dict[str, str]]:
        return resolve_units({namespace: units for namespace, (_, units, _) in self.tallies.value.items() if units})

    def examples(self) -> dict:
        return examples_document([(f"{namespace}/{reason}", items)
                                  for namespace, (_, _, examples) in self.tallies.value.items() for reason, items in examples.items()])

    def error_rows(self) -> list[dict]:
        return list(self.errors.value)
