"""Live progress of a Beam job on stderr, and a quiet stderr while it runs.

``run_pipeline(pipeline, desc, files)`` runs a job and shows how far it is:

- **In-process runners** (the DirectRunner's default ``in_memory`` and ``multi_threading``
  modes): the job's DoFns add to a process-wide tally (``tally("files")``,
  ``tally("records", n)``, ``tally("written", n)``). On a terminal a tqdm line shows it
  live; elsewhere (a log file, CI) a line is logged every ``CORPUSFORGE_PROGRESS_SECONDS``
  (default 30).
- **Dataflow**: ``pipeline.run()`` returns while the job runs; the launcher asks the
  service for the job's metrics every ``CORPUSFORGE_PROGRESS_SECONDS`` and logs the
  reader's counters that show progress (files and records read).
- **Other runners** (the PortableRunner, Flink, Spark): their results answer a metrics
  query once and keep that answer, so the launcher does not ask before the end; the
  runner's own UI shows progress.

Worker processes started on this machine (``--direct_running_mode multi_processing``, the
PortableRunner with a local job server) log their start-up and shutdown on the terminal;
``quiet_worker_args`` sets their log level to WARNING unless the user set one, and
``filtered_stderr`` drops the start-up lines that Beam prints before any level applies.
``corpusforge -v`` keeps all.

Beam is imported by the functions that build, run or read the options of a pipeline, not at
the top of this file: the tally (``tally``, ``record_read``, ``file_read``) is called by the
crawl readers of every engine, and a Spark worker does not load Beam (``pipelines.spark``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from tqdm import tqdm

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

log = logging.getLogger(__name__)

# What the FnApiRunner raises when an SDK worker's data channel breaks (the worker died): the
# launcher turns it into one line (here) and drops the job server's copies of it (pipelines.cli).
LOST_WORKER = "Channel closed prematurely"
LOST_WORKER_CLEANUP = "Error closing worker_handler"

INTERVAL_ENV = "CORPUSFORGE_PROGRESS_SECONDS"
DEFAULT_INTERVAL_S = 30.0
# The reader's counters (read-archive namespace) that tell how far a job is, on Dataflow.
PROGRESS_COUNTERS = ("files", "records:conversion", "records:response")

_lock = threading.Lock()
_tally: Counter = Counter()
enabled = True  # ``corpusforge -q`` turns the display off


def tally(name: str, n: int = 1) -> None:
    """Add ``n`` to the in-process progress count ``name`` (cheap: call per file or per batch)."""
    with _lock:
        _tally[name] += n


RECORDS_PER_TALLY = 1000  # a reader adds its records to the tally in steps of this many


def record_read(number: int) -> None:
    """The reader of one file is at its ``number``-th record (counted from 1)."""
    if number % RECORDS_PER_TALLY == 0:
        tally("records", RECORDS_PER_TALLY)


def file_read(records: int) -> None:
    """One input file finished after ``records`` records: count it, and its records not tallied yet."""
    with _lock:
        _tally["files"] += 1
        _tally["records"] += records % RECORDS_PER_TALLY


def snapshot() -> Counter:
    with _lock:
        return Counter(_tally)


def _interval() -> float:
    try:
        return max(0.1, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


# How the tallies the readers and writers keep are named on the progress line.
_LABELS = {"records": "records", "written": "documents written"}


def describe(counts: Counter, files: int | None, unit: str = "files") -> str:
    """``3/10 files, 2,500 records, ...``: the tally ``unit`` (out of ``files`` when known),
    then every other tally under its own name, so a job says what it counts."""
    parts = [f"{counts.get(unit, 0):,}" + (f"/{files:,}" if files is not None else "") + f" {unit}"]
    for name in [*_LABELS, *sorted(set(counts) - set(_LABELS))]:
        if name != unit and counts.get(name):
            parts.append(f"{counts[name]:,} {_LABELS.get(name, name)}")
    return ", ".join(parts)


def runner_name(options: PipelineOptions) -> str:
    """The job's runner, lower-cased (``directrunner`` when none is named)."""
    from apache_beam.options.pipeline_options import (
        StandardOptions,  # Beam: only where a pipeline runs (module docstring)
    )

    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    return (runner if isinstance(runner, str) else type(runner).__name__).lower()


DIRECT_RUNNERS = ("directrunner", "direct", "fnapirunner", "bundlebaseddirectrunner", "switchingdirectrunner")


def in_process(options: PipelineOptions) -> bool:
    """Whether the job's DoFns run in this process (so the tally sees them)."""
    from apache_beam.options.pipeline_options import (
        DirectOptions,  # Beam: only where a pipeline runs (module docstring)
    )

    if runner_name(options) not in DIRECT_RUNNERS:
        return False
    return options.view_as(DirectOptions).direct_running_mode in (None, "in_memory", "multi_threading")


