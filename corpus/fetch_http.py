"""HTTP/1.1 responses read from asyncio streams: status line, headers, body framing, decoding.

The wire half of ``corpus.fetch_client``: ``read_head`` reads a status line and headers
(obsolete line folding joined, repeated fields joined with ", ", a cap on their size),
``body_framing`` says how the body ends (Content-Length, chunked, connection close, or no
body), and ``read_body`` reads it into a ``BodySink``, which counts the bytes as they arrive
against a cap and keeps both the bytes as they came over the wire (for the WARC) and, through
a ``CappedDecoder``, the payload with gzip/deflate undone (never more than its cap: a
decompression bomb stops at the cap). A connection that closes mid-response raises
``Dropped`` (``NoReply`` before the first byte): the client retries those.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable

from corpus.fetch_policy import BAD_RESPONSE, DECOMPRESSION_BOMB, TOO_LARGE, KiB, PageFailed

READ_SIZE = 64 * KiB
STREAM_LIMIT = 64 * KiB  # longest header line or chunk-size line we accept


class Dropped(Exception):
    """The connection was reset or closed before the response was complete (retryable)."""


class NoReply(Dropped):
    """The connection closed before a single byte of the response came back."""


class ResponseHead:
    __slots__ = ("raw", "version", "status", "reason", "headers")

    def __init__(self, raw: bytes, version: str, status: int, reason: str, headers: dict):
        self.raw = raw
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers


async def read_head(reader: asyncio.StreamReader, limit: int) -> ResponseHead:
    try:
        line = await reader.readline()
    except ValueError:
        raise PageFailed(BAD_RESPONSE, "status line too long") from None
    if not line:
        raise NoReply("connection closed before the response")
    if not line.endswith(b"\n"):
        raise Dropped("connection closed inside the status line")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
        raise PageFailed(BAD_RESPONSE, f"not an HTTP/1.x status line: {line[:60]!r}")
    raw = [line]
    total = len(line)
    headers: dict[str, str] = {}
    last = ""
    while True:
        try:
            line = await reader.readline()
        except ValueError:
            raise PageFailed(BAD_RESPONSE, "header line too long") from None
        if not line.endswith(b"\n"):
            raise Dropped("connection closed inside the headers")
        total += len(line)
        if total > limit:
            raise PageFailed(BAD_RESPONSE, f"headers over {limit} bytes")
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
    return ResponseHead(b"".join(raw), parts[0].decode("latin-1"), int(parts[1]), reason, headers)


LENGTH, CHUNKED, CLOSE, NO_BODY = "length", "chunked", "close", "none"


def body_framing(head: ResponseHead) -> tuple[str, int]:
    if head.status < 200 or head.status in (204, 304):
        return NO_BODY, 0
    te = head.headers.get("transfer-encoding")
    if te is not None:
        codings = [c.strip().lower() for c in te.split(",") if c.strip()]
        if codings != ["chunked"]:
            raise PageFailed(BAD_RESPONSE, f"unsupported Transfer-Encoding {te[:40]!r}", head.status)
        return CHUNKED, 0
    cl = head.headers.get("content-length")
    if cl is not None:
        values = {v.strip() for v in cl.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise PageFailed(BAD_RESPONSE, f"bad Content-Length {cl[:40]!r}", head.status)
        return LENGTH, int(next(iter(values)))
    return CLOSE, 0


def keeps_alive(head: ResponseHead) -> bool:
    tokens = {t.strip().lower() for t in head.headers.get("connection", "").split(",")}
    if head.version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens


class OverLimit(Exception):
    def __init__(self, outcome: str, detail: str):
        super().__init__(outcome, detail)
        self.outcome = outcome
        self.detail = detail


class CappedDecoder:
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
            raise PageFailed(BAD_RESPONSE, f"unsupported Content-Encoding {encoding[:40]!r}")

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
                raise PageFailed(BAD_RESPONSE, f"bad {self.encoding} data: {exc}") from None
            if len(out) > room or self._z.unconsumed_tail:
                if self.truncate:
                    self.parts.append(out[:room])
                    self.total += min(len(out), room)
                    self.full = True
                    return
                raise OverLimit(DECOMPRESSION_BOMB, f"{self.encoding} body decodes to more than {self.cap} bytes")
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


class BodySink:
    """Collects a body as it arrives: wire bytes for the WARC, decoded bytes for the page."""

    def __init__(self, cap: int, decoder: CappedDecoder | None, check: Callable[[], None] | None, truncate: bool):
        self.cap = cap
        self.decoder = decoder
        self.check = check  # called before each piece: raises when the page's deadline has passed
        self.truncate = truncate
        self.wire: list[bytes] = []
        self.payload = 0
        self.full = False

    def feed(self, wire: bytes, payload: bytes) -> None:
        if self.check is not None:
            self.check()
        if payload:
            if self.payload + len(payload) > self.cap:
                if self.truncate:
                    keep = self.cap - self.payload
                    payload = payload[:keep]
                    self.full = True
                else:
                    raise OverLimit(TOO_LARGE, f"body over {self.cap} bytes")
            self.payload += len(payload)
            if self.decoder is not None:
                self.decoder.feed(payload)
                self.full = self.full or self.decoder.full
        self.wire.append(wire)


class SinkFull(Exception):
    """Raised to stop reading once a truncating sink has all it wants."""


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError:  # over STREAM_LIMIT without a newline
        raise PageFailed(BAD_RESPONSE, f"line over {STREAM_LIMIT} bytes in the body framing") from None


async def read_body(reader: asyncio.StreamReader, framing: str, length: int, sink: BodySink) -> None:
    def give(wire: bytes, payload: bytes) -> None:
        sink.feed(wire, payload)
        if sink.full:
            raise SinkFull()

    if framing == LENGTH:
        left = length
        while left > 0:
            data = await reader.read(min(left, READ_SIZE))
            if not data:
                raise Dropped(f"connection closed with {left} of {length} body bytes missing")
            left -= len(data)
            give(data, data)
    elif framing == CHUNKED:
        while True:
            line = await _readline(reader)
            if not line.endswith(b"\n"):
                raise Dropped("connection closed inside a chunk header")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise PageFailed(BAD_RESPONSE, f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise PageFailed(BAD_RESPONSE, "negative chunk size")
            give(line, b"")
            if size == 0:
                while True:  # trailer fields, then the blank line
                    trailer = await _readline(reader)
                    if not trailer.endswith(b"\n"):
                        raise Dropped("connection closed inside the chunked trailer")
                    give(trailer, b"")
                    if trailer in (b"\r\n", b"\n"):
                        return
            left = size
            while left > 0:
                data = await reader.read(min(left, READ_SIZE))
                if not data:
                    raise Dropped("connection closed inside a chunk")
                left -= len(data)
                give(data, data)
            end = await _readline(reader)
            if end not in (b"\r\n", b"\n"):
                if not end.endswith(b"\n"):
                    raise Dropped("connection closed after a chunk")
                raise PageFailed(BAD_RESPONSE, "chunk not followed by CRLF")
            give(end, b"")
    elif framing == CLOSE:
        while True:
            data = await reader.read(READ_SIZE)
            if not data:
                return
            give(data, data)
