"""``corpusforge stats``: documents, bytes, characters, words, top domains and a document-length
histogram of shards (C4 ``.json.gz``, ``.jsonl``, ``.parquet``), local or on an object store.

    corpusforge stats 'c4/c4-train.*.json.gz' [--plot lengths.png] [--json] [--s3_endpoint_url URL]
"""

from __future__ import annotations

import argparse
import json
import logging

from tqdm import tqdm

from corpus.shards import find_shards, read_documents
from corpus.stats import compute_stats, format_stats, plot_length_histogram

log = logging.getLogger("corpusforge")

EXTRA_OPTIONS = "store"  # s3:// shards: the store options (common.storage), e.g. --s3_endpoint_url


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shards", nargs="+", help="shard files, globs or folders (.json.gz, .jsonl, .parquet)")
    parser.add_argument("--plot", metavar="PNG", help="write a document-length histogram to this PNG")
    parser.add_argument("--top_domains", type=int, default=20, help="how many domains to list (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> dict:
    shards = find_shards(args.shards)
    docs = tqdm(read_documents(shards), desc="stats", unit="doc", disable=args.quiet)
    stats = compute_stats(docs, top_domains=args.top_domains)
    if args.plot:
        plot_length_histogram(stats, args.plot, title=f"Document length, {len(shards)} shard(s)")
        log.info("length histogram written to %s", args.plot)
    return {"stats": stats, "json": args.json}


def format_summary(summary: dict) -> str:
    stats = summary["stats"]
    return json.dumps(stats.to_dict(), indent=2, ensure_ascii=False) if summary["json"] else format_stats(stats)
