"""The Spark jobs on a real standalone cluster (``tests/spark_cluster.py``): a Master and two
Workers on 127.0.0.1, each its own JVM started with a clean environment, executors on a
Python that cannot import corpusforge (the job ships it) and that has no NLTK data (punkt
travels with the job). Each job's output equals Beam's DirectRunner's: every shard, the
``_SUCCESS`` list and _stats.json's counters, units and examples (``assert_same_output``);
a Worker killed mid-job changes none of it; a cluster left with no executor ends the job in
one line with nothing committed. Every service is stopped by its pid, also when a test fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")

from spark_cluster import SHORT_JVM, SPARK_HOME, Cluster, hidden_project_python  # noqa: E402
from test_packaging import project_wheel  # noqa: E402
from test_spark_engine import assert_same_output, variant_args  # noqa: E402
from test_spark_jobs_audit import assert_same_output as assert_same_files  # noqa: E402
from test_spark_jobs_tokweb import same_files  # noqa: E402

from pipelines.c4 import job as c4_pipeline  # noqa: E402
from pipelines.cli import run_job  # noqa: E402
from pipelines.spark_package import LAUNCHER_NAME, ZIP_NAME  # noqa: E402

pytestmark = [pytest.mark.pipeline, pytest.mark.slow, pytest.mark.usefixtures("java")]

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "pipelines.cli"]
# Every job's session on the cluster: small executors with the short-run JVM flags.
EXECUTOR_CONF = {"spark.executor.memory": "768m", "spark.executor.extraJavaOptions": SHORT_JVM}
WET_FILES = ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz")
# C4's input for the fault tests: real WET and WARC files (extraction makes the first stage long enough to lose a node in).
C4_FILES = (*WET_FILES, "warc/resiliparse/warcfile.warc.gz", "warc/whirlwind/whirlwind.warc.gz")


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> str:
    return hidden_project_python(tmp_path_factory.mktemp("executor-venv") / "venv")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The Master and two Workers, one core each; stopped by pid at the end."""
    bed = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        bed.start()
        bed.add_worker()
        bed.add_worker()
        yield bed
    finally:
        bed.stop()


