"""``corpusforge decontaminate``: training shards without the benchmarks' n-gram overlaps
(GPT-3's spans: the match and 200 characters either side removed; or whole documents
dropped, or the matches masked). The job lives beside the audit, whose index it shares
(``pipelines.audit``); this module is its entry in the command registry.

    corpusforge decontaminate --corpus c4/ --benchmark lambada:lambada_test.jsonl --output clean/ [--mode drop]
"""

from __future__ import annotations

from pipelines.audit import add_decontaminate_arguments as add_arguments
from pipelines.audit import decontaminate_shards as run
from pipelines.audit import format_decontaminate as format_summary

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option

__all__ = ["add_arguments", "run", "format_summary", "EXTRA_OPTIONS"]
