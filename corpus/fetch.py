"""Fetching user-submitted URLs (WebText's Reddit links) safely, politely and fast.

One page in, one ``FetchResult`` out, whose ``outcome`` is one of ``OUTCOMES``:

======================== ==============================================================
``ok``                   a 2xx HTML page, read whole; ``body`` holds it (content-encoding undone)
``bad_url``              not a URL we can request (no host, bad port, bad IDNA name)
``refused_scheme``       not http/https (also a redirect to ``ftp:``, ``file:``, ...)
``refused_address``      the host is, or resolves to, an address we never connect to (below)
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
``internal_error``       a bug in this module; the run goes on, the detail says what broke
``skipped_resume``       (``fetch_links`` counts only) already in a fetch log of the folder
``skipped_duplicate``    (``fetch_links`` counts only) the same URL earlier in this run's input
======================== ==============================================================

The client
----------
A small HTTP/1.1 client of our own over asyncio streams (``ssl`` for https), not aiohttp
or urllib. Every safety rule needs a hook in the middle of the request: the address we
connect to must be the one we checked, each redirect hop is checked again, the body is
counted as it arrives and content-encoding is undone by us with a cap. Owning the ~300
lines of HTTP that gives keeps all of that visible in one file, adds no dependency, and
makes a request cheap enough for thousands of pages a second on one core. Connections are
kept alive and reused per (scheme, host, port). We send ``Accept-Encoding: gzip, deflate``
only (brotli is not a dependency); a server that answers ``br`` anyway gets
``bad_response``.

Addresses (SSRF safety) and DNS pinning
---------------------------------------
Before any connection we resolve the name ourselves (``getaddrinfo`` in a thread pool;
an IP literal is parsed, not resolved) and refuse the URL when ANY address is loopback,
private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, with the cloud metadata address
169.254.169.254, and fe80::/10), shared/CGNAT (100.64.0.0/10), multicast, reserved,
documentation, benchmarking, unspecified or broadcast, or an IPv4-mapped, NAT64 or 6to4
IPv6 address wrapping one of those (``forbidden_reason``). We then connect to that exact
IP (the name goes only into ``Host`` and TLS SNI/verification), so DNS is never asked
twice and a rebinding answer cannot slip in between check and connect. Every redirect
hop goes through the same check. ``allow_hosts`` holds ``"host:port"`` strings (IPv6 as
``"[::1]:8080"``): a URL whose host:port, or whose resolved ip:port, is listed skips the
address check and nothing else (robots, caps and deadline still apply).

The deadline
------------
A socket timeout is not a deadline: a server that drips a byte a second never trips
one. Each page gets one wall-clock deadline (``deadline_s``) that covers every
redirect hop, retry and backoff, connecting and reading the body. It is armed when the
page's first request gets its politeness slot (time queued behind other pages of the same
host is not the page's fault), and when it passes the page's task is cancelled wherever
it is waiting, and the page becomes ``deadline``. A retry is not started when its
backoff would end after the deadline. Connecting also has its own ``connect_timeout_s``.

Retries
-------
Only for 429, 500, 502, 503, 504 and for connections reset or closed mid-response:
``retries`` more tries of the same request, sleeping ``min(backoff_cap_s,
backoff_base_s * backoff_factor ** (try - 1))``, or the server's ``Retry-After`` (seconds
or HTTP date) when it sends one. A ``Retry-After`` longer than ``backoff_cap_s`` is
obeyed by not retrying at all: retrying sooner than asked would be impolite.
``attempts`` counts the tries of the last request of the chain. A pooled keep-alive
connection that the server had already closed is replaced silently (not a try).

Politeness and robots.txt
-------------------------
At most ``per_host_concurrency`` requests at a time per host name, request starts at
least ``per_host_delay_s`` apart (raised to robots.txt's Crawl-delay, up to
``max_crawl_delay_s``), and at most ``concurrency`` requests in flight overall. robots.txt
is fetched once per (scheme, host, port) through the same safe path (same address checks,
redirects, deadline, retries), read up to ``robots_max_bytes`` (RFC 9309 asks for at least
500 KiB), parsed with ``urllib.robotparser`` and cached for ``robots_ttl_s``. Per RFC 9309:
a 4xx (except 429) or more than ``max_redirects`` redirects means no rules (allow all);
429, 5xx and any failure to reach it (DNS, connection, deadline, refused address) mean
disallow all. Pages of a host wait for its one robots fetch; concurrent pages never fetch
it twice. ``respect_robots=False`` turns the whole thing off.

Content types
-------------
Decided by the Content-Type header, before the body is read: a type outside
``html_types`` is ``non_html`` and its body is never downloaded. A response with no
Content-Type is ``non_html`` too: sniffing would be a guess, and ``corpus.warc.read_archive``
skips responses without an HTML type, so a sniffed page could not be read back.

Output: WARC and the fetch log (``fetch_links``)
------------------------------------------------
Each ``ok`` page becomes three records, each its own gzip member, written with warcio's
``WARCWriter``: ``request`` (the bytes we sent), ``response`` (status line, headers and the
body as it came over the wire, transfer- and content-encoding included, so
``read_archive`` decodes it as it decodes Common Crawl) and ``metadata`` (JSON: the
requested URL, redirect chain, attempts). ``WARC-Target-URI`` is the final URL;
``WARC-Source-URI`` (on all three) is the URL as requested, the key back to the Reddit
link; ``WARC-Date`` is the fetch time; ``WARC-IP-Address`` the address connected to.
Non-ok results are only logged, never archived. Members are compressed at level 6
(warcio's own wrapper uses 9: about twice the time for 1% smaller files on HTML), in
a small thread pool (zlib and hashlib release the GIL), and appended in order.

The fetch log is JSON lines, one per link (``FetchResult.log_entry``): url, final_url,
outcome, status, attempts, fetched_at, content_type, redirects, detail, ip, and for ok
pages ``warc`` (file name in the folder) and ``offset`` (the response record's gzip
member, the same offset ``read_archive`` reports as ``HtmlPage.offset``).

Both are written by checkpoints: every ``checkpoint_pages`` results, every
``checkpoint_s`` seconds, or when the WARC file reaches ``warc_max_bytes``, the WARC
file is closed, fsynced and renamed into place, and only then is the log segment for
those results written (under a temporary name, renamed). A URL is therefore never in a
log unless its WARC records are in a finished file; an interrupted run loses at most
one checkpoint of work, and a rerun (``resume=True``) skips every URL found in any log
of the folder and fetches the rest. A crash between the WARC rename and the log rename
leaves records that no log points to; they are fetched again (the log is the index).

Sync API in any thread
----------------------
``Fetcher`` runs its own event loop in a daemon thread; ``fetch_many(urls)`` is a
plain generator yielding results in completion order, usable from any thread (Beam
calls DoFns from worker threads) and from several threads at once. Input is read lazily
in the caller's thread, with at most ``window`` pages started and not yet consumed.
``AsyncFetcher`` is the same engine for code that already runs a loop. Pages with many
links per host are served one host slot at a time, so feed links in an order that mixes
hosts (Reddit order does) for full speed.

Command line: ``python -m corpus.fetch LINKS --out DIR [--allow-hosts 127.0.0.1:8080]``
runs ``fetch_links`` over a file of URLs and prints the counts; run it again to resume.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import functools
import io
import ipaddress
import itertools
import json
import logging
import os
import queue
import re
import signal
import socket
import ssl
import threading
import time
import zlib
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator
from urllib.parse import quote, urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

from warcio.warcwriter import WARCWriter

from common.storage import atomic_path, temporary_path
from corpus.records import TIMESTAMP_FORMAT, HtmlPage
from corpus.warc import decode_html

log = logging.getLogger(__name__)

MiB = 1 << 20
KiB = 1 << 10

OK = "ok"
BAD_URL = "bad_url"
REFUSED_SCHEME = "refused_scheme"
REFUSED_ADDRESS = "refused_address"
DNS_ERROR = "dns_error"
ROBOTS_DISALLOWED = "robots_disallowed"
ROBOTS_UNREACHABLE = "robots_unreachable"
TOO_MANY_REDIRECTS = "too_many_redirects"
NON_HTML = "non_html"
TOO_LARGE = "too_large"
DECOMPRESSION_BOMB = "decompression_bomb"
DEADLINE = "deadline"
HTTP_ERROR = "http_error"
CONNECTION_ERROR = "connection_error"
BAD_RESPONSE = "bad_response"
INTERNAL_ERROR = "internal_error"
SKIPPED_RESUME = "skipped_resume"
SKIPPED_DUPLICATE = "skipped_duplicate"  # fetch_links: the same URL string earlier in this run's input

OUTCOMES = (
    OK, BAD_URL, REFUSED_SCHEME, REFUSED_ADDRESS, DNS_ERROR, ROBOTS_DISALLOWED, ROBOTS_UNREACHABLE, TOO_MANY_REDIRECTS,
    NON_HTML, TOO_LARGE, DECOMPRESSION_BOMB, DEADLINE, HTTP_ERROR, CONNECTION_ERROR, BAD_RESPONSE,
    INTERNAL_ERROR, SKIPPED_RESUME,
)

DEFAULT_USER_AGENT = "corpusforge/0.1 (+https://github.com/corpusforge/corpusforge)"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
DEFAULT_PORTS = {"http": 80, "https": 443}
READ_SIZE = 64 * KiB
STREAM_LIMIT = 64 * KiB  # longest header line or chunk-size line we accept
DRAIN_LIMIT = 64 * KiB  # bodies of redirects and errors up to this are read to keep the connection
DNS_CACHE_S = 60.0
MAX_IDLE_CONNECTIONS = 256


@dataclass(frozen=True)
class FetchConfig:
    """Every knob of a fetch; the defaults are the polite, safe ones for a real crawl."""

    user_agent: str = DEFAULT_USER_AGENT
    max_bytes: int = 10 * MiB  # body bytes as transferred (before content decoding)
    max_decoded_bytes: int = 10 * MiB  # body bytes after gzip/deflate decoding
    deadline_s: float = 30.0  # wall clock per page: redirects, retries, backoff, body
    connect_timeout_s: float = 10.0  # DNS lookup, TCP connect and TLS handshake, each
    max_redirects: int = 5
    retries: int = 3  # extra tries for 429/500/502/503/504 and reset connections only
    backoff_base_s: float = 1.0
    backoff_factor: float = 2.0
    backoff_cap_s: float = 30.0
    per_host_concurrency: int = 2
    per_host_delay_s: float = 1.0  # between request starts on one host
    concurrency: int = 64  # requests in flight overall
    respect_robots: bool = True
    robots_max_bytes: int = 512 * KiB  # RFC 9309 2.5: parse at least 500 KiB
    robots_ttl_s: float = 24 * 3600.0  # RFC 9309 2.4: cache for at most 24 hours
    max_crawl_delay_s: float = 10.0  # a robots.txt Crawl-delay is honoured up to this
    allow_hosts: frozenset = frozenset()  # "host:port" that may be private/loopback
    html_types: tuple = ("text/html", "application/xhtml+xml")
    verify_tls: bool = True
    max_header_bytes: int = 64 * KiB

    def __post_init__(self):
        object.__setattr__(self, "allow_hosts", frozenset(_normalize_allow(h) for h in self.allow_hosts))
        object.__setattr__(self, "html_types", tuple(t.lower() for t in self.html_types))
        for name in ("max_bytes", "max_decoded_bytes", "per_host_concurrency", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        for name in ("deadline_s", "connect_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.max_redirects < 0 or self.retries < 0:
            raise ValueError("max_redirects and retries must be >= 0")


def _normalize_allow(entry: str) -> str:
    host, sep, port = entry.strip().lower().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"allow_hosts entries are 'host:port', not {entry!r}")
    return f"{host.strip('[]')}:{int(port)}"


@dataclass
class FetchResult:
    """What happened to one link. ``body`` (content-encoding undone) is set for ``ok`` only."""

    url: str
    final_url: str
    outcome: str
    status: int = 0
    content_type: str = ""
    headers: dict = field(default_factory=dict)  # lower-cased names; repeats joined by ", "
    body: bytes = field(default=b"", repr=False)
    fetched_at: str = ""  # when the last request was sent, e.g. 2024-01-31T12:00:00Z
    attempts: int = 0
    redirects: list = field(default_factory=list)  # [{"status", "url", "location"}] per hop
    detail: str = ""
    ip: str = ""  # the address the final response came from
    # The exchange as it went over the wire, for the WARC (ok pages only).
    request: bytes = field(default=b"", repr=False)
    raw_head: bytes = field(default=b"", repr=False)
    raw_body: bytes = field(default=b"", repr=False)

    def log_entry(self) -> dict:
        return {
            "url": self.url,
            "final_url": self.final_url,
            "outcome": self.outcome,
            "status": self.status,
            "attempts": self.attempts,
            "fetched_at": self.fetched_at,
            "content_type": self.content_type,
            "redirects": self.redirects,
            "detail": self.detail,
            "ip": self.ip,
            "warc": None,
            "offset": None,
        }

    def to_html_page(self, source: str = "", offset: int = -1) -> HtmlPage:
        """The page as ``read_archive`` would give it back from the WARC (charset decoded)."""
        if self.outcome != OK:
            raise ValueError(f"no page for outcome {self.outcome}")
        html, charset = decode_html(self.body, self.content_type)
        return HtmlPage(
            url=self.final_url,
            timestamp=self.fetched_at,
            status=self.status,
            headers=dict(self.headers),
            html=html,
            charset=charset,
            source=source,
            offset=offset,
        )


# -- addresses ----------------------------------------------------------------------------

_V4_FORBIDDEN = [
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "this-network"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local (cloud metadata)"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "6to4 relay anycast"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "broadcast"),
    )
]
_V6_FORBIDDEN = [
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible (deprecated)"),
        ("64:ff9b:1::/48", "local-use NAT64"),
        ("100::/64", "discard-only"),
        ("2001::/23", "IETF protocol assignments"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing"),
        ("fc00::/7", "unique local (private)"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated)"),
        ("ff00::/8", "multicast"),
    )
]
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def forbidden_reason(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why we never connect to this address (e.g. ``"loopback"``); ``""`` for a public one."""
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = None
        if ip.ipv4_mapped is not None:
            embedded, how = ip.ipv4_mapped, "IPv4-mapped"
        elif ip in _NAT64:
            embedded, how = ipaddress.IPv4Address(ip.packed[-4:]), "NAT64"
        elif ip.sixtofour is not None:
            embedded, how = ip.sixtofour, "6to4"
        if embedded is not None:
            inner = forbidden_reason(embedded)
            return f"{how} {inner}" if inner else ""
        table = _V6_FORBIDDEN
    else:
        table = _V4_FORBIDDEN
    for network, why in table:
        if ip in network:
            return why
    if not ip.is_global:  # whatever the tables above miss, Python's registry data catches
        return "not globally routable"
    return ""


