"""The PortableRunner's job server and worker pool (``pipelines.portable``) as real processes:
the pool reaps the workers of a finished job, a launcher stopped with SIGTERM cancels its job
in the job server, and a worker killed under a running job is reported in one line, whatever
it was doing (its control stream broken with an instruction unanswered fails the job at once).

Each test starts its own job server and worker pool (separate processes on free ports) and
runs ``corpusforge c4`` as a separate launcher process against them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from apache_beam.portability.api import beam_fn_api_pb2
from apache_beam.runners.portability.fn_api_runner.worker_handlers import BeamFnControlServicer, ControlConnection
from test_object_store import bound_port, start_service, stop, wait_for

from pipelines.portable import AbortingControlConnection
from pipelines.progress import LOST_WORKER
from samplecrawl.crawl import write_sample_crawl

pytestmark = pytest.mark.pipeline  # runs Beam jobs on the PortableRunner in subprocesses: not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
HANG_GUARD_S = 300  # a launcher still running after this is a hang, not a slow run


def children(pid: int) -> dict[int, str]:
    """The child processes of ``pid``: pid -> state letter (``Z`` for a zombie)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found[int(entry)] = fields[0]
    return found


@pytest.fixture
def services(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    pool = start_service("worker-pool", tmp_path / "pool.log", env)
    jobs = start_service("job-server", tmp_path / "jobs.log", env)
    try:
        pool_port, job_port = bound_port(pool, tmp_path / "pool.log"), bound_port(jobs, tmp_path / "jobs.log")
        yield {"pool": pool, "jobs": jobs, "pool_log": tmp_path / "pool.log", "jobs_log": tmp_path / "jobs.log",
               "options": ["--runner", "PortableRunner", "--job_endpoint", f"localhost:{job_port}", "--environment_type",
                           "EXTERNAL", "--environment_config", f"localhost:{pool_port}", "--direct_num_workers", "2"]}
    finally:
        stop(jobs)
        stop(pool)


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    """600 pages: a job long enough to be stopped or have a worker killed while it runs."""
    return write_sample_crawl(tmp_path_factory.mktemp("crawl"), seed=0, pages=600)


def launch(crawl, real_data, out: Path, services) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "pipelines.cli", "-q", "c4", "--input", *crawl.wet_paths, "--output", str(out),
                             "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2", *services["options"]],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def job_running(services) -> bool:
    return "SDK worker(s)" in services["jobs_log"].read_text(errors="replace")


def test_the_pool_reaps_the_workers_of_a_finished_job(services, small_crawl, real_data, tmp_path):
    launcher = launch(small_crawl, real_data, tmp_path / "c4", services)  # a job that finishes: any size does
    _, stderr = launcher.communicate(timeout=HANG_GUARD_S)
    assert launcher.returncode == 0, stderr[-3000:]
    assert (tmp_path / "c4" / "_SUCCESS").exists()
    assert "--id=worker_1" in services["pool_log"].read_text(errors="replace")  # two workers ran
    pool = services["pool"].pid
    try:
        wait_for(lambda: not children(pool), "the pool to reap its workers", timeout=60)
    except TimeoutError:
        pass
    assert children(pool) == {}, f"left behind: {children(pool)}"
    staging = Path(logged_folder(services["jobs_log"], "artifacts staged under"))
    assert staging.is_dir() and not list(staging.iterdir()), "the finished job's staged artifacts were kept"
    boot = Path(logged_folder(services["pool_log"], "boot script under"))
    stop(services["jobs"])  # SIGTERM, as a service manager stops it
    stop(services["pool"])
    assert not staging.exists() and not boot.exists(), "a service stopped with SIGTERM left its temporary folder"


def logged_folder(log_path: Path, label: str) -> str:
    """The folder a service's start-up line names after ``label`` (``...; label /tmp/x)``)."""
    for line in log_path.read_text(errors="replace").splitlines():
        if label in line:
            return line.split(label, 1)[1].strip().rstrip(")")
    raise AssertionError(f"no {label!r} line in {log_path}")


