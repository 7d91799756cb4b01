"""corpus.fetch against a real HTTP server on 127.0.0.1: every outcome, the WARC read back, resume."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from warcio.archiveiterator import ArchiveIterator

from corpus import fetch_archive, fetch_client
from corpus.fetch import (
    BAD_RESPONSE,
    BAD_URL,
    CONNECTION_ERROR,
    DEADLINE,
    DECOMPRESSION_BOMB,
    HTTP_ERROR,
    NON_HTML,
    OK,
    REFUSED_ADDRESS,
    REFUSED_SCHEME,
    ROBOTS_DISALLOWED,
    ROBOTS_UNREACHABLE,
    SKIPPED_RESUME,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    FetchConfig,
    Fetcher,
    fetch_links,
    forbidden_reason,
    is_transient,
    read_fetch_log,
)
from corpus.records import HtmlPage
from corpus.warc import read_archive
from pipelines import cli

MB = 1 << 20
BOMB = gzip.compress(b"\0" * (64 * MB), compresslevel=9)  # ~64 KB on the wire, 64 MiB decoded


def page_html(name: str) -> bytes:
    return f"<!doctype html><html><head><title>{name}</title></head><body><p>Page {name}: caf\u00e9.</p></body></html>".encode()


class Site:
    """A real server with the behaviours a crawler meets, counting what it was asked for."""

    def __init__(self, robots: bytes = b"User-agent: *\nDisallow: /private\n", robots_status: int = 200, slow_s: float = 0.15, tls=None):
        self.robots = robots
        self.robots_status = robots_status
        self.slow_s = slow_s
        self.hits: Counter = Counter()
        self.sent: Counter = Counter()  # body bytes written per path
        self.active = 0
        self.max_active = 0
        self.order: list[str] = []  # paths in the order they were asked for
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                with site.lock:
                    site.hits[self.path] += 1
                    site.order.append(self.path)
                    site.active += 1
                    site.max_active = max(site.max_active, site.active)
                    count = site.hits[self.path]
                try:
                    site.route(self, count)
                except OSError:  # the client left (cancelled, or hit a cap): nothing to answer
                    self.close_connection = True
                finally:
                    with site.lock:
                        site.active -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.allow = f"127.0.0.1:{self.port}"
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return self.base + path

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- responses --------------------------------------------------------------------

    @staticmethod
    def send(h, status: int, body: bytes = b"", ctype: str | None = "text/html; charset=utf-8", extra: dict | None = None) -> None:
        h.send_response(status)
        if ctype:
            h.send_header("Content-Type", ctype)
        for name, value in (extra or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def stream(self, h, path: str, total: int, block: bytes, pause: float = 0.0) -> None:
        try:
            while self.sent[path] < total:
                h.wfile.write(block)
                h.wfile.flush()
                with self.lock:
                    self.sent[path] += len(block)
                if pause:
                    time.sleep(pause)
        except OSError:  # the client went away: what we want
            h.close_connection = True

    def route(self, h, count: int) -> None:
        path = h.path
        if path == "/robots.txt":
            self.send(h, self.robots_status, self.robots, "text/plain")
        elif path.startswith(("/page/", "/private/")):
            self.send(h, 200, page_html(path.rsplit("/", 1)[1]))
        elif path == "/gzip":
            self.send(h, 200, gzip.compress(page_html("gzipped")), extra={"Content-Encoding": "gzip"})
        elif path in ("/deflate", "/deflate-raw"):
            packer = zlib.compressobj(6, zlib.DEFLATED, 15 if path == "/deflate" else -15)
            body = packer.compress(page_html("deflated")) + packer.flush()
            self.send(h, 200, body, extra={"Content-Encoding": "deflate"})
        elif path == "/bad-gzip":
            self.send(h, 200, b"\x1f\x8b\x08\x00 this is not gzip at all", extra={"Content-Encoding": "gzip"})
        elif path == "/brotli":
            self.send(h, 200, b"\x0b\x02\x80hello\x03", extra={"Content-Encoding": "br"})
        elif path == "/chunked":
            h.send_response(200)
            h.send_header("Content-Type", "text/html; charset=utf-8")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            body = page_html("chunked")
            for part in (body[:20], body[20:]):
                h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            h.wfile.write(b"0\r\n\r\n")
        elif path.startswith("/redirect/"):
            left = int(path.rsplit("/", 1)[1])
            if left == 0:
                self.send(h, 200, page_html("after-redirects"))
            else:
                self.send(h, 302, b"", None, {"Location": f"/redirect/{left - 1}"})
        elif path.startswith("/moved/"):
            self.send(h, 301, b"", None, {"Location": "/page/" + path.rsplit("/", 1)[1]})
        elif path == "/to-127.0.0.2":
            self.send(h, 302, b"", None, {"Location": f"http://127.0.0.2:{self.port}/page/elsewhere"})
        elif path == "/to-localhost-other-port":
            self.send(h, 301, b"", None, {"Location": f"http://localhost:{self.port + 1}/page/elsewhere"})
        elif path == "/to-metadata":
            self.send(h, 307, b"", None, {"Location": "http://169.254.169.254/latest/meta-data/"})
        elif path == "/to-ftp":
            self.send(h, 302, b"", None, {"Location": "ftp://example.com/file"})
        elif path == "/flaky-429":
            if count == 1:
                self.send(h, 429, b"slow down", "text/plain", {"Retry-After": "1"})
            else:
                self.send(h, 200, page_html("after-429"))
        elif path == "/always-500":
            self.send(h, 500, b"oops", "text/plain")
        elif path == "/reset-once":
            if count == 1:  # promise 4000 bytes, send 100, then reset the connection (RST)
                h.send_response(200)
                h.send_header("Content-Type", "text/html")
                h.send_header("Content-Length", "4000")
                h.end_headers()
                h.wfile.write(b"<html>" + b"x" * 94)
                h.wfile.flush()
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                h.connection.close()
                h.close_connection = True
            else:
                self.send(h, 200, page_html("after-reset"))
        elif path == "/drip":  # a byte every 0.2 s: no socket timeout ever fires
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", "1000")
            h.end_headers()
            self.stream(h, path, 1000, b"x", pause=0.2)
        elif path == "/huge":  # 50 MB announced
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", str(50 * MB))
            h.end_headers()
            self.stream(h, path, 50 * MB, b"a" * 65536)
        elif path == "/huge-unannounced":  # 50 MB, no length: only counting can stop it
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.send_header("Connection", "close")
            h.end_headers()
            self.stream(h, path, 50 * MB, b"a" * 65536)
            h.close_connection = True
        elif path == "/bomb":
            self.send(h, 200, BOMB, extra={"Content-Encoding": "gzip"})
        elif path == "/image.png":
            self.send(h, 200, b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "image/png")
        elif path == "/doc.pdf":
            self.send(h, 200, b"%PDF-1.4 " + b"\0" * 100, "application/pdf")
        elif path == "/no-type":
            self.send(h, 200, page_html("untyped"), None)
        elif path.startswith("/slow/"):
            time.sleep(self.slow_s)
            self.send(h, 200, page_html("slow"))
        else:
            self.send(h, 404, b"not here", "text/plain")


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


def config_for(*sites: Site, **overrides) -> FetchConfig:
    settings = dict(
        allow_hosts=frozenset(s.allow for s in sites),
        per_host_delay_s=0.0,
        per_host_concurrency=4,
        backoff_base_s=0.01,
        backoff_cap_s=2.0,
        deadline_s=10.0,
        connect_timeout_s=2.0,
    )
    settings.update(overrides)
    return FetchConfig(**settings)


def run_links(urls, config, out_dir, **kwargs) -> tuple[dict, dict]:
    counts = fetch_links(urls, config, out_dir, **kwargs)
    return counts, read_fetch_log(out_dir)


def outcome_of(log: dict, url: str) -> str:
    return log[url]["outcome"]


# -- addresses and URLs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.8.9.10", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
        "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.254", "0.0.0.0", "255.255.255.255",
        "224.0.0.1", "239.255.255.250", "240.0.0.1", "192.0.2.1", "198.18.0.1",
        "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "2001:db8::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
    ],
)
def test_forbidden_addresses(address):
    assert forbidden_reason(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"])
def test_public_addresses(address):
    assert forbidden_reason(address) == ""


def test_refused_before_any_network(monkeypatch):
    """Bad schemes, bad URLs and forbidden IP literals end without a DNS lookup or a connect."""
    connects, lookups = [], []
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def counting_connect(sock, address):
        connects.append(address)
        return real_connect(sock, address)

    def counting_getaddrinfo(*args, **kwargs):
        lookups.append(args[0])
        return real_getaddrinfo(*args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", counting_connect)
    monkeypatch.setattr(socket, "getaddrinfo", counting_getaddrinfo)
    refused = {
        "http://169.254.169.254/latest/meta-data/": REFUSED_ADDRESS,
        "http://user@169.254.169.254:80/latest/meta-data/": REFUSED_ADDRESS,
        "http://[::ffff:169.254.169.254]/": REFUSED_ADDRESS,
        "http://[fd00::1]/": REFUSED_ADDRESS,
        "http://10.0.0.1:8080/admin": REFUSED_ADDRESS,
        "http://0.0.0.0/": REFUSED_ADDRESS,
        "http://[::1]:8080/": REFUSED_ADDRESS,
        "https://127.0.0.1/": REFUSED_ADDRESS,
        "ftp://example.com/file": REFUSED_SCHEME,
        "file:///etc/passwd": REFUSED_SCHEME,
        "javascript:alert(1)": REFUSED_SCHEME,
        "http://": BAD_URL,
        "http://example.com:99999/": BAD_URL,
    }
    site = Site()
    try:
        with Fetcher(config_for(site)) as fetcher:
            results = {r.url: r for r in fetcher.fetch_many(refused)}
            assert {url: r.outcome for url, r in results.items()} == refused
            assert connects == [] and lookups == []
            # The counters do see real traffic: a page on the allowlisted server connects.
            assert fetcher.fetch(site.url("/page/control")).outcome == OK
            assert connects
    finally:
        site.close()
    assert "link-local" in results["http://169.254.169.254/latest/meta-data/"].detail


def test_names_resolving_to_loopback_are_refused(site):
    # localhost resolves (via /etc/hosts) to loopback, and the resolver reads 2130706433 as
    # 127.0.0.1; only 127.0.0.1 on the site's own port is allowlisted.
    with Fetcher(config_for(site)) as fetcher:
        results = list(fetcher.fetch_many([f"http://localhost:{site.port + 1}/", f"http://2130706433:{site.port + 1}/"]))
    assert [r.outcome for r in results] == [REFUSED_ADDRESS, REFUSED_ADDRESS]
    assert all("loopback" in r.detail for r in results)


# -- pages, redirects, the WARC --------------------------------------------------------------


def test_pages_land_in_warc_and_log(site, tmp_path):
    urls = [site.url(p) for p in ("/page/one", "/page/two", "/gzip", "/chunked", "/redirect/3")]
    counts, log = run_links(urls, config_for(site), tmp_path)
    assert counts == {OK: 5}
    assert all(outcome_of(log, u) == OK for u in urls)
    redirected = log[site.url("/redirect/3")]
    assert redirected["final_url"] == site.url("/redirect/0")
    assert [hop["status"] for hop in redirected["redirects"]] == [302, 302, 302]
    assert redirected["attempts"] == 1

    # read_archive gives every page back, at the offset the log recorded.
    pages = {}
    for entry in log.values():
        path = tmp_path / entry["warc"]
        found = [p for p in read_archive(str(path)) if isinstance(p, HtmlPage) and p.offset == entry["offset"]]
        assert len(found) == 1
        pages[entry["url"]] = found[0]
    assert pages[site.url("/page/one")].html == page_html("one").decode()
    assert pages[site.url("/gzip")].html == page_html("gzipped").decode()  # content-encoding undone on read
    assert pages[site.url("/chunked")].html == page_html("chunked").decode()  # chunking undone on read
    assert pages[site.url("/redirect/3")].url == site.url("/redirect/0")
    assert all(p.status == 200 and p.timestamp == log[u]["fetched_at"] for u, p in pages.items())

    # WARC-Source-URI joins the final page back to the link as submitted.
    sources = {}
    for name in {e["warc"] for e in log.values()}:
        with open(tmp_path / name, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "response":
                    sources[record.rec_headers.get_header("WARC-Target-URI")] = record.rec_headers.get_header("WARC-Source-URI")
    assert sources[site.url("/redirect/0")] == site.url("/redirect/3")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temporary left behind


def test_fetch_result_body_and_page(site):
    with Fetcher(config_for(site)) as fetcher:
        result = fetcher.fetch(site.url("/gzip"))
    assert result.outcome == OK and result.body == page_html("gzipped")
    assert result.raw_body == gzip.compress(page_html("gzipped")) or result.raw_body[:2] == b"\x1f\x8b"
    assert "café" in result.to_html_page().html


def test_content_encodings(site):
    urls = [site.url(p) for p in ("/deflate", "/deflate-raw", "/bad-gzip", "/brotli")]
    with Fetcher(config_for(site)) as fetcher:
        results = {r.url: r for r in fetcher.fetch_many(urls)}
    assert [(results[u].outcome, results[u].body) for u in urls[:2]] == [(OK, page_html("deflated"))] * 2
    assert [results[u].outcome for u in urls[2:]] == [BAD_RESPONSE, BAD_RESPONSE]
    assert "br" in results[site.url("/brotli")].detail


def test_redirect_limits_and_targets(site):
    urls = {
        site.url("/redirect/5"): OK,  # exactly max_redirects hops
        site.url("/redirect/7"): TOO_MANY_REDIRECTS,
        site.url("/to-127.0.0.2"): REFUSED_ADDRESS,
        site.url("/to-localhost-other-port"): REFUSED_ADDRESS,
        site.url("/to-metadata"): REFUSED_ADDRESS,
        site.url("/to-ftp"): REFUSED_SCHEME,
    }
    with Fetcher(config_for(site)) as fetcher:
        results = {r.url: r for r in fetcher.fetch_many(urls)}
    assert {u: r.outcome for u, r in results.items()} == urls
    assert results[site.url("/to-metadata")].final_url == "http://169.254.169.254/latest/meta-data/"
    assert len(results[site.url("/redirect/7")].redirects) == 5
    assert results[site.url("/redirect/7")].final_url == site.url("/redirect/2")
    assert site.hits["/redirect/1"] == 1  # by /redirect/5 only: the sixth redirect of /redirect/7 was not followed


@pytest.mark.parametrize("links, time_scale", [(6, 0.25), pytest.param(40, 0.25, marks=pytest.mark.slow)])
def test_a_redirect_hop_goes_ahead_of_the_hosts_new_pages_with_default_politeness(site, links, time_scale):
    """``links`` links on one host, the first a 301: its hop waits for the next slot, not for
    the other pages (at one start a second, it used to wait behind all of them: with 40 links,
    ~40 s, past its 30 s deadline, and the page was lost). Its place in the order proves it.
    Both cases run the default politeness and deadline on a clock four times faster (0.25 s
    between starts, a 7.5 s deadline): the order they check is the same, the 40-link case
    (the failure as it was seen) in 10 s instead of 40 (with the hop queued behind the host's
    new pages, as it was, the hop comes 40th of 41 and the check fails)."""
    defaults = FetchConfig()
    urls = [site.url("/moved/first")] + [site.url(f"/page/p{i}") for i in range(links - 1)]
    config = config_for(site, per_host_delay_s=defaults.per_host_delay_s * time_scale, per_host_concurrency=defaults.per_host_concurrency,
                        deadline_s=defaults.deadline_s * time_scale)
    with Fetcher(config) as fetcher:
        results = {r.url: r for r in fetcher.fetch_many(urls)}
    assert Counter(r.outcome for r in results.values()) == {OK: links}
    moved = results[site.url("/moved/first")]
    assert moved.final_url == site.url("/page/first") and moved.redirects[0]["status"] == 301
    pages = [path for path in site.order if path != "/robots.txt"]
    assert len(pages) == links + 1 and pages.index("/page/first") <= 3  # right after the pages already in flight


def test_host_gate_serves_urgent_requests_first_and_survives_cancelled_waiters():
    import asyncio

    from corpus.fetch_policy import HostGate

    async def scenario():
        gate, order = HostGate(1, 0.0), []

        async def request(name, urgent):
            async with gate.slot(urgent):
                order.append(name)
                await asyncio.sleep(0.01)

        holder = asyncio.create_task(request("first", False))
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(request(f"new{i}", False)) for i in range(3)]
        await asyncio.sleep(0)
        gone = asyncio.create_task(request("cancelled", True))
        hop = asyncio.create_task(request("hop", True))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(holder, hop, *waiting)
        return order, gate.active, gate.users

    order, active, users = asyncio.run(scenario())
    assert order == ["first", "hop", "new0", "new1", "new2"]  # the hop ahead of every new page, new pages in order
    assert (active, users) == (0, 0)  # the cancelled waiter left no slot taken


# -- retries -------------------------------------------------------------------------------


def test_retry_after_is_honoured(site, monkeypatch):
    waits = []
    real_sleep = fetch_client._backoff_sleep

    async def recording_sleep(seconds):
        waits.append(seconds)
        await real_sleep(seconds)

    monkeypatch.setattr(fetch_client, "_backoff_sleep", recording_sleep)
    with Fetcher(config_for(site)) as fetcher:
        result = fetcher.fetch(site.url("/flaky-429"))
    assert (result.outcome, result.status, result.attempts) == (OK, 200, 2)
    assert waits == [1.0]
    assert site.hits["/flaky-429"] == 2


def test_persistent_500_gives_up(site):
    with Fetcher(config_for(site, retries=3)) as fetcher:
        result = fetcher.fetch(site.url("/always-500"))
    assert (result.outcome, result.status, result.attempts) == (HTTP_ERROR, 500, 4)
    assert site.hits["/always-500"] == 4


def test_retry_after_over_the_cap_is_not_retried(site):
    with Fetcher(config_for(site, backoff_cap_s=0.5)) as fetcher:
        result = fetcher.fetch(site.url("/flaky-429"))
    assert (result.outcome, result.status, result.attempts) == (HTTP_ERROR, 429, 1)
    assert "Retry-After" in result.detail


def test_connection_reset_then_success(site):
    with Fetcher(config_for(site)) as fetcher:
        result = fetcher.fetch(site.url("/reset-once"))
    assert (result.outcome, result.attempts) == (OK, 2)
    assert result.body == page_html("after-reset")


def test_client_errors_are_not_retried(site):
    with Fetcher(config_for(site)) as fetcher:
        result = fetcher.fetch(site.url("/missing"))
    assert (result.outcome, result.status, result.attempts) == (HTTP_ERROR, 404, 1)


def test_connection_refused(site):
    with socket.socket() as probe:  # a port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    allow = frozenset({f"127.0.0.1:{port}"})
    with Fetcher(config_for(site, allow_hosts=allow, respect_robots=False)) as fetcher:
        result = fetcher.fetch(f"http://127.0.0.1:{port}/")
    assert (result.outcome, result.attempts) == (CONNECTION_ERROR, 1)
    with Fetcher(config_for(site, allow_hosts=allow)) as fetcher:  # robots.txt unreachable: disallow all
        result = fetcher.fetch(f"http://127.0.0.1:{port}/")
    assert result.outcome == ROBOTS_UNREACHABLE and "connection_error" in result.detail


# -- caps and the deadline ---------------------------------------------------------------------


def test_slow_drip_hits_the_deadline(site):
    with Fetcher(config_for(site, deadline_s=1.0)) as fetcher:
        result = fetcher.fetch(site.url("/drip"))
    assert result.outcome == DEADLINE
    assert site.sent["/drip"] < 1000  # the server was still dripping when we left


def test_too_large_bodies_are_not_read(site):
    with Fetcher(config_for(site)) as fetcher:
        results = {r.url: r for r in fetcher.fetch_many([site.url("/huge"), site.url("/huge-unannounced")])}
    announced, counted = results[site.url("/huge")], results[site.url("/huge-unannounced")]
    assert announced.outcome == TOO_LARGE and "Content-Length" in announced.detail
    assert counted.outcome == TOO_LARGE and counted.body == b""
    time.sleep(0.2)  # let the server notice the closed connections
    assert site.sent["/huge"] < 25 * MB and site.sent["/huge-unannounced"] < 25 * MB


def test_gzip_bomb(site):
    with Fetcher(config_for(site)) as fetcher:
        result = fetcher.fetch(site.url("/bomb"))
    assert result.outcome == DECOMPRESSION_BOMB and result.body == b""


def test_non_html_types(site, tmp_path):
    urls = [site.url(p) for p in ("/image.png", "/doc.pdf", "/no-type")]
    counts, log = run_links(urls, config_for(site), tmp_path)
    assert counts == {NON_HTML: 3}
    assert "image/png" in log[urls[0]]["detail"] and "application/pdf" in log[urls[1]]["detail"]
    assert log[urls[2]]["detail"] == "no Content-Type"
    assert all(e["warc"] is None for e in log.values())
    assert not list(tmp_path.glob("*.warc.gz"))  # nothing but ok pages is archived


# -- robots.txt and politeness ---------------------------------------------------------------


def test_robots_disallow_and_cache(site, tmp_path):
    urls = [site.url(f"/page/{i}") for i in range(6)] + [site.url("/private/secret"), site.url("/private/other")]
    counts, log = run_links(urls, config_for(site), tmp_path)
    assert counts == {OK: 6, ROBOTS_DISALLOWED: 2}
    assert outcome_of(log, site.url("/private/secret")) == ROBOTS_DISALLOWED
    assert site.hits["/robots.txt"] == 1
    assert site.hits["/private/secret"] == 0


@pytest.mark.parametrize("status,expected", [(503, ROBOTS_UNREACHABLE), (404, OK), (403, OK)])
def test_robots_unavailable_or_unreachable(status, expected):
    site = Site(robots=b"", robots_status=status)
    try:
        with Fetcher(config_for(site)) as fetcher:
            result = fetcher.fetch(site.url("/page/a"))
    finally:
        site.close()
    assert result.outcome == expected
    if expected == ROBOTS_UNREACHABLE:
        assert "unreachable" in result.detail


def test_robots_can_be_ignored():
    site = Site(robots=b"User-agent: *\nDisallow: /\n")
    try:
        with Fetcher(config_for(site, respect_robots=False)) as fetcher:
            assert fetcher.fetch(site.url("/page/a")).outcome == OK
    finally:
        site.close()
    assert site.hits["/robots.txt"] == 0


def test_per_host_concurrency_is_never_exceeded(site):
    urls = [site.url(f"/slow/{i}") for i in range(10)]
    with Fetcher(config_for(site, per_host_concurrency=2, concurrency=64)) as fetcher:
        outcomes = Counter(r.outcome for r in fetcher.fetch_many(urls))
    assert outcomes == {OK: 10}
    assert site.max_active <= 2


# -- resume -----------------------------------------------------------------------------------


def test_rerun_fetches_nothing_new(site, tmp_path):
    urls = [site.url(f"/page/{i}") for i in range(5)] + [site.url("/image.png"), site.url("/always-500")]
    first, _ = run_links(urls, config_for(site, retries=0), tmp_path)
    assert first == {OK: 5, NON_HTML: 1, HTTP_ERROR: 1}
    hits_before = sum(site.hits.values())
    second, log = run_links(urls + urls[:2], config_for(site, retries=0), tmp_path, retry_transient=False)
    assert second == {SKIPPED_RESUME: 9}
    assert sum(site.hits.values()) == hits_before
    assert set(log) == set(urls)
    # By default a transient failure (here the 500) is tried again; the rest is not.
    third, _ = run_links(urls, config_for(site, retries=0), tmp_path)
    assert third == {SKIPPED_RESUME: 6, HTTP_ERROR: 1}
    assert site.hits["/always-500"] == 2 and site.hits["/page/0"] == 1


def test_is_transient_tells_lasting_failures_from_passing_ones():
    assert is_transient({"outcome": "connection_error"}) and is_transient({"outcome": "robots_unreachable"})
    assert is_transient({"outcome": "http_error", "status": 503}) and is_transient({"outcome": "http_error", "status": 429})
    assert not is_transient({"outcome": "http_error", "status": 404}) and not is_transient({"outcome": "ok"})
    assert not is_transient({"outcome": "robots_disallowed", "detail": "disallowed by robots.txt"})
    assert is_transient({"outcome": "robots_disallowed", "detail": "robots.txt unreachable (HTTP 503)"})  # older logs


def test_interrupted_run_completes(site, tmp_path):
    urls = [site.url(f"/page/{i}") for i in range(12)]

    seen = []

    def interrupt_after_five(result):  # Ctrl-C while the sixth and later pages are in flight
        seen.append(result.url)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fetch_links(urls, config_for(site, per_host_concurrency=1), tmp_path, checkpoint_pages=2, on_result=interrupt_after_five)
    done_first = set(read_fetch_log(tmp_path))
    assert done_first == set(seen)  # what was recorded before the interrupt is kept, nothing more
    counts, log = run_links(urls, config_for(site), tmp_path)
    assert counts == {SKIPPED_RESUME: len(done_first), OK: 12 - len(done_first)}
    assert set(log) == set(urls)
    lines = [json.loads(line) for f in tmp_path.glob("fetch-log-*.jsonl") for line in f.read_text().splitlines()]
    assert sorted(e["url"] for e in lines) == sorted(urls)  # each link logged exactly once
    for entry in lines:  # and each logged page is where the log says
        pages = [p for p in read_archive(str(tmp_path / entry["warc"])) if isinstance(p, HtmlPage) and p.offset == entry["offset"]]
        assert [p.url for p in pages] == [entry["url"]]


def test_failed_warc_write_never_marks_done(site, tmp_path, monkeypatch):
    urls = [site.url(f"/page/{i}") for i in range(6)] + [site.url("/image.png")]
    class FullDisk:  # takes 2500 bytes, then fails in the middle of a write
        def __init__(self, path):
            self.file = open(path, "wb")
            self.room = 2500

        def write(self, data):
            if len(data) > self.room:
                self.file.write(data[: self.room])
                self.room = 0
                raise OSError(28, "No space left on device")
            self.room -= len(data)
            return self.file.write(data)

        def __getattr__(self, name):
            return getattr(self.file, name)

    monkeypatch.setattr(fetch_archive, "_open_for_writing", FullDisk)
    with pytest.raises(OSError):
        fetch_links(urls, config_for(site), tmp_path)
    log = read_fetch_log(tmp_path)
    assert all(e["outcome"] != OK for e in log.values())  # pages of the broken WARC are not done
    assert not list(tmp_path.glob("*.warc.gz")) and not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    monkeypatch.undo()
    counts, log = run_links(urls, config_for(site), tmp_path)
    assert counts.get(OK) == 6 and set(log) == set(urls)
    assert all(e["outcome"] == OK for e in log.values() if "page" in e["url"])


# -- threads ----------------------------------------------------------------------------------


def test_fetch_many_and_fetch_links_from_worker_threads(site, tmp_path):
    fetcher = Fetcher(config_for(site))
    outputs: dict[int, list] = {}

    def work(n: int) -> None:
        outputs[n] = sorted(r.outcome for r in fetcher.fetch_many(site.url(f"/page/t{n}-{i}") for i in range(5)))

    def archive(out_dir) -> None:
        outputs["links"] = fetch_links([site.url(f"/page/l{i}") for i in range(5)], config_for(site), out_dir)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=archive, args=(tmp_path,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    fetcher.close()
    assert outputs == {0: [OK] * 5, 1: [OK] * 5, 2: [OK] * 5, "links": {OK: 5}}


def test_stopping_early_cancels_the_rest(site):
    with Fetcher(config_for(site, per_host_concurrency=1)) as fetcher:
        results = fetcher.fetch_many(site.url(f"/slow/{i}") for i in range(50))
        first = next(results)
        results.close()
        assert first.outcome == OK
        assert fetcher.fetch(site.url("/page/after")).outcome == OK
    assert site.hits.total() < 50


def test_fetcher_pickles_as_its_config(site):
    fetcher = pickle.loads(pickle.dumps(Fetcher(config_for(site))))
    with fetcher:
        assert fetcher.fetch(site.url("/page/pickled")).outcome == OK


@pytest.fixture
def tls_site(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    s = Site(tls=context)
    yield s
    s.close()


def test_https(tls_site):
    with Fetcher(config_for(tls_site, verify_tls=False)) as fetcher:
        result = fetcher.fetch(tls_site.url("/gzip"))
    assert (result.outcome, result.body) == (OK, page_html("gzipped"))
    assert result.final_url.startswith("https://")
    with Fetcher(config_for(tls_site, respect_robots=False)) as fetcher:  # self-signed: verification fails
        result = fetcher.fetch(tls_site.url("/page/a"))
    assert result.outcome == CONNECTION_ERROR and "CERTIFICATE_VERIFY_FAILED" in result.detail


def test_command_line(site, tmp_path, capsys):
    links = tmp_path / "links.txt"
    links.write_text(f"{site.url('/page/a')}\n\n# a comment\n{site.url('/image.png')}\n")
    out = tmp_path / "out"
    assert cli.main(["fetch", str(links), "--out", str(out), "--allow-hosts", site.allow, "--per-host-delay", "0"]) == 0
    assert json.loads(capsys.readouterr().out) == {OK: 1, NON_HTML: 1}
    assert cli.main(["fetch", str(links), "--out", str(out), "--allow-hosts", site.allow]) == 0
    assert json.loads(capsys.readouterr().out) == {SKIPPED_RESUME: 2}
