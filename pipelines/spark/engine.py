"""What every job run on Spark needs: the session, rule steps, counters, the shard writer.

- ``session(master)``: a SparkSession (the active one if there is one, as spark-submit
  configured it); a local master's Python workers run ``PYSPARK_PYTHON``, by default this
  interpreter, with this project on their path. Any other master gets the project shipped
  (``pipelines.spark.package``: one zip per version, ``addPyFile``), so executors need the
  requirements and nothing of corpusforge.
- ``SparkJob.step`` / ``SparkJob.keyed``: a rule over an RDD as ``mapPartitions``, the
  Spark twin of ``pipelines.steps.step`` / ``keyed_step``. Each partition adds its
  decisions up in a ``Tally`` and hands them to the job's counters (a ``Keyed`` accumulator): the
  counts per namespace, each counter's declared unit, the ``EXAMPLES_PER_REASON`` sampled
  drops with the smallest CRC-32. ``counters()``, ``units()`` and ``examples()`` read it
  after the job as Beam's ``counters_of``, ``units_of`` and ``collect_examples`` read a
  pipeline result, so _stats.json is the same document.
- ``SparkJob.write_shards``: documents keyed by split -> sorted runs staged where they are
  produced (in the shard's order, ``shard_io.encode_row``: md5(url), url, timestamp,
  md5(text)), then one task per shard merging its runs with ``shard_io.write_shard``, the
  Beam writer's last step: the same bytes, and no text through Spark's shuffle.

Counters are exact whatever Spark recomputes. Spark applies an accumulator update made in a
transformation once per successful task attempt, so a stage recomputed after a lost executor
(its shuffle files gone), a speculative copy or a partition read by two actions adds its
updates again. Every update here is therefore keyed by the work it describes, ``(step,
partition, n)``: the step (one id per partition function the job wires), the partition of
the RDD being computed (``TaskContext.partitionId``) and the n-th update of that function in
that partition. A recomputed partition computes the same tallies from the same input and
sends them under the same keys; the driver keeps one value per key (the fuller, should a
partition ever have been read only in part), so each piece of work is counted once.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import sys
import threading
import time
from collections import Counter

from pyspark import AccumulatorParam, StorageLevel, TaskContext
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from common import storage
from common.decision import OTHER
from common.environ import environment_with, prepended
from corpus import native
from pipelines.shard_io import (
    RUN_BYTES,
    WRITE_NAMESPACE,
    WRITTEN_PARTS,
    encode_row,
    merged_runs,
    new_run_id,
    run_path,
    write_run,
    write_shard,
)
from pipelines.spark import jvm
from pipelines.spark_launch import SPARK_JAVA_HINT, SparkStartError, absolute_local_path, java_for_spark
from pipelines.spark_package import project_zip
from pipelines.tally import (
    EXAMPLES_PER_REASON,
    KERNELS_NAMESPACE,
    Tally,
    examples_document,
    kernels_document,
    resolve_units,
)

APP_NAME = "corpusforge"
# The settings of a session the CLI starts on a local master itself: offline (loopback driver,
# no UI), quiet, Python workers reused. A session on any other master (a cluster's) gets none of
# them, and a session spark-submit made is used as it is: the user's settings stand.
SESSION_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
}
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PERSIST = StorageLevel.MEMORY_AND_DISK
NO_EXECUTOR_TIMEOUT_S = 120.0  # --spark_no_executor_timeout_s: a cluster with no executor this long ends the job

log = logging.getLogger(__name__)


def is_local(master: str | None) -> bool:
    """A master whose executors are threads of the driver (``local``, ``local[N]``, none given)."""
    return master is None or master.startswith("local")


def running_session() -> SparkSession | None:
    """The session already running in this process (a test's, or spark-submit's), if any."""
    return SparkSession.getActiveSession()


def session(master: str | None = None, conf: dict | None = None) -> tuple[SparkSession, bool]:
    """(the session, whether this call started it). A session that is already running (a
    test's, or spark-submit's) is used as it is. A local master gets ``SESSION_CONF``; every
    master gets ``conf`` (``--spark_conf KEY=VALUE``) last, so the user's settings win. A JVM
    that does not start (a Java too old for this Spark, a broken JAVA_HOME) is one
    ``SparkStartError`` line; the launcher's own lines are above it on stderr."""
    active = running_session()
    if active is not None:
        return active, False
    builder = SparkSession.builder.appName(APP_NAME)
    if master:
        builder = builder.master(master)
    settings = {**(SESSION_CONF if is_local(master) else {}), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _worker_environment(master, settings.get("spark.pyspark.python")), _driver_jvm(settings):
        try:
            spark = builder.getOrCreate()
        except PySparkRuntimeError as exc:
            if exc.getCondition() != "JAVA_GATEWAY_EXITED":
                raise
            raise SparkStartError(f"Spark's JVM did not start (java: {java_for_spark() or 'none found'}; its messages are above). "
                                  f"{SPARK_JAVA_HINT}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True


def _worker_environment(master: str | None, python: str | None = None):
    """While Spark starts: for a local master, PYSPARK_PYTHON (this interpreter, unless set) and
    PYTHONPATH (this project first), so local workers import the project as the driver does.
    A cluster's executors run their own Python (``PYSPARK_PYTHON``, or ``spark.pyspark.python``
    given with ``--spark_conf``, which PySpark reads only from the environment, else Spark's
    ``python3``) and get the project shipped (``ship_project``). The JVM keeps the environment
    it started with, so both are put back after: nothing this process runs later (another
    command, a subprocess) inherits them."""
    if not is_local(master):
        return environment_with({"PYSPARK_PYTHON": python}) if python else contextlib.nullcontext()
    return environment_with({"PYSPARK_PYTHON": python or os.environ.get("PYSPARK_PYTHON", sys.executable),
                             "PYTHONPATH": prepended("PYTHONPATH", PROJECT_ROOT)})


def _driver_jvm(settings: dict):
    """While a session this process starts comes up: its driver JVM's flags
    (``pipelines.spark.jvm``), unless the user gave their own. They are this process's own
    JVM's, on any master; the executors' JVMs are the cluster's, and a session spark-submit
    made is used as it is."""
    options = jvm.driver_options(settings)
    return environment_with({"SPARK_SUBMIT_OPTS": options}) if options else contextlib.nullcontext()


def ship_project(sc) -> None:
    """On any master but a local one, the project's zip (``pipelines.spark_package.project_zip``)
    added to the job's Python files once per context, unless spark-submit ships it already
    (``--py-files`` naming the zip this driver imports): executors need only the requirements."""
    if is_local(sc.master) or getattr(sc, "_corpusforge_shipped", False):
        return
    path = project_zip()
    submitted = [p for p in (sc.getConf().get("spark.submit.pyFiles") or "").split(",") if p]
    if not any(os.path.basename(p) == os.path.basename(path) for p in submitted):
        sc.addPyFile(path)
        log.info("shipped %s to the executors", path)
    sc._corpusforge_shipped = True  # once per context (a context is never reused after stop)


class SparkNoExecutorsError(RuntimeError):
    """The cluster had no executor for longer than ``--spark_no_executor_timeout_s``."""

    one_line = True  # pipelines.cli prints it in one line (no traceback), exit 1


def executor_count(sc) -> int:
    """Executors registered with the driver now (the driver itself not counted)."""
    infos = sc._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)


class _ExecutorWatch:
    """A driver thread that ends the job's Spark work (``cancelAllJobs``) once the cluster has
    had no executor for ``timeout_s`` in a row: lost workers, or none ever there. Spark itself
    would wait for resources without a word."""

    def __init__(self, sc, timeout_s: float, poll_s: float = 1.0):
        self.sc, self.timeout_s, self.poll_s = sc, timeout_s, poll_s
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="corpusforge-executor-watch", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        return False

    def _watch(self) -> None:
        since = time.monotonic()
        while not self._stop.wait(self.poll_s):
            try:
                count = executor_count(self.sc)
            except Exception:  # the context is stopping
                return
            if count:
                since = time.monotonic()
            elif time.monotonic() - since >= self.timeout_s:
                self.fired = True
                self.sc.cancelAllJobs()
                return

    def error(self) -> SparkNoExecutorsError:
        return SparkNoExecutorsError(
            f"the Spark cluster ({self.sc.master}) had no executor for {self.timeout_s:g} s (its workers were lost, or none "
            "has room for the job's executors); the job stopped and nothing was committed. Start workers, or raise "
            "--spark_no_executor_timeout_s, and rerun the job")


@contextlib.contextmanager
def job_session(master: str | None = None, conf: dict | None = None, no_executor_timeout_s: float = NO_EXECUTOR_TIMEOUT_S):
    """The session a job runs on (``session``), stopped after the job if the job started it.
    On a cluster (any master but a local one), a job left with no executor for
    ``no_executor_timeout_s`` ends in one ``SparkNoExecutorsError`` line."""
    spark, started = session(master, conf)
    watch = None if is_local(spark.sparkContext.master) or not no_executor_timeout_s else _ExecutorWatch(spark.sparkContext, no_executor_timeout_s)
    try:
        with watch or contextlib.nullcontext():
            try:
                yield spark
            except Exception as exc:
                if watch is not None and watch.fired:
                    raise watch.error() from exc
                raise
    finally:
        if started:
            spark.stop()


def job_session_for(args):
    """``job_session`` with a job's options: ``--spark_master``, ``--spark_conf``, ``--spark_no_executor_timeout_s``."""
    return job_session(getattr(args, "spark_master", None), dict(getattr(args, "spark_conf", None) or ()),
                       getattr(args, "spark_no_executor_timeout_s", NO_EXECUTOR_TIMEOUT_S))


class Keyed(AccumulatorParam):
    """``{(step, partition, n): (weight, value)}``: one value per piece of work, however often
    Spark ran it. Of two values under one key the heavier is kept (the same value, from a
    recomputed partition; or the whole of a partition once read only in part)."""

    def zero(self, value):
        return {}

    def addInPlace(self, total, more):
        for key, entry in more.items():
            held = total.get(key)
            if held is None or entry[0] > held[0]:
                total[key] = entry
        return total


def _tally_weight(document: dict) -> int:
    return sum(sum(counts.values()) for counts, _, _ in document.values()) + 1


def _rows_weight(rows: list) -> int:
    return len(rows) + 1


class StepAccumulator:
    """One partition function's handle on a ``Keyed`` accumulator: ``add(value)`` files the
    value under ``(this step, the partition being computed, how many this function added
    before in it)``. A fresh handle is unpickled for every task, so the count starts at 0."""

    def __init__(self, accumulator, step: int, weigh):
        self.accumulator, self.step, self.weigh = accumulator, step, weigh
        self._added = 0

    def __getstate__(self):
        return {"accumulator": self.accumulator, "step": self.step, "weigh": self.weigh}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._added = 0

    def add(self, value) -> None:
        if not value:
            return
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else -1
        self.accumulator.add({(self.step, partition, self._added): (self.weigh(value), value)})
        self._added += 1


def keyed_values(accumulator) -> list:
    """The values of a ``Keyed`` accumulator, one per piece of work, in key order."""
    return [value for _, (_, value) in sorted(accumulator.value.items(), key=lambda item: item[0])]


def merge_tallies(documents) -> dict:
    """``{namespace: (counts, {counter: {units}}, {reason: [(crc, excerpt), ...]})}`` added up."""
    total: dict = {}
    for document in documents:
        for namespace, (counts, units, examples) in document.items():
            mine = total.setdefault(namespace, (Counter(), {}, {}))
            mine[0].update(counts)
            for name, found in units.items():
                mine[1].setdefault(name, set()).update(found)
            for reason, items in examples.items():
                mine[2][reason] = sorted(mine[2].get(reason, []) + items)[:EXAMPLES_PER_REASON]
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
    document = {namespace: (Counter(counts), declared, sampled if i == 0 else {}) for i, namespace in enumerate(namespaces)}
    kernels = native.take_used()  # which C kernels this task ran, beside the counters (``kernels()``)
    if kernels:
        document[KERNELS_NAMESPACE] = (Counter(), {name: {state} for name, state in kernels.items()}, {})
    return document


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


def _run_writer(out_dir: str, name: str, splits, offsets, counts, run_bytes: int, beam_args):
    """Each partition's ``(split position, Document)`` pairs as sorted runs: up to
    ``run_bytes`` of encoded rows sorted by (shard, md5(url), url, timestamp, md5(text)) and
    each shard's slice staged as one run file; yields ``(shard of all splits, run path)``."""
    def spill(rows):
        rows.sort()  # (shard, sort key, line): a total order, as Beam's runs
        run_id = new_run_id()
        for shard, group in itertools.groupby(rows, key=lambda r: r[0]):
            position = bisect.bisect_right(offsets, shard) - 1
            path = run_path(out_dir, f"{name}-{splits[position][0]}", shard - offsets[position], run_id)
            write_run(path, ((key, line) for _, key, line in group))
            yield shard, path

    def run(items):
        on_worker(beam_args)
        rows, size = [], 0
        for position, doc in items:
            shard, _, key, line = encode_row(doc, counts[position])
            rows.append((offsets[position] + shard, key, line))
            size += len(line)
            if size >= run_bytes:
                yield from spill(rows)
                rows, size = [], 0
        yield from spill(rows)
    return run


def _shard_merger(out_dir: str, formats: tuple[str, ...], name: str, splits, offsets, tallies, beam_args):
    def write(shards):
        on_worker(beam_args)
        out = []
        for shard, paths in shards:
            position = bisect.bisect_right(offsets, shard) - 1
            split, count = splits[position]
            entries, _ = write_shard(out_dir, formats, name, split, shard - offsets[position], count, merged_runs(paths) if paths else iter(()))
            tallies.add(tally_of((WRITE_NAMESPACE,), {WRITTEN_PARTS: 1}, OTHER))
            out.extend((split, entry) for entry in entries)
        return out
    return write


class SparkJob:
    """One job's RDD wiring on a session: steps, counters, errors, shards."""

    def __init__(self, spark: SparkSession, beam_args=()):
        self.sc = spark.sparkContext
        ship_project(self.sc)
        self._tallies = self.sc.accumulator({}, Keyed())
        self._errors = self.sc.accumulator({}, Keyed())
        self._steps = itertools.count()
        self.beam_args = tuple(beam_args)
        self.partitions = max(2, self.sc.defaultParallelism)
        self.persisted = []

    @property
    def tallies(self) -> StepAccumulator:
        """A new step's handle on the job's counters (each partition function takes its own)."""
        return StepAccumulator(self._tallies, next(self._steps), _tally_weight)

    @property
    def errors(self) -> StepAccumulator:
        """A new step's handle on the job's error rows."""
        return StepAccumulator(self._errors, next(self._steps), _rows_weight)

    def rows(self) -> tuple:
        """``(accumulator, step handle factory)`` for rows a job gathers besides errors
        (decontaminate's ``_removed.jsonl``): ``keyed_values(accumulator)`` reads them."""
        accumulator = self.sc.accumulator({}, Keyed())
        return accumulator, lambda: StepAccumulator(accumulator, next(self._steps), _rows_weight)

    def files(self, files: list[str]):
        """``(index, file)`` pairs, one partition per file (a file is a unit of work, as in Beam)."""
        if not is_local(self.sc.master):  # executors resolve a relative path in their own working folders
            files = [absolute_local_path(f) for f in files]
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

    def write_shards(self, docs, out_dir: str, formats, name: str, splits: list[tuple[str, int]], run_bytes: int = RUN_BYTES) -> None:
        """``(split position, Document)`` pairs -> ``<name>-<split>.NNNNN-of-MMMMM.<ext>`` for
        every split of ``splits`` (``(split, number of shards)``), every index that holds a document, and
        their manifest entries staged for ``_SUCCESS`` (``storage.record_written``).

        As Beam's ``--shard_sort runs``: each partition sorts its rows in runs of at most
        ``run_bytes`` and stages each shard's slice under ``_temporary/runs/``; only the run
        paths reach the driver, and one task per shard merges its runs into every format
        (``shard_io.write_shard``). No shuffle carries text."""
        counts = [count for _, count in splits]
        offsets = [sum(counts[:i]) for i in range(len(counts))]
        total = sum(counts)
        runs: dict[int, list[str]] = {shard: [] for shard in range(total)}
        for shard, path in docs.mapPartitions(_run_writer(out_dir, name, splits, offsets, counts, run_bytes, self.beam_args)).collect():
            runs[shard].append(path)
        shards = self.sc.parallelize([(shard, sorted(runs[shard])) for shard in range(total)], total)
        entries = shards.mapPartitions(_shard_merger(out_dir, tuple(formats), name, splits, offsets, self.tallies, self.beam_args)).collect()
        for split, _ in splits:
            storage.record_written(out_dir, f"{name}-{split}", [entry for s, entry in entries if s == split])

    def cogroup(self, named: dict):
        """``{name: RDD of (key, value)}`` -> ``(key, {name: values})`` for every key of any of
        them, as Beam's ``CoGroupByKey`` of a dict of PCollections yields it."""
        names = list(named)
        first, *rest = (named[name] for name in names)
        grouped = first.cogroup(rest[0], self.partitions) if len(rest) == 1 else first.groupWith(*rest)
        return grouped.map(lambda keyed: (keyed[0], dict(zip(names, keyed[1], strict=True))))

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

    def _merged(self) -> dict:
        return merge_tallies(keyed_values(self._tallies))

    def counters(self) -> dict[str, dict[str, int]]:
        """Every counter, ``{namespace: {name: value}}`` sorted, as ``jobs.counters_of``."""
        return {namespace: dict(sorted(counts.items())) for namespace, (counts, _, _) in sorted(self._merged().items()) if counts}

    def units(self) -> dict[str, dict[str, str]]:
        return resolve_units({namespace: units for namespace, (_, units, _) in self._merged().items() if units and namespace != KERNELS_NAMESPACE})

    def kernels(self) -> dict:
        """_stats.json's ``kernels``, as Beam's ``kernels_of``: what every task's worker ran, and the driver."""
        return kernels_document(self._merged().get(KERNELS_NAMESPACE, (None, {}, None))[1])

    def examples(self) -> dict:
        return examples_document([(f"{namespace}/{reason}", items)
                                  for namespace, (_, _, examples) in self._merged().items() for reason, items in examples.items()])

    def error_rows(self) -> list[dict]:
        return [row for rows in keyed_values(self._errors) for row in rows]
