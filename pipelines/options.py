"""Pipeline options shared by every corpusforge job.

``stage_setup_file`` lets users pass ``--setup_file ./beam_setup.py`` as they would any
setup file: Beam's stager only takes files named setup.py or pyproject.toml, so the
option is replaced by ``--extra_package <sdist>``, an sdist built from that file, which
Dataflow, Spark and Flink workers install before running any step.

Workers get the dependencies of ``requirements.txt`` (every Beam job's) and nothing of
``requirements-model.txt`` (torch, the tokenizer libraries) unless the job asks:
``stage_setup_file(beam_args, extras=("tokenize",))`` (the tokenize job) writes the extra's
name into the sdist's ``worker-extras.txt``, and ``beam_setup.py``, run again by pip on each
worker, adds that extra's pins to what it installs. The extras are listed in beam_setup.py.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import difflib
import glob
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from common import storage
from common.environ import environment_with
from corpus.inputs import InputError
from corpus.warc import MAX_RECORD_BYTES

log = logging.getLogger(__name__)


# --- argument types: a value out of range is a one-line usage error before any work ------
def _number(kind, text: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None


def int_at_least(minimum: int):
    """An argparse type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        value = _number(int, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return parse


positive_int = int_at_least(1)


def non_negative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(float, text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, not {text}")
    return value


def open_probability(text: str) -> float:
    """Strictly between 0 and 1 (a false-positive rate)."""
    value = _number(float, text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), not {text}")
    return value


def unit_fraction(text: str) -> float:
    """From 0 to 1 inclusive (a share, a probability threshold)."""
    value = _number(float, text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def power_of_two(text: str) -> int:
    value = positive_int(text)
    if value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two (1, 2, 4, ...), not {value}")
    return value


# --- Beam options: what the job does not take must be a real Beam pipeline option --------
def split_job_args(parser: argparse.ArgumentParser, argv) -> tuple[argparse.Namespace, list[str]]:
    """The job's own options, and the rest as Beam options, refusing (usage error, exit 2)
    any ``--flag`` that is neither: Beam would drop it with a warning and run with defaults.

    Then the store options (S3 endpoint and credentials, GCP project, HDFS namenode,
    ``--store_timeout_s``) are given to ``common.storage``, here for every job, before the
    job lists or reads anything."""
    parser.add_argument(storage.STORE_TIMEOUT_OPTION, type=positive_float, default=storage.STORE_TIMEOUT_S,
                        help=f"seconds an object store may stay silent before the job ends with one line naming it "
                             f"(default {storage.STORE_TIMEOUT_S:g})")
    args, beam_args = parser.parse_known_args(argv)
    unknown = unknown_beam_flags(beam_args)
    if unknown:
        known = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
        hints = []
        for flag in unknown:
            close = difflib.get_close_matches(flag.split("=", 1)[0], known, n=1)
            hints.append(f"{flag} (did you mean {close[0]}?)" if close else flag)
        parser.error(f"unrecognized arguments: {', '.join(hints)} (neither an option of this job nor a Beam pipeline option)")
    storage.configure(beam_args, timeout_s=args.store_timeout_s)
    return args, beam_args


def unknown_beam_flags(beam_args) -> list[str]:
    """The ``--flags`` of ``beam_args`` that no registered Beam PipelineOptions class defines."""
    if not any(token.startswith("-") for token in beam_args):
        return []  # nothing to check: Beam is not imported (a usage error comes before it)
    # Beam (about a second): this module is imported at the CLI's start (--help, inspect, stats)
    import apache_beam.options.pipeline_options as beam_options

    import pipelines.sources  # noqa: F401  (registers corpusforge's own --shard_sort; imports Beam)

    parser_class = getattr(beam_options, "_BeamArgumentParser", argparse.ArgumentParser)
    parser = parser_class(allow_abbrev=False, add_help=False)
    for cls in {str(c): c for c in beam_options.PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    _, rest = parser.parse_known_args(list(beam_args))
    return [token for token in rest if token.startswith("-")]


def add_max_record_bytes(parser) -> None:
    """The reading options every job that reads crawl files takes."""
    parser.add_argument("--max_record_bytes", type=int_at_least(1024), default=MAX_RECORD_BYTES,
                        help=f"largest WARC/WET record block, and largest decoded HTTP body, read into memory; "
                             f"longer ones are skipped and counted (default {MAX_RECORD_BYTES})")
    parser.add_argument("--verify_digest", action="store_true",
                        help="check WARC-Block-Digest and WARC-Payload-Digest; mismatches are counted "
                             "(read-archive digest:*_mismatch) and logged, the records still read")


ENGINES = ("beam", "spark")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine`` and ``--spark_master``: which engine runs the job's steps (docs/spark.md)."""
    parser.add_argument("--engine", choices=ENGINES, default="beam",
                        help="beam: Apache Beam, any --runner (default); spark: native PySpark, same bytes "
                             "(pip install 'corpusforge[spark]'; docs/spark.md)")
    parser.add_argument("--spark_master", default=None,
                        help="--engine spark: the Spark master, e.g. local[2], spark://host:7077, yarn "
                             "(default: spark-submit's, else local[*]). Any master but a local one gets the "
                             "project shipped as a zip; paths must then be visible to every node (docs/spark.md)")
    parser.add_argument("--spark_conf", action="append", default=[], type=spark_setting, metavar="KEY=VALUE",
                        help="--engine spark: a Spark setting for the session the job starts (repeatable), "
                             "e.g. spark.executor.memory=4g; it wins over the job's own local-mode settings")
    parser.add_argument("--spark_no_executor_timeout_s", type=float, default=120.0, metavar="S",
                        help="--engine spark on a cluster: end the job, in one line and with nothing committed, once "
                             "the cluster has had no executor for S seconds (lost workers); 0: wait as Spark does "
                             "(default: 120)")


def spark_setting(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--spark_conf``."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. spark.executor.memory=4g)")
    return key.strip(), value


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


def spark_engine(args: argparse.Namespace):
    """The native Spark engine (``pipelines.spark``), or one line saying how to install it:
    pyspark (the spark extra), and Java for the session's JVM unless a session is running
    already (``spark-submit``'s)."""
    try:
        import pyspark  # noqa: F401  (the optional spark extra: Beam users never load it)
    except ImportError:
        raise InputError("--engine spark needs pyspark, the spark extra: pip install 'corpusforge[spark]'") from None
    from pipelines import spark  # noqa: PLC0415  (imports pyspark)

    running = spark.engine.running_session()
    if running is None:
        why = missing_java()
        if why:
            raise InputError(f"--engine spark needs Java: {why}")
        check_spark_master(getattr(args, "spark_master", None))
        check_worker_python(getattr(args, "spark_master", None))
    master = running.sparkContext.master if running is not None else getattr(args, "spark_master", None)
    if not spark.engine.is_local(master):
        absolute_paths_for_cluster(args)
    return spark


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


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what --output already holds (the old set is readable until the job starts, and its "
                             "shard files are removed when the new set is complete); without it a non-empty --output is refused")


def add_manifest_path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow_any_manifest_path", action="store_true",
                        help="open manifest entries that leave --base_url (.., absolute paths, other URLs); "
                             "by default such an entry is refused before anything runs")

# What the FnApiRunner raises when an SDK worker's data channel breaks (the worker died): the
# launcher turns it into one line (pipelines.progress) and drops the job server's copies of it (pipelines.cli).
LOST_WORKER = "Channel closed prematurely"
LOST_WORKER_CLEANUP = "Error closing worker_handler"

PACKAGES = ("common", "corpus", "dedup", "pipelines", "model")
STAGED_FILES = ("requirements.txt", "requirements-model.txt", "README.md")
WORKER_EXTRAS_FILE = "worker-extras.txt"  # read by beam_setup.py on the worker
MANIFEST = (f"include {' '.join(STAGED_FILES)} {WORKER_EXTRAS_FILE}\n"
            + "".join(f"recursive-include {p}/data *\n" for p in PACKAGES))
# ``--setup_file corpusforge``: the workers' sdist built from the installed package itself (its
# packages, the beam_setup.py it ships as pipelines/data/beam_setup.py, its pinned requirements).
INSTALLED_PACKAGE = "corpusforge"
SHIPPED_SETUP_FILE = os.path.join("pipelines", "data", "beam_setup.py")
# requirements-model.txt is the `model` extra (pyproject.toml): the installed package's metadata gives both back.
REQUIREMENT_FILES = {"requirements.txt": None, "requirements-model.txt": "model"}


def installed_requirements(distribution: str = INSTALLED_PACKAGE) -> dict[str, str]:
    """``REQUIREMENT_FILES`` written back from an installed distribution's metadata (its
    ``Requires-Dist``, the pins of requirements.txt and of each extra's file): file name -> text."""
    import importlib.metadata  # noqa: PLC0415  (only --setup_file corpusforge reads the metadata)

    requires = importlib.metadata.requires(distribution) or []
    files = {name: [] for name in REQUIREMENT_FILES}
    for requirement in requires:
        spec, _, marker = (part.strip() for part in requirement.partition(";"))
        extra = re.fullmatch(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        for name, wanted in REQUIREMENT_FILES.items():
            if (wanted is None and not marker) or (extra and extra.group(1) == wanted):
                files[name].append(spec)
    return {name: "".join(f"{line}\n" for line in lines) for name, lines in files.items()}


def worker_package_source(setup_file: str) -> tuple[str, str, dict[str, str] | None]:
    """Where the workers' sdist comes from: (the setup file, the folder holding the packages,
    the requirement files' texts or ``None`` to copy them from that folder).

    ``--setup_file corpusforge`` names the installed package: in a source checkout (an
    editable install) that is the checkout's ``beam_setup.py``; from a wheel, the copy the
    package ships and the pins of its metadata. Any other value is a setup file's path."""
    if setup_file != INSTALLED_PACKAGE:
        if not os.path.isfile(setup_file):
            raise FileNotFoundError(f"--setup_file {setup_file}: no such file (or pass --setup_file {INSTALLED_PACKAGE}: "
                                    "the installed package)")
        return setup_file, os.path.dirname(os.path.abspath(setup_file)), None
    import pipelines  # noqa: PLC0415  (this package: where it is installed)

    root = os.path.dirname(os.path.dirname(os.path.abspath(pipelines.__file__)))
    checkout = os.path.join(root, "beam_setup.py")
    if os.path.isfile(checkout) and os.path.isfile(os.path.join(root, "requirements.txt")):
        return checkout, root, None
    shipped = os.path.join(root, SHIPPED_SETUP_FILE)
    if not os.path.isfile(shipped):
        raise FileNotFoundError(f"--setup_file {INSTALLED_PACKAGE}: the installed package at {root} has no {SHIPPED_SETUP_FILE}; "
                                "reinstall corpusforge, or pass the path of a checkout's beam_setup.py")
    return shipped, root, installed_requirements()


def build_worker_package(setup_file: str, dist_dir: str, extras: Sequence[str] = ()) -> str:
    """Build the sdist a worker installs from ``setup_file`` (a path, or ``corpusforge``: the
    installed package, ``worker_package_source``); returns the tarball's path.

    The build runs in a clean copy holding only the packages, the requirement files and the
    setup file as setup.py, so nothing else in the checkout (pyproject.toml, tests,
    caches) changes what workers get. ``extras`` (e.g. ``("tokenize",)``) are recorded in
    the sdist's ``worker-extras.txt``: workers then install their requirements too.
    """
    setup_path, root, requirement_texts = worker_package_source(setup_file)
    os.makedirs(dist_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="corpusforge-sdist-") as stage:
        for package in PACKAGES:
            shutil.copytree(os.path.join(root, package), os.path.join(stage, package), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in STAGED_FILES:
            if requirement_texts is not None and name in requirement_texts:
                with open(os.path.join(stage, name), "w", encoding="utf-8") as f:
                    f.write(requirement_texts[name])
            elif os.path.exists(os.path.join(root, name)):
                shutil.copy(os.path.join(root, name), stage)
        shutil.copy(setup_path, os.path.join(stage, "setup.py"))
        with open(os.path.join(stage, WORKER_EXTRAS_FILE), "w", encoding="utf-8") as f:
            f.write("# extras whose requirements workers install with this sdist (beam_setup.py reads this file)\n")
            f.writelines(f"{name}\n" for name in sorted(set(extras)))
        with open(os.path.join(stage, "MANIFEST.in"), "w") as f:
            f.write(MANIFEST)
        out = os.path.join(stage, "dist")
        result = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", out], cwd=stage, capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"building the worker sdist from {setup_file} failed:\n{result.stderr.strip()}")
        (built,) = glob.glob(os.path.join(out, "*.tar.gz"))
        target = os.path.join(dist_dir, os.path.basename(built))
        shutil.copy(built, target)
    return target


# Beam's PortableRunner uses --job_server_timeout (default 300 s) as the deadline of the job's
# state stream too, so a job that runs longer fails with DEADLINE_EXCEEDED; corpusforge jobs
# default it to a day and check the job server is reachable first instead.
PORTABLE_JOB_TIMEOUT_S = 86400


def portable_runner_options(beam_args: list[str]) -> list[str]:
    """For ``--runner PortableRunner`` with a job server address: refuse an address nothing
    listens on, and give the job more than Beam's 300 s before its state stream times out."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--runner")
    parser.add_argument("--job_endpoint")
    parser.add_argument("--job_server_timeout", "--job-server-timeout")
    known, _ = parser.parse_known_args(beam_args)
    if (known.runner or "").lower() not in ("portablerunner", "portable") or known.job_endpoint in (None, "embed"):
        return list(beam_args)
    host, _, port = known.job_endpoint.rpartition(":")
    try:
        socket.create_connection((host or "localhost", int(port)), timeout=10).close()
    except (OSError, ValueError) as exc:
        raise InputError(f"--job_endpoint {known.job_endpoint}: no job server answers there ({exc}); "
                         "start one, e.g. python -m pipelines.portable job-server --port PORT") from exc
    if known.job_server_timeout is None:
        return list(beam_args) + ["--job_server_timeout", str(PORTABLE_JOB_TIMEOUT_S)]
    return list(beam_args)


def construction_check_options(beam_args: list[str]) -> list[str]:
    """``--no_pipeline_type_check`` unless the user chose either way: Beam's check of declared
    type hints while a graph is built finds nothing in the jobs' fixed, tested graphs and costs
    about 0.2 s of CPU in every job (``benchmarks/c4_throughput.py``); ``--pipeline_type_check``
    turns it back on."""
    if any(arg.split("=", 1)[0] in ("--pipeline_type_check", "--no_pipeline_type_check") for arg in beam_args):
        return list(beam_args)
    return list(beam_args) + ["--no_pipeline_type_check"]


def stage_setup_file(beam_args: list[str], extras: Sequence[str] = ()) -> list[str]:
    """Replace ``--setup_file X`` (X not named setup.py/pyproject.toml) with ``--extra_package``,
    an sdist whose workers also install ``extras`` (see ``build_worker_package``); apply the
    PortableRunner defaults (``portable_runner_options``), the construction check default
    (``construction_check_options``) and quiet local workers (``progress.quiet_worker_args``)."""
    from pipelines.progress import quiet_worker_args  # imports Beam: not at the CLI's start (--help, inspect, stats)

    beam_args = quiet_worker_args(portable_runner_options(beam_args))
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--setup_file")
    known, rest = parser.parse_known_args(beam_args)
    setup_file = known.setup_file
    if not setup_file or (setup_file != INSTALLED_PACKAGE and os.path.basename(setup_file) in ("setup.py", "pyproject.toml")):
        return construction_check_options(beam_args)
    tarball = _staged_worker_package(setup_file, tuple(sorted(set(extras))))
    return construction_check_options(rest + ["--extra_package", tarball])


_WORKER_PACKAGES: dict[tuple[str, tuple[str, ...]], str] = {}


def _staged_worker_package(setup_file: str, extras: tuple[str, ...]) -> str:
    """The workers' sdist for ``setup_file`` and ``extras``, built once per process (the audit
    runs two pipelines) in a temporary folder removed when the process ends."""
    key = (os.path.abspath(setup_file) if setup_file != INSTALLED_PACKAGE else setup_file, extras)
    if key in _WORKER_PACKAGES and os.path.isfile(_WORKER_PACKAGES[key]):
        return _WORKER_PACKAGES[key]
    dist_dir = tempfile.mkdtemp(prefix="corpusforge-worker-package-")
    atexit.register(shutil.rmtree, dist_dir, True)
    tarball = build_worker_package(setup_file, dist_dir, extras)
    log.info("staging %s (built from %s%s) for the workers", tarball, setup_file,
             f", with extras {', '.join(extras)}" if extras else "")
    _WORKER_PACKAGES[key] = tarball
    return tarball


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the sdist Beam workers install, from beam_setup.py.")
    parser.add_argument("--setup_file", default="beam_setup.py",
                        help=f"a beam_setup.py, or {INSTALLED_PACKAGE}: the installed package's own (default: beam_setup.py)")
    parser.add_argument("--dist-dir", default="dist")
    parser.add_argument("--extras", nargs="*", default=[], help="extras workers install too (beam_setup.py: tokenize, model)")
    args = parser.parse_args(argv)
    print(build_worker_package(args.setup_file, args.dist_dir, args.extras))
    return 0


if __name__ == "__main__":
    sys.exit(main())