class _Display(threading.Thread):
    """Shows the tally: a tqdm line on a terminal, a log line every interval elsewhere."""

    def __init__(self, desc: str, files: int | None, unit: str = "files"):
        super().__init__(daemon=True, name="corpusforge-progress")
        self.desc, self.files, self.unit = desc, files, unit
        self.done = threading.Event()
        self.tty = sys.stderr.isatty()

    def run(self) -> None:
        started = time.monotonic()
        if self.tty:
            with tqdm(total=self.files, desc=self.desc, unit=" " + self.unit, leave=False, file=sys.stderr) as bar:
                while not self.done.wait(0.5):
                    counts = snapshot()
                    bar.n = counts.get(self.unit, 0)
                    rest = describe(counts, None, self.unit).split(", ", 1)
                    bar.set_postfix_str(rest[1] if len(rest) > 1 else "", refresh=True)
            return
        while not self.done.wait(_interval()):
            log.info("%s: %s (%.0f s)", self.desc, describe(snapshot(), self.files, self.unit), time.monotonic() - started)


def run_pipeline(pipeline, desc: str, files: int | None = None, unit: str = "files"):
    """Run ``pipeline`` to the end with progress on stderr; the finished ``PipelineResult``.
    ``files`` is how many of the tally ``unit`` (input files, dumps) the job has in all."""
    options = pipeline.options
    local = in_process(options)
    with _lock:
        _tally.clear()
    display = _Display(desc, files, unit) if enabled and local else None
    if display:
        display.start()
    quiet = starts_local_workers(options) and not logging.getLogger().isEnabledFor(logging.DEBUG)
    try:
        with filtered_stderr() if quiet else contextlib.nullcontext(), terminate_as_interrupt() as stopper:
            if runner_name(options) not in DIRECT_RUNNERS:  # run() returns a handle while the job runs elsewhere:
                stopper.hold()  # a signal during submission waits for that handle, so the job can be cancelled
            result = pipeline.run()
            try:
                stopper.release()
                if not local and enabled and live_metrics(result):
                    _poll_metrics(result, desc)
                result.wait_until_finish()
            except KeyboardInterrupt:
                cancel_job(result)
                raise
            except RuntimeError as exc:
                if not local and LOST_WORKER in str(exc):
                    raise WorkerLostError(
                        "a worker of the job died while it ran (killed, or out of memory): nothing was committed; "
                        "the worker pool's log names it; rerun the job with --overwrite") from exc
                raise
    finally:
        if display:
            display.done.set()
            display.join()
    if enabled and local:
        log.info("%s: %s", desc, describe(snapshot(), files, unit))
    return result


class WorkerLostError(RuntimeError):
    """An SDK worker died under a running job; the message is the one line the command prints.

    Beam's client threads for the dead job (its state and message streams, the portable
    runner's executors) can be left waiting on the job server after the error: the command
    ends its process within ``pipelines.cli.EXIT_GRACE_S`` of printing it (``exit_promptly``)."""

    one_line = True
    exit_promptly = True


