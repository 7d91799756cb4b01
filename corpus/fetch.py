"""Fetching user-submitted URLs (WebText's Reddit links) safely, politely and fast.

One page in, one ``FetchResult`` out, whose ``outcome`` is one of ``OUTCOMES``:

======================== ==============================================================
``ok``                   a 2xx HTML page, read whole; ``body`` holds it (content-encoding undone)
``bad_url``              not a URL we can request (no host, bad port, bad IDNA name)
``refused_scheme``       not http/https (also a redirect to ``ftp:``, ``file:``, ...)
``refused_address``      the host is, or resolves to, an address we never connect to (``corpus.fetch_policy``)
``dns_error``            the name does not resolve (or not within ``connect_timeout_s``)
``robots_disallowed``    robots.txt forbids it
``robots_unreachable``   robots.txt could not be fetched (5xx, 429, no connection): disallowed, as RFC 9309 says, and retried on a rerun
``too_many_redirects``   more than ``max_redirects`` redirects
``non_html``             Content-Type not in ``html_types``, or no Content-Type at all
``too_large``            body over ``max_bytes`` (by Content-Length, or counted while streaming)
``decompression_bomb``   gzip/deflate body that decodes to more than ``max_decoded_bytes``
``deadline``             the page took longer than ``deadline_s`` of wall-clock time
``http_error``           a final 4xx/5xx (after retries for 429/5xx); ``status`` is kept
``connection_error``     refused, reset, TLS failure, closed mid-response (after retries)
``bad_response``         not parseable HTTP/1.x, bad chunking, bad gzip, unsupported encoding
``internal_error``       a bug in the fetcher; the run goes on, the detail says what broke
``skipped_resume``       (``fetch_links`` counts only) already in a fetch log of the folder
``skipped_duplicate``    (``fetch_links`` counts only) the same URL earlier in this run's input
======================== ==============================================================

The fetcher in five parts
-------------------------
``corpus.fetch_policy``   what may be fetched: schemes, addresses (SSRF safety), robots.txt,
                          per-host politeness, content types and size caps, retries; the
                          outcome names and ``FetchConfig``, every knob with its default
``corpus.fetch_client``   the HTTP/1.1 client: connections, redirects, retries, the per-page
                          deadline; ``AsyncFetcher`` and its synchronous front ``Fetcher``
``corpus.fetch_http``     reading one response off the wire: status line, headers, framing,
                          chunked bodies, gzip/deflate decoding, all with caps
``corpus.fetch_archive``  WARC files and the fetch log, written at checkpoints; resume
``corpus.fetch``          (this module) ``fetch_links``: links in, WARC files and a fetch log
                          out, resumable; the public names of policy, client and archive

Command line: ``corpusforge fetch LINKS --out DIR [--allow_hosts 127.0.0.1:8080]``
(``pipelines/fetch_links.py``; ``python -m corpus.fetch`` runs the same command) runs
``fetch_links`` over a file of URLs and prints the counts; run it again to resume.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from corpus.fetch_archive import (
    LOG_PREFIX,
    LOG_SUFFIX,
    TRANSIENT_OUTCOMES,
    ArchiveWriter,
    is_transient,
    read_fetch_log,
    remove_stale_temporaries,
)
from corpus.fetch_client import AsyncFetcher, Fetcher, FetchResult
from corpus.fetch_policy import (
    BAD_RESPONSE,
    BAD_URL,
    CONNECTION_ERROR,
    DEADLINE,
    DECOMPRESSION_BOMB,
    DEFAULT_USER_AGENT,
    DNS_ERROR,
    HTTP_ERROR,
    INTERNAL_ERROR,
    NON_HTML,
    OK,
    OUTCOMES,
    REFUSED_ADDRESS,
    REFUSED_SCHEME,
    RETRY_STATUSES,
    ROBOTS_DISALLOWED,
    ROBOTS_UNREACHABLE,
    SKIPPED_DUPLICATE,
    SKIPPED_RESUME,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    FetchConfig,
    forbidden_reason,
)

__all__ = [
    "OK", "BAD_URL", "REFUSED_SCHEME", "REFUSED_ADDRESS", "DNS_ERROR", "ROBOTS_DISALLOWED", "ROBOTS_UNREACHABLE",
    "TOO_MANY_REDIRECTS", "NON_HTML", "TOO_LARGE", "DECOMPRESSION_BOMB", "DEADLINE", "HTTP_ERROR", "CONNECTION_ERROR",
    "BAD_RESPONSE", "INTERNAL_ERROR", "SKIPPED_RESUME", "SKIPPED_DUPLICATE", "OUTCOMES", "TRANSIENT_OUTCOMES",
    "DEFAULT_USER_AGENT", "RETRY_STATUSES", "LOG_PREFIX", "LOG_SUFFIX",
    "FetchConfig", "FetchResult", "AsyncFetcher", "Fetcher", "forbidden_reason",
    "fetch_links", "is_transient", "read_fetch_log", "remove_stale_temporaries",
]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _deferred_interrupts():
    """While it lasts, Ctrl-C (SIGINT) is noted and ignored; only the main thread can do this."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def fetch_links(
    urls: Iterable[str],
    config: FetchConfig | None = None,
    out_dir: str | os.PathLike = ".",
    *,
    resume: bool = True,
    retry_transient: bool = True,
    refetch: Iterable[str] = (),
    fetcher: Fetcher | None = None,
    warc_prefix: str = "webtext",
    warc_max_bytes: int = 1 << 30,
    checkpoint_pages: int = 10000,
    checkpoint_s: float = 300.0,
    warc_gzip_level: int = 6,
    warc_workers: int | None = None,
    on_result: Callable[[FetchResult], None] | None = None,
) -> dict[str, int]:
    """Fetch links into ``out_dir`` (WARC files + fetch log); return counts by outcome.

    With ``resume`` every URL already in a fetch log of ``out_dir`` is skipped
    (``skipped_resume``), unless its logged failure was transient (``is_transient``: no
    connection, DNS, deadline, robots.txt unreachable, 429/5xx; off with
    ``retry_transient=False``) or its outcome is in ``refetch`` (e.g. ``{"non_html"}``).
    A URL repeated in ``urls`` is fetched once (``skipped_duplicate``). ``on_result`` sees
    every result after it is recorded. Partial files that killed runs left in ``out_dir``
    are removed first (``remove_stale_temporaries``).
    """
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    config = config or (fetcher.config if fetcher is not None else FetchConfig())
    refetch = frozenset(refetch)
    done = read_fetch_log(out_dir) if resume else {}
    counts: Counter = Counter()

    def todo() -> Iterator[str]:
        seen: set[str] = set()
        for url in urls:
            entry = done.get(url)
            if entry is not None and entry.get("outcome") not in refetch and not (retry_transient and is_transient(entry)):
                counts[SKIPPED_RESUME] += 1
                continue
            if url in seen:
                counts[SKIPPED_DUPLICATE] += 1
                continue
            seen.add(url)
            yield url

    own = fetcher is None
    fetcher = fetcher or Fetcher(config)
    workers = warc_workers if warc_workers is not None else min(4, os.cpu_count() or 1)
    writer = ArchiveWriter(out_dir, config, warc_prefix, warc_max_bytes, checkpoint_pages, checkpoint_s, warc_gzip_level, workers)
    remove_stale_temporaries(out_dir)
    results = fetcher.fetch_many(todo())
    try:
        for result in results:
            writer.add(result)
            counts[result.outcome] += 1
            if on_result is not None:
                on_result(result)
        writer.checkpoint()
    except BaseException as exc:
        with _deferred_interrupts():  # a second Ctrl-C must not cut the save short
            if isinstance(exc, KeyboardInterrupt):
                log.warning("interrupted: saving what was fetched in %s (its WARC and fetch log) before stopping", out_dir)
            results.close()
            writer.abort()
        raise
    finally:
        writer.close()
        if own:
            fetcher.close()
    return dict(counts)


if __name__ == "__main__":
    # ``python -m corpus.fetch`` is ``corpusforge fetch``: the command line lives in pipelines/fetch_links.py.
    from pipelines.cli import main

    sys.exit(main(["fetch", *sys.argv[1:]]))
