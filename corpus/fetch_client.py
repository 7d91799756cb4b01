"""The fetcher's HTTP client: connections, requests, redirects, retries and the deadline.

``AsyncFetcher.fetch(url)`` takes one page from URL to ``FetchResult``; ``Fetcher`` is the
same engine for synchronous code. At every step it asks ``corpus.fetch_policy`` what is
allowed (scheme, addresses, robots.txt, politeness, content type, retries).

The client
----------
A small HTTP/1.1 client of our own over asyncio streams (``ssl`` for https), not aiohttp
or urllib. Every safety rule needs a hook in the middle of the request: the address we
connect to must be the one we checked, each redirect hop is checked again, the body is
counted as it arrives and content-encoding is undone by us with a cap. Owning the ~300
lines of HTTP that gives (reading a response is ``corpus.fetch_http``) keeps all of that
visible, adds no dependency, and makes a request cheap enough for thousands of pages a
second on one core. Connections are
kept alive and reused per (scheme, host, port). We send ``Accept-Encoding: gzip, deflate``
only (brotli is not a dependency); a server that answers ``br`` anyway gets
``bad_response``.

The deadline
------------
A socket timeout is not a deadline: a server that drips a byte a second never trips
one. Each page gets one wall-clock deadline (``deadline_s``) that covers every
redirect hop, retry and backoff, connecting and reading the body. It is armed when the
page's first request gets its politeness slot, and stopped while a later request of the
page (a redirect hop, a retry) waits for its slot again: time queued behind other pages of
the same host is not the page's fault. Such a later request goes ahead of every page of the
host not started yet (``HostGate.slot(urgent=True)``), politeness delay kept. When the
deadline passes, the page's task is cancelled wherever it is waiting, and the page becomes
``deadline``. A retry is not started when its backoff would end after the deadline.
Connecting also has its own ``connect_timeout_s``.

Retries
-------
When and how long to wait is the policy's (``corpus.fetch_policy.retry_delay``).
``attempts`` counts the tries of the last request of the chain. A pooled keep-alive
connection that the server had already closed is replaced silently (not a try).

Sync API in any thread
----------------------
``Fetcher`` runs its own event loop in a daemon thread; ``fetch_many(urls)`` is a
plain generator yielding results in completion order, usable from any thread (Beam
calls DoFns from worker threads) and from several threads at once. Input is read lazily
in the caller's thread, with at most ``window`` pages started and not yet consumed.
``AsyncFetcher`` is the same engine for code that already runs a loop. Pages with many
links per host are served one host slot at a time, so feed links in an order that mixes
hosts (Reddit order does) for full speed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import logging
import queue
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin

from corpus.fetch_http import (
    CLOSE,
    LENGTH,
    NO_BODY,
    STREAM_LIMIT,
    BodySink,
    CappedDecoder,
    Dropped,
    NoReply,
    OverLimit,
    ResponseHead,
    SinkFull,
    body_framing,
    keeps_alive,
    read_body,
    read_head,
)
from corpus.fetch_policy import (
    BAD_RESPONSE,
    CONNECTION_ERROR,
    DEADLINE,
    DNS_ERROR,
    HTTP_ERROR,
    INTERNAL_ERROR,
    NON_HTML,
    OK,
    REDIRECT_STATUSES,
    RETRY_STATUSES,
    ROBOTS_DISALLOWED,
    ROBOTS_UNREACHABLE,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    FetchConfig,
    HostGate,
    KiB,
    PageFailed,
    RequestTarget,
    RobotsRules,
    check_addresses,
    parse_target,
    refused_content_type,
    retry_after_seconds,
    retry_delay,
    robots_rules,
)
from corpus.http_decode import decode_html
from corpus.records import TIMESTAMP_FORMAT, HtmlPage

log = logging.getLogger("corpus.fetch")  # one logger for all the fetcher's parts

DRAIN_LIMIT = 64 * KiB  # bodies of redirects and errors up to this are read to keep the connection
DNS_CACHE_S = 60.0
MAX_IDLE_CONNECTIONS = 256


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



def _now_iso() -> str:
    return time.strftime(TIMESTAMP_FORMAT, time.gmtime())


# -- the deadline ---------------------------------------------------------------------------


class _Deadline:
    """Cancels one task when the page has spent ``seconds`` on its own work.

    Started when the page's first request gets its host slot; stopped (``pause``) while a
    later request of the page (a redirect hop, a retry) waits for a slot again, so time
    queued behind other pages of the host is never the page's.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.remaining = seconds
        self.when: float | None = None  # loop time it fires at, while running
        self.started = False
        self.fired = False
        task = asyncio.current_task()
        assert task is not None  # made in the page's own task (AsyncFetcher._fetch)
        self._task = task
        self._handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """Start the clock, or restart it after ``pause``."""
        if self.when is None:
            loop = asyncio.get_running_loop()
            self.started = True
            self.when = loop.time() + self.remaining
            self._handle = loop.call_at(self.when, self._fire)

    def pause(self) -> None:
        if self.when is not None and not self.fired:
            self.remaining = max(0.0, self.when - asyncio.get_running_loop().time())
            self.disarm()
            self.when = None

    def _fire(self) -> None:
        self.fired = True
        self._task.cancel()

    def left(self) -> float:
        if self.when is None:
            return self.remaining
        return self.when - asyncio.get_running_loop().time()

    def check(self) -> None:
        """For the rare await that swallows a cancellation (asyncio.wait_for before 3.12)."""
        if self.when is not None and (self.fired or asyncio.get_running_loop().time() >= self.when):
            raise PageFailed(DEADLINE, f"deadline of {self.seconds:g}s passed")

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


