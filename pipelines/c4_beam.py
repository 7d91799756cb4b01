"""The C4 job's Apache Beam wiring (``build``): ``pipelines.c4``'s chain as Beam steps. The
job itself (options, inputs, resources, the engine dispatch, the summary) is
``pipelines.c4``, which imports this module only for ``--engine beam``: a Spark run never
loads Beam.
"""

from __future__ import annotations

import argparse
import functools

import apache_beam as beam

from common.decision import OTHER
from corpus import c4, langid
from corpus.warc import MAX_RECORD_BYTES, ReadStats
from pipelines.c4_pages import BADWORDS_NAMESPACES, EXTRACT_NAMESPACE, LANGDETECT, C4PageReader, registered_domain_parts
from pipelines.dedupe import DedupeText
from pipelines.sources import READ_NAMESPACE, WriteErrors, WriteShards
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import Steps, Tally, count, flush_tally


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
        step = 6 if args.dedup == "lines" else 7  # spec: c4.md steps 6 (the reference's) and 7 (the paper's)
        deduped = pages | f"{step} Dedupe {args.dedup}" >> DedupeText(args.dedup, floor, out_dir=args.output, punkt=resources["punkt"])
        run_step.add(deduped.examples)
        pages = deduped.pages
    pages = run_step(pages, "8 langdetect en", c4.ENGLISH_FILTER,
                     functools.partial(c4.detect_english, detect_langs=LANGDETECT[args.langdetect], detection_error=langid.LanguageDetectionError))
    if variant.badwords:
        pages = run_step(pages, "9 Bad words", BADWORDS_NAMESPACES,
                         functools.partial(c4.badwords_filter, matcher=resources["badwords"]))
    splits = pages | "10 Split by md5(url)" >> beam.Partition(c4.split_index, len(c4.SPLITS))
    for index, (split, num_shards) in enumerate(zip(c4.SPLITS, (args.num_shards, args.num_validation_shards), strict=True)):
        docs = run_step(splits[index], f"10 {split} documents", split, c4.to_document)
        docs | f"Write {split}" >> WriteShards(args.output, formats=args.format, name="c4", split=split, num_shards=num_shards)
    read.errors | "Write errors" >> WriteErrors(args.output)
    return {"examples": run_step.write_examples(args.output)}