# -- URLs -----------------------------------------------------------------------------------

_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"


@dataclass(frozen=True)
class _Target:
    url: str
    scheme: str
    host: str  # lower-case, IDNA-encoded, no brackets
    port: int
    target: str  # request-target: path and query, percent-encoded
    host_header: str
    ip_literal: bool

    @property
    def key(self) -> tuple:
        return (self.scheme, self.host, self.port)


class _Fail(Exception):
    """Ends a page with an outcome."""

    def __init__(self, outcome: str, detail: str = "", status: int = 0):
        super().__init__(outcome, detail)
        self.outcome = outcome
        self.detail = detail
        self.status = status


def _parse_target(url: str) -> _Target:
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise _Fail(BAD_URL, str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise _Fail(REFUSED_SCHEME, f"scheme {scheme or '(none)'!r}")
    try:
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise _Fail(BAD_URL, str(exc)) from None
    if not host:
        raise _Fail(BAD_URL, "no host")
    ip_literal = True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        ip_literal = False
        try:
            host = host.encode("idna").decode("ascii") if not host.isascii() else host
        except UnicodeError as exc:
            raise _Fail(BAD_URL, f"host name: {exc}") from None
        if not host or any(c in host for c in "\x00 /\\%@"):
            raise _Fail(BAD_URL, "bad host name")
    target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    return _Target(url, scheme, host, port, target, host_header, ip_literal)


def _now_iso() -> str:
    return time.strftime(TIMESTAMP_FORMAT, time.gmtime())


# -- the deadline ---------------------------------------------------------------------------


class _Deadline:
    """Cancels one task at a wall-clock time; armed when the page's first request may start."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.when: float | None = None
        self.fired = False
        self._task = asyncio.current_task()
        self._handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self.when is None:
            loop = asyncio.get_running_loop()
            self.when = loop.time() + self.seconds
            self._handle = loop.call_at(self.when, self._fire)

    def _fire(self) -> None:
        self.fired = True
        self._task.cancel()

    def left(self) -> float:
        if self.when is None:
            return self.seconds
        return self.when - asyncio.get_running_loop().time()

    def check(self) -> None:
        """For the rare await that swallows a cancellation (asyncio.wait_for before 3.12)."""
        if self.when is not None and (self.fired or asyncio.get_running_loop().time() >= self.when):
            raise _Fail(DEADLINE, f"deadline of {self.seconds:g}s passed")

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


@contextlib.asynccontextmanager
async def _time_limit(seconds: float):
    if hasattr(asyncio, "timeout"):  # 3.11+: never swallows an outer cancellation
        async with asyncio.timeout(seconds):
            yield
    else:  # pragma: no cover - Python 3.10
        task = asyncio.current_task()
        handle = asyncio.get_running_loop().call_later(seconds, task.cancel)
        try:
            yield
        except asyncio.CancelledError:
            if handle.when() <= asyncio.get_running_loop().time():
                raise TimeoutError() from None
            raise
        finally:
            handle.cancel()


async def _backoff_sleep(seconds: float) -> None:
    """Sleep between tries (a module function so tests can see what was asked for)."""
    await asyncio.sleep(seconds)


# -- politeness -----------------------------------------------------------------------------


class _HostGate:
    """At most ``concurrency`` requests at a time on one host, starts ``delay`` apart."""

    def __init__(self, concurrency: int, delay: float):
        self.slots = asyncio.Semaphore(concurrency)
        self.delay = delay
        self.next_start = 0.0
        self.users = 0

    async def __aenter__(self):
        self.users += 1
        try:
            await self.slots.acquire()
        except BaseException:
            self.users -= 1
            raise
        try:
            if self.delay > 0:
                now = asyncio.get_running_loop().time()
                start = max(now, self.next_start)
                self.next_start = start + self.delay
                if start > now:
                    await asyncio.sleep(start - now)
        except BaseException:
            self._leave()
            raise
        return self

    async def __aexit__(self, *exc_info):
        self._leave()

    def _leave(self) -> None:
        self.slots.release()
        self.users -= 1


# -- HTTP/1.1 over asyncio streams -----------------------------------------------------------


class _Conn:
    __slots__ = ("reader", "writer", "ip")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ip: str):
        self.reader = reader
        self.writer = writer
        self.ip = ip

    def usable(self) -> bool:
        # Bytes waiting on an idle connection belong to no request: such a connection is spoiled.
        leftover = getattr(self.reader, "_buffer", b"")
        return not self.reader.at_eof() and not self.writer.is_closing() and not leftover

    def close(self) -> None:
        # abort, not close: a TLS close waits on the peer's close_notify (up to 30 s), which a
        # crawler has no use for; the socket is closed at the loop's next turn either way.
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class _Pool:
    """Idle keep-alive connections per (scheme, host, port), oldest evicted first."""

    def __init__(self, per_key: int, total: int = MAX_IDLE_CONNECTIONS):
        self.per_key = per_key
        self.total = total
        self.idle: OrderedDict[tuple, list[_Conn]] = OrderedDict()
        self.count = 0

    def get(self, key: tuple) -> _Conn | None:
        conns = self.idle.get(key)
        while conns:
            conn = conns.pop()
            self.count -= 1
            if not conns:
                del self.idle[key]
            if conn.usable():
                return conn
            conn.close()
        return None

    def put(self, key: tuple, conn: _Conn) -> None:
        conns = self.idle.setdefault(key, [])
        self.idle.move_to_end(key)
        if len(conns) >= self.per_key:
            conn.close()
            return
        conns.append(conn)
        self.count += 1
        while self.count > self.total:
            old_key, old = next(iter(self.idle.items()))
            old.pop(0).close()
            self.count -= 1
            if not old:
                del self.idle[old_key]

    def close_all(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()
        self.count = 0


class _Reset(Exception):
    """The connection was reset or closed before the response was complete (retryable)."""


class _NoReply(_Reset):
    """The connection closed before a single byte of the response came back."""


class _Head:
    __slots__ = ("raw", "version", "status", "reason", "headers")

    def __init__(self, raw: bytes, version: str, status: int, reason: str, headers: dict):
        self.raw = raw
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers


async def _read_head(reader: asyncio.StreamReader, limit: int) -> _Head:
    try:
        line = await reader.readline()
    except ValueError:
        raise _Fail(BAD_RESPONSE, "status line too long") from None
    if not line:
        raise _NoReply("connection closed before the response")
    if not line.endswith(b"\n"):
        raise _Reset("connection closed inside the status line")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise _Fail(BAD_RESPONSE, f"not an HTTP/1.x status line: {line[:60]!r}")
    raw = [line]
    total = len(line)
    headers: dict[str, str] = {}
    last = ""
    while True:
        try:
            line = await reader.readline()
        except ValueError:
            raise _Fail(BAD_RESPONSE, "header line too long") from None
        if not line.endswith(b"\n"):
            raise _Reset("connection closed inside the headers")
        total += len(line)
        if total > limit:
            raise _Fail(BAD_RESPONSE, f"headers over {limit} bytes")
        raw.append(line)
        if line in (b"\r\n", b"\n"):
            break
        if line[:1] in (b" ", b"\t") and last:  # obsolete line folding
            headers[last] += " " + line.strip().decode("latin-1")
            continue
        name, sep, value = line.partition(b":")
        if not sep or not name.strip():
            continue  # a broken line is skipped, as browsers do
        last = name.strip().decode("latin-1").lower()
        value_text = value.strip().decode("latin-1")
        headers[last] = f"{headers[last]}, {value_text}" if last in headers else value_text
    reason = parts[2].strip().decode("latin-1") if len(parts) > 2 else ""
    return _Head(b"".join(raw), parts[0].decode("latin-1"), int(parts[1]), reason, headers)


_LENGTH, _CHUNKED, _CLOSE, _NONE = "length", "chunked", "close", "none"


def _framing(head: _Head) -> tuple[str, int]:
    if head.status < 200 or head.status in (204, 304):
        return _NONE, 0
    te = head.headers.get("transfer-encoding")
    if te is not None:
        codings = [c.strip().lower() for c in te.split(",") if c.strip()]
        if codings != ["chunked"]:
            raise _Fail(BAD_RESPONSE, f"unsupported Transfer-Encoding {te[:40]!r}", head.status)
        return _CHUNKED, 0
    cl = head.headers.get("content-length")
    if cl is not None:
        values = {v.strip() for v in cl.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise _Fail(BAD_RESPONSE, f"bad Content-Length {cl[:40]!r}", head.status)
        return _LENGTH, int(next(iter(values)))
    return _CLOSE, 0


def _keep_alive(head: _Head) -> bool:
    tokens = {t.strip().lower() for t in head.headers.get("connection", "").split(",")}
    if head.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


class _Limit(Exception):
    def __init__(self, outcome: str, detail: str):
        super().__init__(outcome, detail)
        self.outcome = outcome
        self.detail = detail


class _Decoder:
    """Undo gzip/deflate as the bytes arrive, never producing more than ``cap`` bytes."""

    def __init__(self, encoding: str, cap: int, truncate: bool):
        self.encoding = encoding
        self.cap = cap
        self.truncate = truncate  # robots.txt: keep the first ``cap`` bytes instead of failing
        self.parts: list[bytes] = []
        self.total = 0
        self.full = False
        self._z = None
        self._pending = b""
        if encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(31)
        elif encoding != "deflate":
            raise _Fail(BAD_RESPONSE, f"unsupported Content-Encoding {encoding[:40]!r}")

    def feed(self, data: bytes) -> None:
        if self.full or not data:
            return
        if self._z is None:  # deflate: zlib-wrapped (RFC) or raw (common); look at 2 bytes
            self._pending += data
            if len(self._pending) < 2:
                return
            b0, b1 = self._pending[0], self._pending[1]
            wrapped = (b0 & 0x0F) == 8 and ((b0 << 8) | b1) % 31 == 0
            self._z = zlib.decompressobj(15 if wrapped else -15)
            data, self._pending = self._pending, b""
        while data:
            room = self.cap - self.total
            try:
                out = self._z.decompress(data, room + 1)
            except zlib.error as exc:
                raise _Fail(BAD_RESPONSE, f"bad {self.encoding} data: {exc}") from None
            if len(out) > room or self._z.unconsumed_tail:
                if self.truncate:
                    self.parts.append(out[:room])
                    self.total += min(len(out), room)
                    self.full = True
                    return
                raise _Limit(DECOMPRESSION_BOMB, f"{self.encoding} body decodes to more than {self.cap} bytes")
            self.parts.append(out)
            self.total += len(out)
            data = b""
            if self._z.eof and self._z.unused_data:
                data = self._z.unused_data
                if self.encoding == "deflate" or not data.startswith(b"\x1f\x8b"):
                    break  # bytes after the end of the stream are ignored, as browsers do
                self._z = zlib.decompressobj(31)  # a second gzip member follows

    def result(self) -> bytes:
        if self._z is None and self._pending:  # a deflate body of one byte
            self._z = zlib.decompressobj(-15)
            data, self._pending = self._pending, b""
            self.feed(data)
        return b"".join(self.parts)


class _Sink:
    """Collects a body as it arrives: wire bytes for the WARC, decoded bytes for the page."""

    def __init__(self, cap: int, decoder: _Decoder | None, deadline: _Deadline | None, truncate: bool):
        self.cap = cap
        self.decoder = decoder
        self.deadline = deadline
        self.truncate = truncate
        self.wire: list[bytes] = []
        self.payload = 0
        self.full = False

    def feed(self, wire: bytes, payload: bytes) -> None:
        if self.deadline is not None:
            self.deadline.check()
        if payload:
            if self.payload + len(payload) > self.cap:
                if self.truncate:
                    keep = self.cap - self.payload
                    payload = payload[:keep]
                    self.full = True
                else:
                    raise _Limit(TOO_LARGE, f"body over {self.cap} bytes")
            self.payload += len(payload)
            if self.decoder is not None:
                self.decoder.feed(payload)
                self.full = self.full or self.decoder.full
        self.wire.append(wire)


class _Full(Exception):
    """Raised to stop reading once a truncating sink has all it wants."""


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError:  # over STREAM_LIMIT without a newline
        raise _Fail(BAD_RESPONSE, f"line over {STREAM_LIMIT} bytes in the body framing") from None


async def _read_body(reader: asyncio.StreamReader, framing: str, length: int, sink: _Sink) -> None:
    def give(wire: bytes, payload: bytes) -> None:
        sink.feed(wire, payload)
        if sink.full:
            raise _Full()

    if framing == _LENGTH:
        left = length
        while left > 0:
            data = await reader.read(min(left, READ_SIZE))
            if not data:
                raise _Reset(f"connection closed with {left} of {length} body bytes missing")
            left -= len(data)
            give(data, data)
    elif framing == _CHUNKED:
        while True:
            line = await _readline(reader)
            if not line.endswith(b"\n"):
                raise _Reset("connection closed inside a chunk header")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _Fail(BAD_RESPONSE, f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise _Fail(BAD_RESPONSE, "negative chunk size")
            give(line, b"")
            if size == 0:
                while True:  # trailer fields, then the blank line
                    trailer = await _readline(reader)
                    if not trailer.endswith(b"\n"):
                        raise _Reset("connection closed inside the chunked trailer")
                    give(trailer, b"")
                    if trailer in (b"\r\n", b"\n"):
                        return
            left = size
            while left > 0:
                data = await reader.read(min(left, READ_SIZE))
                if not data:
                    raise _Reset("connection closed inside a chunk")
                left -= len(data)
                give(data, data)
            end = await _readline(reader)
            if end not in (b"\r\n", b"\n"):
                if not end.endswith(b"\n"):
                    raise _Reset("connection closed after a chunk")
                raise _Fail(BAD_RESPONSE, "chunk not followed by CRLF")
            give(end, b"")
    elif framing == _CLOSE:
        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                return
            give(data, data)


@dataclass
class _Exchange:
    """One request and its response, as far as it was read."""

    head: _Head
    request: bytes
    ip: str
    outcome: str = ""  # "" for a complete response; else why the body was not kept
    detail: str = ""
    raw_body: bytes = b""
    body: bytes = b""


_PAGE, _ROBOTS = "page", "robots"


# -- robots.txt ----------------------------------------------------------------------------


@dataclass
class _Robots:
    parser: RobotFileParser | None
    allow_all: bool
    detail: str
    crawl_delay: float = 0.0

    def allows(self, url: str, user_agent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(user_agent, url)


# -- the engine ------------------------------------------------------------------------------


class _PageState:
    __slots__ = ("url", "current", "redirects", "attempts", "fetched_at", "head", "ip")

    def __init__(self, url: str):
        self.url = url
        self.current = url
        self.redirects: list[dict] = []
        self.attempts = 0
        self.fetched_at = ""
        self.head: _Head | None = None
        self.ip = ""

    def result(self, outcome: str, detail: str = "", status: int = 0) -> FetchResult:
        head = self.head
        return FetchResult(
            url=self.url,
            final_url=self.current,
            outcome=outcome,
            status=status or (head.status if head else 0),
            content_type=head.headers.get("content-type", "") if head else "",
            headers=dict(head.headers) if head else {},
            fetched_at=self.fetched_at or _now_iso(),
            attempts=self.attempts,
            redirects=self.redirects,
            detail=detail,
            ip=self.ip,
        )


class AsyncFetcher:
    """The asyncio engine: ``await fetch(url)`` in a running loop. ``Fetcher`` wraps it."""

    def __init__(self, config: FetchConfig | None = None):
        self.config = config or FetchConfig()
        cfg = self.config
        self._pool = _Pool(cfg.per_host_concurrency)
        self._gates: dict[str, _HostGate] = {}
        self._global = asyncio.Semaphore(cfg.concurrency)
        self._robots: dict[tuple, tuple[float, asyncio.Future]] = {}
        self._robots_tasks: set[asyncio.Task] = set()
        self._dns: dict[tuple, tuple[float, list[str]]] = {}
        self._dns_pool = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="corpusforge-dns")
        self._ssl: ssl.SSLContext | None = None
        self._accept = {
            _PAGE: "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
            _ROBOTS: "text/plain,*/*;q=0.5",
        }

    # -- public ------------------------------------------------------------------------

    async def fetch(self, url: str) -> FetchResult:
        return await self._fetch(url, _PAGE)

    async def aclose(self) -> None:
        for task in list(self._robots_tasks):
            task.cancel()
        self._pool.close_all()
        self._dns_pool.shutdown(wait=False, cancel_futures=True)

    # -- one page ----------------------------------------------------------------------

    async def _fetch(self, url: str, purpose: str) -> FetchResult:
        state = _PageState(url)
        deadline = _Deadline(self.config.deadline_s)
        try:
            try:
                return await self._chain(state, deadline, purpose)
            except _Fail as fail:
                return state.result(fail.outcome, fail.detail, fail.status)
            except asyncio.CancelledError:
                if not deadline.fired:
                    raise
                task = asyncio.current_task()
                if hasattr(task, "uncancel"):
                    task.uncancel()
                return state.result(DEADLINE, f"deadline of {self.config.deadline_s:g}s passed")
            except Exception as exc:  # a bug here must not end the run
                log.exception("fetching %s", url)
                return state.result(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:300])
        finally:
            deadline.disarm()

    async def _chain(self, state: _PageState, deadline: _Deadline, purpose: str) -> FetchResult:
        cfg = self.config
        while True:
            target = _parse_target(state.current)
            addresses = await self._resolve(target)
            if purpose == _PAGE and cfg.respect_robots:
                robots = await self._robots_for(target)
                if not robots.allows(target.url, cfg.user_agent):
                    raise _Fail(ROBOTS_DISALLOWED if robots.parser is not None else ROBOTS_UNREACHABLE, robots.detail)
                if robots.crawl_delay:
                    gate = self._gate(target.host)
                    gate.delay = max(gate.delay, robots.crawl_delay)
            exchange = await self._with_retries(target, addresses, state, deadline, purpose)
            head = exchange.head
            state.head = head
            state.ip = exchange.ip
            location = head.headers.get("location", "").strip()
            if head.status in REDIRECT_STATUSES and location:
                if len(state.redirects) >= cfg.max_redirects:
                    raise _Fail(TOO_MANY_REDIRECTS, f"more than {cfg.max_redirects} redirects")
                try:
                    location = location.encode("latin-1").decode("utf-8")
                except UnicodeError:
                    pass
                following = urldefrag(urljoin(state.current, location))[0]
                state.redirects.append({"status": head.status, "url": state.current, "location": following})
                state.current = following
                continue
            if exchange.outcome:
                raise _Fail(exchange.outcome, exchange.detail)
            if not 200 <= head.status < 300:
                detail = f"HTTP {head.status} {head.reason}".strip()
                raise _Fail(HTTP_ERROR, f"{detail} ({exchange.detail})" if exchange.detail else detail)
            result = state.result(OK)
            result.body = exchange.body
            result.request = exchange.request
            result.raw_head = head.raw
            result.raw_body = exchange.raw_body
            return result

    async def _with_retries(self, target, addresses, state, deadline, purpose) -> _Exchange:
        cfg = self.config
        attempt = 0
        while True:
            attempt += 1
            state.attempts = attempt
            state.fetched_at = _now_iso()
            retry_after = None
            try:
                exchange = await self._request(target, addresses, deadline, purpose)
            except _Reset as exc:
                failure, exchange = f"{exc}", None
            else:
                if exchange.head.status not in RETRY_STATUSES:
                    return exchange
                failure = f"HTTP {exchange.head.status}"
                retry_after = _retry_after(exchange.head.headers.get("retry-after"))
            if attempt > cfg.retries:
                return self._give_up(exchange, failure, f"after {attempt} tries")
            if retry_after is not None:
                if retry_after > cfg.backoff_cap_s:
                    return self._give_up(exchange, failure, f"Retry-After {retry_after:g}s is over the {cfg.backoff_cap_s:g}s cap")
                delay = retry_after
            else:
                delay = min(cfg.backoff_cap_s, cfg.backoff_base_s * cfg.backoff_factor ** (attempt - 1))
            if delay >= deadline.left():
                return self._give_up(exchange, failure, "no time left before the deadline for another try")
            await _backoff_sleep(delay)

    @staticmethod
    def _give_up(exchange: _Exchange | None, failure: str, why: str) -> _Exchange:
        if exchange is None:
            raise _Fail(CONNECTION_ERROR, f"{failure} ({why})")
        exchange.detail = why
        return exchange

    # -- one request ---------------------------------------------------------------------

    def _gate(self, host: str) -> _HostGate:
        gate = self._gates.get(host)
        if gate is None:
            if len(self._gates) > 20000:
                now = asyncio.get_running_loop().time()
                for name in [h for h, g in self._gates.items() if g.users == 0 and g.next_start <= now]:
                    del self._gates[name]
            gate = self._gates[host] = _HostGate(self.config.per_host_concurrency, self.config.per_host_delay_s)
        return gate

    def _request_bytes(self, target: _Target, purpose: str) -> bytes:
        return (
            f"GET {target.target} HTTP/1.1\r\n"
            f"Host: {target.host_header}\r\n"
            f"User-Agent: {self.config.user_agent}\r\n"
            f"Accept: {self._accept[purpose]}\r\n"
            "Accept-Encoding: gzip, deflate\r\n"
            "Connection: keep-alive\r\n\r\n"
        ).encode("latin-1")

    async def _request(self, target: _Target, addresses: list[str], deadline: _Deadline, purpose: str) -> _Exchange:
        request = self._request_bytes(target, purpose)
        async with self._gate(target.host):
            async with self._global:
                deadline.arm()
                conn = self._pool.get(target.key)
                reused = conn is not None
                if conn is None:
                    conn = await self._connect(target, addresses)
                try:
                    deadline.check()
                    try:
                        head = await self._send(conn, request)
                    except (_NoReply, ConnectionError) as exc:
                        if not reused:
                            raise
                        conn.close()  # the server dropped the idle connection; a fresh one is not a retry
                        log.debug("keep-alive connection to %s was closed (%s); reconnecting", target.host, exc)
                        conn = await self._connect(target, addresses)
                        head = await self._send(conn, request)
                    while 100 <= head.status < 200:
                        if head.status == 101:
                            raise _Fail(BAD_RESPONSE, "unexpected 101 Switching Protocols")
                        head = await _read_head(conn.reader, self.config.max_header_bytes)
                    exchange = _Exchange(head, request, conn.ip)
                    reusable = await self._consume(conn, exchange, deadline, purpose)
                except ConnectionError as exc:  # reset, aborted, broken pipe
                    conn.close()
                    raise _Reset(f"{type(exc).__name__}: {exc}") from None
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                    conn.close()
                    raise _Reset(f"{type(exc).__name__}") from None
                except OSError as exc:  # TLS errors after the handshake, and the like
                    conn.close()
                    raise _Fail(CONNECTION_ERROR, f"{type(exc).__name__}: {exc}"[:300]) from None
                except BaseException:
                    conn.close()
                    raise
                if reusable:
                    self._pool.put(target.key, conn)
                else:
                    conn.close()
                return exchange

    async def _send(self, conn: _Conn, request: bytes) -> _Head:
        conn.writer.write(request)
        await conn.writer.drain()
        return await _read_head(conn.reader, self.config.max_header_bytes)

    async def _connect(self, target: _Target, addresses: list[str]) -> _Conn:
        cfg = self.config
        tls = None
        if target.scheme == "https":
            tls = self._ssl_context()
        failures = []
        for ip in addresses:
            try:
                async with _time_limit(cfg.connect_timeout_s):
                    reader, writer = await asyncio.open_connection(
                        ip,
                        target.port,
                        ssl=tls,
                        server_hostname=target.host if tls else None,
                        limit=STREAM_LIMIT,
                    )
            except TimeoutError:
                failures.append(f"{ip}: connect timed out after {cfg.connect_timeout_s:g}s")
            except OSError as exc:
                failures.append(f"{ip}: {type(exc).__name__}: {exc}")
            else:
                return _Conn(reader, writer, ip)
        raise _Fail(CONNECTION_ERROR, "; ".join(failures)[:300])

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context()
            if not self.config.verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["http/1.1"])
            self._ssl = context
        return self._ssl

    async def _consume(self, conn: _Conn, exchange: _Exchange, deadline: _Deadline, purpose: str) -> bool:
        """Read (or refuse) the body; True when the connection can be reused."""
        cfg = self.config
        head = exchange.head
        framing, length = _framing(head)
        keep = _keep_alive(head) and framing != _CLOSE
        if framing == _NONE:
            return keep
        if not 200 <= head.status < 300:  # redirects and errors: read small bodies to keep the connection
            if keep and framing == _LENGTH and length <= DRAIN_LIMIT:
                await _read_body(conn.reader, framing, length, _Sink(DRAIN_LIMIT, None, deadline, False))
                return True
            return False
        truncate = purpose == _ROBOTS
        if purpose == _PAGE:
            mime = head.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if mime not in cfg.html_types:
                exchange.outcome = NON_HTML
                exchange.detail = f"Content-Type {mime!r}" if mime else "no Content-Type"
                return False
        cap = cfg.robots_max_bytes if truncate else cfg.max_bytes
        decoded_cap = cfg.robots_max_bytes if truncate else cfg.max_decoded_bytes
        if framing == _LENGTH and length > cap and not truncate:
            exchange.outcome = TOO_LARGE
            exchange.detail = f"Content-Length {length} is over {cap} bytes"
            return False
        encoding = head.headers.get("content-encoding", "").strip().lower()
        decoder = None if encoding in ("", "identity") else _Decoder(encoding, decoded_cap, truncate)
        sink = _Sink(cap, decoder, deadline, truncate)
        complete = True
        try:
            await _read_body(conn.reader, framing, length, sink)
        except _Full:
            complete = False
        except _Limit as limit:
            exchange.outcome = limit.outcome
            exchange.detail = limit.detail
            return False
        exchange.raw_body = b"".join(sink.wire)
        exchange.body = decoder.result() if decoder is not None else exchange.raw_body
        return keep and complete

    # -- DNS and the address check -------------------------------------------------------

    async def _resolve(self, target: _Target) -> list[str]:
        """The checked addresses to connect to; refuses before any connection is made."""
        cfg = self.config
        if target.ip_literal:
            addresses = [target.host]
        else:
            key = (target.host, target.port)
            cached = self._dns.get(key)
            loop = asyncio.get_running_loop()
            if cached is not None and cached[0] > loop.time():
                addresses = cached[1]
            else:
                try:
                    async with _time_limit(cfg.connect_timeout_s):
                        infos = await loop.run_in_executor(
                            self._dns_pool,
                            functools.partial(
                                socket.getaddrinfo, target.host, target.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
                            ),
                        )
                except TimeoutError:
                    raise _Fail(DNS_ERROR, f"no answer for {target.host} in {cfg.connect_timeout_s:g}s") from None
                except (socket.gaierror, UnicodeError, OSError) as exc:
                    raise _Fail(DNS_ERROR, f"{target.host}: {exc}"[:300]) from None
                addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
                addresses.sort(key=lambda a: ":" in a)  # IPv4 first: IPv6 is more often unreachable
                if not addresses:
                    raise _Fail(DNS_ERROR, f"{target.host}: no addresses")
                if len(self._dns) > 50000:
                    self._dns.clear()
                self._dns[key] = (loop.time() + DNS_CACHE_S, addresses)
        if f"{target.host}:{target.port}" in cfg.allow_hosts:
            return addresses
        for address in addresses:
            if f"{address.split('%')[0].lower()}:{target.port}" in cfg.allow_hosts:
                continue
            why = forbidden_reason(address.split("%")[0])
            if why:
                shown = target.host if target.ip_literal else f"{target.host} -> {address}"
                raise _Fail(REFUSED_ADDRESS, f"{shown}: {why}")
        return addresses

    # -- robots.txt ------------------------------------------------------------------------

    async def _robots_for(self, target: _Target) -> _Robots:
        loop = asyncio.get_running_loop()
        key = target.key
        entry = self._robots.get(key)
        if entry is not None and entry[0] > loop.time():
            future = entry[1]
        else:
            if len(self._robots) > 100000:
                for old in [k for k, (_, f) in self._robots.items() if f.done()][:50000]:
                    del self._robots[old]
            task = loop.create_task(self._fetch_robots(target))
            self._robots_tasks.add(task)
            task.add_done_callback(self._robots_tasks.discard)
            future = task
            self._robots[key] = (loop.time() + self.config.robots_ttl_s, future)
        return await asyncio.shield(future)

    async def _fetch_robots(self, target: _Target) -> _Robots:
        cfg = self.config
        url = f"{target.scheme}://{target.host_header}/robots.txt"
        result = await self._fetch(url, _ROBOTS)
        if result.outcome == OK:
            parser = RobotFileParser(url)
            parser.parse(result.body.decode("utf-8", "replace").splitlines())
            delay = parser.crawl_delay(cfg.user_agent)
            crawl_delay = min(float(delay), cfg.max_crawl_delay_s) if delay else 0.0
            return _Robots(parser, True, "disallowed by robots.txt", crawl_delay)
        status = result.status
        if result.outcome == TOO_MANY_REDIRECTS or (result.outcome == HTTP_ERROR and 400 <= status < 500 and status != 429):
            return _Robots(None, True, "")  # RFC 9309 2.3.1.3: unavailable, so no rules
        why = f"HTTP {status}" if result.outcome == HTTP_ERROR else f"{result.outcome}: {result.detail}"
        return _Robots(None, False, f"robots.txt unreachable ({why[:200]})")  # RFC 9309 2.3.1.4


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


# -- the sync API ------------------------------------------------------------------------------


class _Run:
    """The pages of one ``fetch_many`` call; touched only in the loop thread."""

    def __init__(self):
        self.tasks: set[asyncio.Task] = set()
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        for task in list(self.tasks):
            task.cancel()


async def _shutdown(engine: AsyncFetcher) -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await engine.aclose()
    for _ in range(3):  # let the aborted transports close their sockets
        await asyncio.sleep(0)


class Fetcher:
    """Sync front of ``AsyncFetcher``: an event loop in a daemon thread, generators in yours.

    Use as a context manager, or call ``close()``. Picklable (only the config travels):
    build it in ``DoFn.setup`` and close it in ``DoFn.teardown``.
    """

    def __init__(self, config: FetchConfig | None = None, *, window: int | None = None):
        self.config = config or FetchConfig()
        self.window = window or max(256, 16 * self.config.concurrency)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._engine: AsyncFetcher | None = None

    def __getstate__(self) -> dict:
        return {"config": self.config, "window": self.window}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], window=state["window"])

    def __enter__(self) -> "Fetcher":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._engine = AsyncFetcher(self.config)
                self._thread = threading.Thread(target=run, name="corpusforge-fetch", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        if self._thread is not None and threading.current_thread() is self._thread:
            self._loop.call_soon(self._loop.stop)  # closed from inside its own loop (e.g. by the GC)
            return
        with self._lock:
            loop, thread, engine = self._loop, self._thread, self._engine
            self._loop = self._thread = self._engine = None
        if loop is None:
            return
        if not loop.is_closed() and thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_shutdown(engine), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()

    def fetch(self, url: str) -> FetchResult:
        return next(iter(self.fetch_many([url])))

    def fetch_many(self, urls: Iterable[str]) -> Iterator[FetchResult]:
        """Fetch every URL; results come in completion order. Closing the generator stops the rest."""
        loop = self._start()
        engine = self._engine
        results: queue.SimpleQueue = queue.SimpleQueue()
        run = _Run()
        source = iter(urls)
        exhausted = False
        pending = 0
        refill_at = self.window - max(1, self.window // 16)  # start pages in batches, not one by one
        thread = self._thread

        def deliver(url: str, task: asyncio.Task) -> None:
            run.tasks.discard(task)
            if task.cancelled():
                if not run.cancelled:
                    results.put(FetchResult(url, url, INTERNAL_ERROR, fetched_at=_now_iso(), detail="cancelled"))
                return
            exc = task.exception()
            if exc is not None:
                results.put(FetchResult(url, url, INTERNAL_ERROR, fetched_at=_now_iso(), detail=f"{type(exc).__name__}: {exc}"))
            else:
                results.put(task.result())

        def start(batch: list[str]) -> None:
            if run.cancelled:
                return
            for url in batch:
                task = loop.create_task(engine.fetch(url))
                run.tasks.add(task)
                task.add_done_callback(functools.partial(deliver, url))

        try:
            while True:
                if not exhausted and pending <= refill_at:
                    batch = list(itertools.islice(source, self.window - pending))
                    if len(batch) < self.window - pending:
                        exhausted = True
                    if batch:
                        pending += len(batch)
                        loop.call_soon_threadsafe(start, batch)
                if pending == 0:
                    return
                while True:
                    try:
                        item = results.get(timeout=1.0)
                        break
                    except queue.Empty:
                        if not thread.is_alive():
                            raise RuntimeError("the fetch event loop stopped") from None
                pending -= 1
                yield item
        finally:
            if pending and thread.is_alive():
                with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                    loop.call_soon_threadsafe(run.cancel)


# -- WARC and the fetch log (fetch_links) -------------------------------------------------------

LOG_PREFIX = "fetch-log-"
LOG_SUFFIX = ".jsonl"
_run_counter = itertools.count()


def _open_for_writing(path: str):
    return open(path, "wb")


_local = threading.local()


def _record_member(record) -> bytes:
    """One WARC record serialized by warcio, gzipped as its own member."""
    buffer, writer = _local.buffer, _local.writer
    buffer.seek(0)
    buffer.truncate()
    writer.write_record(record)
    packer = zlib.compressobj(_local.level, zlib.DEFLATED, 31)
    return packer.compress(buffer.getvalue()) + packer.flush()


def _warc_writer(level: int) -> WARCWriter:
    if getattr(_local, "writer", None) is None:
        _local.buffer = io.BytesIO()
        _local.writer = WARCWriter(_local.buffer, gzip=False)  # members are gzipped by _record_member
    _local.level = level
    return _local.writer


def _page_members(result: FetchResult, level: int) -> tuple[bytes, bytes, bytes]:
    """The request, response and metadata records of an ok page (runs in any thread)."""
    writer = _warc_writer(level)
    common = {"WARC-Date": result.fetched_at, "WARC-Source-URI": result.url}
    payload = result.raw_head + result.raw_body
    response = writer.create_warc_record(
        result.final_url,
        "response",
        payload=io.BytesIO(payload),
        length=len(payload),
        warc_headers_dict={**common, "WARC-IP-Address": result.ip},
    )
    response_id = response.rec_headers.get_header("WARC-Record-ID")
    request = writer.create_warc_record(
        result.final_url,
        "request",
        payload=io.BytesIO(result.request),
        length=len(result.request),
        warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
    )
    about = json.dumps(
        {"source_url": result.url, "redirects": result.redirects, "attempts": result.attempts, "ip": result.ip},
        ensure_ascii=False,
    ).encode("utf-8")
    metadata = writer.create_warc_record(
        result.final_url,
        "metadata",
        payload=io.BytesIO(about),
        length=len(about),
        warc_content_type="application/json",
        warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
    )
    return _record_member(request), _record_member(response), _record_member(metadata)


class _WarcFile:
    """One WARC file being written under a temporary name; ``finish`` renames it into place."""

    def __init__(self, path: str, config: FetchConfig, level: int):
        self.path = path
        self.name = os.path.basename(path)
        self.temporary = temporary_path(path)
        self.file = _open_for_writing(self.temporary)
        self.size = 0
        self.broken = False
        info = {
            "software": "corpusforge corpus.fetch (warcio)",
            "format": "WARC File Format 1.0",
            "http-header-user-agent": config.user_agent,
            "robots": "obey" if config.respect_robots else "ignore",
        }
        _warc_writer(level)
        self._write(_record_member(_local.writer.create_warcinfo_record(self.name, info)))

    def _write(self, member: bytes) -> None:
        try:
            self.file.write(member)
        except BaseException:
            self.broken = True  # part of a member may be on disk: the file is not kept
            raise
        self.size += len(member)

    def append(self, members: tuple[bytes, bytes, bytes]) -> int:
        """Write one page's members; return the offset of its response record."""
        request, response, metadata = members
        self._write(request)
        offset = self.size
        self._write(response)
        self._write(metadata)
        return offset

    def finish(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.temporary, self.path)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.temporary)