def test_sigterm_to_the_launcher_cancels_its_job_in_the_job_server(services, crawl, real_data, tmp_path):
    out = tmp_path / "c4"
    launcher = launch(crawl, real_data, out, services)
    wait_for(lambda: job_running(services), "the job to start", timeout=HANG_GUARD_S)
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=HANG_GUARD_S)
    assert launcher.returncode == 130, stderr[-3000:]
    assert "asked the runner to cancel the job" in stderr and "Traceback" not in stderr
    wait_for(lambda: "cancelled by its launcher" in services["jobs_log"].read_text(errors="replace"),
             "the job server to cancel the job", timeout=HANG_GUARD_S)
    assert not (out / "_SUCCESS").exists()
    assert not list(out.glob("**/c4-train.*"))  # the job stopped before writing its shards


def test_a_worker_killed_under_a_running_job_is_reported_in_one_line(services, crawl, real_data, tmp_path):
    out = tmp_path / "c4"
    launcher = launch(crawl, real_data, out, services)
    pool = services["pool"].pid

    def processing() -> bool:  # the workers run bundles: pages are being staged under _temporary/
        staged = [p for p in (out / "_temporary").rglob("*") if p.is_file() and p.name != "job.json"]
        return bool(staged) and bool(children(pool))

    wait_for(processing, "the job's workers to process bundles", timeout=HANG_GUARD_S)
    victim = sorted(children(pool))[0]
    os.kill(victim, signal.SIGKILL)
    _, stderr = launcher.communicate(timeout=HANG_GUARD_S)
    assert launcher.returncode == 1
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "a worker of the job died" in errors[0] and "--overwrite" in errors[0], errors
    assert "Traceback" not in stderr
    wait_for(lambda: f"(pid {victim}) was killed by SIGKILL" in services["pool_log"].read_text(errors="replace"),
             "the pool's report", timeout=30)
    assert not (out / "_SUCCESS").exists()
    assert victim not in children(pool)


class _StreamBroke(grpc.RpcError):
    """What gRPC raises on the runner's side when a worker's end of the control stream is gone."""


def _lost_worker_stream(answer_first: str, breaks: bool):
    """A worker's control stream that answers one instruction, then breaks (an error) or ends
    (what the runner sees of some killed workers)."""
    yield beam_fn_api_pb2.InstructionResponse(instruction_id=answer_first)
    if breaks:
        raise _StreamBroke()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # Beam's reader thread dies with the stream
@pytest.mark.parametrize("breaks", [True, False], ids=["stream-error", "stream-end"])
@pytest.mark.parametrize("connection, fails_fast", [(AbortingControlConnection, True), (ControlConnection, False)], ids=["ours", "beams"])
def test_a_lost_workers_control_stream_fails_its_unanswered_and_later_instructions_at_once(connection, fails_fast, breaks):
    # The hang the job server guards against: Beam's own connection leaves the unanswered
    # instruction, and any sent after the worker died, pending for good.
    conn = connection()
    answered = conn.push(beam_fn_api_pb2.InstructionRequest(instruction_id="bundle-1"))
    pending = conn.push(beam_fn_api_pb2.InstructionRequest(instruction_id="bundle-2"))
    conn.set_input(_lost_worker_stream("bundle-1", breaks))
    conn._read_thread.join(timeout=30)
    assert not conn._read_thread.is_alive()
    later = conn.push(beam_fn_api_pb2.InstructionRequest(instruction_id="bundle-3"))
    assert answered.get(timeout=1).instruction_id == "bundle-1"
    if fails_fast:
        for future in (pending, later):
            with pytest.raises(RuntimeError, match=LOST_WORKER) as lost:
                future.get(timeout=1)
        assert "1 instruction(s) unanswered" in str(lost.value)
        assert ("_StreamBroke" if breaks else "it ended") in str(lost.value)
    else:
        assert not any(f.is_done() or f._exception for f in (pending, later))


def test_a_control_stream_the_runner_closes_fails_nothing():
    conn = AbortingControlConnection()

    def worker():  # answers every instruction until the runner's done marker, then ends the stream
        while (request := conn.get_req()) is not BeamFnControlServicer._DONE_MARKER:
            yield beam_fn_api_pb2.InstructionResponse(instruction_id=request.instruction_id)

    conn.set_input(worker())
    answered = conn.push(beam_fn_api_pb2.InstructionRequest(instruction_id="bundle-1"))
    assert answered.get(timeout=30).instruction_id == "bundle-1"
    conn.close()
    assert not conn._read_thread.is_alive() and conn._lost is None
