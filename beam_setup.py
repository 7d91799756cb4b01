"""The setuptools file Beam workers install (Dataflow, Spark and Flink portable runners).

    corpusforge read ... --runner DataflowRunner --setup_file ./beam_setup.py

Beam's stager accepts only files named setup.py or pyproject.toml, so corpusforge's jobs
turn ``--setup_file ./beam_setup.py`` into an sdist built from this file and stage it
with ``--extra_package`` (``pipelines/beam_package.py``), which every worker pip-installs.
By hand: ``python -m pipelines.beam_package --setup_file ./beam_setup.py --dist-dir dist
[--extras tokenize]``.

It packages the five packages (not the demo's ``samplecrawl``) with their data files. What workers install:

- always, the pinned dependencies of ``requirements.txt`` (the file pyproject.toml reads
  too): everything the read, c4, webtext, audit and decontaminate jobs import;
- the requirements of each extra named in ``worker-extras.txt`` (one name a line), a file
  ``build_worker_package(..., extras=...)`` writes into the sdist. A worker runs
  ``pip install corpusforge-0.1.0.tar.gz``, which cannot name an extra, so the sdist
  records what its workers need and this file, run again on the worker, reads it back.
  The tokenize job asks for ``tokenize``.

The extras (``EXTRAS``), pinned in ``requirements-model.txt``:

- ``tokenize``: the tokenizer libraries ``model/tokenizer.py`` imports (tokenizers,
  tiktoken), never torch;
- ``model``: all of requirements-model.txt (torch, tokenizers, tiktoken, safetensors).

Both are also declared as ``extras_require``, so ``pip install 'corpusforge-0.1.0.tar.gz[model]'``
works by hand whatever the sdist recorded.
"""

import os
import re

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["common", "corpus", "dedup", "pipelines", "model"]
WORKER_EXTRAS_FILE = "worker-extras.txt"  # written by pipelines.beam_package.build_worker_package
TOKENIZE_LIBRARIES = ("tokenizers", "tiktoken")  # what the tokenize job's workers import (model/tokenizer.py)


def requirements(name: str = "requirements.txt") -> list[str]:
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def project_name(requirement: str) -> str:
    """``tiktoken==0.14.0`` -> ``tiktoken`` (PEP 503 normalised)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def extras() -> dict[str, list[str]]:
    model = requirements("requirements-model.txt")
    return {"tokenize": [r for r in model if project_name(r) in TOKENIZE_LIBRARIES], "model": model}


def worker_extras() -> list[str]:
    """The extras this sdist's workers install, as recorded by ``build_worker_package``."""
    path = os.path.join(HERE, WORKER_EXTRAS_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        names = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
    unknown = sorted(set(names) - set(EXTRAS))
    if unknown:
        raise SystemExit(f"{WORKER_EXTRAS_FILE}: unknown extra(s) {', '.join(unknown)}; known: {', '.join(EXTRAS)}")
    return names


def install_requires() -> list[str]:
    """requirements.txt, then each recorded extra's requirements (each requirement once)."""
    wanted = requirements()
    for name in worker_extras():
        wanted += [r for r in EXTRAS[name] if r not in wanted]
    return wanted


EXTRAS = extras()

setuptools.setup(
    name="corpusforge",
    version="0.1.0",
    description="corpusforge packages for Beam workers",
    packages=setuptools.find_packages(where=HERE, include=[p for name in PACKAGES for p in (name, name + ".*")]),
    package_data={name: ["data/*"] for name in PACKAGES},
    install_requires=install_requires(),
    extras_require=EXTRAS,
    python_requires=">=3.11",
)
