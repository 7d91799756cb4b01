"""The driver JVM's flags for sessions the CLI starts (``pipelines.spark.jvm``): the C1
compiler and the serial collector, a class-data archive built once, checked before use,
and nothing of ours where the user gives JVM flags of their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")

from pipelines.spark import jvm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# A fresh process starts a local session (as the CLI does) and prints the driver JVM's own
# command-line flags, read from the JVM itself.
PROBE = """
import json, sys
from pipelines.spark import engine
spark, _ = engine.session("local[1]", dict(arg.split("=", 1) for arg in sys.argv[1:]))
flags = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print(json.dumps({"flags": flags, "vm": spark._jvm.java.lang.System.getProperty("java.vm.info")}))
spark.stop()
"""


def _probe(env: dict, *conf: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *conf], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def clean_env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_SUBMIT_OPTS", jvm.ARCHIVE_SWITCH)}
    return {**env, "CORPUSFORGE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}


def test_the_users_jvm_flags_are_left_alone(monkeypatch):
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xmx2g")
    assert jvm.driver_options({}) is None
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    assert jvm.driver_options({"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}) is None  # ours would clash with theirs


def test_the_archive_can_be_switched_off(monkeypatch, tmp_path):
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.setenv(jvm.ARCHIVE_SWITCH, "0")
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    assert jvm.class_archive() is None
    assert jvm.driver_options({}) == jvm.LOCAL_JVM_OPTIONS
    assert not (tmp_path / "spark" / "jvm").exists()


@pytest.mark.pipeline  # a one-off spark-submit and two local sessions in fresh processes (one with the user's flags)
def test_a_session_gets_the_flags_and_an_archive_built_once_and_checked(clean_env, tmp_path, monkeypatch, java):
    first = _probe(clean_env)
    folder = tmp_path / "cache" / "spark" / "jvm"
    archives = sorted(folder.glob("*.jsa"))
    assert len(archives) == 1, sorted(folder.iterdir())
    assert sorted(p.name for p in folder.iterdir()) == [archives[0].name]  # no leftovers of the build
    for option in (*jvm.LOCAL_JVM_OPTIONS.split(), f"-XX:SharedArchiveFile={archives[0]}"):
        assert option in first["flags"]
    assert "sharing" in first["vm"]
    built = archives[0].stat().st_mtime_ns
    monkeypatch.setenv("CORPUSFORGE_CACHE", clean_env["CORPUSFORGE_CACHE"])
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv(jvm.ARCHIVE_SWITCH, raising=False)
    assert jvm.class_archive() == str(archives[0])  # the next session's: used, not rebuilt
    assert jvm.driver_options({}) == f"{jvm.LOCAL_JVM_OPTIONS} -XX:SharedArchiveFile={archives[0]}"
    assert archives[0].stat().st_mtime_ns == built
    assert jvm._maps(str(archives[0]), clean_env)  # a JVM that must map it (-Xshare:on) starts
    damaged = tmp_path / "damaged.jsa"
    with open(archives[0], "rb") as whole, open(damaged, "wb") as part:
        part.write(whole.read(1 << 20))
    assert not jvm._maps(str(damaged), clean_env)  # a cut archive is never put in place

    theirs = _probe({**clean_env, "SPARK_SUBMIT_OPTS": "-Xmx700m"})
    assert "-Xmx700m" in theirs["flags"]
    assert not any(flag.startswith("-XX:SharedArchiveFile") or flag == "-XX:+UseSerialGC" for flag in theirs["flags"])


@pytest.mark.pipeline
def test_an_archive_that_cannot_be_built_leaves_nothing_and_the_job_runs_without(clean_env, tmp_path, monkeypatch, java):
    home = tmp_path / "spark-home"  # a Spark whose spark-submit fails
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "spark-submit"
    script.write_text("#!/bin/sh\necho 'no cluster here' >&2\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setattr(jvm, "_spark_home", lambda: str(home))
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    monkeypatch.delenv(jvm.ARCHIVE_SWITCH, raising=False)
    assert jvm.class_archive() is None
    assert jvm.driver_options({}) == jvm.LOCAL_JVM_OPTIONS
    assert list((tmp_path / "cache" / "spark" / "jvm").iterdir()) == []
    shutil.rmtree(home)
