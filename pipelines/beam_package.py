"""The code and requirements a Beam job ships to its workers.

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

from corpus.inputs import InputError

log = logging.getLogger(__name__)


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