class _Stopper:
    """SIGTERM (a scheduler stopping the launcher) handled as Ctrl-C while a job runs, so
    that the job is cancelled where it runs (``cancel_job``) rather than left behind.

    While a job is being submitted to a runner outside this process there is no handle to
    cancel it with yet: ``hold()`` keeps a SIGTERM or Ctrl-C that arrives then, and
    ``release()`` raises it once the handle exists. A second signal while held stops at once."""

    def __init__(self):
        self.holding = False
        self.held: str | None = None
        self.previous: dict[int, object] = {}

    def _interrupt(self, signum, frame):
        name = signal.Signals(signum).name
        if self.holding and self.held is None:
            self.held = name
            return
        raise KeyboardInterrupt(f"signal {name}")

    def install(self, signum: int) -> None:
        if signum not in self.previous:
            self.previous[signum] = signal.signal(signum, self._interrupt)

    def hold(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.holding = True
            self.install(signal.SIGINT)

    def release(self) -> None:
        """Stop holding signals; raise the one that arrived while the job was submitted."""
        if not self.holding:
            return
        self.holding = False
        if signal.SIGINT in self.previous:
            signal.signal(signal.SIGINT, self.previous.pop(signal.SIGINT))
        if self.held:
            raise KeyboardInterrupt(f"signal {self.held}")

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous.clear()


@contextlib.contextmanager
def terminate_as_interrupt():
    """A ``_Stopper`` with SIGTERM raised as ``KeyboardInterrupt`` (main thread only)."""
    stopper = _Stopper()
    if threading.current_thread() is threading.main_thread():
        stopper.install(signal.SIGTERM)
    try:
        yield stopper
    finally:
        stopper.restore()


def cancel_job(result) -> None:
    """Ask the runner to cancel a job that runs outside this process (a job server's,
    Dataflow's): without it the job would go on writing shards that no ``_SUCCESS`` lists."""
    try:
        result.cancel()
    except Exception as exc:  # the job server may be gone too; the interrupt is what gets reported
        log.warning("could not cancel the job in its runner (%s): stop it there", exc)
        return
    log.warning("asked the runner to cancel the job: it stops before its next bundle")


def live_metrics(result) -> bool:
    """Whether asking ``result`` for metrics while the job runs is safe and current: Dataflow
    queries its service each time; the PortableRunner's result keeps the first answer for
    good (asking early would freeze the job's final counters), so it is not asked."""
    return type(result).__name__ == "DataflowPipelineResult"


def _poll_metrics(result, desc: str) -> None:
    """Log the runner's progress counters every interval until the job ends."""
    from apache_beam.runners.runner import PipelineState  # Beam: only where a pipeline runs (module docstring)

    started = time.monotonic()
    while not PipelineState.is_terminal(result.state):
        time.sleep(_interval())
        try:
            counters = result.metrics().query()["counters"]
        except Exception:  # noqa: BLE001 - a runner without live metrics: stop asking
            return
        line = describe_metrics(counters)
        if line:
            log.info("%s: %s (%.0f s)", desc, line, time.monotonic() - started)


def describe_metrics(counters) -> str:
    """``files N, records:conversion N, ...`` from a runner's counter results (attempted
    values: committed ones lag behind while the job runs)."""
    totals = Counter()
    for counter in counters:
        if counter.key.metric.namespace == "read-archive" and counter.key.metric.name in PROGRESS_COUNTERS:
            totals[counter.key.metric.name] += counter.attempted or counter.committed or 0
    return ", ".join(f"{name} {totals[name]:,}" for name in PROGRESS_COUNTERS if name in totals)


# --- quiet workers -------------------------------------------------------------------------
# Lines local worker processes print before their log level is read from the options.
WORKER_STARTUP_LINES = (
    "INFO:__main__:Logging handler created.",
    "INFO:__main__:semi_persistent_directory:",
    "WARNING:__main__:No semi_persistent_directory found",
    "WARNING:root:apitools not found",
    "WARNING:apache_beam.options.pipeline_options:Discarding unparseable args",
    "INFO:__main__:Pipeline_options:",
    "INFO:__main__:Load pipeline options from file",
)


def starts_local_workers(options: PipelineOptions) -> bool:
    """Whether the job runs in worker processes that this machine starts and whose stderr is
    ours: the DirectRunner's ``multi_processing`` mode, the PortableRunner's embedded job server."""
    from apache_beam.options.pipeline_options import (
        DirectOptions,  # Beam: only where a pipeline runs (module docstring)
    )

    runner = runner_name(options)
    if runner in ("directrunner", "direct"):
        return options.view_as(DirectOptions).direct_running_mode == "multi_processing"
    if runner in ("portablerunner", "portable"):
        endpoint = options.get_all_options().get("job_endpoint")
        return endpoint in (None, "embed") or endpoint.split(":")[0] in ("localhost", "127.0.0.1")
    return False


def quiet_worker_args(beam_args: list[str]) -> list[str]:
    """``beam_args`` with ``--default_sdk_harness_log_level WARNING`` when the job's workers
    log on this terminal, unless the user chose a level or asked for debug logs (``-v``)."""
    if logging.getLogger().isEnabledFor(logging.DEBUG) or any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        return list(beam_args)
    from apache_beam.options.pipeline_options import (
        PipelineOptions,  # Beam: only where a pipeline runs (module docstring)
    )

    if not starts_local_workers(PipelineOptions(beam_args)):
        return list(beam_args)
    return list(beam_args) + ["--default_sdk_harness_log_level=WARNING"]


def worker_stderr_filter(line: str) -> bool:
    """Whether a line a local worker process printed on stderr is kept."""
    return not line.startswith(WORKER_STARTUP_LINES)


class filtered_stderr:
    """While active, everything written to file descriptor 2 (this process's and its child
    worker processes') passes through ``keep(line)``; lines it refuses are dropped. Used
    only while no progress bar draws (bars rewrite a line without ending it)."""

    def __init__(self, keep=worker_stderr_filter):
        self.keep = keep

    def __enter__(self):
        sys.stderr.flush()
        self.saved = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.thread = threading.Thread(target=self._forward, args=(read_end,), daemon=True, name="corpusforge-stderr")
        self.thread.start()
        return self

    def _forward(self, read_end: int) -> None:
        pending = b""
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                kept = [line + b"\n" for line in lines if self.keep(line.decode("utf-8", "replace"))]
                if kept:
                    self._write(b"".join(kept))
        if pending and self.keep(pending.decode("utf-8", "replace")):
            self._write(pending)

    def _write(self, data: bytes) -> None:
        try:
            os.write(self.saved, data)
        except OSError:  # the context ended while a lingering worker still wrote
            pass

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)  # closes the pipe's last write end held by this process
        self.thread.join(timeout=5)
        os.close(self.saved)


@contextlib.contextmanager
def pipeline(options: PipelineOptions, desc: str, files: int | None = None):
    """``with progress.pipeline(options, "audit", files=n) as p:`` builds a pipeline that, at
    the end of the block, runs with progress (``run_pipeline``); ``p.result`` is its result."""
    import apache_beam as beam  # only where a pipeline runs (module docstring)

    p = beam.Pipeline(options=options)
    yield p
    p.result = run_pipeline(p, desc, files)
