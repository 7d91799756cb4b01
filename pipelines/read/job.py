"""The read job: WARC/WET files into document shards, declared once (``plan``) for every
engine (``pipelines.engines.run_plan``). What it does, its options and its ``--help``:
``pipelines.read.options``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

from corpus.inputs import expand_inputs
from corpus.records import Document
from pipelines.cli import run_job
from pipelines.engines import run_plan
from pipelines.jobs import error_examples, finish_job, read_status
from pipelines.plan import Plan, ReadFiles, WriteShards
from pipelines.read.options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.shard_io import CrawlRecordReader

log = logging.getLogger(__name__)


def plan(args: argparse.Namespace) -> Plan:
    """Every WET conversion record of the inputs, as it was read, into one split's shards."""
    reader = functools.partial(CrawlRecordReader, Document, args.text_mode, args.max_record_bytes, args.verify_digest)
    return Plan("read", ReadFiles("Read WARC/WET", reader), (), WriteShards(args.name, tuple(args.format), ((args.split, args.num_shards),)))


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge read ARGV`, errors raised
        return run_job("read", sys.argv[1:] if args is None else args)
    files = expand_inputs(args.input, base=args.base_url, max_files=args.max_files, allow_any_manifest_path=args.allow_any_manifest_path)
    log.info("reading %d file(s) into %s on %s", len(files), args.output, args.engine)
    counted = run_plan(args, lambda: plan(args), files)
    stats = {"files": len(files), "counters": counted["counters"], "examples": error_examples(args.output), "kernels": counted["kernels"]}
    finish_job(args.output, "read", stats, expect_written=True)
    return stats


def format_summary(stats: dict) -> str:
    read = stats["counters"].get("read-archive", {})
    errors = {k.split(":", 1)[1]: v for k, v in read.items() if k.startswith("error:")}
    return (f"{stats['files']} file(s): {read.get('produced:conversion', 0):,} documents, "
            f"{read.get('produced:response', 0):,} HTML pages, errors {errors or 'none'}")


exit_status = read_status


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["read", *sys.argv[1:]]))
