"""Beam's PortableRunner on one machine with workers in separate processes: a job server
and a worker pool.

    python -m pipelines.portable worker-pool --port 50000 &
    python -m pipelines.portable job-server --port 8099 &
    corpusforge c4 --input s3://bucket/wet/ --output s3://bucket/c4 --runner PortableRunner \\
        --job_endpoint localhost:8099 --environment_type EXTERNAL --environment_config localhost:50000 \\
        --direct_num_workers 2 --s3_endpoint_url http://127.0.0.1:9000

**Job server.** Beam's local job service (``--job_endpoint embed``, or
``apache_beam.runners.portability.local_job_service_main``) runs every job with one SDK
worker, whatever the options say. This one runs a job with ``--direct_num_workers`` workers
(default 1), each asked of the worker pool, and bundles of every stage spread over them.

**Worker pool.** Beam's own pool (``python -m apache_beam.runners.worker.worker_pool_main``) starts each
worker as ``SdkHarness(...)`` directly, which never hands the job's pipeline options to
Beam's ``FileSystems``: a worker then cannot reach an S3 endpoint, credentials or a GCP
project given as options. This pool starts each worker the way Beam's container boot
program does (``pipelines/worker_boot.py``): it asks the runner's provision service for the
job's options and staged artifacts, fetches the artifacts through the artifact service,
``pip install --no-deps`` the job's packages (``--setup_file``'s sdist, ``--extra_package``)
into a folder put first on that worker's ``PYTHONPATH``, puts the options in the
environment (``PIPELINE_OPTIONS``, the control and logging endpoints) and runs
``apache_beam.runners.worker.sdk_worker_main``, which configures FileSystems from them.
Workers run ``--worker_python`` (default: the pool's own Python), which must hold the
requirements (``requirements.txt``) and need not hold corpusforge when the job stages it:

    python -m pipelines.portable worker-pool --port 50000 --worker_python /opt/workers/bin/python &
    corpusforge c4 ... --runner PortableRunner ... --setup_file corpusforge

A worker runs in the pool's working folder with the pool's environment: start the pool
where it should be (not in a checkout, whose packages a worker would import first).

**Hygiene.** A job cancelled by its launcher (Ctrl-C or SIGTERM of ``corpusforge ...``,
which asks the job server to cancel) stops before its next bundle and ends CANCELLED; its
workers are stopped and nothing is committed. The pool reaps every worker that ends (no
zombies), and one that dies while its job runs (killed, out of memory) is reported in one
line with what to do; the job fails at once (``AbortingControlConnection``) instead of
waiting for an answer the dead worker will never send. Each job's staged artifacts are removed when it ends, and a service
stopped with SIGTERM or Ctrl-C removes its own temporary folders.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.portability.api import beam_job_api_pb2
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers
from apache_beam.runners.runner import PipelineState
from apache_beam.runners.worker.worker_pool_main import BeamFnExternalWorkerPoolServicer

from pipelines.progress import LOST_WORKER

log = logging.getLogger(__name__)


WORKER_BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_boot.py")


def _boot_script(folder: str, worker_python: str) -> str:
    """The executable the pool runs per worker: ``worker_python`` running a copy of
    ``worker_boot.py`` (which imports no corpusforge), installing jobs' packages under ``folder``."""
    boot = shutil.copy(WORKER_BOOT, os.path.join(folder, "worker_boot.py"))
    path = os.path.join(folder, "corpusforge-worker-boot")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'#!/bin/sh\nexec {shlex.quote(worker_python)} {shlex.quote(boot)} '
                f'--install_root {shlex.quote(os.path.join(folder, "packages"))} "$@"\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


REAP_INTERVAL_S = 0.5


