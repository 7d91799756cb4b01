"""The native Spark engine: the jobs' steps wired with PySpark instead of Beam.

``engine`` holds what every job needs (the session, rule steps as ``mapPartitions``,
counters as one accumulator, the shard writer); ``c4`` and ``read`` wire one job each,
beside their Beam wiring (``pipelines.c4``, ``pipelines.read``), with the same rules,
namespaces and counter names imported from where the Beam wiring takes them. The output
(every shard, ``_SUCCESS``, ``_stats.json``) is the same bytes as Beam's. docs/spark.md.
"""

from pipelines.spark import c4, read  # noqa: F401

__all__ = ["c4", "read"]
