"""What the WebText job does to one dump, one link shard and one page's documents, for every
engine: Beam's steps (``pipelines.webtext.job``) and Spark's (``pipelines.spark.webtext``) call the
same functions and name the same counters, so both write the same bytes.

- The stages' counter namespaces, the progress line's tallies and the output's names.
- ``dump_lines`` / ``dump_error_counts``: a submission dump's lines, a damaged dump's error row.
- ``write_link_shard``: one shard of the link table (``links/links-NNNNN-of-MMMMM.parquet``).
- ``band_claims`` / ``carry_shingles``: near-duplicate detection's MinHash band keys and the
  shingles carried to the Jaccard check; ``with_span_deduped_text``: a document with its text
  after span dedup.

Beam-free: a Spark worker loads this, not Beam. Tests: ``tests/test_webtext_pipeline.py``.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from common import storage
from common.decision import OTHER
from corpus.reddit import DumpReadError, iter_dump_lines, write_link_table
from dedup import minhash
from pipelines import progress

log = logging.getLogger(__name__)

SUBMISSIONS = "webtext-submissions"  # one decision per submission line (unit: submissions)
LINK_KARMA = "webtext-karma"  # one decision per merged link
FETCH = "webtext-fetch"  # one outcome per link (live mode)
CRAWL_JOIN = "webtext-crawl-join"  # one outcome per link (Common Crawl mode)
EXTRACT = "webtext-extract"
CLEAN = "webtext-clean"
EXACT_DEDUP = "webtext-exact-dedup"
NEAR_DEDUP = "webtext-near-dedup"
# The progress line's tallies (pipelines.progress): what each one counts, in its name.
DUMPS_READ, SUBMISSIONS_READ, LINKS_FETCHED, PAGES_EXTRACTED = "dumps", "submissions read", "links fetched", "pages extracted"
SUMMARY_STAGES = (SUBMISSIONS, LINK_KARMA, FETCH, CRAWL_JOIN, EXTRACT, CLEAN, EXACT_DEDUP, NEAR_DEDUP, "dedupe-spans")
# Where the output goes, for every engine: webtext-train.NNNNN-of-MMMMM.<ext>, the link table
# under links/ (recorded for _SUCCESS as "links"); crawl pages read as written; span dedup's mode.
SHARD_NAME, SHARD_SPLIT, LINK_TABLE = "webtext", "train", "links"
CRAWL_TEXT_MODE, SPAN_DEDUP_MODE = "faithful", "spans"
UNREADABLE_DUMP = "unreadable_dump"  # error reason (counted error:<reason> in webtext-submissions): a dump that stops decompressing part-way


# --- links -------------------------------------------------------------------------------
def dump_lines(path):
    """A dump file -> its lines; a dump that stops decompressing part-way keeps the lines
    before the damage, then yields its error row (a dict; counted ``dump_error_counts``).
    The progress line counts dumps and submission lines read. One dump's reading for every engine."""
    read = 0
    try:
        for read, line in enumerate(iter_dump_lines(path), 1):
            if read % progress.RECORDS_PER_TALLY == 0:
                progress.tally(SUBMISSIONS_READ, progress.RECORDS_PER_TALLY)
            yield line
    except DumpReadError as exc:
        log.warning("%s: %s (lines before it are kept)", path, exc)
        yield {"source": path, "offset": 0, "reason": UNREADABLE_DUMP, "detail": str(exc)[:300]}
    finally:
        progress.tally(SUBMISSIONS_READ, read % progress.RECORDS_PER_TALLY)
        progress.tally(DUMPS_READ)


def dump_error_counts(row: dict) -> dict[str, int]:
    """The ``webtext-submissions`` counter of a dump's error row (unit: other)."""
    return {f"error:{row['reason']}": 1}


def write_link_shard(keyed, out_dir, count):
    """(link shard, its links) -> ``links/links-NNNNN-of-MMMMM.parquet`` (the Spark wiring's link
    table; ``MergeLinks`` writes the same bytes on Beam)."""
    index, links = keyed
    name = f"{LINK_TABLE}/{LINK_TABLE}-{index:05d}-of-{count:05d}.parquet"
    path = write_link_table([link for link in links if link is not None], storage.join(out_dir, name))
    return storage.file_info(path, name)


# --- dedup ---------------------------------------------------------------------------------
def band_claims(item, hasher, bands, rows):
    doc, shingle_set = item
    return [(key, (doc, None)) for key in minhash.band_keys(hasher.signature(shingle_set), bands, rows)]


def carry_shingles(_, groups):
    first = list(groups["shingles"])
    for pair in groups["pairs"]:
        if first:
            yield pair[1], (pair, first[0])


def with_span_deduped_text(_, groups):
    docs, pages = list(groups["docs"]), list(groups["pages"])
    if docs and pages:
        yield replace(docs[0], text=pages[0].text)


class DumpReader:
    """Each Pushshift dump's lines (``dump_lines``), an unreadable dump's error row counted in
    ``submissions`` (``dump_error_counts``): a ``pipelines.plan.FileReader``."""

    def read(self, index: int, path: str, counted):
        for item in dump_lines(path):
            if isinstance(item, dict):
                counted.add(SUBMISSIONS, dump_error_counts(item), OTHER)
            yield item

    def close(self) -> None:
        pass