class _RunWriter:
    """WARC files and log segments of one ``fetch_links`` run, written at checkpoints.

    Records are built and gzipped in a small thread pool (zlib and hashlib release the
    GIL), and appended to the file in the order pages were handed in.
    """

    def __init__(
        self,
        out_dir: str,
        config: FetchConfig,
        prefix: str,
        warc_max_bytes: int,
        checkpoint_pages: int,
        checkpoint_s: float,
        level: int,
        workers: int,
    ):
        self.out_dir = out_dir
        self.config = config
        self.prefix = prefix
        self.warc_max_bytes = warc_max_bytes
        self.checkpoint_pages = checkpoint_pages
        self.checkpoint_s = checkpoint_s
        self.level = level
        self.stamp = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{next(_run_counter)}"
        self.seq = 0
        self.warc: _WarcFile | None = None
        self.entries: list[dict] = []
        self.building: deque = deque()  # (log entry, future of the page's members), in order
        self.in_flight = 4 * workers
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="corpusforge-warc") if workers > 1 else None
        self.last_checkpoint = time.monotonic()

    def add(self, result: FetchResult) -> None:
        entry = result.log_entry()
        if result.outcome != OK:
            self.entries.append(entry)
        elif self.pool is None:
            self._store(entry, _page_members(result, self.level))
        else:
            self.building.append((entry, self.pool.submit(_page_members, result, self.level)))
            self._collect(self.in_flight)
        if (
            len(self.entries) + len(self.building) >= self.checkpoint_pages
            or (self.warc is not None and self.warc.size >= self.warc_max_bytes)
            or time.monotonic() - self.last_checkpoint >= self.checkpoint_s
        ):
            self.checkpoint()

    def _collect(self, keep: int) -> None:
        """Append built pages to the file, in order, until at most ``keep`` are pending."""
        while self.building and (len(self.building) > keep or self.building[0][1].done()):
            entry, future = self.building.popleft()
            self._store(entry, future.result())

    def _store(self, entry: dict, members: tuple[bytes, bytes, bytes]) -> None:
        if self.warc is None:
            name = f"{self.prefix}-{self.stamp}-{self.seq:05d}.warc.gz"
            self.warc = _WarcFile(os.path.join(self.out_dir, name), self.config, self.level)
        entry["offset"] = self.warc.append(members)
        entry["warc"] = self.warc.name
        self.entries.append(entry)

    def checkpoint(self) -> None:
        self._collect(0)
        if self.warc is not None:
            self.warc.finish()  # the WARC is in place before any log line points into it
            self.warc = None
        if self.entries:
            path = os.path.join(self.out_dir, f"{LOG_PREFIX}{self.stamp}-{self.seq:05d}{LOG_SUFFIX}")
            text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.entries)
            with atomic_path(path) as temporary:
                with open(temporary, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            self.entries = []
        self.seq += 1
        self.last_checkpoint = time.monotonic()

    def abort(self) -> None:
        """After an error: keep what was completely written, drop what was not."""
        try:
            if self.warc is None or not self.warc.broken:
                self.checkpoint()  # finishes the pages being built, then renames and logs
                return
        except Exception:
            log.exception("could not save the last checkpoint in %s; keeping only its non-ok results", self.out_dir)
        for _, future in self.building:
            future.cancel()
        self.building.clear()
        if self.warc is not None:
            self.warc.discard()
            self.warc = None
        self.entries = [e for e in self.entries if e["outcome"] != OK]  # their records are gone
        try:
            self.checkpoint()
        except Exception:
            log.exception("could not write the fetch log in %s", self.out_dir)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


# Outcomes that say nothing lasting about a page: a rerun fetches the page again.
TRANSIENT_OUTCOMES = frozenset({DNS_ERROR, ROBOTS_UNREACHABLE, DEADLINE, CONNECTION_ERROR, INTERNAL_ERROR})


def is_transient(entry: dict) -> bool:
    """Whether a fetch log entry records a failure worth trying again on a rerun: no answer
    (connection, DNS, deadline, robots.txt unreachable) or a 429/5xx after the retries."""
    outcome = entry.get("outcome")
    if outcome == HTTP_ERROR:
        return int(entry.get("status") or 0) in RETRY_STATUSES
    if outcome == ROBOTS_DISALLOWED:  # logs written before robots_unreachable existed
        return str(entry.get("detail", "")).startswith("robots.txt unreachable")
    return outcome in TRANSIENT_OUTCOMES


def read_fetch_log(out_dir: str | os.PathLike) -> dict[str, dict]:
    """Every link already fetched into ``out_dir``: url -> its latest log entry."""
    done: dict[str, dict] = {}
    try:
        names = sorted(n for n in os.listdir(out_dir) if n.startswith(LOG_PREFIX) and n.endswith(LOG_SUFFIX))
    except FileNotFoundError:
        return done
    for name in names:
        with open(os.path.join(out_dir, name), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                    url = entry["url"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s line %d: not a fetch log entry, ignored", name, number)
                    continue
                old = done.get(url)
                if old is None or str(entry.get("fetched_at", "")) >= str(old.get("fetched_at", "")):
                    done[url] = entry
    return done


_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)(-[0-9a-f]+)?$")


def remove_stale_temporaries(out_dir: str) -> list[str]:
    """Remove the hidden partial files (``.NAME.tmp-PID-...``) that a process which is no
    longer running left in ``out_dir`` (killed before it could clean up); return their names.
    ``out_dir`` is a folder of this machine (an object-store fetch runs in a local copy), so
    the process ids are this machine's."""
    removed = []
    for name in os.listdir(out_dir):
        found = _TEMPORARY.match(name)
        if not found or _process_alive(int(found.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out_dir, name))
            removed.append(name)
    if removed:
        log.info("%s: removed %d partial file(s) of an interrupted earlier run", out_dir, len(removed))
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


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
    writer = _RunWriter(out_dir, config, warc_prefix, warc_max_bytes, checkpoint_pages, checkpoint_s, warc_gzip_level, workers)
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


def main(argv: list[str] | None = None) -> int:
    """``python -m corpus.fetch LINKS --out DIR``: fetch_links from the command line."""
    import argparse
    import sys

    defaults = FetchConfig()
    parser = argparse.ArgumentParser(
        prog="python -m corpus.fetch",
        description="Fetch links (one per line) into WARC files and a fetch log; rerun to resume.",
    )
    parser.add_argument("links", help="file of URLs, one per line ('-' reads standard input)")
    parser.add_argument("--out", required=True, help="folder for the WARC files and fetch-log-*.jsonl")
    parser.add_argument(
        "--allow-hosts", nargs="*", default=[], metavar="HOST:PORT", help="private/loopback host:port allowed anyway (tests, local mirrors)"
    )
    parser.add_argument("--deadline", type=float, default=defaults.deadline_s, help="seconds per page, redirects and retries included")
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--per-host-concurrency", type=int, default=defaults.per_host_concurrency)
    parser.add_argument("--per-host-delay", type=float, default=defaults.per_host_delay_s)
    parser.add_argument("--retries", type=int, default=defaults.retries)
    parser.add_argument("--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    parser.add_argument("--no-resume", action="store_true", help="fetch every link even if a log in --out has it")
    args = parser.parse_args(argv)
    config = FetchConfig(
        allow_hosts=frozenset(args.allow_hosts),
        deadline_s=args.deadline,
        concurrency=args.concurrency,
        per_host_concurrency=args.per_host_concurrency,
        per_host_delay_s=args.per_host_delay,
        retries=args.retries,
        respect_robots=not args.ignore_robots,
    )
    source = sys.stdin if args.links == "-" else open(args.links, encoding="utf-8")
    with source:
        links = (line.strip() for line in source)
        counts = fetch_links((link for link in links if link and not link.startswith("#")), config, args.out, resume=not args.no_resume)
    print(json.dumps(dict(sorted(counts.items()))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
