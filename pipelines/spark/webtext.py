"""``corpusforge webtext --pages crawl`` on Spark: ``pipelines.webtext.job``'s chain, step for
step, as RDD operations.

The rules, namespaces and helpers are the Beam wiring's own (``corpus.reddit``,
``corpus.webtext``, ``dedup.minhash``, and the Beam-free ``pipelines.webtext.rows``, so a
Python worker never loads Beam): dump lines by
``dump_lines`` (one partition per dump), ``filter_submission`` as a step, ``groupByKey``
by URL key for ``merge_link``, the link table one partition per link shard
(``partitionBy`` on ``shard_index``), the Common Crawl join a ``cogroup`` of links and
WARC pages (``read_crawl_files``) for ``capture_of_link``, extraction per partition (one
extractor child process each), ``clean_webtext``, exact dedup by ``groupByKey`` on the
text hash, MinHash LSH by ``groupByKey`` on band keys with candidate pairs verified
through two ``cogroup``s, ``--span_dedup`` by ``pipelines.spark.dedupe``, and the shards
by ``SparkJob.write_shards``. RDDs read by two steps are stored once (``SparkJob.once``).
"""

from __future__ import annotations

import functools

from common import storage
from corpus import c4
from corpus.records import HtmlPage
from corpus.reddit import filter_submission, merge_link
from corpus.shards import shard_index
from corpus.urls import url_key
from corpus.webtext import capture_of_link, clean_webtext, doc_id, extract_document, text_hash, webtext_extractor
from dedup import minhash
from pipelines import progress
from pipelines.shard_io import write_errors
from pipelines.spark.dedupe import dedupe_text
from pipelines.spark.engine import SparkJob, add_tally, on_worker
from pipelines.spark.plan import read_files
from pipelines.spark.read import read_crawl_files
from pipelines.tally import Tally
from pipelines.webtext.rows import (
    CLEAN,
    CRAWL_JOIN,
    CRAWL_TEXT_MODE,
    EXACT_DEDUP,
    EXTRACT,
    LINK_KARMA,
    LINK_TABLE,
    NEAR_DEDUP,
    PAGES_EXTRACTED,
    SHARD_NAME,
    SHARD_SPLIT,
    SPAN_DEDUP_MODE,
    SUBMISSIONS,
    DumpReader,
    band_claims,
    carry_shingles,
    with_span_deduped_text,
    write_link_shard,
)


def _link_shard_writer(out_dir: str, count: int, beam_args):
    def write(index, keyed_links):
        on_worker(beam_args)
        return [write_link_shard((index, [link for _, link in keyed_links]), out_dir, count)]
    return write


def _extract(timeout_s: float, page_source: str, extractor_choice: str, tallies, beam_args):
    """(link, page) -> Document, as Beam's ``_ExtractFn``: one extractor child process per partition."""
    def run(items):
        on_worker(beam_args)
        extractor, tally = webtext_extractor(timeout_s, extractor_choice), Tally()
        try:
            for item in items:
                decision = extract_document(item, extractor, page_source)
                progress.tally(PAGES_EXTRACTED)
                tally.add(decision)
                if decision.record is not None:
                    yield decision.record
        finally:
            extractor.close()
        add_tally(tallies, (EXTRACT,), tally)
    return run


def write_links(job: SparkJob, links, out_dir: str, count: int) -> None:
    """Links -> ``links/links-NNNNN-of-MMMMM.parquet`` by ``shard_index`` of the key, every
    index present (one partition each), recorded for ``_SUCCESS`` as Beam's ``MergeLinks``."""
    infos = (links.map(lambda link: (shard_index(link.key, count), link))
             .partitionBy(count, lambda index: index)
             .mapPartitionsWithIndex(_link_shard_writer(out_dir, count, job.beam_args))
             .collect())
    storage.record_written(out_dir, LINK_TABLE, infos)


