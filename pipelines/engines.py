"""Which engine runs a job's steps: ``--engine beam`` (Apache Beam, any runner) or ``--engine
spark`` (native PySpark, the same bytes), the options that choose it, and ``spark_engine``,
which loads the Spark engine only when it is asked for (docs/spark.md).
"""

from __future__ import annotations

import argparse

from corpus.inputs import InputError
from pipelines.jobs import begin_job
from pipelines.spark_launch import (
    absolute_paths_for_cluster,
    check_spark_master,
    check_worker_python,
    missing_java,
)

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


def run_plan(args: argparse.Namespace, declare, files: list[str]) -> dict:
    """Run the job ``declare()`` declares (a ``pipelines.plan.Plan``) over ``files`` into
    ``args.output`` on ``args.engine``: the output claimed (``begin_job``, with
    ``args.overwrite``) once the engine is up, then the steps. ``declare`` is called after
    the engine checks, which make a cluster job's paths absolute first. Returns _stats.json's
    ``counters``, ``examples`` and ``units``."""
    if args.engine == "spark":
        spark = spark_engine(args)
        plan = declare()
        from pipelines.spark import plan as spark_plan  # noqa: PLC0415  (imports pyspark)

        with spark.engine.job_session_for(args) as session:
            begin_job(args.output, plan.job, args.overwrite)
            return spark_plan.run(session, plan, files, args.output, args.beam_args)
    plan = declare()
    from pipelines.beam import plan as beam_plan  # noqa: PLC0415  (Beam only for --engine beam: a Spark run never loads it)

    return beam_plan.run(plan, files, args.output, args.beam_args, lambda: begin_job(args.output, plan.job, args.overwrite))