class ReapingWorkerPool(BeamFnExternalWorkerPoolServicer):
    """Beam's process worker pool, reaping each worker that ends by itself (Beam's waits only
    for the ones it is asked to stop, so the others stay zombies) and reporting one that died."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        threading.Thread(target=self._reap_forever, name="reap workers", daemon=True).start()

    def _reap_forever(self) -> None:
        while True:
            time.sleep(REAP_INTERVAL_S)
            self.reap()

    def reap(self) -> None:
        for worker_id, process in list(self._worker_processes.items()):
            code = process.poll()  # reaps it when it has ended
            if code is None:
                continue
            self._worker_processes.pop(worker_id, None)
            if code == 0:
                log.debug("worker %s (pid %d) finished", worker_id, process.pid)
                continue
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
            log.error("worker %s (pid %d) %s while its job ran: the job fails and commits nothing; check the "
                      "machine's memory (a SIGKILL is often the kernel's out-of-memory killer: dmesg) and this "
                      "pool's log, then rerun the job with --overwrite", worker_id, process.pid, how)


def worker_pool(port: int, worker_python: str = sys.executable) -> None:
    with tempfile.TemporaryDirectory(prefix="corpusforge-worker-pool-") as folder:
        address, server = ReapingWorkerPool.start(
            port=port, use_process=True, container_executable=_boot_script(folder, worker_python))
        log.info("corpusforge worker pool listening at %s (pid %d; boot script under %s; workers run %s)",
                 address, os.getpid(), folder, worker_python)
        _serve_forever(server)


class AbortingControlConnection(worker_handlers.ControlConnection):
    """Beam's runner side of one worker's control stream, failing the job's instructions to a
    worker that is gone. Beam's reader thread ends with the stream (an error, or a plain end
    when the worker is killed) and leaves every unanswered instruction pending, and the runner
    goes on sending that worker bundles: a worker killed while no data of a bundle was in
    flight left the job waiting forever (the FnApiRunner notices a dead worker only through a
    broken data channel). Here a stream that ends before the runner closes it fails every
    pending instruction and every later one at once, with an error naming ``LOST_WORKER``, so
    the launcher reports it in one line."""

    def __init__(self):
        super().__init__()
        self._lost: RuntimeError | None = None
        self._closing = False

    def _read(self) -> None:
        try:
            super()._read()
            if self._closing:
                return
            how = "it ended"
        except Exception as exc:  # grpc.RpcError: the worker's end of the stream is gone
            how = type(exc).__name__
        self._lost = RuntimeError(f"{LOST_WORKER}: an SDK worker's control stream broke ({how}) "
                                  f"with {len(self._futures_by_id)} instruction(s) unanswered")
        log.error("%s: the job fails", self._lost)  # names LOST_WORKER: a launcher shows it only with -v (pipelines.cli)
        self.abort(self._lost)

    def push(self, req):
        future = super().push(req)  # registered before ``_lost`` is read: either this or ``abort`` fails it
        if future is not None and self._lost is not None:
            future.abort(self._lost)
        return future

    def close(self) -> None:
        self._closing = True  # the stream's end that follows is the runner's doing
        super().close()

    def abort(self, exn: Exception) -> None:
        for future in list(self._futures_by_id.values()):  # a copy: ``push`` may add one meanwhile
            future.abort(exn)


class JobCancelled(Exception):
    """The job's launcher asked the job server to cancel it."""


class CancellableRunner(fn_runner.FnApiRunner):
    """The FnApiRunner, stopping before its next bundle once ``cancelled`` is set (the bundle
    that runs finishes; its files are written atomically, and no ``_SUCCESS`` follows)."""

    def __init__(self, cancelled: threading.Event, **kwargs):
        super().__init__(**kwargs)
        self._cancelled = cancelled

    def _execute_bundle(self, *args, **kwargs):
        if self._cancelled.is_set():
            raise JobCancelled()
        return super()._execute_bundle(*args, **kwargs)


class ParallelBeamJob(local_job_service.BeamJob):
    """A job run by the FnApiRunner with ``--direct_num_workers`` SDK workers, cancellable
    (Beam's local job only marks a cancelled job CANCELLED and runs it to the end)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cancelled = threading.Event()

    def _invoke_runner(self):
        self.set_state(beam_job_api_pb2.JobState.RUNNING)
        options = self.pipeline_options()
        runner = CancellableRunner(self._cancelled, provision_info=self._provision_info)
        runner._num_workers = max(1, int(float(options.view_as(DirectOptions).direct_num_workers or 1)))
        log.info("job %s: %d SDK worker(s)", self._job_id, runner._num_workers)
        try:
            return runner.run_via_runner_api(self._pipeline_proto, options)
        except JobCancelled:
            log.info("job %s: cancelled by its launcher; its workers are stopped", self._job_id)
            return fn_runner.RunnerResult(PipelineState.CANCELLED, {})
        finally:  # the job's staged artifacts are read by its workers only: a long-lived server keeps none
            staged = os.path.join(self._provision_info.artifact_staging_dir or "", self._job_id)
            if self._provision_info.artifact_staging_dir and os.path.isdir(staged):
                shutil.rmtree(staged, ignore_errors=True)

    def cancel(self):
        if not self.is_terminal_state(self.state):
            log.info("job %s: cancelling", self._job_id)
            self._cancelled.set()
            self.set_state(beam_job_api_pb2.JobState.CANCELLING)


def job_server(port: int) -> None:
    # Beam's control servicer makes a connection per worker from this module-level name when it
    # is first asked for one; this process is a job server only, so every job gets the aborting one.
    worker_handlers.ControlConnection = AbortingControlConnection
    servicer = local_job_service.LocalJobServicer(beam_job_type=ParallelBeamJob)
    bound = servicer.start_grpc_server(port)
    log.info("corpusforge job server listening at localhost:%d (pid %d; jobs' artifacts staged under %s)",
             bound, os.getpid(), servicer._staging_dir)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        servicer.stop()


def _stop_on_sigterm(signum, frame):
    raise KeyboardInterrupt("SIGTERM")


def _serve_forever(server) -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop(0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m pipelines.portable", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("service", choices=("worker-pool", "job-server"))
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    parser.add_argument("--worker_python", default=sys.executable, metavar="PATH",
                        help="worker-pool: the Python its SDK workers run (default: this one). It must hold the "
                             "requirements; it need not hold corpusforge when jobs stage it (--setup_file)")
    args = parser.parse_args(argv)
    if args.service == "worker-pool" and not (os.path.isfile(args.worker_python) and os.access(args.worker_python, os.X_OK)):
        parser.error(f"--worker_python {args.worker_python}: not an executable file")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    log.setLevel(logging.INFO)  # Beam's import may have set the root logger to WARNING first
    signal.signal(signal.SIGTERM, _stop_on_sigterm)  # stopped by a service manager: clean up as on Ctrl-C
    if args.service == "worker-pool":
        worker_pool(args.port, os.path.abspath(args.worker_python))
    else:
        job_server(args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
