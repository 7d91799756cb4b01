"""The C4 job on Apache Beam (or native Spark with ``--engine spark``: ``pipelines.spark.c4``, the same
bytes). Its steps, its options and its ``--help``: ``pipelines.c4_options``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from common.decision import OTHER
from common.errors import UsageError
from corpus import c4, langid
from corpus.inputs import InputError, expand_inputs, open_input, read_pinned
from corpus.sentences import shipped_punkt
from corpus.warc import MAX_RECORD_BYTES, ReadStats
from dedup.text import DEDUPE_SPANS
from pipelines import progress
from pipelines.cli import run_job
from pipelines.dedupe import DedupeText
from pipelines.jobs import begin_job, counters_of, finish_job, read_status
from pipelines.c4_options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.c4_pages import BADWORDS_NAMESPACES, EXTRACT_NAMESPACE, LANGDETECT, C4PageReader, registered_domain_parts
from pipelines.options import spark_engine, stage_setup_file
from pipelines.sources import READ_NAMESPACE, WriteErrors, WriteShards
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import Steps, Tally, collect_examples, count, flush_tally, format_counter_table, format_read_errors, units_of

log = logging.getLogger(__name__)

# Counter namespaces in chain order, for the summary table.
SUMMARY_STAGES = (
    c4.SPLIT_WET_FILE, EXTRACT_NAMESPACE, c4.TOO_LONG_FILTER, c4.REALNEWS_FILTER, c4.DUPLICATE_URL_FILTER,
    c4.WEBTEXTLIKE_FILTER, c4.CLEAN_PAGE, c4.DEDUPE_LINES, DEDUPE_SPANS, c4.ENGLISH_FILTER, c4.BADWORDS_FILTER,
    "train", "validation",
)


# --- Beam steps ----------------------------------------------------------------------
class _ReadPagesFn(beam.DoFn):
    """``C4PageReader`` as a Beam step: pages out, error dicts to ``errors``, tallies flushed per file."""

    def __init__(self, input_kind: str, extract_timeout_s: float, max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
        self.reader = C4PageReader(input_kind, extract_timeout_s, max_record_bytes, verify_digest)

    def teardown(self):
        self.reader.close()

    def process(self, item):
        index, path = item
        stats, wet, extracted = ReadStats(), Tally(), Tally()
        try:
            for out in self.reader.read(index, path, stats, wet, extracted):
                yield beam.pvalue.TaggedOutput("errors", out) if isinstance(out, dict) else out
        finally:  # a failing worker still reports what it counted
            count(READ_NAMESPACE, stats.counts, OTHER)
        yield from flush_tally(wet, (c4.SPLIT_WET_FILE,), windowed=False)
        yield from flush_tally(extracted, (EXTRACT_NAMESPACE,), windowed=False)


class _NewestRef(beam.CombineFn):
    """URL dedup over staged captures ``(timestamp, order, ref)``: the newest per
    normalised URL (``c4.newest_capture``), and how many there were."""

    def create_accumulator(self):
        return None, 0

    def add_input(self, acc, capture):
        best, n = acc
        return (capture if best is None else c4.newest_capture(best, capture)), n + 1

    def merge_accumulators(self, accs):
        best, total = None, 0
        for capture, n in accs:
            total += n
            if capture is not None:
                best = capture if best is None else c4.newest_capture(best, capture)
        return best, total

    def extract_output(self, acc):
        return acc


# --- the pipeline --------------------------------------------------------------------
def build(pipeline: beam.Pipeline, files: list[str], args: argparse.Namespace, resources: dict) -> dict:
    """Wire the chain; returns the PCollections of examples and errors for the caller."""
    variant = c4.VARIANTS[args.variant]
    run_step = Steps()

    read = (
        pipeline
        | "Crawl files" >> beam.Create(list(enumerate(files)))
        | "Spread files over workers" >> beam.Reshuffle()
        | "Read pages" >> beam.ParDo(_ReadPagesFn(args.input_kind, args.extract_timeout, args.max_record_bytes, args.verify_digest)).with_outputs("errors", "examples", main="pages")
    )
    run_step.add(read.examples)
    pages = run_step(read.pages, "1 Length filter", c4.TOO_LONG_FILTER, c4.length_filter)
    if variant.realnewslike:
        pages = run_step(pages, "2 RealNews domains", c4.REALNEWS_FILTER,
                         functools.partial(c4.realnews_filter, domains=resources["realnews_domains"], split_domain=registered_domain_parts))
    staged = pages | "3 Stage pages" >> Stage(args.output, "pages", c4.url_dedup_key)
    newest = run_step.keyed(
        staged.refs
        | "3 Key by normalised URL" >> beam.MapTuple(lambda ref, key: (key[0], (key[1], key[2], ref)))
        | "3 Newest page per URL" >> beam.CombinePerKey(_NewestRef()),
        "3 Count URL duplicates", c4.DUPLICATE_URL_FILTER, c4.keep_newest)
    if variant.webtextlike:
        urls = (
            pipeline
            | "4 Read WebText-like URLs" >> beam.io.ReadFromText(args.webtext_urls)
            | "4 Normalise listed URLs" >> beam.Map(lambda u: (c4.normalize_url(u.strip()), None))
        )
        joined = (newest, urls) | "4 Join on normalised URL" >> beam.CoGroupByKey()
        newest = run_step.keyed(joined, "4 Keep listed pages", c4.WEBTEXTLIKE_FILTER, c4.webtextlike_filter)
    pages = (
        newest
        | "3 Drop URL key" >> beam.Values()
        | "3 Staged reference" >> beam.Map(lambda capture: (capture[2], None))
        | "3 Read pages back" >> LoadStaged(args.output, "pages")
        | "3 Pages" >> beam.MapTuple(lambda page, _: page)
    )
    if variant.clean:
        pages = run_step(pages, "5 clean_page", c4.CLEAN_PAGE, functools.partial(c4.clean_page, count_line_sentences=resources["punkt"].count_line_sentences))
    if variant.dedupe:
        floor = c4.MIN_NUM_SENTENCES if variant.clean else 0
        deduped = pages | f"6 Dedupe {args.dedup}" >> DedupeText(args.dedup, floor, out_dir=args.output, punkt=resources["punkt"])
        run_step.add(deduped.examples)
        pages = deduped.pages
    pages = run_step(pages, "7 langdetect en", c4.ENGLISH_FILTER,
                     functools.partial(c4.detect_english, detect_langs=LANGDETECT[args.langdetect], detection_error=langid.LanguageDetectionError))
    if variant.badwords:
        pages = run_step(pages, "9 Bad words", BADWORDS_NAMESPACES,
                         functools.partial(c4.badwords_filter, matcher=resources["badwords"]))
    splits = pages | "9 Split by md5(url)" >> beam.Partition(c4.split_index, len(c4.SPLITS))
    for index, (split, num_shards) in enumerate(zip(c4.SPLITS, (args.num_shards, args.num_validation_shards))):
        docs = run_step(splits[index], f"9 {split} documents", split, c4.to_document)
        docs | f"Write {split}" >> WriteShards(args.output, formats=args.format, name="c4", split=split, num_shards=num_shards)
    read.errors | "Write errors" >> WriteErrors(args.output)
    return {"examples": run_step.write_examples(args.output)}


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


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["c4", *sys.argv[1:]]))
