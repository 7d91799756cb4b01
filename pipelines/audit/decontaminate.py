"""``corpusforge decontaminate``: training shards without the benchmarks' n-gram overlaps
(GPT-3's spans: the match and 200 characters either side removed; or whole documents
dropped, or the matches masked). The job lives beside the audit, whose index it shares
(``pipelines.audit.job``); this module is its entry in the command registry, and imports no Apache
Beam until the options are parsed (``--help`` and a usage error come first).

    corpusforge decontaminate --corpus c4/ --benchmark lambada:lambada_test.jsonl --output clean/ [--mode drop]
"""

from __future__ import annotations

from pipelines.audit.options import EXTRA_OPTIONS
from pipelines.audit.options import add_decontaminate_arguments as add_arguments

__all__ = ["add_arguments", "run", "format_summary", "EXTRA_OPTIONS"]


def run(args) -> dict:
    """``pipelines.audit.job.decontaminate_shards``, imported (with Apache Beam) once the options are parsed."""
    from pipelines.audit.job import decontaminate_shards

    return decontaminate_shards(args)


def format_summary(stats: dict) -> str:
    from pipelines.audit.job import format_decontaminate

    return format_decontaminate(stats)
