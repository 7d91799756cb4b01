"""Beam's portable runner on clean workers: the job server and worker pool of
``pipelines.portable`` as real processes, whose SDK workers

- run a Python that cannot import corpusforge (a venv made once per test session that sees
  the requirements, this venv's site-packages, through a ``.pth`` path line: the editable
  install's own ``.pth`` finder inside it is not processed);
- start with a clean environment (no ``NLTK_DATA``, no ``PYTHONPATH``) in a temporary working
  folder, not the checkout;
- get the project only from the sdist the job stages (``--setup_file``), which the pool
  fetches through the artifact service and pip-installs for them (``pipelines/worker_boot.py``).

On it, ``corpusforge c4`` and ``corpusforge audit`` write the DirectRunner's bytes and
counters (NLTK's punkt travels inside the job's rules: the workers have no NLTK data), a job
that stages nothing fails (the bed is clean), and a worker killed mid-job fails the job
without ``_SUCCESS``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from test_audit_pipeline import benchmark_heads
from test_object_store import bound_port, wait_for
from test_portable import HANG_GUARD_S, children

from common import storage
from pipelines.jobs import STATS_FILE
from pipelines.shard_io import WRITE_NAMESPACE
from samplecrawl.crawl import write_sample_crawl

pytestmark = pytest.mark.pipeline  # Beam jobs on the PortableRunner in subprocesses: not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("common", "corpus", "dedup", "pipelines", "model")
NAMES_ITS_FOLDER = ("audit.json", STATS_FILE)  # compared with the output folder's name replaced


def clean_environment(home: Path) -> dict[str, str]:
    """What a cluster node's service starts with: no NLTK_DATA, no PYTHONPATH, nothing of the launcher's."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


@pytest.fixture(scope="session")
def worker_python(tmp_path_factory) -> Path:
    """A Python that holds the requirements and cannot import corpusforge."""
    venv = tmp_path_factory.mktemp("worker-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    home = tmp_path_factory.mktemp("worker-home")
    env = clean_environment(home)
    site = subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True, env=env, cwd=home).strip()
    (Path(site) / "zz_requirements.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = ("import importlib.util, apache_beam, nltk, pip, setuptools; "
             f"print(sorted(p for p in {PROJECT_PACKAGES!r} if importlib.util.find_spec(p) is not None))")
    found = subprocess.run([str(python), "-c", probe], env=env, cwd=home, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.split("\n")[0] == "[]", f"the worker Python imports the project: {found.stdout}"
    return python


def start(command: list[str], log_path: Path, env: dict, cwd: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)


def stop(process: subprocess.Popen) -> None:
    """SIGTERM by pid, SIGKILL after 10 s; then any worker of it still alive, by pid."""
    left = list(children(process.pid)) if process.poll() is None else []
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def bed(worker_python, tmp_path_factory):
    """The job server and the worker pool, started clean in a temporary folder; stopped by pid."""
    folder = tmp_path_factory.mktemp("clean-bed")
    env = clean_environment(folder)
    services = []
    try:
        pool = start([sys.executable, "-m", "pipelines.portable", "worker-pool", "--port", "0", "--worker_python", str(worker_python)],
                     folder / "pool.log", env, folder)
        services.append(pool)
        jobs = start([sys.executable, "-m", "pipelines.portable", "job-server", "--port", "0"], folder / "jobs.log", env, folder)
        services.append(jobs)
        pool_port, job_port = bound_port(pool, folder / "pool.log"), bound_port(jobs, folder / "jobs.log")
        yield {"folder": folder, "pool": pool, "pool_log": folder / "pool.log", "worker_python": worker_python,
               "options": ["--runner", "PortableRunner", "--job_endpoint", f"localhost:{job_port}", "--environment_type",
                           "EXTERNAL", "--environment_config", f"localhost:{pool_port}", "--direct_num_workers", "2"]}
    finally:
        for process in reversed(services):
            stop(process)


def corpusforge(argv: list[str], timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """The corpusforge command as a user runs it from the checkout (``--setup_file ./beam_setup.py``
    is relative to it), with this session's NLTK data: the launcher has punkt, the workers do not."""
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "-q", *argv], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, text=True, timeout=timeout)


def c4_args(crawl, real_data: Path, out: Path) -> list[str]:
    return ["c4", "--input", *crawl.wet_paths, "--output", str(out), "--badwords", str(real_data / "badwords" / "en"),
            "--num_shards", "2"]


def manifest(folder: Path) -> dict[str, dict]:
    return {entry["name"]: entry for entry in storage.read_success(str(folder))["files"]}


def without_engine_work(stats: dict) -> dict:
    """_stats.json less the shard writer's tallies (``write-shards``: sorted runs, one a bundle,
    so their number follows the workers), the one namespace that counts an engine's own work."""
    for key in ("counters", "units"):
        stats.get(key, {}).pop(WRITE_NAMESPACE, None)
    return stats


