"""The C4 job: its declaration (``plan``: the spec's chain as ``pipelines.plan`` steps, which
``pipelines.beam.plan`` and ``pipelines.spark.plan`` interpret into the same bytes), its
inputs and resources, and the summary; its options and its ``--help``:
``pipelines.c4.options``; what its steps share on every worker: ``pipelines.c4.pages``.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

from common.errors import UsageError
from corpus import c4, langid
from corpus.inputs import InputError, expand_inputs, open_input, read_pinned
from corpus.sentences import shipped_punkt
from dedup.text import DEDUPE_SPANS
from pipelines.c4.options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.c4.pages import (
    BADWORDS_NAMESPACES,
    EXTRACT_NAMESPACE,
    LANGDETECT,
    C4PageReader,
    registered_domain_parts,
)
from pipelines.cli import run_job
from pipelines.engines import run_plan
from pipelines.jobs import finish_job, read_status
from pipelines.plan import DedupeText, JoinListed, NewestPerKey, Plan, ReadFiles, Rule, WriteShards
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


def plan(args: argparse.Namespace, resources: dict) -> Plan:
    """C4's chain as the spec numbers it (``specs``' c4.md; ``docs/c4.md``), for the variant
    and dedup mode of ``args``: each ``Rule`` is one of ``corpus.c4``'s rules."""
    variant = c4.VARIANTS[args.variant]
    punkt = resources["punkt"]
    steps: list = [Rule("1 Length filter", c4.TOO_LONG_FILTER, c4.length_filter)]
    if variant.realnewslike:
        steps.append(Rule("2 RealNews domains", c4.REALNEWS_FILTER,
                          functools.partial(c4.realnews_filter, domains=resources["realnews_domains"], split_domain=registered_domain_parts)))
    listed = JoinListed("4", args.webtext_urls, c4.normalize_url, c4.WEBTEXTLIKE_FILTER, c4.webtextlike_filter,
                        what="WebText-like URLs") if variant.webtextlike else None
    steps.append(NewestPerKey("3", "pages", c4.url_dedup_key, c4.newest_capture, c4.DUPLICATE_URL_FILTER, c4.keep_newest,
                              join=listed, group_name="normalised URL"))
    if variant.clean:
        steps.append(Rule("5 clean_page", c4.CLEAN_PAGE, functools.partial(c4.clean_page, count_line_sentences=punkt.count_line_sentences)))
    if variant.dedupe:  # spec: c4.md steps 6 (the reference's lines) and 7 (the paper's spans)
        steps.append(DedupeText("6" if args.dedup == "lines" else "7", args.dedup, c4.MIN_NUM_SENTENCES if variant.clean else 0, punkt))
    steps.append(Rule("8 langdetect en", c4.ENGLISH_FILTER,
                      functools.partial(c4.detect_english, detect_langs=LANGDETECT[args.langdetect], detection_error=langid.LanguageDetectionError)))
    if variant.badwords:
        steps.append(Rule("9 Bad words", BADWORDS_NAMESPACES, functools.partial(c4.badwords_filter, matcher=resources["badwords"])))
    reader = functools.partial(C4PageReader, args.input_kind, args.extract_timeout, args.max_record_bytes, args.verify_digest)
    return Plan("c4", ReadFiles("Read pages", reader), tuple(steps),
                WriteShards("c4", tuple(args.format), tuple(zip(c4.SPLITS, (args.num_shards, args.num_validation_shards), strict=True)),
                            split_of=c4.split_index, to_document=c4.to_document, step="10"))


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge c4 ARGV`, errors raised
        return run_job("c4", sys.argv[1:] if args is None else args)
    check_source(args)
    try:
        punkt = shipped_punkt()  # before any input is read; the workers split with the launcher's model
    except Exception as exc:
        raise InputError(str(exc)) from exc
    files = input_files(args)
    resources = {**load_resources(args), "punkt": punkt}
    log.info("C4 %s (%s dedup) over %d file(s) into %s on %s", args.variant, args.dedup, len(files), args.output, args.engine)
    counted = run_plan(args, lambda: plan(args, resources), files)
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
