"""``corpusforge fetch``: fetch links (one per line) safely and politely into WARC files and a
fetch log (``corpus.fetch``); a rerun into the same folder resumes.

    corpusforge fetch links.txt --out fetched/ [--concurrency 64] [--per_host_delay 1]
"""

from __future__ import annotations

import argparse
import json
import sys

from common.errors import UsageError
from corpus.fetch import FetchConfig, fetch_links

DESCRIPTION = "Fetch links (one per line) safely and politely into WARC files and a fetch log; rerun to resume."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``corpusforge fetch``'s options, defaults from ``FetchConfig()``. The dashed spellings
    (``--per-host-concurrency``) are those of the old ``python -m corpus.fetch`` and still work."""
    defaults = FetchConfig()
    parser.add_argument("links", help="file of URLs, one per line ('-' reads standard input)")
    parser.add_argument("--out", required=True, help="folder for the WARC files and fetch-log-*.jsonl")
    parser.add_argument("--allow_hosts", "--allow-hosts", nargs="*", default=[], metavar="HOST:PORT",
                        help="private/loopback host:port allowed anyway (tests, local mirrors)")
    parser.add_argument("--deadline", type=float, default=defaults.deadline_s,
                        help=f"seconds per page, redirects and retries included (default {defaults.deadline_s:g})")
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency,
                        help=f"requests in flight overall (default {defaults.concurrency})")
    parser.add_argument("--per_host_concurrency", "--per-host-concurrency", type=int, default=defaults.per_host_concurrency,
                        help=f"requests in flight per host (default {defaults.per_host_concurrency})")
    parser.add_argument("--per_host_delay", "--per-host-delay", type=float, default=defaults.per_host_delay_s,
                        help=f"seconds between request starts on one host (default {defaults.per_host_delay_s:g})")
    parser.add_argument("--retries", type=int, default=defaults.retries,
                        help=f"extra tries for 429/5xx and reset connections (default {defaults.retries})")
    parser.add_argument("--ignore_robots", "--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    parser.add_argument("--no_resume", "--no-resume", action="store_true", help="fetch every link even if a log in --out has it")


def run(args: argparse.Namespace) -> dict:
    try:
        config = FetchConfig(
            allow_hosts=frozenset(args.allow_hosts),
            deadline_s=args.deadline,
            concurrency=args.concurrency,
            per_host_concurrency=args.per_host_concurrency,
            per_host_delay_s=args.per_host_delay,
            retries=args.retries,
            respect_robots=not args.ignore_robots,
        )
    except ValueError as exc:  # e.g. --concurrency 0: a usage error, before anything runs
        raise UsageError(str(exc)) from exc
    source = sys.stdin if args.links == "-" else open(args.links, encoding="utf-8")
    with source:
        links = (line.strip() for line in source)
        return fetch_links((link for link in links if link and not link.startswith("#")), config, args.out,
                           resume=not args.no_resume)


def format_summary(counts: dict) -> str:
    return json.dumps(dict(sorted(counts.items())))