def assert_same_output(direct: Path, portable: Path) -> None:
    """Every file ``_SUCCESS`` lists, byte for byte (a file naming its own folder with the name
    replaced); ``_stats.json`` whole (counters, units, examples) but for ``without_engine_work``."""
    expected, got = manifest(direct), manifest(portable)
    assert sorted(got) == sorted(expected)
    for name, entry in expected.items():
        want, have = (direct / name).read_bytes(), (portable / name).read_bytes()
        if name in NAMES_ITS_FOLDER:
            have = have.replace(str(portable).encode(), str(direct).encode())
        else:
            assert got[name] == entry, name
        if name == STATS_FILE:
            assert without_engine_work(json.loads(have)) == without_engine_work(json.loads(want))
        else:
            assert have == want, name


@pytest.fixture(scope="module")
def direct_c4(small_crawl, real_data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("direct-c4") / "c4"
    done = corpusforge(c4_args(small_crawl, real_data, out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_c4_on_clean_workers_is_byte_identical_to_the_direct_runner(bed, direct_c4, small_crawl, real_data, tmp_path):
    out = tmp_path / "c4"
    done = corpusforge(c4_args(small_crawl, real_data, out) + bed["options"] + ["--setup_file", "corpusforge"])
    assert done.returncode == 0, done.stderr[-3000:] + bed["pool_log"].read_text(errors="replace")[-3000:]
    assert "--id=worker_1" in bed["pool_log"].read_text(errors="replace")  # two clean workers ran it
    assert_same_output(direct_c4, out)
    stats = json.loads((out / STATS_FILE).read_text())
    assert stats["counters"]["dedupe-lines"]["filtered:too_few_sentences"] > 0  # punkt ran on the workers
    assert sum(stats["counters"][WRITE_NAMESPACE].values()) >= 2  # the shard writer ran on both workers' bundles


def test_audit_on_clean_workers_is_byte_identical_to_the_direct_runner(bed, direct_c4, real_data, tmp_path):
    specs = benchmark_heads(real_data, tmp_path / "benchmarks", ("lambada", "wikitext2"))
    args = ["audit", "--corpus", str(direct_c4), "--benchmark", *specs.values(), "--filter_parts", "2", "--fp_queries", "20000"]
    direct = corpusforge(args + ["--output", str(tmp_path / "direct")])
    assert direct.returncode == 0, direct.stderr[-3000:]
    portable = corpusforge(args + ["--output", str(tmp_path / "portable"), *bed["options"], "--setup_file", "./beam_setup.py"])
    assert portable.returncode == 0, portable.stderr[-3000:] + bed["pool_log"].read_text(errors="replace")[-3000:]
    assert_same_output(tmp_path / "direct", tmp_path / "portable")
    assert {"report.json", "bloom/bloom-part-00000-of-00002.bin", "bloom/bloom.json"} <= set(manifest(tmp_path / "portable"))


def test_a_job_that_stages_nothing_fails_on_clean_workers(bed, small_crawl, real_data, tmp_path):
    # The bed is clean: without --setup_file no worker can unpickle the job's rules.
    out = tmp_path / "c4"
    done = corpusforge(c4_args(small_crawl, real_data, out) + bed["options"])
    assert done.returncode != 0
    assert "No module named 'pipelines'" in done.stderr + bed["pool_log"].read_text(errors="replace")
    assert not (out / "_SUCCESS").exists()


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def test_a_worker_killed_on_clean_workers_fails_the_job_without_success(bed, real_data, tmp_path):
    crawl = write_sample_crawl(tmp_path / "crawl", seed=0, pages=600)  # long enough to be killed mid-job
    out = tmp_path / "c4"
    launcher = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "-q", *c4_args(crawl, real_data, out), *bed["options"],
                                 "--setup_file", "./beam_setup.py"],
                                cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pool = bed["pool"].pid
    try:
        def processing() -> bool:  # the workers run bundles: pages are being staged under _temporary/
            staged = [p for p in (out / "_temporary").rglob("*") if p.is_file() and p.name != "job.json"]
            return bool(staged) and bool(children(pool))

        wait_for(processing, "the job's workers to process bundles", timeout=HANG_GUARD_S)
        victim = sorted(children(pool))[0]
        # What the worker runs in: the worker Python, the pool's clean environment and folder, the job's sdist.
        env = environ_of(victim)
        assert "NLTK_DATA" not in env
        assert env["PYTHONPATH"].startswith(tempfile_root(bed)) and "packages" in env["PYTHONPATH"], env["PYTHONPATH"]
        assert {p.name for p in Path(env["PYTHONPATH"]).iterdir()} >= set(PROJECT_PACKAGES)
        assert Path(f"/proc/{victim}/cwd").resolve() == bed["folder"].resolve()
        command = Path(f"/proc/{victim}/cmdline").read_bytes().decode().split("\0")
        assert command[0] == str(bed["worker_python"]) and "apache_beam.runners.worker.sdk_worker_main" in command, command
        os.kill(victim, signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=HANG_GUARD_S)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 1, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "a worker of the job died" in errors[0], errors
    wait_for(lambda: f"(pid {victim}) was killed by SIGKILL" in bed["pool_log"].read_text(errors="replace"),
             "the pool's report", timeout=30)
    assert not (out / "_SUCCESS").exists()


def tempfile_root(bed) -> str:
    """The pool's temporary folder (its start-up line: ``boot script under /tmp/...;``)."""
    line = next(line for line in bed["pool_log"].read_text(errors="replace").splitlines() if "boot script under" in line)
    return line.split("boot script under ", 1)[1].split(";", 1)[0].strip()
