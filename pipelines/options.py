"""Pipeline options shared by every corpusforge job.

``stage_setup_file`` lets users pass ``--setup_file ./beam_setup.py`` as they would any
setup file: Beam's stager only takes files named setup.py or pyproject.toml, so the
option is replaced by ``--extra_package <sdist>``, an sdist built from that file, which
Dataflow, Spark and Flink workers install before running any step.
"""

from __future__ import annotations

import argparse
import glob
import logging
import os
import shutil
import subprocess
import sys
import tempfile

log = logging.getLogger(__name__)

PACKAGES = ("corpus", "dedup", "pipelines", "model")
STAGED_FILES = ("requirements.txt", "README.md")
MANIFEST = "include requirements.txt README.md\n" + "".join(f"recursive-include {p}/data *\n" for p in PACKAGES)


def build_worker_package(setup_file: str, dist_dir: str) -> str:
    """Build the sdist a worker installs from ``setup_file``; returns the tarball's path.

    The build runs in a clean copy holding only the packages, requirements.txt and the
    setup file as setup.py, so nothing else in the checkout (pyproject.toml, tests,
    caches) changes what workers get.
    """
    root = os.path.dirname(os.path.abspath(setup_file))
    os.makedirs(dist_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="corpusforge-sdist-") as stage:
        for package in PACKAGES:
            shutil.copytree(os.path.join(root, package), os.path.join(stage, package), ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in STAGED_FILES:
            if os.path.exists(os.path.join(root, name)):
                shutil.copy(os.path.join(root, name), stage)
        shutil.copy(setup_file, os.path.join(stage, "setup.py"))
        with open(os.path.join(stage, "MANIFEST.in"), "w") as f:
            f.write(MANIFEST)
        out = os.path.join(stage, "dist")
        subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", out], cwd=stage, check=True, capture_output=True, text=True)
        (built,) = glob.glob(os.path.join(out, "*.tar.gz"))
        target = os.path.join(dist_dir, os.path.basename(built))
        shutil.copy(built, target)
    return target


def stage_setup_file(beam_args: list[str]) -> list[str]:
    """Replace ``--setup_file X`` (X not named setup.py/pyproject.toml) with ``--extra_package``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--setup_file")
    known, rest = parser.parse_known_args(beam_args)
    setup_file = known.setup_file
    if not setup_file or os.path.basename(setup_file) in ("setup.py", "pyproject.toml"):
        return list(beam_args)
    if not os.path.isfile(setup_file):
        raise FileNotFoundError(f"--setup_file {setup_file}: no such file")
    dist_dir = tempfile.mkdtemp(prefix="corpusforge-worker-package-")
    tarball = build_worker_package(setup_file, dist_dir)
    log.info("staging %s (built from %s) for the workers", tarball, setup_file)
    return rest + ["--extra_package", tarball]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the sdist Beam workers install, from beam_setup.py.")
    parser.add_argument("--setup_file", default="beam_setup.py")
    parser.add_argument("--dist-dir", default="dist")
    args = parser.parse_args(argv)
    print(build_worker_package(args.setup_file, args.dist_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
