"""The C4 job: inputs, resources, the engine dispatch and the summary. Its Beam wiring is
``pipelines.c4_beam`` (loaded only for ``--engine beam``), its Spark wiring
``pipelines.spark.c4`` (the same bytes); its options and its ``--help``:
``pipelines.c4_options``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from common.errors import UsageError
from corpus import c4
from corpus.inputs import InputError, expand_inputs, open_input, read_pinned
from corpus.sentences import shipped_punkt
from dedup.text import DEDUPE_SPANS
from pipelines import progress
from pipelines.beam_package import stage_setup_file
from pipelines.c4_options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.c4_pages import EXTRACT_NAMESPACE
from pipelines.cli import run_job
from pipelines.engines import spark_engine
from pipelines.jobs import begin_job, counters_of, finish_job, read_status
from pipelines.tally import format_counter_table, format_read_errors

log = logging.getLogger(__name__)

# Counter namespaces in chain order, for the summary table.
SUMMARY_STAGES = (
    c4.SPLIT_WET_FILE, EXTRACT_NAMESPACE, c4.TOO_LONG_FILTER, c4.REALNEWS_FILTER, c4.DUPLICATE_URL_FILTER,
    c4.WEBTEXTLIKE_FILTER, c4.CLEAN_PAGE, c4.DEDUPE_LINES, DEDUPE_SPANS, c4.ENGLISH_FILTER, c4.BADWORDS_FILTER,
    "train", "validation",
)


def check_source(args: argparse.Namespace) -> None:
    """--input or --crawl is required (usage error, exit 2), except for webtextlike, whose
    crawls default to the reference's OpenWebText crawls (TFDS ``OPENWEBTEXT_CC_VERSIONS``)."""
    if args.input or args.crawl:
        return
    if not c4.VARIANTS[args.variant].webtextlike:
        raise UsageError("one of the arguments --input --crawl is required")
    args.crawl = list(c4.OPENWEBTEXT_CRAWLS)


def input_files(args: argparse.Namespace) -> list[str]:
    if args.crawl:
        try:
            specs = [c4.crawl_manifest_url(crawl, args.crawl_files, args.base_url) for crawl in args.crawl]
        except ValueError as exc:
            raise InputError(str(exc)) from exc
    else:
        specs = args.input
    files = expand_inputs(specs, base=args.base_url, max_files=args.max_files, allow_any_manifest_path=args.allow_any_manifest_path)
    kept = [f for f in files if not any(f.endswith(bad) for bad in c4.KNOWN_CORRUPT_WET_FILES)]
    if len(kept) < len(files):
        log.warning("skipping %d known-corrupt WET file(s)", len(files) - len(kept))
    return kept


def load_resources(args: argparse.Namespace) -> dict:
    """Everything the workers need that comes from a file, read once on the launcher (and
    ``run`` adds ``punkt``, the launcher's punkt model, which every sentence split binds)."""
    resources = {}
    variant = c4.VARIANTS[args.variant]
    if variant.badwords:
        resources["badwords"] = c4.BadwordsMatcher(c4.parse_badwords(_read_text(args.badwords, "--badwords")))
    if variant.realnewslike:
        resources["realnews_domains"] = c4.load_realnews_domains(_read_text(args.realnews_domains, "--realnews_domains"))
    if variant.webtextlike and not args.webtext_urls:
        raise InputError("--variant webtextlike needs --webtext_urls (the OpenWebText URL list, one URL a line)")
    return resources


def _read_text(location: str, option: str) -> str:
    if location in (c4.BADWORDS_URL, c4.REALNEWS_DOMAINS_URL):  # pinned defaults: downloaded once, then offline
        return read_pinned(location, option).decode("utf-8")
    try:
        with open_input(location) as f:
            return f.read().decode("utf-8")
    except (OSError, ValueError) as exc:
        raise InputError(f"{option}: cannot read {location}: {exc}") from exc


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge c4 ARGV`, errors raised
        return run_job("c4", sys.argv[1:] if args is None else args)
    beam_args = args.beam_args
    check_source(args)
    try:
        punkt = shipped_punkt()  # before any input is read; the workers split with the launcher's model
    except Exception as exc:
        raise InputError(str(exc)) from exc
    files = input_files(args)
    resources = {**load_resources(args), "punkt": punkt}
    log.info("C4 %s (%s dedup) over %d file(s) into %s on %s", args.variant, args.dedup, len(files), args.output, args.engine)
    if args.engine == "spark":
        spark = spark_engine(args)
        with spark.engine.job_session_for(args) as session:
            begin_job(args.output, "c4", args.overwrite)
            counted = spark.c4.run(session, files, args, resources, beam_args)
    else:
        import apache_beam as beam  # noqa: PLC0415  (Beam only for --engine beam: a Spark run never loads it)
        from apache_beam.options.pipeline_options import PipelineOptions  # noqa: PLC0415

        from pipelines.c4_beam import build  # noqa: PLC0415
        from pipelines.steps import collect_examples, units_of  # noqa: PLC0415

        pipeline = beam.Pipeline(options=PipelineOptions(stage_setup_file(beam_args)))
        begin_job(args.output, "c4", args.overwrite)
        build(pipeline, files, args, resources)
        result = progress.run_pipeline(pipeline, "c4", files=len(files))
        counted = {"counters": counters_of(result), "examples": collect_examples(args.output), "units": units_of(result)}
    stats = {"variant": args.variant, "dedup": args.dedup, "files": len(files), **counted}
    finish_job(args.output, "c4", stats, expect_written=True)
    return stats


def format_summary(stats: dict) -> str:
    """The C4 run's one-screen table of counters, stage by stage."""
    table = format_counter_table(f"C4 {stats['variant']} ({stats['dedup']} dedup), {stats['files']} file(s)", stats["counters"], SUMMARY_STAGES,
                                 stats.get("units"))
    return "\n".join(filter(None, [table, format_read_errors(stats["counters"])]))


exit_status = read_status


def __getattr__(name: str):
    """``build`` (the Beam wiring) from ``pipelines.c4_beam``, loaded when first asked for."""
    if name == "build":
        from pipelines.c4_beam import build  # noqa: PLC0415

        return build
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["c4", *sys.argv[1:]]))
