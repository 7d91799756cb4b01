"""The ``spark-submit`` entry point: a corpusforge job on the native Spark engine.

    python -m build --wheel            # or: zip -r corpusforge.zip common corpus dedup pipelines samplecrawl
    spark-submit --master yarn --py-files dist/corpusforge-*.whl pipelines/spark_main.py \\
        c4 --input s3://bucket/wet/ --output s3://bucket/c4 --num_shards 1024 [c4's options]

The first argument names the job (``c4``, ``read``, ``tokenize``, ``webtext`` with
``--pages crawl``), the rest are its options as
``corpusforge <job>`` takes them; ``--engine spark`` is implied and the master is
spark-submit's. Executors need the project's dependencies (``requirements.txt``) in the
Python that ``PYSPARK_PYTHON`` names (by default the driver's). docs/spark.md.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    # Run as a script (spark-submit): its folder, pipelines/, must not shadow the standard
    # library (pipelines/tokenize.py is not ``tokenize``); the project comes from --py-files.
    del sys.path[0]

import json  # noqa: E402
import logging  # noqa: E402

from corpus.inputs import InputError  # noqa: E402
from pipelines import c4, read, tokenize, webtext  # noqa: E402

JOBS = {"c4": c4, "read": read, "tokenize": tokenize, "webtext": webtext}
# What each job prints when it is done: its own summary (read has none: its counters).
SUMMARIES = {"c4": c4.format_summary, "read": lambda stats: json.dumps(stats["counters"], indent=1),
             "tokenize": tokenize.format_summary, "webtext": webtext.format_summary}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not argv or argv[0] not in JOBS:
        print(f"usage: spark-submit [spark options] pipelines/spark_main.py {{{','.join(JOBS)}}} [job options]", file=sys.stderr)
        return 2
    job = JOBS[argv[0]]
    print(f"corpusforge {argv[0]} on Spark, the project from {c4.__file__}", file=sys.stderr)  # a zip/wheel with --py-files
    try:
        stats = job.run(argv[1:] + ["--engine", "spark"])
    except InputError as exc:
        print(f"corpusforge {argv[0]}: {exc}", file=sys.stderr)
        return 2
    print(SUMMARIES[argv[0]](stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
