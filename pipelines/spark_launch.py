"""What a Spark launcher checks and sets before any JVM starts, without importing pyspark: the
``java`` a session would run, the JVM flags of the sessions this project starts, the forms of
``--spark_master`` (and that a standalone master answers), the workers' Python on a local
master, and the local paths a cluster's executors must see as the driver does (docs/spark.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import sys

from common.environ import environment_with
from corpus.inputs import InputError

# The options that name paths the executors read or write (the output, the crawl files, the
# shards): with a cluster master, a relative local path is made absolute on the driver, as the
# executors, which run in their own working folders, must find the same files.
SPARK_PATH_OPTIONS = ("output", "input", "corpus", "warc", "submissions")


def absolute_paths_for_cluster(args: argparse.Namespace) -> None:
    """Each relative local path of ``SPARK_PATH_OPTIONS`` made absolute (the driver's working
    folder): a cluster's executors resolve paths in their own folders. Such a path must be on
    storage every node sees (a shared mount); object stores are left as they are."""
    for name in SPARK_PATH_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, absolute_local_path(value))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            setattr(args, name, [absolute_local_path(v) for v in value])


def absolute_local_path(path: str) -> str:
    """``path`` made absolute in this process's working folder, unless it is a URL or absolute already."""
    return path if "://" in path or os.path.isabs(path) else os.path.abspath(path)


class SparkStartError(InputError):
    """Spark's JVM did not start (a Java too old for this Spark, a broken installation)."""


SPARK_JAVA_HINT = "Spark runs in a JVM: install Java 17 or later and put java on PATH, or set JAVA_HOME to the JDK's folder"


def java_for_spark() -> str | None:
    """The ``java`` a local Spark session would start, as pyspark's launcher picks it
    (``$JAVA_HOME/bin/java`` where JAVA_HOME is set, else ``java`` on PATH), or ``None``."""
    home = os.environ.get("JAVA_HOME")
    if home:
        path = os.path.join(home, "bin", "java")
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which("java")


def missing_java() -> str | None:
    """One line saying why no JVM can start here (no ``java_for_spark``), or ``None``."""
    if java_for_spark() is not None:
        return None
    home = os.environ.get("JAVA_HOME")
    where = f"JAVA_HOME={home} holds no bin/java" if home else "no java on PATH and JAVA_HOME is not set"
    return f"{where}. {SPARK_JAVA_HINT}"


# JVM flags for the local Spark sessions this project starts (the CLI's, the demo's, the
# tests'): the C1 compiler only and the serial collector (pipelines.spark.jvm, docs/spark.md).
# Never applied to a cluster's JVMs, nor where the user gives JVM flags of their own.
SHORT_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def short_run_jvm():
    """``SPARK_SUBMIT_OPTS`` (the driver JVM's flags) set to ``SHORT_RUN_JVM_OPTIONS`` while the
    block runs, unless the environment sets it already: the user's flags win."""
    if os.environ.get("SPARK_SUBMIT_OPTS") is not None:
        return contextlib.nullcontext()
    return environment_with({"SPARK_SUBMIT_OPTS": SHORT_RUN_JVM_OPTIONS})


def check_worker_python(master: str | None) -> None:
    """With a local master (``local...``, or none: ``local[*]``) Spark's Python workers run
    ``PYSPARK_PYTHON`` on this machine: refuse, in one line, one that is not a program here
    (every task would fail and the job end in a JVM stack trace). On a cluster it names a
    program on the executors, which this machine cannot check."""
    python = os.environ.get("PYSPARK_PYTHON")
    if not python or not (master is None or master.startswith("local")):
        return
    if shutil.which(python) is None:
        raise InputError(f"PYSPARK_PYTHON={python} is not a program here, and Spark's Python workers run it on this machine "
                         f"(--spark_master {master or 'local[*]'}); unset it to run them on this Python ({sys.executable})")


SPARK_MASTER_PORT = 7077  # a standalone master's default port (spark://host without one)


# The local masters SparkContext reads (SparkMasterRegex in Spark's SparkContext.scala).
LOCAL_MASTER = re.compile(r"local|local\[([0-9]+|\*)\]|local\[([0-9]+|\*)\s*,\s*([0-9]+)\]"
                          r"|local-cluster\[\s*([0-9]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*\]")
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn or k8s://https://HOST:PORT"


def check_spark_master(master: str | None) -> None:
    """Refuse, in one line and before any JVM starts, a ``--spark_master`` that cannot work: one
    Spark cannot read (spark-submit and SparkContext would print a JVM stack trace), or a
    standalone cluster (``spark://host:port``, several for a standby master
    ``spark://h1:7077,h2:7077``) nothing listens at (Spark would retry for about a minute
    first). ``yarn`` and ``k8s://...`` masters are left to Spark."""
    if not master:
        return
    known = master == "yarn" or master.startswith(("spark://", "k8s://")) or LOCAL_MASTER.fullmatch(master)
    if not known:
        raise InputError(f"--spark_master {master}: Spark cannot read it as a master URL; it takes {MASTER_FORMS}")
    if not master.startswith("spark://"):
        return
    failures = []
    for address in master[len("spark://"):].split(","):
        host, _, port = address.rpartition(":") if ":" in address else (address, "", str(SPARK_MASTER_PORT))
        try:
            socket.create_connection((host or "localhost", int(port)), timeout=10).close()
            return  # one master that answers is enough (the others may be standbys)
        except (OSError, ValueError) as exc:
            failures.append(f"{address}: {exc}")
    raise InputError(f"--spark_master {master}: no Spark master answers there ({'; '.join(failures)}); "
                     "start one (Spark's sbin/start-master.sh) or run locally with --spark_master 'local[2]'")
