"""``corpusforge spark-package DIR``: the project as a Spark cluster's executors import it.

PySpark puts only ``.zip``, ``.egg`` and ``.jar`` files on an executor's path
(``--py-files``, ``SparkContext.addPyFile``), so the project travels as one zip of its
packages with their data files (every data file loads through ``importlib.resources``,
which reads a zip member as it reads a file). This command writes it, with the launcher
that ``spark-submit`` runs, and prints the ``spark-submit`` line:

    corpusforge spark-package dist/spark
    spark-submit --master yarn --py-files dist/spark/corpusforge.zip dist/spark/spark_main.py c4 --input ... --output ...

A job started with ``corpusforge JOB --engine spark --spark_master spark://...`` (any master
that is not ``local``) ships the same zip itself (``project_zip``: built once per version and
content under the user's cache folder, ``addPyFile``), so executors need only the
requirements (``requirements.txt``, and tokenize's tokenizer libraries). docs/spark.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.metadata
import os
import shlex
import sys
import tempfile
import zipfile

# What executors import: every package of the project (model/ for tokenize's tokenizer).
PACKAGES = ("common", "corpus", "dedup", "pipelines", "model", "samplecrawl")
ZIP_NAME = "corpusforge.zip"
LAUNCHER_NAME = "spark_main.py"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every member's timestamp: the same sources give the same zip bytes
LAUNCHER = '''"""corpusforge's spark-submit launcher (written by `corpusforge spark-package`).

    spark-submit [spark options] --py-files corpusforge.zip spark_main.py JOB [job options]
"""
import sys

from pipelines.spark_main import main

if __name__ == "__main__":
    sys.exit(main())
'''


def _package_dir(name: str) -> str:
    return os.path.dirname(importlib.import_module(name).__file__)


def imported_archive() -> str | None:
    """The zip or wheel this process imports the project from (``--py-files``), or ``None``
    when it comes from folders (a checkout, an installed package)."""
    path = os.path.abspath(_package_dir("common"))
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return path if os.path.isfile(path) else None


def _members() -> list[tuple[str, str]]:
    """``(name in the zip, file)`` for every source and data file of the packages, sorted."""
    members = []
    for package in PACKAGES:
        root = _package_dir(package)
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")) or name.startswith("."):
                    continue
                path = os.path.join(folder, name)
                members.append((os.path.join(package, os.path.relpath(path, root)).replace(os.sep, "/"), path))
    return sorted(members)


def version() -> str:
    try:
        return importlib.metadata.version("corpusforge")
    except importlib.metadata.PackageNotFoundError:  # run from a zip: no installed metadata
        return "0.1.0"


def write_zip(path: str) -> str:
    """The project's packages as a zip at ``path`` (written under a temporary name, then
    renamed); returns ``path``. The same sources give the same bytes."""
    archive = imported_archive()
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, partial = tempfile.mkstemp(prefix=".corpusforge-", suffix=".zip.partial", dir=folder)
    os.close(handle)
    try:
        if archive is not None:  # already a zip (or a wheel, which is one): the same packages
            with zipfile.ZipFile(archive) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
                for info in sorted(source.infolist(), key=lambda i: i.filename):
                    if info.filename.split("/", 1)[0] in PACKAGES and not info.is_dir():
                        out.writestr(zipfile.ZipInfo(info.filename, ZIP_TIME), source.read(info), zipfile.ZIP_DEFLATED)
        else:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as out:
                for name, file in _members():
                    with open(file, "rb") as f:
                        out.writestr(zipfile.ZipInfo(name, ZIP_TIME), f.read(), zipfile.ZIP_DEFLATED)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise
    return path


def cache_dir() -> str:
    """Where shipped zips are kept: ``$CORPUSFORGE_CACHE`` or ``$XDG_CACHE_HOME/corpusforge``
    (``~/.cache/corpusforge``), ``spark/`` under it."""
    base = os.environ.get("CORPUSFORGE_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "corpusforge")
    return os.path.join(base, "spark")


def _sources_digest() -> str:
    archive = imported_archive()
    digest = hashlib.sha256()
    if archive is not None:
        with open(archive, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    for name, file in _members():
        digest.update(name.encode() + b"\0")
        with open(file, "rb") as f:
            digest.update(f.read())
        digest.update(b"\0")
    return digest.hexdigest()


def project_zip() -> str:
    """The zip a job ships to a cluster's executors: one per version and content of the
    sources (``corpusforge-<version>-<sha256[:12]>.zip`` under ``cache_dir()``), built on
    first use. The project run from a zip is that zip; from a wheel, a zip of the wheel's
    packages (PySpark puts no ``.whl`` on an executor's path)."""
    archive = imported_archive()
    if archive is not None and archive.endswith(".zip"):
        return archive
    path = os.path.join(cache_dir(), f"corpusforge-{version()}-{_sources_digest()[:12]}.zip")
    if not os.path.isfile(path):
        write_zip(path)
    return path


def write_package(out_dir: str) -> tuple[str, str]:
    """``out_dir/corpusforge.zip`` and ``out_dir/spark_main.py``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    zip_path = write_zip(os.path.join(out_dir, ZIP_NAME))
    launcher = os.path.join(out_dir, LAUNCHER_NAME)
    with open(launcher + ".partial", "w", encoding="utf-8") as f:
        f.write(LAUNCHER)
    os.replace(launcher + ".partial", launcher)
    return zip_path, launcher


def submit_line(zip_path: str, launcher: str, master: str = "yarn") -> str:
    return (f"spark-submit --master {shlex.quote(master)} --py-files {shlex.quote(zip_path)} {shlex.quote(launcher)} "
            "c4 --input s3://BUCKET/wet/ --output s3://BUCKET/c4 --num_shards 1024")


# --- the command --------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", metavar="DIR", help="where corpusforge.zip and spark_main.py are written")
    parser.add_argument("--master", default="yarn", help="the master the printed spark-submit line names (default: yarn)")


def run(args: argparse.Namespace) -> dict:
    zip_path, launcher = write_package(args.out_dir)
    return {"zip": os.path.abspath(zip_path), "launcher": os.path.abspath(launcher), "bytes": os.path.getsize(zip_path),
            "submit": submit_line(os.path.abspath(zip_path), os.path.abspath(launcher), args.master)}


def format_summary(summary: dict) -> str:
    return "\n".join([
        f"wrote {summary['zip']} ({summary['bytes']:,} bytes) and {summary['launcher']}",
        "executors need the requirements (requirements.txt; tokenize also tokenizers and tiktoken), not corpusforge:",
        f"  {summary['submit']}",
    ])


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["spark-package", *sys.argv[1:]]))

