"""The C4 recipe on Spark: ``pipelines.c4``'s chain, step for step, as RDD operations.

The rules, namespaces and readers are the Beam wiring's own (``corpus.c4``, ``dedup/``,
``pipelines.c4_pages.C4PageReader``, ``dedup.text.dedupe_rule``); only the plumbing is
Spark's: ``mapPartitions`` for every per-page rule; pages staged under the output as in
the Beam job (``pipelines.spark.staging``), so that ``combineByKey`` for URL dedup (the
newest capture per normalised URL) and the line/span claims (``pipelines.spark.dedupe``)
shuffle references, and each surviving page is read back from its staging file once.
"""

from __future__ import annotations

import functools

from common import storage
from common.decision import OTHER
from corpus import c4, langid
from corpus.warc import ReadStats
from pipelines.c4_pages import BADWORDS_NAMESPACES, EXTRACT_NAMESPACE, LANGDETECT, C4PageReader, registered_domain_parts
from pipelines.shard_io import READ_NAMESPACE, write_errors
from pipelines.spark.dedupe import dedupe_text
from pipelines.spark.engine import SparkJob, add_tally, on_worker, tally_of
from pipelines.spark.staging import load, stage
from pipelines.tally import Tally

PAGES_STAGE = "pages"  # the pages' staging folder for URL dedup, as the Beam job's "3 Stage pages"


def _read_pages(input_kind, extract_timeout, max_record_bytes, verify_digest, tallies, errors, beam_args):
    def run(items):
        on_worker(beam_args)
        reader = C4PageReader(input_kind, extract_timeout, max_record_bytes, verify_digest)
        try:
            for index, path in items:
                stats, wet, extracted, bad = ReadStats(), Tally(), Tally(), []
                try:
                    for out in reader.read(index, path, stats, wet, extracted):
                        if isinstance(out, dict):
                            bad.append(out)
                        else:
                            yield out
                finally:  # a failing worker still reports what it counted
                    tallies.add(tally_of((READ_NAMESPACE,), stats.counts, OTHER))
                add_tally(tallies, (c4.SPLIT_WET_FILE,), wet)
                add_tally(tallies, (EXTRACT_NAMESPACE,), extracted)
                errors.add(bad)
        finally:
            reader.close()
    return run


def _documents_by_split(tallies, beam_args):
    """Each page -> ``(split index, Document)`` (``c4.split_index``, ``c4.to_document``),
    counted in its split's namespace as Beam's ``10 <split> documents`` steps count."""
    def run(pages):
        on_worker(beam_args)
        per_split = [Tally() for _ in c4.SPLITS]
        for page in pages:
            position = c4.split_index(page)
            decision = c4.to_document(page)
            per_split[position].add(decision)
            if decision.record is not None:
                yield position, decision.record
        for split, tally in zip(c4.SPLITS, per_split, strict=True):
            add_tally(tallies, (split,), tally)
    return run


def _newest_of_one(capture):
    return capture, 1


def _newest_with(newest, capture):
    return c4.newest_capture(newest[0], capture), newest[1] + 1


def _newest_of_both(a, b):
    return c4.newest_capture(a[0], b[0]), a[1] + b[1]


def _listed_urls(pattern: str) -> list[str]:
    """The WebText-like URL list, one URL a line, from every file ``pattern`` matches."""
    paths = storage.glob(pattern) if storage.has_magic(pattern) else [pattern]
    urls = []
    for path in paths:
        text = storage.read_text(path)
        urls.extend(line.rstrip("\r") for line in text.split("\n")[: -1 if text.endswith("\n") else None])
    return urls


def run(spark, files: list[str], args, resources: dict, beam_args=()) -> dict:
    """Run the C4 chain on ``spark`` into ``args.output`` (claimed by the caller's
    ``begin_job``); returns _stats.json's ``counters``, ``examples`` and ``units``."""
    job = SparkJob(spark, beam_args)
    variant = c4.VARIANTS[args.variant]
    pages = job.over_partitions(job.files(files), _read_pages, args.input_kind, args.extract_timeout, args.max_record_bytes, args.verify_digest)
    pages = job.step(pages, c4.TOO_LONG_FILTER, c4.length_filter)
    if variant.realnewslike:
        pages = job.step(pages, c4.REALNEWS_FILTER,
                         functools.partial(c4.realnews_filter, domains=resources["realnews_domains"], split_domain=registered_domain_parts))
    input_partitions = pages.getNumPartitions()
    staged = stage(job, pages, args.output, PAGES_STAGE, c4.url_dedup_key)  # (ref, (normalised URL, timestamp, order))
    captures = staged.map(lambda ref_key: (ref_key[1][0], (ref_key[1][1], ref_key[1][2], ref_key[0])))
    newest = job.keyed(captures.combineByKey(_newest_of_one, _newest_with, _newest_of_both, job.partitions),
                       c4.DUPLICATE_URL_FILTER, c4.keep_newest)
    if variant.webtextlike:
        listed = job.sc.parallelize(_listed_urls(args.webtext_urls), job.partitions).map(lambda url: (c4.normalize_url(url.strip()), None))
        newest = job.keyed(newest.cogroup(listed, job.partitions), c4.WEBTEXTLIKE_FILTER, c4.webtextlike_filter)
    refs = newest.map(lambda url_capture: (url_capture[1][2], None))
    pages = load(job, refs, args.output, PAGES_STAGE, max(job.partitions, input_partitions)).map(lambda page_payloads: page_payloads[0])
    if variant.clean:
        pages = job.step(pages, c4.CLEAN_PAGE, functools.partial(c4.clean_page, count_line_sentences=resources["punkt"].count_line_sentences))
    if variant.dedupe:
        pages = dedupe_text(job, pages, args.dedup, c4.MIN_NUM_SENTENCES if variant.clean else 0, resources["punkt"], args.output)
    pages = job.step(pages, c4.ENGLISH_FILTER,
                     functools.partial(c4.detect_english, detect_langs=LANGDETECT[args.langdetect], detection_error=langid.LanguageDetectionError))
    if variant.badwords:
        pages = job.step(pages, BADWORDS_NAMESPACES, functools.partial(c4.badwords_filter, matcher=resources["badwords"]))
    docs = pages.mapPartitions(_documents_by_split(job.tallies, job.beam_args))
    job.write_shards(docs, args.output, args.format, "c4", list(zip(c4.SPLITS, (args.num_shards, args.num_validation_shards), strict=True)))
    job.release()
    write_errors(job.error_rows(), args.output)
    return {"counters": job.counters(), "examples": job.examples(), "units": job.units()}
