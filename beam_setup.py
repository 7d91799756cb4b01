"""The setuptools file Beam workers install (Dataflow, Spark and Flink portable runners).

    corpusforge read ... --runner DataflowRunner --setup_file ./beam_setup.py

Beam's stager accepts only files named setup.py or pyproject.toml, so corpusforge's jobs
turn ``--setup_file ./beam_setup.py`` into an sdist built from this file and stage it
with ``--extra_package`` (``pipelines/options.py``), which every worker pip-installs.
By hand: ``python -m pipelines.options --setup_file ./beam_setup.py --dist-dir dist``.

It packages the four packages with their data files and installs the pinned
dependencies of ``requirements.txt`` (the file pyproject.toml reads too).
"""

import os

import setuptools

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["corpus", "dedup", "pipelines", "model"]


def requirements() -> list[str]:
    with open(os.path.join(HERE, "requirements.txt"), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


setuptools.setup(
    name="corpusforge",
    version="0.1.0",
    description="corpusforge packages for Beam workers",
    packages=setuptools.find_packages(where=HERE, include=[p for name in PACKAGES for p in (name, name + ".*")]),
    package_data={name: ["data/*"] for name in PACKAGES},
    install_requires=requirements(),
    python_requires=">=3.10",
)
