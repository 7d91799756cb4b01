"""The native Spark engine against Beam's DirectRunner: the same shards (every byte), the
same ``_SUCCESS`` shard list, the same _stats.json counters, units and examples, on real
WET/WARC files, on two generated crawls that share URLs, in every C4 variant and both
dedup modes, for ``read``, on a moto S3 server and through ``spark-submit``.

The session is conftest's ``spark`` (``local[2]``, workers on this interpreter, one a test
process); the S3 and spark-submit runs start their own, in fresh processes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_object_store import BUCKET, closed_port, s3, upload  # noqa: F401  (the moto S3 server fixture)

from common import storage
from corpus.inputs import InputError
from pipelines.c4 import job as c4_pipeline
from pipelines.jobs import STATS_FILE
from pipelines.read import job as read_pipeline
from pipelines.shard_io import ERRORS_FILE, WRITE_NAMESPACE
from pipelines.spark_launch import MASTER_FORMS, SHORT_RUN_JVM_OPTIONS, SPARK_JAVA_HINT, check_spark_master
from samplecrawl.crawl import write_sample_crawl

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")

pytestmark = [pytest.mark.pipeline, pytest.mark.usefixtures("java")]  # runs Spark and Beam jobs: not in `make test-fast`; skipped without Java

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "corpus", "dedup", "pipelines", "samplecrawl")
# Two seeded sample crawls, 300 pages each: 6 WET files, URLs shared across the two (the newest
# copy of a URL picked across files), every special page kind in each (every drop of every
# stage), repeated lines across pages, and pages of both splits (3 train and 2 validation
# shards). Byte identity needs every path hit, not volume: C4 on 2 x 300 pages reaches the
# same 38 counters (namespace and name) as on 2 x 2,000 pages, and fills both validation shards.
GENERATED_SEEDS = (0, 1)
GENERATED_PAGES = 300


@pytest.fixture(scope="module")
def real_inputs(real_data, tmp_path_factory) -> list[str]:
    """Real WET and WARC files (Common Crawl slices), one folder."""
    folder = tmp_path_factory.mktemp("real")
    for name in ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz",
                 "warc/resiliparse/warcfile.warc.gz", "warc/whirlwind/whirlwind.warc.gz"):
        shutil.copy(real_data / name, folder / Path(name).name)
    return sorted(str(p) for p in folder.iterdir())


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("generated")
    files = []
    for seed in GENERATED_SEEDS:
        crawl = write_sample_crawl(folder / f"seed{seed}", seed=seed, pages=GENERATED_PAGES)
        files += crawl.wet_paths
    return files


def both_engines(job, out: Path, args: list[str]) -> tuple[dict, dict]:
    """Run ``job`` on Beam (DirectRunner) into out/beam and on Spark into out/spark."""
    beam_stats = job(args + ["--output", str(out / "beam")])
    spark_stats = job(args + ["--output", str(out / "spark"), "--engine", "spark"])
    return beam_stats, spark_stats


def shard_entries(folder: str) -> list[dict]:
    """The ``_SUCCESS`` list of data files (_stats.json, which counts the engine's own work, aside)."""
    return [entry for entry in storage.read_success(folder)["files"] if entry["name"] != STATS_FILE]


def without_engine_work(stats: dict) -> dict:
    """_stats.json less the shard writer's tallies (``write-shards``: Beam's sorted runs, one
    part per shard on Spark), the one namespace that counts an engine's own units of work."""
    stats = json.loads(json.dumps(stats))
    for key in ("counters", "units"):
        stats.get(key, {}).pop(WRITE_NAMESPACE, None)
    return stats


def assert_same_output(beam_out: str, spark_out: str, beam_stats: dict, spark_stats: dict) -> None:
    entries = shard_entries(beam_out)
    assert entries == shard_entries(spark_out)
    for entry in entries:
        assert storage.read_bytes(storage.join(spark_out, entry["name"])) == storage.read_bytes(storage.join(beam_out, entry["name"])), entry["name"]
    assert without_engine_work(spark_stats) == without_engine_work(beam_stats)
    written = json.loads(storage.read_text(storage.join(spark_out, STATS_FILE)))
    assert without_engine_work(written) == without_engine_work(json.loads(storage.read_text(storage.join(beam_out, STATS_FILE))))
    assert set(spark_stats["counters"][WRITE_NAMESPACE]) == {"parts"}


def test_the_test_sessions_jvm_runs_with_the_short_run_flags(spark):
    # tests/conftest.py sets SPARK_SUBMIT_OPTS (unless the environment has its own) before any JVM starts
    if os.environ["SPARK_SUBMIT_OPTS"] != SHORT_RUN_JVM_OPTIONS:
        pytest.skip(f"SPARK_SUBMIT_OPTS is the environment's own: {os.environ['SPARK_SUBMIT_OPTS']}")
    flags = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(SHORT_RUN_JVM_OPTIONS.split()) <= set(flags), flags


def test_c4_on_real_wet_and_warc_files_is_byte_identical(spark, real_data, real_inputs, tmp_path):
    args = ["--input", *real_inputs, "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2", "--format", "c4json", "parquet", "jsonl"]
    beam_stats, spark_stats = both_engines(c4_pipeline.run, tmp_path, args)
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    counters = spark_stats["counters"]
    assert counters["train"]["examples"] > 10
    assert counters["extract-main-text"]  # the WARC pages went through trafilatura
    assert spark_stats["examples"]["clean-page"]


def test_c4_on_two_generated_crawls_sharing_urls_is_byte_identical(spark, real_data, generated, tmp_path):
    args = ["--input", *generated, "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "3", "--num_validation_shards", "2"]
    beam_stats, spark_stats = both_engines(c4_pipeline.run, tmp_path, args)
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    counters = spark_stats["counters"]
    assert counters["split-wet-file"]["passed"] > len(GENERATED_SEEDS) * GENERATED_PAGES * 9 // 10
    assert counters["duplicate-url-filter"]["filtered"] > 0 and counters["dedupe-lines"]["line-filtered:global_duplicate"] > 0
    assert counters["validation"]["examples"] > 0


def variant_args(variant: str, crawl, tmp_path: Path) -> list[str]:
    truth = json.loads(Path(crawl.truth_path).read_text(encoding="utf-8"))
    args = ["--input", *crawl.wet_paths, "--badwords", crawl.badwords_path, "--variant", variant]
    if variant == "realnewslike":
        domains = tmp_path / "domains.json"
        first, *rest = truth["news_domains"]
        domains.write_text(json.dumps({first: ["www"], **{d: None for d in rest}}))
        args += ["--realnews_domains", str(domains)]
    if variant == "webtextlike":
        urls = tmp_path / "urls.txt"
        urls.write_text("\n".join(sorted(p["url"] for p in truth["pages"])[::3] + ["http://not-in-the-crawl.example/x"]) + "\n")
        args += ["--webtext_urls", str(urls)]
    return args


@pytest.mark.parametrize("variant, dedup", [("en", "spans"), ("en.noclean", "lines"), ("en.noblocklist", "lines"),
                                            ("realnewslike", "lines"), ("webtextlike", "lines")])
def test_every_variant_and_dedup_mode_is_byte_identical(spark, small_crawl, tmp_path, variant, dedup):
    args = variant_args(variant, small_crawl, tmp_path) + ["--dedup", dedup]
    beam_stats, spark_stats = both_engines(c4_pipeline.run, tmp_path, args)
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    assert spark_stats["counters"]["train"]["examples"] > 0
    assert spark_stats["variant"] == variant and spark_stats["dedup"] == dedup


def test_read_with_bad_input_is_byte_identical_errors_included(spark, real_data, real_inputs, tmp_path):
    malformed = sorted(str(p) for p in (real_data / "warc_malformed").rglob("*") if p.is_file() and not p.name.startswith("LICENSE"))
    args = ["--input", *real_inputs, *malformed, "--num_shards", "2", "--format", "c4json", "parquet"]
    beam_stats, spark_stats = both_engines(read_pipeline.run, tmp_path, args)
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    assert any(name.startswith("error:") for name in spark_stats["counters"]["read-archive"])
    assert spark_stats["examples"]  # the sampled error rows, read back from the errors file both engines wrote
    assert ERRORS_FILE in {entry["name"] for entry in shard_entries(str(tmp_path / "spark"))}


def run_cli(args: list[str], cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def beam_real(real_data, real_inputs, tmp_path_factory):
    """Beam's C4 of the real WET files, local disk: what the S3 and spark-submit runs must equal."""
    out = tmp_path_factory.mktemp("beam-real") / "c4"
    wet = [path for path in real_inputs if ".wet" in path]
    stats = c4_pipeline.run(["--input", *wet, "--output", str(out), "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2"])
    return out, stats, wet


def test_c4_on_spark_reads_and_writes_s3_in_a_fresh_process(real_data, beam_real, s3, tmp_path):  # noqa: F811
    local, beam_stats, wet = beam_real
    folder = tmp_path / "wet"
    folder.mkdir()
    for path in wet:
        shutil.copy(path, folder)
    upload(folder, f"s3://{BUCKET}/spark-wet")
    remote = f"s3://{BUCKET}/spark-c4"
    done = run_cli(["c4", "--input", f"s3://{BUCKET}/spark-wet/", "--output", remote, "--badwords", str(real_data / "badwords" / "en"),
                    "--num_shards", "2", "--engine", "spark", "--spark_master", "local[2]", *s3])
    assert done.returncode == 0, done.stderr[-3000:]
    storage.configure(s3)
    spark_stats = json.loads(storage.read_text(storage.join(remote, STATS_FILE)))
    assert_same_output(str(local), remote, beam_stats, spark_stats)
    assert not storage.exists(storage.staging_path(remote, storage.JOB_FILE))


def test_spark_submit_runs_c4_with_the_package_shipped_as_a_zip(real_data, beam_real, tmp_path):
    local, beam_stats, wet = beam_real
    package = tmp_path / "corpusforge.zip"
    with zipfile.ZipFile(package, "w") as zf:
        for name in PACKAGES:
            for path in sorted((ROOT / name).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(ROOT))
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the project comes from the zip only
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    out = tmp_path / "c4"
    done = subprocess.run([str(submit), "--master", "local[2]", "--py-files", str(package), str(ROOT / "pipelines" / "spark_main.py"),
                           "c4", "--input", *wet, "--output", str(out), "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "corpusforge.zip/pipelines/c4/job.py" in done.stdout + done.stderr  # where the driver imported the project from (spark-submit merges its streams)
    assert_same_output(str(local), str(out), beam_stats, json.loads((out / STATS_FILE).read_text()))


def test_engine_spark_without_pyspark_says_how_to_install_it_in_one_line(sample_crawl, tmp_path):
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['pyspark'] = None\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(ROOT)]))
    done = run_cli(["c4", "--input", *sample_crawl.wet_paths, "--output", str(tmp_path / "out"), "--badwords", sample_crawl.badwords_path,
                    "--engine", "spark"], env=env)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].endswith("pip install 'corpusforge[spark]'") and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize("java", ["missing", "exits at once"])  # in place of the `java` fixture: runs without Java too
def test_engine_spark_without_a_java_that_starts_is_one_line_before_any_work(sample_crawl, tmp_path, java):
    # No JVM, no Spark: a JAVA_HOME without bin/java is refused before Spark is asked (pyspark's
    # launcher would print a bash error and pyspark a traceback); a java that exits at once (too
    # old for this Spark, broken) leaves its own message on stderr and then one line of ours.
    jdk = tmp_path / "jdk"
    if java == "exits at once":
        (jdk / "bin").mkdir(parents=True)
        (jdk / "bin" / "java").write_text("#!/bin/sh\necho 'this java is too old for Spark' >&2\nexit 1\n")
        (jdk / "bin" / "java").chmod(0o755)
    env = dict(os.environ, JAVA_HOME=str(jdk))
    done = run_cli(["c4", "--input", *sample_crawl.wet_paths, "--output", str(tmp_path / "out"), "--badwords", sample_crawl.badwords_path,
                    "--engine", "spark", "--spark_master", "local[2]"], env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert last.endswith(SPARK_JAVA_HINT)
    if java == "missing":
        assert f"--engine spark needs Java: JAVA_HOME={jdk} holds no bin/java" in last
    else:
        assert f"Spark's JVM did not start (java: {jdk / 'bin' / 'java'};" in last
        assert "this java is too old for Spark" in done.stderr
    assert not (tmp_path / "out").exists()  # refused before the job claimed its output


def test_a_standalone_master_nobody_answers_at_is_one_line_before_spark_starts(sample_crawl, tmp_path):
    # Spark itself retries an unreachable spark:// master for about a minute, then ends in a JVM
    # stack trace; the job asks every listed master first (one that answers is enough).
    with closed_port() as first, closed_port() as second:
        master = f"spark://127.0.0.1:{first},127.0.0.1:{second}"
        done = run_cli(["c4", "--input", *sample_crawl.wet_paths, "--output", str(tmp_path / "out"), "--badwords", sample_crawl.badwords_path,
                        "--engine", "spark", "--spark_master", master])
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert f"--spark_master {master}: no Spark master answers there (127.0.0.1:{first}: " in last
    assert last.endswith("or run locally with --spark_master 'local[2]'")
    assert not (tmp_path / "out").exists()
    with closed_port() as dead, socket.create_server(("127.0.0.1", 0)) as standby:
        check_spark_master(f"spark://127.0.0.1:{dead},127.0.0.1:{standby.getsockname()[1]}")  # the second answers
        with pytest.raises(InputError, match=f"127.0.0.1:{dead}: "):
            check_spark_master(f"spark://127.0.0.1:{dead}")
    for left_to_spark in (None, "local[2]", "local[*]", "yarn", "k8s://https://127.0.0.1:1"):
        check_spark_master(left_to_spark)


@pytest.mark.parametrize("master", ["local[two]", "nosuchmaster"])
def test_a_master_url_spark_cannot_read_is_one_line(sample_crawl, tmp_path, master):
    # Refused before any JVM starts: spark-submit (nosuchmaster) and SparkContext (local[two])
    # would print a JVM stack trace and leave pyspark's traceback.
    done = run_cli(["c4", "--input", *sample_crawl.wet_paths, "--output", str(tmp_path / "out"), "--badwords", sample_crawl.badwords_path,
                    "--engine", "spark", "--spark_master", master])
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert last.endswith(f"--spark_master {master}: Spark cannot read it as a master URL; it takes {MASTER_FORMS}")
    assert "org.apache.spark" not in done.stderr  # no JVM was started
    assert not (tmp_path / "out").exists()


def test_a_worker_python_that_is_not_there_is_one_line_before_spark_starts(sample_crawl, tmp_path):
    # With a local master every task would fail to start its Python worker and the job end in a
    # JVM stack trace, leaving the output's claim behind.
    missing = tmp_path / "no-venv" / "bin" / "python"
    done = run_cli(["c4", "--input", *sample_crawl.wet_paths, "--output", str(tmp_path / "out"), "--badwords", sample_crawl.badwords_path,
                    "--engine", "spark", "--spark_master", "local[2]"], env=dict(os.environ, PYSPARK_PYTHON=str(missing)))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "org.apache.spark" not in done.stderr
    last = [line for line in done.stderr.splitlines() if line.strip()][-1]
    assert f"PYSPARK_PYTHON={missing} is not a program here" in last and last.endswith(f"unset it to run them on this Python ({sys.executable})")
    assert not (tmp_path / "out").exists()
