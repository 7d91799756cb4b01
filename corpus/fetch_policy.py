"""The fetcher's safety policy: what may be fetched, from where, how often and how much.

Everything here decides; nothing here talks to the network (``corpus.fetch_client`` does,
and asks this module at each step). The outcome names every page ends with are defined
here too (the table is in ``corpus.fetch``).

Schemes and URLs
----------------
Only http and https (``refused_scheme`` otherwise, also for a redirect to ``ftp:``,
``file:``, ...). ``parse_target`` turns a URL into what a request needs: the lower-case
IDNA host, the port, the percent-encoded request-target and the ``Host`` header;
``bad_url`` when there is no host, a bad port or a bad IDNA name.

Addresses (SSRF safety) and DNS pinning
---------------------------------------
Before any connection the client resolves the name itself (``getaddrinfo`` in a thread
pool; an IP literal is parsed, not resolved) and ``check_addresses`` refuses the URL when
ANY address is loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, with
the cloud metadata address 169.254.169.254, and fe80::/10), shared/CGNAT (100.64.0.0/10),
multicast, reserved, documentation, benchmarking, unspecified or broadcast, or an
IPv4-mapped, NAT64 or 6to4 IPv6 address wrapping one of those (``forbidden_reason``). The
client then connects to that exact IP (the name goes only into ``Host`` and TLS
SNI/verification), so DNS is never asked twice and a rebinding answer cannot slip in
between check and connect. Every redirect hop goes through the same check.
``allow_hosts`` holds ``"host:port"`` strings (IPv6 as ``"[::1]:8080"``): a URL whose
host:port, or whose resolved ip:port, is listed skips the address check and nothing else
(robots, caps and deadline still apply).

Politeness and robots.txt
-------------------------
At most ``per_host_concurrency`` requests at a time per host name, request starts at
least ``per_host_delay_s`` apart (``HostGate``; raised to robots.txt's Crawl-delay, up to
``max_crawl_delay_s``), and at most ``concurrency`` requests in flight overall. robots.txt
is fetched once per (scheme, host, port) through the same safe path (same address checks,
redirects, deadline, retries), read up to ``robots_max_bytes`` (RFC 9309 asks for at least
500 KiB), parsed with ``urllib.robotparser`` and cached for ``robots_ttl_s``. Per RFC 9309
(``robots_rules``): a 4xx (except 429) or more than ``max_redirects`` redirects means no
rules (allow all); 429, 5xx and any failure to reach it (DNS, connection, deadline,
refused address) mean disallow all. Pages of a host wait for its one robots fetch;
concurrent pages never fetch it twice. ``respect_robots=False`` turns the whole thing off.

Content types and sizes
-----------------------
Decided by the Content-Type header, before the body is read (``refused_content_type``): a
type outside ``html_types`` is ``non_html`` and its body is never downloaded. A response
with no Content-Type is ``non_html`` too: sniffing would be a guess, and
``corpus.warc.read_archive`` skips responses without an HTML type, so a sniffed page could
not be read back. Bodies are capped at ``max_bytes`` as transferred (``too_large``, by
Content-Length before reading or counted while streaming) and ``max_decoded_bytes`` after
gzip/deflate decoding (``decompression_bomb``).

Retries
-------
Only for 429, 500, 502, 503, 504 and for connections reset or closed mid-response:
``retries`` more tries of the same request, sleeping ``min(backoff_cap_s,
backoff_base_s * backoff_factor ** (try - 1))``, or the server's ``Retry-After`` (seconds
or HTTP date) when it sends one (``retry_delay``). A ``Retry-After`` longer than
``backoff_cap_s`` is obeyed by not retrying at all: retrying sooner than asked would be
impolite. A retry is not started when its backoff would end after the page's deadline.
"""

from __future__ import annotations

import asyncio
import email.utils
import heapq
import ipaddress
import itertools
import time
from dataclasses import dataclass
from urllib.parse import quote, urlsplit
from urllib.robotparser import RobotFileParser

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
class RequestTarget:
    """What a request to ``url`` needs: where to connect and what to send."""

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


class PageFailed(Exception):
    """Ends a page with an outcome (one of ``OUTCOMES``): raised by a check, caught by the client."""

    def __init__(self, outcome: str, detail: str = "", status: int = 0):
        super().__init__(outcome, detail)
        self.outcome = outcome
        self.detail = detail
        self.status = status