def driver_environment(executor_python: str | None, **extra: str) -> dict[str, str]:
    """The launcher's environment (its NLTK data included) with the executors' Python named
    (``None``: not in the environment) and the driver bound to loopback; nothing puts the
    project on an executor's path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "CORPUSFORGE_CACHE": os.path.join(tempfile.gettempdir(), "corpusforge-test-cache")})
    if executor_python is not None:
        env["PYSPARK_PYTHON"] = executor_python
    env.update(extra)
    return env


def conf_args(conf: dict[str, str]) -> list[str]:
    return [arg for key, value in conf.items() for arg in ("--spark_conf", f"{key}={value}")]


def test_the_executors_python_has_the_requirements_and_not_the_project(executor_python, tmp_path):
    missing = subprocess.run([executor_python, "-c", "import corpus"], cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert missing.returncode != 0 and "No module named 'corpus'" in missing.stderr
    present = subprocess.run([executor_python, "-c", "import pyspark, langdetect, trafilatura, pyarrow, nltk"], cwd=tmp_path, capture_output=True,
                             text=True, env={"PATH": "/usr/bin:/bin"})
    assert present.returncode == 0, present.stderr


def test_c4_through_the_cli_with_a_relative_output_and_a_worker_killed_mid_job_equals_beam(cluster, executor_python, real_data, tmp_path):
    inputs = [str(real_data / name) for name in C4_FILES]
    args = ["--input", *inputs, "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2", "--num_validation_shards", "1"]
    beam_stats = c4_pipeline.run([*args, "--output", str(tmp_path / "beam")])
    workdir = tmp_path / "launcher"
    workdir.mkdir()
    conf = {**EXECUTOR_CONF, "spark.pyspark.python": executor_python}  # as a setting, not PYSPARK_PYTHON: the CLI hands it on
    job = subprocess.Popen([*CLI, "c4", *args, "--output", "spark", "--engine", "spark", "--spark_master", cluster.master_url, *conf_args(conf)],
                           cwd=workdir, env=driver_environment(None, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while cluster.finished_tasks(1) == 0 and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        still_running = job.poll() is None
        cluster.kill_worker(1)  # a lost node: its executor's shuffle output is gone and recomputed elsewhere
        out, err = job.communicate(timeout=600)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        cluster.add_worker()  # the next tests get two Workers again
    assert still_running, "the job ended before a task of the second Worker finished: nothing was lost mid-job"
    assert job.returncode == 0, err.decode()[-3000:]
    survivor = "".join(log.read_text(errors="replace") for log in cluster.executor_logs(0))
    assert re.search(r"Finished task \d+\.[1-9]\d* in stage|Finished task \d+\.\d+ in stage \d+\.[1-9]", survivor)  # work was redone
    spark_out = workdir / "spark"  # the relative --output, resolved on the driver, is where every shard went
    spark_stats = json.loads((spark_out / "_stats.json").read_text(encoding="utf-8"))
    assert_same_output(str(tmp_path / "beam"), str(spark_out), beam_stats, spark_stats)
    assert spark_stats["counters"]["read-archive"] == beam_stats["counters"]["read-archive"]  # not 4 files for 2
    summary = out.decode()
    assert f"{beam_stats['counters']['clean-page']['passed']:,}" in summary or str(beam_stats["counters"]["clean-page"]["passed"]) in summary


def test_spark_package_and_the_printed_spark_submit_line_run_a_job_with_the_users_settings(cluster, executor_python, real_data, tmp_path):
    package = tmp_path / "package"
    made = subprocess.run([*CLI, "spark-package", str(package), "--master", cluster.master_url], cwd=ROOT, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert (package / ZIP_NAME).is_file() and (package / LAUNCHER_NAME).is_file()
    [line] = [x.strip() for x in made.stdout.splitlines() if x.strip().startswith("spark-submit ")]
    assert f"--py-files {package / ZIP_NAME}" in line and str(package / LAUNCHER_NAME) in line
    args = ["--input", *(str(real_data / name) for name in WET_FILES), "--num_shards", "2"]
    beam_stats = run_job("read", [*args, "--output", str(tmp_path / "beam")])
    submit = [os.path.join(SPARK_HOME, "bin", "spark-submit"), "--master", cluster.master_url, "--name", "users-own-name",
              "--conf", f"spark.pyspark.python={executor_python}",  # the driver too: it imports the project from the zip alone
              "--conf", "spark.ui.enabled=true", "--conf", "spark.ui.port=0",
              *[arg for key, value in EXECUTOR_CONF.items() for arg in ("--conf", f"{key}={value}")],
              "--py-files", str(package / ZIP_NAME), str(package / LAUNCHER_NAME), "read", *args, "--output", str(tmp_path / "spark")]
    done = subprocess.run(submit, cwd=tmp_path, env=driver_environment(executor_python), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    # spark-submit's PythonRunner passes the driver's stdout and stderr on as its own stdout
    [source] = re.findall(r"corpusforge read on Spark, the project from (\S+)", done.stdout + done.stderr)
    assert f"{ZIP_NAME}/pipelines/read/job.py" in source and str(ROOT) not in source  # from the zip: not the checkout, not the test venv
    spark_stats = json.loads((tmp_path / "spark" / "_stats.json").read_text(encoding="utf-8"))
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    assert "users-own-name" in cluster.app_names()  # spark-submit's --name stood: the job made no session of its own


def test_every_spark_job_on_the_cluster_equals_beam(cluster, executor_python, small_crawl, sample_crawl, real_data, tmp_path):
    """read, c4 (span dedup, noclean, realnewslike, webtextlike), webtext --pages crawl,
    tokenize, audit and decontaminate, run one after another by one driver on the cluster."""
    corpus = tmp_path / "beam" / "c4-spans"
    benchmark = ["--benchmark", f"lambada:{real_data / 'lm_benchmarks' / 'lambada' / 'lambada_test.jsonl'}"]
    jobs = {
        "read": ("read", ["--input", *(str(real_data / name) for name in WET_FILES), "--num_shards", "2"]),
        "c4-spans": ("c4", [*variant_args("en", small_crawl, tmp_path), "--num_shards", "2", "--dedup", "spans"]),
        "c4-noclean": ("c4", variant_args("en.noclean", small_crawl, tmp_path)),
        "c4-realnewslike": ("c4", variant_args("realnewslike", small_crawl, tmp_path)),
        "c4-webtextlike": ("c4", variant_args("webtextlike", small_crawl, tmp_path)),
        "webtext": ("webtext", ["--submissions", sample_crawl.submissions_zst_path, "--pages", "crawl", "--warc", *sample_crawl.warc_paths,
                                "--span_dedup", "--num_shards", "2"]),
        "tokenize": ("tokenize", ["--input", str(corpus), "--vocab_size", "300", "--shard_tokens", "3000", "--val_fraction", "0.1"]),
        "audit": ("audit", ["--corpus", str(corpus), *benchmark, "--filter_parts", "2"]),
        "decontaminate": ("decontaminate", ["--corpus", str(corpus), *benchmark, "--num_shards", "2"]),
    }
    for name, (command, args) in jobs.items():  # in order: the later jobs read c4-spans's shards
        run_job(command, [*args, "--output", str(tmp_path / "beam" / name)])
    # relative outputs (the driver runs in tmp_path) where the output names no folder of its own in a file
    plan = [[command, [*args, "--output", str(tmp_path / "spark" / name) if command in ("audit", "decontaminate") else f"spark/{name}"]]
            for name, (command, args) in jobs.items()]
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from pipelines.cli import run_job\n"
        f"builder = SparkSession.builder.master({cluster.master_url!r}).appName('every-job')\n"
        f"for key, value in {EXECUTOR_CONF!r}.items():\n"
        "    builder = builder.config(key, value)\n"
        "builder.getOrCreate()\n"
        "for job, args in json.loads(sys.argv[1]):\n"
        "    run_job(job, args + ['--engine', 'spark'])\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(driver), json.dumps(plan)], cwd=tmp_path, env=driver_environment(executor_python, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in jobs:
        beam_out, spark_out = tmp_path / "beam" / name, tmp_path / "spark" / name
        if name in ("audit", "decontaminate"):  # audit.json and decontaminate's _stats.json name their own folder
            assert_same_files(str(beam_out), str(spark_out))
            continue
        if name == "tokenize":  # no write-shards counters: every listed file, _stats.json included, the same bytes
            same_files(beam_out, spark_out)
            continue
        beam_stats = json.loads((beam_out / "_stats.json").read_text(encoding="utf-8"))
        spark_stats = json.loads((spark_out / "_stats.json").read_text(encoding="utf-8"))
        assert_same_output(str(beam_out), str(spark_out), beam_stats, spark_stats)


def test_a_cluster_left_with_no_executor_ends_the_job_in_one_line_with_nothing_committed(executor_python, real_data, tmp_path):
    bed = Cluster(tmp_path / "lonely")
    out = tmp_path / "out"
    try:
        bed.start()
        bed.add_worker()
        job = subprocess.Popen([*CLI, "c4", "--input", *(str(real_data / name) for name in C4_FILES), "--badwords", str(real_data / "badwords" / "en"),
                                "--output", str(out), "--engine", "spark",
                                "--spark_master", bed.master_url, "--spark_no_executor_timeout_s", "8", *conf_args(EXECUTOR_CONF)],
                               cwd=tmp_path, env=driver_environment(executor_python, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 300
            while not bed.executor_logs(0) and job.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            bed.kill_worker(0)  # the last worker: Spark alone would wait for resources without a word
            started = time.monotonic()
            _, err = job.communicate(timeout=300)
            waited = time.monotonic() - started
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
    finally:
        bed.stop()
    assert job.returncode == 1
    errors = [line for line in err.decode().splitlines() if " ERROR " in line or line.startswith("ERROR")]
    assert len(errors) == 1 and "had no executor for 8 s" in errors[0] and "nothing was committed" in errors[0], err.decode()[-2000:]
    assert waited < 120
    assert not (out / "_SUCCESS").exists()


def test_spark_package_from_a_zip_writes_the_same_zip(tmp_path):
    first = subprocess.run([*CLI, "spark-package", str(tmp_path / "a")], cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-c", "import sys; from pipelines.cli import main; sys.exit(main(sys.argv[1:]))", "spark-package", str(tmp_path / "b")],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path / "a" / ZIP_NAME)}, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "a" / ZIP_NAME).read_bytes() == (tmp_path / "b" / ZIP_NAME).read_bytes()


def test_a_wheel_on_the_drivers_path_is_shipped_as_a_zip_executors_import_with_its_data(executor_python, tmp_path):
    """``spark-submit --py-files corpusforge-*.whl``: PySpark puts no wheel on an executor's
    path, so the job ships a zip of the wheel's packages (``project_zip``), whose modules and
    data files import from the zip alone."""
    wheel = project_wheel(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "CORPUSFORGE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(wheel)}
    made = subprocess.run([executor_python, "-c", "from pipelines.spark_package import imported_archive, project_zip; "
                           "print(imported_archive()); print(project_zip())"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    archive, shipped = made.stdout.split()
    assert archive == str(wheel) and shipped.endswith(".zip") and shipped.startswith(str(tmp_path / "cache"))
    probe = ("import corpus.reddit, pipelines.spark.plan, model.tokenizer; from corpus.reddit import LinkFilter; "
             "print(corpus.reddit.__file__); print(len(LinkFilter().domain_blocklist))")
    used = subprocess.run([executor_python, "-c", probe], cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": shipped},
                          capture_output=True, text=True)
    assert used.returncode == 0, used.stderr
    where, domains = used.stdout.split()
    assert where == f"{shipped}/corpus/reddit.py" and int(domains) > 0
