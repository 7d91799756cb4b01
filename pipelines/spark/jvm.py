"""The driver JVM's flags for the Spark sessions the CLI starts itself (any master; not spark-submit's).

A job's driver JVM (and a local job's only JVM) schedules tasks and moves small shuffle records (page text stays in
staging files, ``pipelines.spark.staging``); most of its CPU is its own start: loading and
verifying some 10,000 classes and compiling hot code with C2. So, unless the user sets
``SPARK_SUBMIT_OPTS`` or ``spark.driver.extraJavaOptions`` (then nothing is added):

- ``LOCAL_JVM_OPTIONS``: the C1 compiler only and the serial collector;
- a class-data archive (AppCDS, ``-XX:SharedArchiveFile``) of the classes a Spark job
  loads, dumped once per Spark and Java version by a one-off ``spark-submit`` under
  ``<cache>/spark/jvm/`` (``$CORPUSFORGE_CACHE``, else ``~/.cache/corpusforge``), checked
  by a JVM that must map it (``-Xshare:on``) before it is used, and only then moved into
  place: a JVM given a damaged archive can crash, so none is ever named. Building it
  fails quietly (a line at INFO): the job runs without one.
  ``CORPUSFORGE_SPARK_CLASS_ARCHIVE=0`` turns it off.

Measured by ``benchmarks/engines.py --breakdown`` (docs/spark.md): a ``local[2]`` session's
start, one tiny job and stop, JVM CPU 11.8 s with the JVM's defaults, 5.9 with these
flags, 3.8 with flags and archive. A cluster's JVMs are the cluster's: nothing here
applies to their executors (docs/spark.md shows the same flags for ``spark.executor.extraJavaOptions``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile

from pipelines.spark_launch import SHORT_RUN_JVM_OPTIONS, java_for_spark

log = logging.getLogger(__name__)

LOCAL_JVM_OPTIONS = SHORT_RUN_JVM_OPTIONS  # -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
ARCHIVE_SWITCH = "CORPUSFORGE_SPARK_CLASS_ARCHIVE"  # "0": no class-data archive
BUILD_TIMEOUT_S = 300
# The archive's job: a session, a shuffle and a Python worker, as every job has them.
WARM_JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
sc = spark.sparkContext
sc.parallelize(range(1000), 2).map(lambda x: (x % 7, 1)).reduceByKey(lambda a, b: a + b, 2).sortByKey().collect()
sc.parallelize([b"x"], 1).map(len).repartition(2).count()
spark.stop()
"""


def _spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home  # noqa: PLC0415

    return _find_spark_home()


def java_version(java: str) -> str:
    """``java -version``'s text (the archive is valid only for the JVM that wrote it)."""
    done = subprocess.run([java, "-Xshare:auto", "-version"], capture_output=True, text=True, timeout=60)
    return done.stderr.strip()


def archive_path(java: str) -> str:
    """Where the archive for this Spark and this Java lives (it may not exist)."""
    import pyspark  # noqa: PLC0415

    from pipelines.spark_package import cache_dir  # noqa: PLC0415

    key = hashlib.sha256("\n".join([pyspark.__version__, os.path.realpath(java), java_version(java), _spark_home()]).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), "jvm", f"spark-{pyspark.__version__}-{key}.jsa")


def _spark_script(name: str) -> str:
    return os.path.join(_spark_home(), "bin", name)


def _maps(archive: str, env: dict) -> bool:
    """Whether a JVM with Spark's classpath maps ``archive`` (``-Xshare:on`` fails otherwise)."""
    check_env = {**env, "SPARK_SUBMIT_OPTS": f"{LOCAL_JVM_OPTIONS} -Xshare:on -XX:SharedArchiveFile={archive}"}
    done = subprocess.run([_spark_script("spark-submit"), "--version"], env=check_env, capture_output=True, timeout=120)
    return done.returncode == 0


def build_archive(path: str) -> bool:
    """Dump the archive with a one-off ``spark-submit`` of ``WARM_JOB``, check it, move it
    into place; ``False`` (and nothing at ``path``) if any of it fails."""
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    work = tempfile.mkdtemp(prefix="class-archive-", dir=folder)
    dumped, script = os.path.join(work, "spark.jsa"), os.path.join(work, "warm.py")
    try:
        with open(script, "w", encoding="utf-8") as f:
            f.write(WARM_JOB)
        env = {**os.environ, "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable), "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("SPARK_SUBMIT_OPTS", None)
        command = [_spark_script("spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                   "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                   "--driver-java-options", f"{LOCAL_JVM_OPTIONS} -XX:ArchiveClassesAtExit={dumped}", script]
        done = subprocess.run(command, env=env, cwd=work, capture_output=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0 or not os.path.isfile(dumped):
            log.info("no class-data archive for Spark's JVM (spark-submit exited %s): %s", done.returncode, done.stderr[-300:])
            return False
        if not _maps(dumped, env):
            log.info("no class-data archive for Spark's JVM: the one dumped does not map")
            return False
        os.replace(dumped, path)
        return True
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no class-data archive for Spark's JVM: %s", exc)
        return False
    finally:
        for name in (dumped, script):
            if os.path.exists(name):
                os.remove(name)
        os.rmdir(work)


def class_archive() -> str | None:
    """The class-data archive for the driver JVM of a session this process starts, built first if there is none
    yet; ``None`` when switched off, when no Java is found, or when building it fails."""
    if os.environ.get(ARCHIVE_SWITCH) == "0":
        return None
    java = java_for_spark()
    if java is None:
        return None
    try:
        path = archive_path(java)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no class-data archive for Spark's JVM: %s", exc)
        return None
    if os.path.isfile(path):
        return path
    log.warning("preparing a class-data archive for Spark's JVM, once for this Spark and Java (%s)", path)
    return path if build_archive(path) else None


def driver_options(conf: dict) -> str | None:
    """``SPARK_SUBMIT_OPTS`` for the driver JVM of a session this process starts, or ``None`` where the user
    gave JVM flags of their own (that variable, or ``spark.driver.extraJavaOptions``)."""
    if os.environ.get("SPARK_SUBMIT_OPTS") is not None or "spark.driver.extraJavaOptions" in conf:
        return None
    archive = class_archive()
    return LOCAL_JVM_OPTIONS + (f" -XX:SharedArchiveFile={archive}" if archive else "")
