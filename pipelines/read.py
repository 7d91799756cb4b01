"""Read WARC/WET files into document shards, unfiltered: the first step of every recipe.

    corpusforge read --input 'crawl/*.wet.gz' --output out/ --format c4json parquet --num_shards 8 \
        [--text_mode c4] [any Beam option, e.g. --runner DataflowRunner --setup_file ./beam_setup.py]

WET ``conversion`` records become documents (``text``, ``url``, ``timestamp`` and ``meta``
with language header and provenance). WARC HTML responses are counted here; turning HTML
into text belongs to the recipes that choose an extractor. Bad input goes to
``_errors/errors.jsonl``; all counters and up to 5 example errors per reason go to
``_stats.json``.
"""

from __future__ import annotations

import argparse
import logging
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from common import storage
from corpus.inputs import COMMON_CRAWL_BASE_URL, expand_inputs
from corpus.shards import FORMATS
from corpus.warc import TEXT_MODES
from pipelines import progress
from pipelines.cli import run_job
from pipelines.options import add_engine_arguments, add_manifest_path_argument, add_overwrite_argument, positive_int, spark_engine, stage_setup_file
from pipelines.jobs import begin_job, counters_of, error_examples, finish_job, read_status
from pipelines.sources import ReadCrawlFiles, WriteErrors, WriteShards, add_max_record_bytes

log = logging.getLogger(__name__)

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="+", required=True, help="WARC/WET files, globs, folders, *.paths.gz manifests or URLs")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=["c4json"], help="shard format(s), e.g. c4json parquet (default c4json)")
    add_max_record_bytes(parser)
    parser.add_argument("--num_shards", type=positive_int, default=1, help="number of output shards (default 1)")
    parser.add_argument("--name", default="docs", help="shard name prefix (default docs)")
    parser.add_argument("--split", default="train", help="split name in shard file names (default train)")
    parser.add_argument("--text_mode", choices=TEXT_MODES, default="faithful", help="WET text as written, or with the C4 reference's quirks")
    parser.add_argument("--base_url", default=COMMON_CRAWL_BASE_URL, help="base URL (or folder) for manifest paths")
    add_manifest_path_argument(parser)
    parser.add_argument("--max_files", type=positive_int, default=None, help="read only the first N files")
    add_engine_arguments(parser)


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
        with spark.engine.job_session(args.spark_master) as session:
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
