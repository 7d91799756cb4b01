"""The read job on Apache Beam (or native Spark: ``pipelines.spark.read``): WARC/WET files into
document shards. What it does, its options and its ``--help``: ``pipelines.read_options``.
"""

from __future__ import annotations

import argparse
import logging
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from corpus.inputs import expand_inputs
from pipelines import progress
from pipelines.beam_package import stage_setup_file
from pipelines.cli import run_job
from pipelines.engines import spark_engine
from pipelines.jobs import begin_job, counters_of, error_examples, finish_job, read_status
from pipelines.read_options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.sources import ReadCrawlFiles, WriteErrors, WriteShards

log = logging.getLogger(__name__)


def build(pipeline: beam.Pipeline, files: list[str], args: argparse.Namespace) -> None:
    read = pipeline | "Crawl files" >> beam.Create(files) | "Read WARC/WET" >> ReadCrawlFiles(args.text_mode, args.max_record_bytes, args.verify_digest)
    read.documents | "Write shards" >> WriteShards(args.output, formats=args.format, name=args.name, split=args.split, num_shards=args.num_shards)
    read.errors | "Write errors" >> WriteErrors(args.output)


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge read ARGV`, errors raised
        return run_job("read", sys.argv[1:] if args is None else args)
    beam_args = args.beam_args
    files = expand_inputs(args.input, base=args.base_url, max_files=args.max_files, allow_any_manifest_path=args.allow_any_manifest_path)
    log.info("reading %d file(s) into %s on %s", len(files), args.output, args.engine)
    if args.engine == "spark":
        spark = spark_engine(args)
        with spark.engine.job_session_for(args) as session:
            begin_job(args.output, "read", args.overwrite)
            counters = spark.read.run(session, files, args, beam_args)
    else:
        pipeline = beam.Pipeline(options=PipelineOptions(stage_setup_file(beam_args)))
        begin_job(args.output, "read", args.overwrite)
        build(pipeline, files, args)
        counters = counters_of(progress.run_pipeline(pipeline, "read", files=len(files)))
    stats = {"files": len(files), "counters": counters, "examples": error_examples(args.output)}
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
