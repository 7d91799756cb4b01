"""Every data file the packages read loads from inside a zip, as a Spark executor imports the
project (``spark-submit --py-files corpusforge.zip``, ``SparkContext.addPyFile``): a fresh
interpreter whose path holds only zips loads each one through the public functions that use
it, and gets the checkout's content.

The files: the WebText blocklists (``corpus/data/``, read by ``corpus.reddit``: the defaults
of ``LinkFilter`` and of the webtext job's options), the C kernels' sources
(``corpus/data/langid_trial.c``, ``dedup/data/bloom_kernel.c``, compiled by ``corpus.native``), and ``corpus/langid.py``'s own source,
whose digest names the cached language model. The dependencies come from this venv, as on an
executor that installed requirements.txt (langdetect, whose profiles ``corpus.langid``
reads, cannot load from a zip: it opens its own files by path when imported). The bad-words
list and the realnewslike domains are no package data: they are downloaded
(``corpus.c4.BADWORDS_URL``, ``REALNEWS_DOMAINS_URL``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from corpus import langid
from corpus.reddit import LinkFilter, load_blocklist

pytestmark = pytest.mark.pipeline  # a fresh Python process

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "corpus", "dedup", "pipelines", "model", "samplecrawl")
TEXTS = ("The quick brown fox jumps over the lazy dog while the farmer watches from the gate.",
         "Der schnelle braune Fuchs springt über den faulen Hund, und der Bauer sieht vom Tor aus zu.",
         "Le renard brun rapide saute par-dessus le chien paresseux pendant que le fermier regarde.",
         "Быстрая коричневая лиса прыгает через ленивую собаку, а фермер смотрит от ворот.")

PROBE = rf"""
import json, sys
import corpus
from corpus import langid, native, reddit
from dedup import bloom_native
from pipelines.webtext import job as webtext
from pipelines.webtext import options as webtext_options

parser = __import__("argparse").ArgumentParser()
webtext_options.add_arguments(parser)
job_filter = webtext.link_filter_from(parser.parse_args(["--submissions", "dumps/", "--pages", "crawl", "--output", "out/"]))
default = reddit.LinkFilter()
texts = json.loads(sys.argv[1])
print(json.dumps({{
    "corpus": corpus.__file__,
    "project": sorted({{m.__file__ for n, m in list(sys.modules.items())
                       if n.partition(".")[0] in {PACKAGES!r} and getattr(m, "__file__", None)}}),
    "domains": sorted(reddit.default_domain_blocklist()), "extensions": sorted(reddit.default_extension_blocklist()),
    "filter": [sorted(default.domain_blocklist), sorted(default.extension_blocklist)],
    "from_files": [sorted(reddit.LinkFilter.from_files().domain_blocklist), sorted(reddit.LinkFilter.from_files().extension_blocklist)],
    "job": [sorted(job_filter.domain_blocklist), sorted(job_filter.extension_blocklist)],
    "langs": [repr(langid.detect_langs(t)) for t in texts],
    "fallback": langid._fallback is not None,
    "bloom": bloom_native.kernel() is not None,
    "kernels": native.status(),
}}))
"""


def zip_folders(archive: Path, folders: list[tuple[Path, str]]) -> None:
    """Each (folder, name in the zip) with everything under it but bytecode."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder, name in folders:
            for top, dirs, files in os.walk(folder):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for file in files:
                    if not file.endswith(".pyc"):
                        path = Path(top, file)
                        zf.write(path, f"{name}/{path.relative_to(folder).as_posix()}")


def test_every_data_file_loads_from_a_zip_on_the_path(tmp_path):
    project = tmp_path / "corpusforge.zip"
    zip_folders(project, [(ROOT / name, name) for name in PACKAGES])
    assert "corpus/data/webtext_domain_blocklist.txt" in zipfile.ZipFile(project).namelist()
    cache = tmp_path / "cache"  # empty: the process builds the language model and keeps it here
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "CORPUSFORGE_CACHE": str(cache),
           "PYTHONPATH": str(project)}  # the dependencies: this venv's site-packages
    # -s: no user site; -P: neither the working folder nor a script's folder on the path.
    done = subprocess.run([sys.executable, "-s", "-P", "-c", PROBE, json.dumps(TEXTS)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])

    assert got["corpus"] == f"{project}/corpus/__init__.py"
    assert got["project"] and all(path.startswith(f"{project}/") for path in got["project"]), got["project"]
    domains = sorted(load_blocklist(ROOT / "corpus" / "data" / "webtext_domain_blocklist.txt"))
    extensions = sorted(load_blocklist(ROOT / "corpus" / "data" / "webtext_extension_blocklist.txt"))
    assert "imgur.com" in domains and "jpg" in extensions
    assert (got["domains"], got["extensions"]) == (domains, extensions)
    checkout = LinkFilter()  # its entries normalised ("www." dropped, extensions lower-cased)
    for key in ("filter", "from_files", "job"):
        assert got[key] == [sorted(checkout.domain_blocklist), sorted(checkout.extension_blocklist)], key
    assert not got["fallback"], done.stderr[-3000:]  # corpus.langid's own model, not langdetect's code
    # the language model is kept under a digest of corpus/langid.py, read from the zip
    digest = hashlib.sha256((ROOT / "corpus" / "langid.py").read_bytes() + langid.LANGDETECT_VERSION.encode()
                            + np.__version__.encode()).hexdigest()[:16]
    assert [p.name for p in cache.glob("langid-model-*")] == [f"langid-model-{digest}.pickle"]
    assert got["langs"] == [repr(langid.detect_langs(text)) for text in TEXTS]
    assert [row[:6] for row in got["langs"]] == ["[('en'", "[('de'", "[('fr'", "[('ru'"]
    if shutil.which(os.environ.get("CC") or "cc"):  # the C kernels' sources (corpus/data/, dedup/data/) read from the zip
        assert got["bloom"] and got["kernels"] == {"langid-trial": "native", "bloom-kernel": "native"}, got["kernels"]
