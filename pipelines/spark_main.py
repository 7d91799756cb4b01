"""The ``spark-submit`` entry point: a corpusforge job on the native Spark engine.

    corpusforge spark-package dist/spark     # dist/spark/corpusforge.zip and dist/spark/spark_main.py
    spark-submit --master yarn --py-files dist/spark/corpusforge.zip dist/spark/spark_main.py \\
        c4 --input s3://bucket/wet/ --output s3://bucket/c4 --num_shards 1024 [c4's options]

The first argument names the job (``c4``, ``read``, ``tokenize``, ``webtext`` with
``--pages crawl``, ``audit``, ``decontaminate``), the rest are its options as
``corpusforge <job>`` takes them; ``--engine spark`` is implied and the master is
spark-submit's, and the session is the one spark-submit configured: no setting the user gave
is changed. Executors need the project's dependencies (``requirements.txt``) in the Python
that ``spark.pyspark.python`` / ``PYSPARK_PYTHON`` names; the project itself comes from
``--py-files`` (a wheel given there is shipped again as a zip, which executors can import).
docs/spark.md.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    # Run as a script (spark-submit): its folder, pipelines/, must not shadow the standard
    # library (pipelines/tokenize/job.py is not ``tokenize``); the project comes from --py-files.
    del sys.path[0]

import logging  # noqa: E402

from corpus.inputs import InputError  # noqa: E402
from pipelines.cli import load_command, run_job  # noqa: E402

# The jobs that run on Spark (``pipelines.cli``'s registry names them; each prints its own summary).
JOBS = ("c4", "read", "tokenize", "webtext", "audit", "decontaminate")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apache_beam").setLevel(logging.WARNING)  # Beam's import-time INFO lines, as pipelines.cli does
    if not argv or argv[0] not in JOBS:
        print(f"usage: spark-submit [spark options] pipelines/spark_main.py {{{','.join(JOBS)}}} [job options]", file=sys.stderr)
        return 2
    # only the job that runs is loaded: a zip shipped for c4 needs no model/ (tokenize's tokenizer)
    job = load_command(argv[0])
    print(f"corpusforge {argv[0]} on Spark, the project from {job.__file__}", file=sys.stderr)  # a zip/wheel with --py-files
    from pyspark.sql import SparkSession  # noqa: PLC0415  (spark-submit's session, made before any job option is read)

    SparkSession.builder.getOrCreate()  # as spark-submit configured it: the job adds no setting of its own
    try:
        stats = run_job(argv[0], argv[1:] + ["--engine", "spark"])
    except InputError as exc:
        print(f"corpusforge {argv[0]}: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if not getattr(exc, "one_line", False):  # e.g. pipelines.spark.engine.SparkNoExecutorsError
            raise
        print(f"corpusforge {argv[0]}: {exc}", file=sys.stderr)
        return 1
    print(job.format_summary(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