def parse_target(url: str) -> RequestTarget:
    """``url`` as a request target; ``bad_url`` or ``refused_scheme`` when it cannot be one."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise PageFailed(BAD_URL, str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise PageFailed(REFUSED_SCHEME, f"scheme {scheme or '(none)'!r}")
    try:
        host = parts.hostname or ""
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as exc:
        raise PageFailed(BAD_URL, str(exc)) from None
    if not host:
        raise PageFailed(BAD_URL, "no host")
    ip_literal = True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        ip_literal = False
        try:
            host = host.encode("idna").decode("ascii") if not host.isascii() else host
        except UnicodeError as exc:
            raise PageFailed(BAD_URL, f"host name: {exc}") from None
        if not host or any(c in host for c in "\x00 /\\%@"):
            raise PageFailed(BAD_URL, "bad host name") from None
    target = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_QUERY_SAFE)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    return RequestTarget(url, scheme, host, port, target, host_header, ip_literal)


# -- politeness -----------------------------------------------------------------------------


class HostGate:
    """At most ``concurrency`` requests at a time on one host, starts ``delay`` apart.

    Waiters are served in order of arrival, except that an urgent one (the redirect hop or
    retry of a page already started) goes ahead of every page not started yet: a page's
    later requests wait behind at most the requests in flight, never behind the whole
    queue of the host (with 40 links on a host, a 301 hop used to wait 40 delays and miss
    its deadline). Politeness is unchanged: every start, urgent or not, keeps the delay.
    """

    URGENT, NEW = 0, 1  # the waiting order

    def __init__(self, concurrency: int, delay: float):
        self.concurrency = concurrency
        self.active = 0  # slots held
        self.delay = delay
        self.next_start = 0.0
        self.users = 0  # holding or waiting
        self._waiting: list[tuple[int, int, asyncio.Future]] = []  # (order, arrival, future): a heap
        self._arrivals = itertools.count()

    def slot(self, urgent: bool = False) -> _GateSlot:
        """``async with gate.slot(urgent)``: hold one slot of the host, its start spaced by ``delay``."""
        return _GateSlot(self, self.URGENT if urgent else self.NEW)

    async def __aenter__(self):
        await self._enter(self.NEW)
        return self

    async def __aexit__(self, *exc_info):
        self._leave()

    async def _enter(self, order: int) -> None:
        self.users += 1
        try:
            await self._acquire(order)
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

    async def _acquire(self, order: int) -> None:
        if self.active < self.concurrency:
            self.active += 1
            return
        entry = (order, next(self._arrivals), asyncio.get_running_loop().create_future())
        heapq.heappush(self._waiting, entry)
        try:
            await entry[2]  # resolved by _release: the slot is handed over, active unchanged
        except BaseException:
            if entry[2].done() and not entry[2].cancelled():
                self._release()  # handed a slot and cancelled at once: pass it on
            elif entry in self._waiting:  # (a release may already have popped it, cancelled)
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
            raise

    def _release(self) -> None:
        while self._waiting:
            future = heapq.heappop(self._waiting)[2]
            if not future.done():
                future.set_result(None)
                return
        self.active -= 1

    def _leave(self) -> None:
        self._release()
        self.users -= 1


class _GateSlot:
    def __init__(self, gate: HostGate, order: int):
        self.gate, self.order = gate, order

    async def __aenter__(self) -> HostGate:
        await self.gate._enter(self.order)
        return self.gate

    async def __aexit__(self, *exc_info) -> None:
        self.gate._leave()


# -- robots.txt ----------------------------------------------------------------------------


@dataclass
class RobotsRules:
    """One host's robots.txt: its parsed rules, or allow/disallow all when there are none."""

    parser: RobotFileParser | None
    allow_all: bool
    detail: str
    crawl_delay: float = 0.0

    def allows(self, url: str, user_agent: str) -> bool:
        if self.parser is None:
            return self.allow_all
        return self.parser.can_fetch(user_agent, url)



def robots_rules(result, url: str, config: FetchConfig) -> RobotsRules:
    """The rules a robots.txt fetch result stands for (``result``: its ``FetchResult``)."""
    if result.outcome == OK:
        parser = RobotFileParser(url)
        parser.parse(result.body.decode("utf-8", "replace").splitlines())
        delay = parser.crawl_delay(config.user_agent)
        crawl_delay = min(float(delay), config.max_crawl_delay_s) if delay else 0.0
        return RobotsRules(parser, True, "disallowed by robots.txt", crawl_delay)
    status = result.status
    if result.outcome == TOO_MANY_REDIRECTS or (result.outcome == HTTP_ERROR and 400 <= status < 500 and status != 429):
        return RobotsRules(None, True, "")  # RFC 9309 2.3.1.3: unavailable, so no rules
    why = f"HTTP {status}" if result.outcome == HTTP_ERROR else f"{result.outcome}: {result.detail}"
    return RobotsRules(None, False, f"robots.txt unreachable ({why[:200]})")  # RFC 9309 2.3.1.4


# -- addresses after DNS ------------------------------------------------------------------


def check_addresses(target: RequestTarget, addresses: list[str], config: FetchConfig) -> list[str]:
    """``addresses`` when every one may be connected to (or ``allow_hosts`` lets it); else ``refused_address``."""
    if f"{target.host}:{target.port}" in config.allow_hosts:
        return addresses
    for address in addresses:
        if f"{address.split('%')[0].lower()}:{target.port}" in config.allow_hosts:
            continue
        why = forbidden_reason(address.split("%")[0])
        if why:
            shown = target.host if target.ip_literal else f"{target.host} -> {address}"
            raise PageFailed(REFUSED_ADDRESS, f"{shown}: {why}")
    return addresses


# -- content types ----------------------------------------------------------------------------


def refused_content_type(headers: dict, config: FetchConfig) -> str:
    """Why a page's response is ``non_html`` (``""`` when its Content-Type is one of ``html_types``)."""
    mime = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if mime in config.html_types:
        return ""
    return f"Content-Type {mime!r}" if mime else "no Content-Type"


# -- retries -------------------------------------------------------------------------------------


def retry_delay(attempt: int, retry_after: float | None, config: FetchConfig) -> tuple[float | None, str]:
    """Seconds to wait before try ``attempt + 1``, or ``(None, why)`` when there is no other try."""
    if attempt > config.retries:
        return None, f"after {attempt} tries"
    if retry_after is not None:
        if retry_after > config.backoff_cap_s:
            return None, f"Retry-After {retry_after:g}s is over the {config.backoff_cap_s:g}s cap"
        return retry_after, ""
    return min(config.backoff_cap_s, config.backoff_base_s * config.backoff_factor ** (attempt - 1)), ""


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header (seconds or an HTTP date) in seconds from now; None without one."""
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