def near_duplicates(job: SparkJob, id_texts, threshold: float, ngram: int, num_perm: int, seed: int = minhash.DEFAULT_SEED):
    """(id, text) -> ids to drop, as Beam's ``NearDuplicates``: band buckets by ``groupByKey``,
    each candidate pair meeting its two documents' shingles through two ``cogroup``s and
    verified by exact Jaccard (``minhash.verified_losers``, counted in ``webtext-near-dedup``)."""
    bands, rows = minhash.choose_bands(num_perm, threshold)
    hasher = minhash.MinHasher(num_perm, seed)
    shingled = job.once(id_texts.map(lambda item: (item[0], minhash.shingles(item[1], ngram))))
    pairs = (shingled.flatMap(lambda item: band_claims(item, hasher, bands, rows))
             .groupByKey(job.partitions)
             .flatMap(lambda bucket: minhash.candidate_pairs(list(bucket[1])))
             .distinct(job.partitions))
    with_first = job.cogroup({"pairs": pairs.map(lambda pair: (pair[0], pair)), "shingles": shingled}).flatMap(lambda kv: carry_shingles(*kv))
    verified = job.keyed(job.cogroup({"pairs": with_first, "shingles": shingled}), NEAR_DEDUP,
                         functools.partial(minhash.verified_losers, threshold=threshold))
    return verified.flatMap(lambda keyed: keyed[1]).distinct(job.partitions)


def run(spark, dumps: list[str], crawl_files: list[str], args, link_filter, beam_args=()) -> dict:
    """WebText from ``dumps`` joined against ``crawl_files`` into ``args.output`` (claimed by
    the caller's ``begin_job``); returns _stats.json's ``counters``, ``units`` and ``examples``."""
    job = SparkJob(spark, beam_args)
    lines = read_files(job, dumps, DumpReader)
    subs = job.step(lines, SUBMISSIONS, functools.partial(filter_submission, filt=link_filter))
    grouped = subs.map(lambda sub: (url_key(sub.url), sub)).groupByKey(job.partitions)
    links = job.once(job.keyed(grouped, LINK_KARMA, functools.partial(merge_link, filt=link_filter)).values())
    write_links(job, links, args.output, args.num_link_shards)

    pages = read_crawl_files(job, crawl_files, HtmlPage, CRAWL_TEXT_MODE)
    joined = job.cogroup({"links": links.map(lambda link: (link.key, link)), "pages": pages.map(lambda page: (url_key(page.url), page))})
    linked_pages = job.keyed(joined, CRAWL_JOIN, capture_of_link).values()

    docs = linked_pages.mapPartitions(_extract(args.extract_timeout, args.pages, args.extractor, job.tallies, job.beam_args))
    clean_options = {"min_words": args.min_words, "min_english_probability": args.min_english_probability}
    docs = job.step(docs, CLEAN, functools.partial(clean_webtext, **clean_options))
    copies = docs.map(lambda doc: (text_hash(doc.text), doc)).groupByKey(job.partitions)
    docs = job.keyed(copies, EXACT_DEDUP, functools.partial(minhash.keep_first_copy, id_of=doc_id)).values()
    by_id = job.once(docs.map(lambda doc: (doc_id(doc), doc)))
    losers = near_duplicates(job, by_id.mapValues(lambda doc: doc.text), args.near_dup_threshold, args.shingle_words, args.num_perm)
    joined_losers = job.cogroup({"docs": by_id, "losers": losers.map(lambda loser: (loser, True))})
    docs = job.keyed(joined_losers, NEAR_DEDUP, minhash.drop_near_duplicate).values()
    if args.span_dedup:
        docs = job.once(docs)
        as_pages = docs.map(lambda doc: c4.C4Page(url=doc.url, text=doc.text, timestamp=doc.timestamp))
        deduped = dedupe_text(job, as_pages, SPAN_DEDUP_MODE, c4.MIN_NUM_SENTENCES, args.punkt, args.output)
        docs = (job.cogroup({"docs": docs.map(lambda doc: (doc.url, doc)), "pages": deduped.map(lambda page: (page.url, page))})
                .flatMap(lambda kv: with_span_deduped_text(*kv)))
    job.write_shards(docs.map(lambda doc: (0, doc)), args.output, args.format, SHARD_NAME, [(SHARD_SPLIT, args.num_shards)])
    job.release()
    write_errors(job.error_rows(), args.output)
    return {"counters": job.counters(), "units": job.units(), "examples": job.examples(), "kernels": job.kernels()}
