"""How fast corpus.fetch fetches pages, alone and with text extraction, on 1 and 2 cores.

A local server (its own process, asyncio, keep-alive, responses prepared in advance)
serves ``--pages`` URLs ``/p/<i>`` on 127.0.0.1 whose bodies are the real HTML pages of
``$CORPUSFORGE_TEST_DATA/html_gold/trafilatura_eval_en/eval`` (cycled; generated pages
when the variable is unset). Each row is timed in fresh worker processes that start
together; "2 cores" is two processes each fetching half the URLs. Rows:

  fetch           Fetcher.fetch_many (safety checks, robots.txt, caps, deadline), results dropped
  fetch+warc      fetch_links: the same plus WARC files and the fetch log on disk
  fetch+extract   fetch_many, then corpus.extract.extract_main_text on each page (trafilatura
                  in full mode: C4's WARC extraction)
  fetch+webtext   fetch_many, then corpus.webtext.extract_text: WebText's default extraction
                  (trafilatura, fast mode with favor_recall)
  fetch+combined  fetch_many, then corpus.webtext.extract_combined: the rule of the retired
                  --extractor combined (newspaper3k where trafilatura's text is too short)

Baseline: ``fetch`` on 1 core, ratio = pages/s over the baseline's. Target: ``fetch``
>= 1000 pages/s on loopback. The server has a single host, so politeness is relaxed for
the run (per-host concurrency = total concurrency, no per-host delay); everything else
is the default FetchConfig.

    .venv/bin/python benchmarks/webtext_fetch.py [--pages 5000] [--extract-pages 400] [--gzip]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import gzip
import multiprocessing
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.fetch import OK, FetchConfig, Fetcher, fetch_links  # noqa: E402


def load_pages() -> tuple[list[bytes], str]:
    data = os.environ.get("CORPUSFORGE_TEST_DATA")
    if data:
        files = sorted(glob.glob(os.path.join(data, "html_gold", "trafilatura_eval_en", "eval", "*.html.gz")))
        if files:
            return [gzip.open(f).read() for f in files], f"{len(files)} real pages from html_gold/trafilatura_eval_en"
    rng = random.Random(0)
    words = "the of and to in a is that for it as was with be by on not he this are or his from at which".split()
    pages = []
    for i in range(64):
        paragraphs = "".join(
            "<p>" + " ".join(rng.choice(words) for _ in range(rng.randint(20, 80))) + ".</p>\n" for _ in range(rng.randint(10, 80))
        )
        pages.append(f"<!doctype html><html><head><title>Page {i}</title></head><body><nav>home | news</nav><article>{paragraphs}</article></body></html>".encode())
    return pages, f"{len(pages)} generated pages (CORPUSFORGE_TEST_DATA unset)"


# -- the server ------------------------------------------------------------------------------


def pin(cpu: int | None) -> None:
    """Keep this process (and the threads it starts later) on one CPU."""
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


def serve(pages: list[bytes], use_gzip: bool, port_out, stop, cpu: int | None) -> None:
    pin(cpu)
    responses = []
    for body in pages:
        extra = b""
        if use_gzip:
            body = gzip.compress(body, compresslevel=6)
            extra = b"Content-Encoding: gzip\r\n"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n%sContent-Length: %d\r\n\r\n" % (extra, len(body))
        responses.append(head + body)
    not_found = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"

    class Page(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.buffer = b""

        def data_received(self, data):
            self.buffer += data
            while True:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                line = self.buffer[: self.buffer.find(b"\r\n")]
                self.buffer = self.buffer[end + 4 :]
                path = line.split(b" ")[1]
                if path.startswith(b"/p/"):
                    self.transport.write(responses[int(path[3:]) % len(responses)])
                else:  # robots.txt: 404, which RFC 9309 reads as "no rules"
                    self.transport.write(not_found)

    async def main():
        server = await asyncio.get_running_loop().create_server(Page, "127.0.0.1", 0, backlog=1024)
        port_out.put(server.sockets[0].getsockname()[1])
        while not stop.is_set():
            await asyncio.sleep(0.1)
        server.close()

    asyncio.run(main())


# -- the workers -----------------------------------------------------------------------------


def worker(mode: str, urls: list[str], config: FetchConfig, barrier, out, cpu: int | None) -> None:
    pin(cpu)
    extract = None
    if mode == "fetch+extract":
        from corpus.extract import extract_main_text as extract
    elif mode == "fetch+webtext":
        from corpus.webtext import extract_text as extract
    elif mode == "fetch+combined":
        from corpus.webtext import extract_combined

        def extract(html, url):
            return extract_combined(html, url)[0]
    barrier.wait()
    start = time.monotonic()
    ok = chars = 0
    if mode == "fetch+warc":
        with tempfile.TemporaryDirectory() as scratch:
            counts = fetch_links(urls, config, scratch, resume=False)
            ok = counts.get(OK, 0)
    else:
        with Fetcher(config) as fetcher:
            for result in fetcher.fetch_many(urls):
                if result.outcome != OK:
                    continue
                ok += 1
                if extract is not None:
                    page = result.to_html_page()
                    chars += len(extract(page.html, page.url) or "")
    out.put((start, time.monotonic(), ok, len(urls), chars))


def timed(mode: str, urls: list[str], config: FetchConfig, cores: int, cpus: list[int] | None) -> dict:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(cores)
    out = context.Queue()
    shares = [urls[i::cores] for i in range(cores)]
    pinned = cpus is not None and len(cpus) > cores  # one CPU for the server, one per worker
    procs = [
        context.Process(target=worker, args=(mode, share, config, barrier, out, cpus[1 + k] if pinned else None))
        for k, share in enumerate(shares)
    ]
    for p in procs:
        p.start()
    reports = [out.get() for _ in procs]
    for p in procs:
        p.join()
    seconds = max(r[1] for r in reports) - min(r[0] for r in reports)
    ok = sum(r[2] for r in reports)
    total = sum(r[3] for r in reports)
    if ok != total:
        raise SystemExit(f"{mode}: only {ok} of {total} pages fetched ok")
    return {"mode": mode, "cores": cores, "pages": total, "seconds": seconds, "rate": total / seconds, "pinned": pinned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=5000, help="URLs for the fetch and fetch+warc rows")
    parser.add_argument("--extract-pages", type=int, default=400, help="URLs for the extraction rows")
    parser.add_argument("--gzip", action="store_true", help="serve bodies with Content-Encoding: gzip")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()

    pages, origin = load_pages()
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    cpus = available if len(available) >= 2 else None  # server on the first, workers on the next ones
    context = multiprocessing.get_context("spawn")
    port_out, stop = context.Queue(), context.Event()
    server = context.Process(target=serve, args=(pages, args.gzip, port_out, stop, cpus[0] if cpus else None), daemon=True)
    server.start()
    port = port_out.get(timeout=30)
    config = FetchConfig(
        allow_hosts=frozenset({f"127.0.0.1:{port}"}),
        per_host_concurrency=args.concurrency,  # one host: politeness relaxed for the benchmark
        per_host_delay_s=0.0,
        concurrency=args.concurrency,
    )
    base = f"http://127.0.0.1:{port}/p/"
    urls = [f"{base}{i}" for i in range(args.pages)]
    extract_urls = [f"{base}{i}" for i in range(args.extract_pages)]

    modes = [("fetch", urls), ("fetch+warc", urls), ("fetch+extract", extract_urls), ("fetch+webtext", extract_urls),
             ("fetch+combined", extract_urls)]

    mean_kb = sum(len(p) for p in pages) / len(pages) / 1024
    print(f"pages: {origin}, mean {mean_kb:.0f} KiB{', served gzip-encoded' if args.gzip else ''}")
    print(f"{len(available) or os.cpu_count()} CPUs: the server is pinned to one, each worker process to another "
          "(rows marked * could not be pinned: too few CPUs, so the workers share them with the server)")
    print(f"politeness relaxed for one local host: per_host_concurrency={args.concurrency}, per_host_delay_s=0 "
          f"(defaults: 2 and 1.0 s); robots.txt still fetched (404 -> allow)")
    rows = []
    try:
        for mode, mode_urls in modes:
            for cores in (1, 2):
                rows.append(timed(mode, mode_urls, config, cores, cpus))
    finally:
        stop.set()
        server.join(5)
    baseline = rows[0]["rate"]
    print()
    print(f"{'mode':<15} {'cores':>6} {'pages':>6} {'seconds':>8} {'pages/s':>9} {'ratio':>6}")
    for r in rows:
        cores = f"{r['cores']}{'' if r['pinned'] else '*'}"
        print(f"{r['mode']:<15} {cores:>6} {r['pages']:>6} {r['seconds']:>8.2f} {r['rate']:>9.0f} {r['rate'] / baseline:>6.2f}")
    print(f"\nbaseline: fetch on 1 core = {baseline:.0f} pages/s; target >= 1000 pages/s: {'met' if baseline >= 1000 else 'NOT met'}")


if __name__ == "__main__":
    main()
