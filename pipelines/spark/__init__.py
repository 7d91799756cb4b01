"""The native Spark engine: the jobs' steps wired with PySpark instead of Beam.

``engine`` holds what every job needs (the session, rule steps as ``mapPartitions``,
counters as one accumulator, the shard writer); ``plan`` interprets the jobs declared once
(``c4``, ``read``: ``pipelines.plan``) and holds every job's file-reader loop; ``tokenize``,
``webtext`` and ``audit`` (``corpusforge audit`` and ``decontaminate``) wire one job each,
beside their Beam wiring (``pipelines.tokenize.job``, ...), with the same rules, namespaces and
counter names imported from where the Beam wiring takes them. The output (every shard,
``_SUCCESS``, the stats document) is the same bytes as Beam's. docs/spark.md.
"""

import importlib

from pipelines.spark import engine  # noqa: F401

JOBS = ("plan", "read", "tokenize", "webtext", "audit")

__all__ = ["engine", *JOBS]


def __getattr__(name: str):
    """``pipelines.spark.<job>``, loaded when the job runs: the package shipped to run c4
    needs no ``model/`` (tokenize's tokenizer), and a worker loads one job's wiring."""
    if name in JOBS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
