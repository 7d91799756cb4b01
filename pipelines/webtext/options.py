"""The WebText pipeline: Reddit links with >= 3 karma -> pages -> text -> deduplicated shards.

    corpusforge webtext --submissions 'RS_2017-*.zst' --output webtext/ --until 2017-12-31
        --pages fetch                          (fetch every link live, safely, into WARC files)
    corpusforge webtext --submissions RS_2019-04.zst --output webtext-cc/
        --pages crawl --crawl CC-MAIN-2019-18  (or join the links against Common Crawl WARC files)
        [--engine spark --spark_master 'local[2]']   (crawl mode on native Spark, the same bytes: docs/spark.md)

The steps (GPT-2 paper, section 2.1; spec ``webtext.md``), each a pure function in
``corpus/`` or ``dedup/``, every count a Beam counter:

    read dumps -> per-submission filters -> GroupByKey by url_key -> merge (max/sum karma)
    -> karma >= 3 -> link table -> pages (safe fetch into WARC, or Common Crawl join)
    -> trafilatura -> Wikipedia / stubs / English / length -> exact dedup
    -> MinHash LSH + Jaccard near-dup dedup -> [3-sentence span dedup] -> shards
"""

from __future__ import annotations

import argparse

from corpus.inputs import COMMON_CRAWL_BASE_URL
from corpus.reddit import SCORE_MODES, WEBTEXT_MIN_SCORE
from corpus.shards import FORMATS
from corpus.webtext import DEFAULT_EXTRACTOR, EXTRACTOR_CHOICES, MIN_ENGLISH_PROBABILITY, MIN_WORDS, check_extractor
from dedup import minhash
from pipelines.engines import add_engine_arguments
from pipelines.options import (
    add_manifest_path_argument,
    add_overwrite_argument,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    unit_fraction,
)

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option
PAGE_SOURCES = ("fetch", "crawl")


def _extractor_choice(value: str) -> str:
    try:
        return check_extractor(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    p = parser.add_argument_group("links")
    p.add_argument("--submissions", nargs="+", required=True, help="Pushshift submission dumps (.zst, .bz2, .xz, .gz, NDJSON), globs or folders")
    p.add_argument("--min_score", type=int, default=WEBTEXT_MIN_SCORE, help="karma a link needs (default 3, the paper's)")
    p.add_argument("--score_mode", choices=SCORE_MODES, default="max", help="karma of a URL: max or sum over its submissions")
    p.add_argument("--since", default=None, help="first submission date, YYYY-MM-DD (UTC)")
    p.add_argument("--until", default=None, help="last submission date, inclusive (2017-12-31: the paper's preliminary release)")
    p.add_argument("--keep_over_18", action="store_true", help="keep links posted as over_18 (dropped by default)")
    p.add_argument("--subreddit_blocklist", default=None, help="file, one subreddit a line")
    # default None: the bundled lists (corpus.reddit's package resources, read from a folder or a zip)
    p.add_argument("--domain_blocklist", default=None, help="file, one domain a line (default: the bundled media/file hosts)")
    p.add_argument("--extension_blocklist", default=None, help="file, one extension a line (default: the bundled list)")
    p.add_argument("--num_link_shards", type=positive_int, default=1, help="Parquet files of the link table")

    p = parser.add_argument_group("pages")
    p.add_argument("--pages", choices=PAGE_SOURCES, required=True,
                   help="where pages come from, chosen explicitly: fetch = live from the internet (safely, politely, into WARC); "
                        "crawl = a join against Common Crawl WARC files (--crawl or --warc)")
    p.add_argument("--crawl", nargs="+", default=None, help="crawl mode: Common Crawl crawl id(s) (their warc.paths.gz)")
    p.add_argument("--warc", nargs="+", default=None, help="crawl mode: WARC files, globs, folders or manifests")
    p.add_argument("--base_url", default=COMMON_CRAWL_BASE_URL, help="Common Crawl's host or a mirror, for --crawl and manifests")
    add_manifest_path_argument(p)
    p.add_argument("--max_files", type=positive_int, default=None, help="crawl mode: only the first N WARC files")
    p.add_argument("--fetch_shards", type=positive_int, default=16, help="fetch mode: shards (by host) fetched in parallel, each resumable")
    p.add_argument("--allow_hosts", "--allow-hosts", dest="allow_hosts", nargs="+", default=(), help="host:port that may be private/loopback (tests only)")
    p.add_argument("--max_bytes", type=positive_int, default=10 << 20, help="fetch: body cap in bytes (default 10 MiB)")
    p.add_argument("--deadline", type=positive_float, default=30.0, help="fetch: wall-clock seconds per page, redirects included")
    p.add_argument("--per_host_delay", type=non_negative_float, default=1.0, help="fetch: seconds between requests to one host")
    p.add_argument("--ignore_robots", action="store_true", help="fetch: do not read robots.txt (only for your own servers)")

    p = parser.add_argument_group("text and dedup")
    p.add_argument("--extract_timeout", type=positive_float, default=10.0, help="seconds allowed per page for extraction")
    p.add_argument("--extractor", type=_extractor_choice, default=DEFAULT_EXTRACTOR,
                   help=f"main-text extraction: {', '.join(EXTRACTOR_CHOICES)} (default {DEFAULT_EXTRACTOR}); "
                        "combined was retired by measurement (docs/webtext.md)")
    p.add_argument("--min_words", type=non_negative_int, default=MIN_WORDS, help=f"drop pages with fewer words (default {MIN_WORDS})")
    p.add_argument("--min_english_probability", type=unit_fraction, default=MIN_ENGLISH_PROBABILITY, help="langdetect probability of en to keep a page")
    p.add_argument("--near_dup_threshold", type=unit_fraction, default=minhash.DEFAULT_THRESHOLD, help="Jaccard of word 5-gram sets above which pages are near duplicates")
    p.add_argument("--shingle_words", type=positive_int, default=minhash.DEFAULT_NGRAM, help="words per shingle (default 5)")
    p.add_argument("--num_perm", type=positive_int, default=minhash.DEFAULT_NUM_PERM, help="MinHash permutations (default 96 = 16 bands x 6 rows)")
    p.add_argument("--span_dedup", action="store_true", help="also run C4's 3-sentence span dedup (T5 paper wording)")

    p = parser.add_argument_group("output")
    p.add_argument("--output", required=True, help="output folder (with --pages fetch, a rerun into it resumes the fetch)")
    add_overwrite_argument(p)
    p.add_argument("--format", nargs="+", choices=FORMATS, default=["parquet", "jsonl"], help="shard formats (default parquet jsonl: both keep the metadata)")
    p.add_argument("--num_shards", type=positive_int, default=1, help="document shards")
    add_engine_arguments(parser)
