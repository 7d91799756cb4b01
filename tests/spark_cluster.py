"""A Spark standalone cluster on 127.0.0.1 for the cluster tests: a Master and Workers, each
its own JVM started with a clean environment (no PYTHONPATH, no NLTK_DATA, no project on any
path, a working folder of its own), and executors whose Python cannot import corpusforge.

- ``hidden_project_python(folder)``: a venv whose site-packages lists this test venv's
  site-packages in a ``.pth`` line. Such a line puts the folder on ``sys.path`` but runs none of
  the ``.pth`` files inside it, so the requirements import and the editable install's finder
  (``__editable__...pth``) never loads: ``import corpus`` fails unless the job shipped it. This is
  the executors' Python: what YARN, EMR, Dataproc and standalone clusters look like.
- ``Cluster``: ``start()`` the Master, ``add_worker()`` each Worker (one core, its own work
  folder), ``kill_worker(i)`` (SIGKILL of the Worker and of the executor JVMs it started: a
  lost node), ``stop()`` by pid. ``alive_workers()`` asks the Master's JSON page.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pyspark

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))
# The daemons' and executors' JVM flags for short runs (as pipelines.spark_launch.SHORT_RUN_JVM_OPTIONS).
SHORT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_environment(home: Path, **extra: str) -> dict[str, str]:
    """What a cluster's daemon starts with: a PATH that finds bash and java, JAVA_HOME if
    set, Spark's home, loopback binding, a HOME of its own; nothing of the launcher's."""
    java = shutil.which("java")
    path_dirs = ["/usr/bin", "/bin"] + ([os.path.dirname(os.path.realpath(java))] if java else [])
    env = {"PATH": os.pathsep.join(path_dirs), "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1", "HOME": str(home),
           "LANG": "C.UTF-8", "SPARK_DAEMON_JAVA_OPTS": SHORT_JVM, "SPARK_DAEMON_MEMORY": "512m"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env.update(extra)
    return env


def hidden_project_python(folder: Path) -> str:
    """A Python with this venv's packages but not the project (see the module's docstring)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = str(folder / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "test-venv-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


class Cluster:
    """A standalone Master and its Workers on 127.0.0.1, every process stopped by its pid."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port, self.ui_port = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self.work_dirs: list[Path] = []

    def _daemon(self, name: str, args: list[str]) -> subprocess.Popen:
        home = self.folder / name
        home.mkdir(parents=True, exist_ok=True)
        log = open(home / "daemon.log", "wb")  # noqa: SIM115  (the daemon writes it while it lives)
        try:
            return subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), *args], cwd=home, env=clean_environment(home),
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def start(self, timeout_s: float = 90) -> Cluster:
        self.master = self._daemon("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                              "--port", str(self.port), "--webui-port", str(self.ui_port)])
        self._wait(lambda: self.state() is not None, timeout_s, "the Master to answer")
        return self

    def add_worker(self, timeout_s: float = 90) -> int:
        index = len(self.workers)
        work_dir = self.folder / f"worker-{index}" / "work"
        work_dir.mkdir(parents=True, exist_ok=True)
        before = self.alive_workers()
        self.workers.append(self._daemon(f"worker-{index}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1", "--memory", "1500m",
            "--work-dir", str(work_dir), "--webui-port", str(free_port()), self.master_url]))
        self.work_dirs.append(work_dir)
        self._wait(lambda: self.alive_workers() > before, timeout_s, f"worker {index} to register")
        return index

    def state(self) -> dict | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                return json.loads(response.read())
        except (OSError, ValueError):  # not listening yet, or its UI up before its JSON (an empty answer)
            return None

    def alive_workers(self) -> int:
        state = self.state() or {}
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def app_names(self) -> list[str]:
        state = self.state() or {}
        return [app["name"] for key in ("activeapps", "completedapps") for app in state.get(key, [])]

    def executor_logs(self, index: int) -> list[Path]:
        """The stderr files of the executors worker ``index`` ran."""
        return sorted(self.work_dirs[index].glob("app-*/*/stderr"))

    def finished_tasks(self, index: int) -> int:
        """Tasks the executors of worker ``index`` have finished (their INFO lines)."""
        return sum(log.read_text(errors="replace").count("Finished task") for log in self.executor_logs(index))

    def kill_worker(self, index: int) -> None:
        """A lost node: SIGKILL of the Worker's whole process group (the Worker and the executor
        JVMs, with their Python workers, that it started)."""
        worker = self.workers[index]
        if worker is None:
            return
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait(timeout=30)
        self.workers[index] = None

    def stop(self) -> None:
        for index in range(len(self.workers)):
            self.kill_worker(index)
        if self.master is not None:
            try:
                os.killpg(self.master.pid, signal.SIGTERM)
                self.master.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.master.pid, signal.SIGKILL)
                self.master.wait(timeout=20)
            self.master = None

    @staticmethod
    def _wait(ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.5)
        raise TimeoutError(f"timed out waiting for {what}")
