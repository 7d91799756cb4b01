"""The WebText job on Apache Beam (crawl mode also on native Spark: ``pipelines.spark.webtext``,
the same bytes). Its steps, its options and its ``--help``: ``pipelines.webtext.options``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import heapq
import itertools
import logging
import os
import pickle
import sys
import tempfile
from collections.abc import Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from common import storage
from corpus import c4
from corpus.fetch import OK, FetchConfig, fetch_links, read_fetch_log
from corpus.inputs import SUBMISSION_DUMPS, InputError, expand_inputs
from corpus.records import HtmlPage
from corpus.reddit import (
    DEFAULT_DOMAIN_BLOCKLIST_PATH,
    DEFAULT_EXTENSION_BLOCKLIST_PATH,
    LINK_ROW_GROUP_ROWS,
    LinkFilter,
    LinkTableWriter,
    filter_submission,
    merge_link,
)
from corpus.sentences import shipped_punkt
from corpus.shards import shard_index
from corpus.urls import url_key
from corpus.warc import read_archive
from corpus.webtext import (
    capture_of_link,
    clean_webtext,
    doc_id,
    extract_document,
    fetched_page,
    text_hash,
    webtext_extractor,
)
from dedup import minhash
from pipelines import progress, staging
from pipelines.beam.plan import read_files
from pipelines.beam_package import stage_setup_file
from pipelines.cli import run_job
from pipelines.dedupe import DedupeText
from pipelines.engines import spark_engine
from pipelines.jobs import begin_job, counters_of, finish_job, read_status
from pipelines.shard_io import CrawlRecordReader
from pipelines.sources import WriteErrors, WriteShards
from pipelines.steps import (
    Steps,
    Tally,
    collect_examples,
    flush_tally,
    format_counter_table,
    format_read_errors,
    kernels_of,
    keyed_step,
    units_of,
)
from pipelines.webtext.options import EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from pipelines.webtext.rows import (
    CLEAN,
    CRAWL_JOIN,
    CRAWL_TEXT_MODE,
    DUMPS_READ,
    EXACT_DEDUP,
    EXTRACT,
    FETCH,
    LINK_KARMA,
    LINK_TABLE,
    LINKS_FETCHED,
    NEAR_DEDUP,
    PAGES_EXTRACTED,
    SHARD_NAME,
    SHARD_SPLIT,
    SPAN_DEDUP_MODE,
    SUBMISSIONS,
    SUMMARY_STAGES,
    DumpReader,
    band_claims,
    carry_shingles,
    with_span_deduped_text,
)

log = logging.getLogger(__name__)

# The link stage's sort (MergeLinks): pickled submission bytes a bundle holds before it
# writes them as sorted runs, how many runs one merge reads at once, and the read buffer of
# each open run (with its zstd window, under 1 MB a run; a 1 MiB buffer made it ~1.8 MB,
# so the merge's memory grew with the number of runs, i.e. with the dump: issue 25).
LINK_RUN_BYTES = 16 << 20
MERGE_FAN_IN = 64
MERGE_READ_BYTES = 64 << 10
LINK_RUNS = "links"  # the runs' folder under <out>/_temporary/stage/
# The page stage reads links by reference (issue 25: the runner held every kept link for the
# crawl join or the fetch grouping, ~2.4 KB each): each link shard's kept links, in key order,
# one staged file per page shard, and crawl mode's status-200 pages in sorted runs by URL key
# (``LINK_RUN_BYTES`` each), both under <out>/_temporary/stage/.
KEPT_LINKS, CRAWL_PAGE_RUNS = "kept-links", "crawl-pages"


# --- links -------------------------------------------------------------------------------
class MergeLinks(beam.PTransform):
    """Eligible submissions -> links (or references to them), in memory that does not grow with the dump.

    A GroupByKey of submissions held every one of them in the DirectRunner's memory
    (issue 25: 981 MB at 150k submissions, 1.69 GB at 300k). Here each bundle
    sorts what it reads by ``url_key`` in runs of ``run_bytes`` pickled bytes, one run
    file per link shard (``shard_index(key, num_link_shards)``) under
    ``<out>/_temporary/stage/links/``; only the run files' ids are shuffled. Each link
    shard then merges its runs (``heapq.merge``, at most ``MERGE_FAN_IN`` open at once,
    more merged in passes first), turns each key's submissions into a ``Link``
    (``merge_link``, counted in ``LINK_KARMA``), passes the kept ones on and streams
    them, already in key order, into ``links/links-NNNNN-of-MMMMM.parquet`` one row group
    of ``table_rows`` links at a time (``LinkTableWriter``): the same links and counters as
    the GroupByKey gave (``corpus.reddit.select_links``), and the same table rows (the same
    bytes for a shard of at most ``table_rows`` links).

    With ``page_shard`` (a function of a link and its link shard's index), the kept links
    are not passed on: each link shard writes them, in key order, to one staged file per
    page shard under ``_temporary/stage/kept-links/`` and the main output is
    ``(page shard, file id)``, read back by ``JoinCrawl`` or the fetch stage
    (``read_kept_links``), so no runner holds the links.
    """

    def __init__(self, out_dir: str, num_shards: int, link_filter, run_bytes: int = LINK_RUN_BYTES, page_shard=None,
                 table_rows: int = LINK_ROW_GROUP_ROWS):
        super().__init__()
        self.out_dir, self.num_shards, self.link_filter, self.run_bytes = out_dir, num_shards, link_filter, run_bytes
        self.page_shard, self.table_rows = page_shard, table_rows

    def expand(self, subs):
        count, out_dir = self.num_shards, self.out_dir
        runs = subs | "Sorted runs by URL key" >> beam.ParDo(_SortedRunsFn(out_dir, count, self.run_bytes, LINK_RUNS))
        every = subs.pipeline | "Every link shard" >> beam.Create([(i, None) for i in range(count)])
        merged = (
            (runs, every)
            | "Runs and link shards" >> beam.Flatten()
            | "Group runs by link shard" >> beam.GroupByKey()
            | "Merge runs and karma" >> beam.ParDo(_MergeRunsFn(out_dir, count, self.link_filter, self.page_shard, self.table_rows)).with_outputs(
                "files", "examples", main="links")
        )
        (merged.files
         | "Collect link files" >> beam.combiners.ToList()
         | "Record link files" >> beam.Map(lambda infos: storage.record_written(out_dir, LINK_TABLE, infos)))
        return merged


def _run_key(item):
    return item[0]


class _SortedRunsFn(beam.DoFn):
    """Submissions (or crawl pages) -> (link shard, run file id): sorted runs of
    (url_key, element) under ``_temporary/stage/<label>/``."""

    def __init__(self, out_dir: str, num_shards: int, run_bytes: int, label: str):
        self.out_dir, self.num_shards, self.run_bytes, self.label = out_dir, num_shards, run_bytes, label

    def start_bundle(self):
        self.pending, self.held, self.runs = [], 0, []

    def process(self, sub):
        key = url_key(sub.url)
        data = pickle.dumps((key, sub), protocol=pickle.HIGHEST_PROTOCOL)
        self.pending.append((key, data))
        self.held += len(data)
        if self.held >= self.run_bytes:
            self._spill()

    def _spill(self):
        self.pending.sort(key=_run_key)  # stable; merge_submissions does not depend on order within a key
        writers = {}
        try:
            for key, data in self.pending:
                shard = shard_index(key, self.num_shards)
                if shard not in writers:
                    file_id = staging.new_file_id()
                    writers[shard] = (file_id, staging.StagedWriter(staging.staged_file(staging.stage_folder(self.out_dir, self.label), file_id)))
                writers[shard][1].write_pickled(data)
            for shard, (file_id, writer) in sorted(writers.items()):
                writer.commit()
                self.runs.append((shard, file_id))
        except BaseException:
            for _, writer in writers.values():
                writer.discard()
            raise
        self.pending, self.held = [], 0

    def finish_bundle(self):
        if self.pending:
            self._spill()
        for run in self.runs:
            yield WindowedValue(run, MIN_TIMESTAMP, [GlobalWindow()])


def _runs_folder(out_dir: str) -> str:
    return staging.stage_folder(out_dir, LINK_RUNS)


def _read_run(path: str):
    for _, item in staging.read_staged(path, MERGE_READ_BYTES):
        yield item


def merged_runs(paths: list[str], folder: str, fan_in: int = MERGE_FAN_IN):
    """(url_key, submissions) for every key of the sorted runs ``paths``, in key order.

    At most ``fan_in`` runs are read at once: with more, runs are first merged ``fan_in``
    at a time into new runs under ``folder`` (kept until the job commits)."""
    paths = sorted(paths)
    while len(paths) > fan_in:
        merged_paths = []
        for start in range(0, len(paths), fan_in):
            path = staging.staged_file(folder, staging.new_file_id())
            staging.write_staged(path, heapq.merge(*map(_read_run, paths[start:start + fan_in]), key=_run_key))
            merged_paths.append(path)
        paths = merged_paths
    for key, items in itertools.groupby(heapq.merge(*map(_read_run, paths), key=_run_key), key=_run_key):
        yield key, [sub for _, sub in items]


class _MergeRunsFn(beam.DoFn):
    """(link shard, run file ids) -> kept links, or ``(page shard, kept-links file id)`` with
    ``page_shard`` (and that shard of the link table, ``files``)."""

    def __init__(self, out_dir: str, num_shards: int, link_filter, page_shard=None, table_rows: int = LINK_ROW_GROUP_ROWS):
        self.out_dir, self.num_shards, self.link_filter, self.page_shard = out_dir, num_shards, link_filter, page_shard
        self.table_rows = table_rows

    def start_bundle(self):
        self.tally = Tally()

    def process(self, keyed):
        index, file_ids = keyed
        folder = _runs_folder(self.out_dir)
        paths = [staging.staged_file(folder, file_id) for file_id in file_ids if file_id is not None]
        name = f"{LINK_TABLE}/{LINK_TABLE}-{index:05d}-of-{self.num_shards:05d}.parquet"
        table = LinkTableWriter(storage.join(self.out_dir, name), self.table_rows)
        kept = _KeptLinkWriters(self.out_dir) if self.page_shard is not None else None
        try:
            for key, subs in merged_runs(paths, folder):
                decision = merge_link(key, subs, self.link_filter)
                self.tally.add(decision)
                if decision.record is None:
                    continue
                table.add(decision.record)
                if kept is None:
                    yield decision.record
                else:
                    kept.write(self.page_shard(decision.record, index), decision.record)
            refs = kept.commit() if kept is not None else ()
        except BaseException:
            table.discard()
            if kept is not None:
                kept.discard()
            raise
        yield from refs
        path = table.commit()
        yield beam.pvalue.TaggedOutput("files", storage.file_info(path, name))

    def finish_bundle(self):
        yield from flush_tally(self.tally, (LINK_KARMA,))


class _KeptLinkWriters:
    """One link shard's kept links, in the key order they come in, to one staged file per page shard."""

    def __init__(self, out_dir: str):
        self.folder, self.writers = staging.stage_folder(out_dir, KEPT_LINKS), {}

    def write(self, shard: int, link) -> None:
        if shard not in self.writers:
            file_id = staging.new_file_id()
            self.writers[shard] = (file_id, staging.StagedWriter(staging.staged_file(self.folder, file_id)))
        self.writers[shard][1].write(link)

    def commit(self) -> list[tuple[int, int]]:
        refs = []
        for shard, (file_id, writer) in sorted(self.writers.items()):
            writer.commit()
            refs.append((shard, file_id))
        self.writers = {}
        return refs

    def discard(self) -> None:
        for _, writer in self.writers.values():
            writer.discard()
        self.writers = {}


def _link_key(link) -> str:
    return link.key


def read_kept_links(out_dir: str, file_ids) -> Iterator:
    """The links of kept-links files (``MergeLinks`` with ``page_shard``), streamed in key
    order: each file is in key order, several are merged (a key is in one link shard only)."""
    folder = staging.stage_folder(out_dir, KEPT_LINKS)
    streams = [(link for _, link in staging.read_staged(staging.staged_file(folder, file_id), MERGE_READ_BYTES))
               for file_id in sorted(file_ids)]
    return heapq.merge(*streams, key=_link_key)


def join_sorted(links, keyed_pages):
    """(link, its pages) for every link: ``links`` and ``keyed_pages`` ((url_key, pages))
    both in key order; a link without pages gets ``[]``, pages without a link are skipped."""
    pages = iter(keyed_pages)
    current = next(pages, None)
    for link in links:
        while current is not None and current[0] < link.key:
            current = next(pages, None)
        yield link, (current[1] if current is not None and current[0] == link.key else [])


def _captured(page) -> bool:
    return page.status == 200  # the only pages capture_of_link looks at


class JoinCrawl(beam.PTransform):
    """(kept-links refs of ``MergeLinks``, crawl pages) -> ``(link, newest capture)``, counted
    in ``CRAWL_JOIN`` (``capture_of_link``), with ``examples``; no step holds the links.

    Status-200 pages are spilled in sorted runs by URL key, one run file per link shard
    (``shard_index``, as the links); only run and kept-links file ids are shuffled. Each
    link shard then merges its page runs (``merged_runs``) and streams its kept links, both
    in key order, and joins them (``join_sorted``): memory is one bundle's run and one key's
    captures, whatever the number of links or pages.
    """

    def __init__(self, out_dir: str, num_shards: int, run_bytes: int = LINK_RUN_BYTES):
        super().__init__()
        self.out_dir, self.num_shards, self.run_bytes = out_dir, num_shards, run_bytes

    def expand(self, inputs):
        link_refs, pages = inputs
        page_runs = (
            pages
            | "Captured pages" >> beam.Filter(_captured)
            | "Sorted page runs by URL key" >> beam.ParDo(_SortedRunsFn(self.out_dir, self.num_shards, self.run_bytes, CRAWL_PAGE_RUNS))
        )
        return (
            (link_refs | "Tag link files" >> beam.MapTuple(lambda shard, file_id: (shard, (KEPT_LINKS, file_id))),
             page_runs | "Tag page runs" >> beam.MapTuple(lambda shard, file_id: (shard, (CRAWL_PAGE_RUNS, file_id))))
            | "Link files and page runs" >> beam.Flatten()
            | "Group by link shard" >> beam.GroupByKey()
            | "Join sorted links and pages" >> beam.ParDo(_JoinShardFn(self.out_dir)).with_outputs("examples", main="pages")
        )


class _JoinShardFn(beam.DoFn):
    """(link shard, tagged file ids) -> (link, newest capture) for every link with one."""

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def start_bundle(self):
        self.tally = Tally()

    def process(self, keyed):
        _, tagged = keyed
        files = {KEPT_LINKS: [], CRAWL_PAGE_RUNS: []}
        for label, file_id in tagged:
            files[label].append(file_id)
        if not files[KEPT_LINKS]:
            return  # pages no link asked for
        folder = staging.stage_folder(self.out_dir, CRAWL_PAGE_RUNS)
        keyed_pages = merged_runs([staging.staged_file(folder, file_id) for file_id in files[CRAWL_PAGE_RUNS]], folder)
        for link, pages in join_sorted(read_kept_links(self.out_dir, files[KEPT_LINKS]), keyed_pages):
            decision = capture_of_link(link.key, {"links": (link,), "pages": pages})
            self.tally.add(decision)
            if decision.record is not None:
                yield decision.record

    def finish_bundle(self):
        yield from flush_tally(self.tally, (CRAWL_JOIN,))


# --- pages: live fetching ----------------------------------------------------------------
def _same_shard(_link, link_shard: int) -> int:
    return link_shard  # crawl mode: the join works per link shard


def _fetch_shard(link, _link_shard: int, count: int) -> int:
    return fetch_shard_of(link, count)


def fetch_shard_of(link, count: int) -> int:
    """Links of one host stay in one fetch shard, so politeness holds per worker and a
    rerun finds each link's fetch log where it left it (resume)."""
    host = link.domain or link.key.split("/", 1)[0]
    return int.from_bytes(hashlib.md5(host.encode("utf-8", "surrogatepass")).digest()[:8], "big") % count


class _FetchShardFn(beam.DoFn):
    """(shard, kept-links file ids) -> (link, fetch log entry, HtmlPage or None) for every
    link (read in key order by ``read_kept_links``: no shuffle holds the links), the pages
    read back from the WARC files the fetch wrote; the raw responses and the fetch log of
    the shard go to ``<out>/fetch/shard-NNNNN/``."""

    def __init__(self, config, out_dir: str):
        self.config, self.out_dir = config, out_dir

    def process(self, keyed):
        shard, file_ids = keyed
        links = list(read_kept_links(self.out_dir, file_ids))  # the fetcher takes the shard's URLs at once
        target = storage.join(self.out_dir, "fetch", f"shard-{shard:05d}")
        with _local_folder(target) as folder:
            fetch_links([link.url for link in links], self.config, folder)
            progress.tally(LINKS_FETCHED, len(links))
            yield from _logged_pages(links, folder)


def _logged_pages(links, folder):
    """Each link with its fetch log entry and, for a page the log puts in a WARC, that page
    (streamed from the WARC files in name order; links without one come first)."""
    logged = read_fetch_log(folder)
    wanted: dict[str, dict[int, object]] = {}
    for link in links:
        entry = logged.get(link.url)
        if entry and entry["outcome"] == OK and entry.get("warc"):
            wanted.setdefault(entry["warc"], {})[int(entry["offset"])] = link
        else:
            yield link, entry, None
    for name, by_offset in sorted(wanted.items()):
        for record in read_archive(os.path.join(folder, name)):
            if isinstance(record, HtmlPage) and record.offset in by_offset:
                link = by_offset.pop(record.offset)
                yield link, logged[link.url], record
        for link in by_offset.values():  # logged, but no HTML record at its offset
            yield link, logged[link.url], None


@contextlib.contextmanager
def _local_folder(target: str):
    """The fetcher writes WARCs and its log to a local folder: ``target`` itself when local;
    for an object store, a temporary folder that starts with what ``target`` holds (so a
    rerun resumes) and whose files are uploaded to ``target`` at the end, even on an error."""
    if storage.is_local(target):
        storage.makedirs(target)
        yield target
        return
    with tempfile.TemporaryDirectory(prefix="corpusforge-fetch-") as folder:
        if storage.is_folder(target):
            for path in storage.list_files(target):
                storage.copy_file(path, os.path.join(folder, storage.basename(path)))
        try:
            yield folder
        finally:
            for name in sorted(os.listdir(folder)):
                if not name.startswith(".") and os.path.isfile(os.path.join(folder, name)):
                    storage.copy_file(os.path.join(folder, name), storage.join(target, name))


# --- text --------------------------------------------------------------------------------
class _ExtractFn(beam.DoFn):
    """(link, page) -> Document with the link's Reddit metadata (``corpus.webtext.extract_document``);
    the text by ``extractor_choice`` (``corpus.webtext.EXTRACTOR_CHOICES``) in a child process
    with a per-page time limit. A DoFn, not a step: the extractor's child process lives from
    ``setup`` to ``teardown``; its decisions are tallied the same way (``Tally``)."""

    def __init__(self, timeout_s: float, page_source: str, extractor_choice: str = "trafilatura"):
        self.timeout_s, self.page_source, self.extractor_choice = timeout_s, page_source, extractor_choice
        self.extractor = None

    def setup(self):
        self.extractor = webtext_extractor(self.timeout_s, self.extractor_choice)

    def teardown(self):
        if self.extractor is not None:
            self.extractor.close()

    def start_bundle(self):
        self.tally = Tally()

    def process(self, item):
        decision = extract_document(item, self.extractor, self.page_source)
        progress.tally(PAGES_EXTRACTED)
        self.tally.add(decision)
        if decision.record is not None:
            yield decision.record

    def finish_bundle(self):
        yield from flush_tally(self.tally, (EXTRACT,))


class NearDuplicates(beam.PTransform):
    """(id, text) -> ids to drop: MinHash LSH candidates, every candidate verified by exact
    shingle Jaccard, the larger keep_key of each verified pair dropped (``dedup/minhash.py``).

    Band buckets are a GroupByKey on band keys; candidate pairs meet their two documents'
    shingles through two CoGroupByKeys, so no step holds more than one bucket or one
    document's pairs.
    """

    def __init__(self, threshold: float, ngram: int, num_perm: int, seed: int = minhash.DEFAULT_SEED):
        super().__init__()
        self.threshold, self.ngram, self.num_perm, self.seed = threshold, ngram, num_perm, seed

    def expand(self, docs):
        bands, rows = minhash.choose_bands(self.num_perm, self.threshold)
        hasher = minhash.MinHasher(self.num_perm, self.seed)
        shingled = docs | "Shingles" >> beam.Map(lambda item, n: (item[0], minhash.shingles(item[1], n)), self.ngram)
        pairs = (
            shingled
            | "Band keys" >> beam.FlatMap(band_claims, hasher, bands, rows)
            | "Band buckets" >> beam.GroupByKey()
            | "Candidate pairs" >> beam.FlatMapTuple(lambda _, bucket: minhash.candidate_pairs(list(bucket)))
            | "One per pair" >> beam.Distinct()
        )
        with_first = (
            {"pairs": pairs | "Key by first" >> beam.Map(lambda p: (p[0], p)), "shingles": shingled}
            | "Join first shingles" >> beam.CoGroupByKey()
            | "Carry first" >> beam.FlatMapTuple(carry_shingles)
        )
        verified = (
            {"pairs": with_first, "shingles": shingled}
            | "Join second shingles" >> beam.CoGroupByKey()
            | keyed_step("Verify by Jaccard", NEAR_DEDUP, functools.partial(minhash.verified_losers, threshold=self.threshold))
        )
        # verified_losers drops nothing (it tallies pairs), so its examples output stays empty
        return verified.pages | "Losers" >> beam.FlatMap(lambda keyed: keyed[1]) | "One per loser" >> beam.Distinct()


# --- the pipeline --------------------------------------------------------------------------
def build(pipeline: beam.Pipeline, dumps: list[str], crawl_files: list[str], args: argparse.Namespace, link_filter, fetch_config) -> None:
    run_step = Steps()

    lines = read_files(pipeline, dumps, "Read dump lines", DumpReader, what="Dump files")
    subs = run_step(lines.records, "Filter submissions", SUBMISSIONS, functools.partial(filter_submission, filt=link_filter))
    # the page stage reads the kept links by reference: (page shard, kept-links file id)
    page_shard = functools.partial(_fetch_shard, count=args.fetch_shards) if args.pages == "fetch" else _same_shard
    merged = subs | "Links and link table" >> MergeLinks(args.output, args.num_link_shards, link_filter, page_shard=page_shard)
    run_step.add(merged.examples)
    link_refs = merged.links

    if args.pages == "fetch":
        fetched = (
            link_refs
            | "Group by fetch shard" >> beam.GroupByKey()
            | "Fetch safely" >> beam.ParDo(_FetchShardFn(fetch_config, args.output))
        )
        linked_pages = run_step(fetched, "Fetch outcome", FETCH, fetched_page)
        errors = [lines.errors]
    else:
        read = read_files(pipeline, crawl_files, "Read WARC", functools.partial(CrawlRecordReader, HtmlPage, CRAWL_TEXT_MODE))
        joined = (link_refs, read.records) | "Join on URL key" >> JoinCrawl(args.output, args.num_link_shards)
        run_step.add(joined.examples)
        linked_pages = joined.pages
        errors = [lines.errors, read.errors]

    extracted = linked_pages | "Extract text" >> beam.ParDo(_ExtractFn(args.extract_timeout, args.pages, args.extractor)).with_outputs(
        "examples", main="docs")
    run_step.add(extracted.examples)
    clean_options = {"min_words": args.min_words, "min_english_probability": args.min_english_probability}
    docs = run_step(extracted.docs, "Clean", CLEAN, functools.partial(clean_webtext, **clean_options))
    copies = docs | "Key by text hash" >> beam.Map(lambda d: (text_hash(d.text), d)) | "Group exact copies" >> beam.GroupByKey()
    docs = (run_step.keyed(copies, "Keep first copy", EXACT_DEDUP, functools.partial(minhash.keep_first_copy, id_of=doc_id))
            | "First copies" >> beam.Values())
    by_id = docs | "Key by doc id" >> beam.Map(lambda d: (doc_id(d), d))
    losers = by_id | "Ids and texts" >> beam.MapTuple(lambda i, d: (i, d.text)) | "Near duplicates" >> NearDuplicates(
        args.near_dup_threshold, args.shingle_words, args.num_perm)
    joined_losers = (
        {"docs": by_id, "losers": losers | "Key losers" >> beam.Map(lambda i: (i, True))}
        | "Join losers" >> beam.CoGroupByKey()
    )
    docs = run_step.keyed(joined_losers, "Drop near duplicates", NEAR_DEDUP, minhash.drop_near_duplicate) | "Kept" >> beam.Values()
    if args.span_dedup:
        as_pages = docs | "As pages" >> beam.Map(lambda d: c4.C4Page(url=d.url, text=d.text, timestamp=d.timestamp))
        deduped = as_pages | "Span dedup" >> DedupeText(SPAN_DEDUP_MODE, c4.MIN_NUM_SENTENCES, out_dir=args.output, punkt=args.punkt)
        run_step.add(deduped.examples)
        docs = (
            {"docs": docs | "Docs by url" >> beam.Map(lambda d: (d.url, d)),
             "pages": deduped.pages | "Pages by url" >> beam.Map(lambda p: (p.url, p))}
            | "Join span-deduped text" >> beam.CoGroupByKey()
            | "Take span-deduped text" >> beam.FlatMapTuple(with_span_deduped_text)
        )
    docs | "Write shards" >> WriteShards(args.output, formats=args.format, name=SHARD_NAME, split=SHARD_SPLIT, num_shards=args.num_shards)
    tuple(errors) | "Merge errors" >> beam.Flatten() | "Write errors" >> WriteErrors(args.output)
    run_step.write_examples(args.output)


def link_filter_from(args: argparse.Namespace):
    try:
        return LinkFilter.from_files(  # an option left out (None): the bundled list
            domain_blocklist=DEFAULT_DOMAIN_BLOCKLIST_PATH if args.domain_blocklist is None else args.domain_blocklist,
            extension_blocklist=DEFAULT_EXTENSION_BLOCKLIST_PATH if args.extension_blocklist is None else args.extension_blocklist,
            subreddit_blocklist=args.subreddit_blocklist, min_score=args.min_score, score_mode=args.score_mode,
            since=args.since, until=args.until, drop_over_18=not args.keep_over_18,
        )
    except (OSError, ValueError) as exc:
        raise InputError(f"link filter: {exc}") from exc


def fetch_config_from(args: argparse.Namespace):
    return FetchConfig(max_bytes=args.max_bytes, deadline_s=args.deadline, per_host_delay_s=args.per_host_delay,
                       allow_hosts=frozenset(args.allow_hosts), respect_robots=not args.ignore_robots)


def run(args: argparse.Namespace | list[str] | None = None) -> dict:
    if not isinstance(args, argparse.Namespace):  # run(argv), as Beam's wordcount: `corpusforge webtext ARGV`, errors raised
        return run_job("webtext", sys.argv[1:] if args is None else args)
    beam_args = args.beam_args
    if args.engine == "spark" and args.pages != "crawl":
        raise InputError("--engine spark runs --pages crawl (the Common Crawl join); --pages fetch runs on Beam")
    args.punkt = None  # the launcher's punkt model, which the span dedup's workers split with
    if args.span_dedup:
        try:
            args.punkt = shipped_punkt()
        except Exception as exc:
            raise InputError(str(exc)) from exc
    dumps = expand_inputs(args.submissions, kind=SUBMISSION_DUMPS)
    crawl_files: list[str] = []
    if args.pages == "crawl":
        specs = list(args.warc or [])
        try:
            specs += [c4.crawl_manifest_url(crawl, "warc", args.base_url) for crawl in args.crawl or []]
        except ValueError as exc:
            raise InputError(str(exc)) from exc
        if not specs:
            raise InputError("--pages crawl needs --warc files or --crawl ids")
        crawl_files = expand_inputs(specs, base=args.base_url, max_files=args.max_files, allow_any_manifest_path=args.allow_any_manifest_path)
    link_filter = link_filter_from(args)
    fetch_config = fetch_config_from(args) if args.pages == "fetch" else None
    log.info("WebText from %d dump(s), pages by %s, into %s on %s", len(dumps), args.pages, args.output, args.engine)
    if args.engine == "spark":
        spark = spark_engine(args)
        with spark.engine.job_session_for(args) as session:
            begin_job(args.output, "webtext", args.overwrite)
            counted = spark.webtext.run(session, dumps, crawl_files, args, link_filter, beam_args)
    else:
        pipeline = beam.Pipeline(options=PipelineOptions(stage_setup_file(beam_args)))
        # A fetch is resumable: a rerun into its folder replaces the set and resumes from the
        # logs and WARCs under fetch/ (kept). Crawl mode refuses a full folder unless --overwrite.
        begin_job(args.output, "webtext", args.overwrite or args.pages == "fetch", keep=("fetch/",) if args.pages == "fetch" else ())
        build(pipeline, dumps, crawl_files, args, link_filter, fetch_config)
        result = progress.run_pipeline(pipeline, "webtext", files=len(dumps), unit=DUMPS_READ)
        counted = {"counters": counters_of(result), "units": units_of(result), "examples": collect_examples(args.output),
                   "kernels": kernels_of(result)}
    stats = {"pages": args.pages, "dumps": len(dumps), "crawl_files": len(crawl_files), **counted}
    finish_job(args.output, "webtext", stats)
    return stats


def format_summary(stats: dict) -> str:
    title = f"WebText, {stats['dumps']} dump(s), pages by {stats['pages']}"
    table = format_counter_table(title, stats["counters"], SUMMARY_STAGES, stats.get("units"))
    return "\n".join(filter(None, [table, format_read_errors(stats["counters"])]))


exit_status = read_status


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["webtext", *sys.argv[1:]]))