@contextlib.asynccontextmanager
async def _time_limit(seconds: float):
    if hasattr(asyncio, "timeout"):  # 3.11+: never swallows an outer cancellation
        async with asyncio.timeout(seconds):
            yield
    else:  # pragma: no cover - Python 3.10
        task = asyncio.current_task()
        assert task is not None  # entered from a page's task
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

# -- connections (the responses on them are read by corpus.fetch_http) -------------------------


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


@dataclass
class _Exchange:
    """One request and its response, as far as it was read."""

    head: ResponseHead
    request: bytes
    ip: str
    outcome: str = ""  # "" for a complete response; else why the body was not kept
    detail: str = ""
    raw_body: bytes = b""
    body: bytes = b""


_PAGE, _ROBOTS = "page", "robots"



# -- the engine ------------------------------------------------------------------------------


class _PageState:
    __slots__ = ("url", "current", "redirects", "attempts", "fetched_at", "head", "ip")

    def __init__(self, url: str):
        self.url = url
        self.current = url
        self.redirects: list[dict] = []
        self.attempts = 0
        self.fetched_at = ""
        self.head: ResponseHead | None = None
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
        self._gates: dict[str, HostGate] = {}
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
            except PageFailed as fail:
                return state.result(fail.outcome, fail.detail, fail.status)
            except asyncio.CancelledError:
                if not deadline.fired:
                    raise
                task = asyncio.current_task()
                if task is not None and hasattr(task, "uncancel"):
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
            target = parse_target(state.current)
            addresses = await self._resolve(target)
            if purpose == _PAGE and cfg.respect_robots:
                robots = await self._robots_for(target)
                if not robots.allows(target.url, cfg.user_agent):
                    raise PageFailed(ROBOTS_DISALLOWED if robots.parser is not None else ROBOTS_UNREACHABLE, robots.detail)
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
                    raise PageFailed(TOO_MANY_REDIRECTS, f"more than {cfg.max_redirects} redirects")
                try:
                    location = location.encode("latin-1").decode("utf-8")
                except UnicodeError:
                    pass
                following = urldefrag(urljoin(state.current, location))[0]
                state.redirects.append({"status": head.status, "url": state.current, "location": following})
                state.current = following
                continue
            if exchange.outcome:
                raise PageFailed(exchange.outcome, exchange.detail)
            if not 200 <= head.status < 300:
                detail = f"HTTP {head.status} {head.reason}".strip()
                raise PageFailed(HTTP_ERROR, f"{detail} ({exchange.detail})" if exchange.detail else detail)
            result = state.result(OK)
            result.body = exchange.body
            result.request = exchange.request
            result.raw_head = head.raw
            result.raw_body = exchange.raw_body
            return result

    async def _with_retries(self, target, addresses, state, deadline, purpose) -> _Exchange:
        cfg = self.config
        attempt = 0
        exchange: _Exchange | None
        while True:
            attempt += 1
            state.attempts = attempt
            state.fetched_at = _now_iso()
            retry_after = None
            try:
                exchange = await self._request(target, addresses, deadline, purpose)
            except Dropped as exc:
                failure, exchange = f"{exc}", None
            else:
                if exchange.head.status not in RETRY_STATUSES:
                    return exchange
                failure = f"HTTP {exchange.head.status}"
                retry_after = retry_after_seconds(exchange.head.headers.get("retry-after"))
            delay, why = retry_delay(attempt, retry_after, cfg)
            if delay is None:
                return self._give_up(exchange, failure, why)
            if delay >= deadline.left():
                return self._give_up(exchange, failure, "no time left before the deadline for another try")
            await _backoff_sleep(delay)

    @staticmethod
    def _give_up(exchange: _Exchange | None, failure: str, why: str) -> _Exchange:
        if exchange is None:
            raise PageFailed(CONNECTION_ERROR, f"{failure} ({why})")
        exchange.detail = why
        return exchange

    # -- one request ---------------------------------------------------------------------

    def _gate(self, host: str) -> HostGate:
        gate = self._gates.get(host)
        if gate is None:
            if len(self._gates) > 20000:
                now = asyncio.get_running_loop().time()
                for name in [h for h, g in self._gates.items() if g.users == 0 and g.next_start <= now]:
                    del self._gates[name]
            gate = self._gates[host] = HostGate(self.config.per_host_concurrency, self.config.per_host_delay_s)
        return gate

    def _request_bytes(self, target: RequestTarget, purpose: str) -> bytes:
        return (
            f"GET {target.target} HTTP/1.1\r\n"
            f"Host: {target.host_header}\r\n"
            f"User-Agent: {self.config.user_agent}\r\n"
            f"Accept: {self._accept[purpose]}\r\n"
            "Accept-Encoding: gzip, deflate\r\n"
            "Connection: keep-alive\r\n\r\n"
        ).encode("latin-1")

    async def _request(self, target: RequestTarget, addresses: list[str], deadline: _Deadline, purpose: str) -> _Exchange:
        request = self._request_bytes(target, purpose)
        started = deadline.started  # a redirect hop or retry: ahead of new pages, clock stopped while queued
        deadline.pause()
        async with self._gate(target.host).slot(urgent=started):
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
                    except (NoReply, ConnectionError) as exc:
                        if not reused:
                            raise
                        conn.close()  # the server dropped the idle connection; a fresh one is not a retry
                        log.debug("keep-alive connection to %s was closed (%s); reconnecting", target.host, exc)
                        conn = await self._connect(target, addresses)
                        head = await self._send(conn, request)
                    while 100 <= head.status < 200:
                        if head.status == 101:
                            raise PageFailed(BAD_RESPONSE, "unexpected 101 Switching Protocols")
                        head = await read_head(conn.reader, self.config.max_header_bytes)
                    exchange = _Exchange(head, request, conn.ip)
                    reusable = await self._consume(conn, exchange, deadline, purpose)
                except ConnectionError as exc:  # reset, aborted, broken pipe
                    conn.close()
                    raise Dropped(f"{type(exc).__name__}: {exc}") from None
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                    conn.close()
                    raise Dropped(f"{type(exc).__name__}") from None
                except OSError as exc:  # TLS errors after the handshake, and the like
                    conn.close()
                    raise PageFailed(CONNECTION_ERROR, f"{type(exc).__name__}: {exc}"[:300]) from None
                except BaseException:
                    conn.close()
                    raise
                if reusable:
                    self._pool.put(target.key, conn)
                else:
                    conn.close()
                return exchange

    async def _send(self, conn: _Conn, request: bytes) -> ResponseHead:
        conn.writer.write(request)
        await conn.writer.drain()
        return await read_head(conn.reader, self.config.max_header_bytes)

    async def _connect(self, target: RequestTarget, addresses: list[str]) -> _Conn:
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
        raise PageFailed(CONNECTION_ERROR, "; ".join(failures)[:300])

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
        framing, length = body_framing(head)
        keep = keeps_alive(head) and framing != CLOSE
        if framing == NO_BODY:
            return keep
        if not 200 <= head.status < 300:  # redirects and errors: read small bodies to keep the connection
            if keep and framing == LENGTH and length <= DRAIN_LIMIT:
                await read_body(conn.reader, framing, length, BodySink(DRAIN_LIMIT, None, deadline.check, False))
                return True
            return False
        truncate = purpose == _ROBOTS
        if purpose == _PAGE:
            refused = refused_content_type(head.headers, cfg)
            if refused:
                exchange.outcome = NON_HTML
                exchange.detail = refused
                return False
        cap = cfg.robots_max_bytes if truncate else cfg.max_bytes
        decoded_cap = cfg.robots_max_bytes if truncate else cfg.max_decoded_bytes
        if framing == LENGTH and length > cap and not truncate:
            exchange.outcome = TOO_LARGE
            exchange.detail = f"Content-Length {length} is over {cap} bytes"
            return False
        encoding = head.headers.get("content-encoding", "").strip().lower()
        decoder = None if encoding in ("", "identity") else CappedDecoder(encoding, decoded_cap, truncate)
        sink = BodySink(cap, decoder, deadline.check, truncate)
        complete = True
        try:
            await read_body(conn.reader, framing, length, sink)
        except SinkFull:
            complete = False
        except OverLimit as limit:
            exchange.outcome = limit.outcome
            exchange.detail = limit.detail
            return False
        exchange.raw_body = b"".join(sink.wire)
        exchange.body = decoder.result() if decoder is not None else exchange.raw_body
        return keep and complete

    # -- DNS and the address check -------------------------------------------------------

    async def _resolve(self, target: RequestTarget) -> list[str]:
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
                    raise PageFailed(DNS_ERROR, f"no answer for {target.host} in {cfg.connect_timeout_s:g}s") from None
                except (socket.gaierror, UnicodeError, OSError) as exc:
                    raise PageFailed(DNS_ERROR, f"{target.host}: {exc}"[:300]) from None
                addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
                addresses.sort(key=lambda a: ":" in a)  # IPv4 first: IPv6 is more often unreachable
                if not addresses:
                    raise PageFailed(DNS_ERROR, f"{target.host}: no addresses")
                if len(self._dns) > 50000:
                    self._dns.clear()
                self._dns[key] = (loop.time() + DNS_CACHE_S, addresses)
        return check_addresses(target, addresses, cfg)

    # -- robots.txt ------------------------------------------------------------------------

    async def _robots_for(self, target: RequestTarget) -> RobotsRules:
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

    async def _fetch_robots(self, target: RequestTarget) -> RobotsRules:
        url = f"{target.scheme}://{target.host_header}/robots.txt"
        return robots_rules(await self._fetch(url, _ROBOTS), url, self.config)



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
        type(self).__init__(self, state["config"], window=state["window"])

    def __enter__(self) -> Fetcher:
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
            own_loop = self._loop
            assert own_loop is not None  # set by _start before any work is scheduled on the loop
            own_loop.call_soon(own_loop.stop)  # closed from inside its own loop (e.g. by the GC)
            return
        with self._lock:
            loop, thread, engine = self._loop, self._thread, self._engine
            self._loop = self._thread = self._engine = None
        if loop is None:
            return
        assert thread is not None and engine is not None  # _start sets all three
        if not loop.is_closed() and thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_shutdown(engine), loop).result(timeout=10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()

    def fetch(self, url: str) -> FetchResult:
        return next(iter(self.fetch_many([url])))

    def fetch_many(self, urls: Iterable[str]) -> Generator[FetchResult, None, None]:
        """Fetch every URL; results come in completion order. Closing the generator stops the rest."""
        loop = self._start()
        engine, thread = self._engine, self._thread
        assert engine is not None and thread is not None  # _start sets them with the loop
        results: queue.SimpleQueue = queue.SimpleQueue()
        run = _Run()
        source = iter(urls)
        exhausted = False
        pending = 0
        refill_at = self.window - max(1, self.window // 16)  # start pages in batches, not one by one

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
