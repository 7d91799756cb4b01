"""An archived HTTP response decoded as a browser would: the head parsed (as warcio parses
it), chunking and Content-Encoding undone with a cap on the decoded size, the charset found
(BOM, header, ``<meta>``, WHATWG's supersets) and the HTML decoded. ``corpus/warc.py`` calls
it for WARC response records; the fetcher for live pages.
"""

from __future__ import annotations

import codecs
import io
import re
import zlib

from warcio.bufferedreaders import ChunkedDataException, ChunkedDataReader
from warcio.statusandheaders import StatusAndHeadersParser

from corpus.records import (
    BAD_CHUNKING,
    BAD_CONTENT_ENCODING,
    DECODED_TOO_LARGE,
)

MAX_DECODED_BYTES = 50 << 20


_HTTP_PROTOCOLS = ["HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/2.0"]


def parse_http(block: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """(status code text, header (name, value) pairs, body) of an HTTP response block,
    exactly as warcio's ``StatusAndHeadersParser(verify=False)`` reads them. The usual head
    (ASCII, CRLF lines, none folded or blank) is split here at C speed; any other goes to
    warcio itself (which raises ``EOFError`` on an empty block)."""
    end = block.find(b"\r\n\r\n")
    head = block[:end]
    if end > 0 and head.isascii():
        text = head.decode("ascii")
        if text.count("\n") == text.count("\r\n"):  # warcio reads lines up to a bare LF too
            lines = list(map(str.rstrip, text.split("\r\n")))
            if "" not in lines and not any(map(_is_folded, lines)):
                protocol_status = lines[0].split(" ", 1)
                statusline = protocol_status[1].strip() if len(protocol_status) > 1 else ""
                # warcio: the name right-stripped of blanks, the value left-stripped; no colon, no header
                fields = [line.partition(":") for line in lines[1:]]
                headers = [(name.rstrip(" \t"), value.lstrip()) for name, sep, value in fields if sep]
                return statusline.split(" ", 1)[0], headers, block[end + 4 :]
    stream = io.BytesIO(block)
    http = StatusAndHeadersParser(_HTTP_PROTOCOLS, verify=False).parse(stream)
    return http.get_statuscode(), http.headers, stream.read()


def _is_folded(line: str) -> bool:
    return line[:1] in (" ", "\t")


def get_header(headers: list[tuple[str, str]], name: str) -> str | None:
    """The first header of that (lower-case) name, as warcio's ``get_header``."""
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def http_body(body: bytes, headers: list[tuple[str, str]], max_decoded_bytes: int = MAX_DECODED_BYTES) -> tuple[bytes, tuple[str, str] | None]:
    """Undo transfer chunking and content encoding, as the client would have."""
    if (get_header(headers, "transfer-encoding") or "").lower() == "chunked":
        try:
            body = ChunkedDataReader(io.BytesIO(body), raise_exceptions=True).read()
        except (ChunkedDataException, ValueError) as exc:
            return body, (BAD_CHUNKING, str(exc)[:200])
    encoding = (get_header(headers, "content-encoding") or "").lower().strip()
    if encoding in ("", "identity"):
        return body, None
    try:
        return decode_content(body, encoding, max_decoded_bytes), None
    except DecodedTooLarge as exc:
        return b"", (DECODED_TOO_LARGE, f"{encoding}: {exc}")
    except (zlib.error, ValueError) as exc:
        return body, (BAD_CONTENT_ENCODING, f"{encoding}: {exc}"[:200])


class DecodedTooLarge(ValueError):
    """A Content-Encoding would decode past the limit (a decompression bomb, or a huge page)."""


def _inflate_capped(inflater, body: bytes, limit: int) -> bytes:
    out = inflater.decompress(body, limit + 1)
    if len(out) > limit:
        raise DecodedTooLarge(f"{len(body)} bytes decode to more than {limit} bytes")
    return out


def decode_content(body: bytes, encoding: str, max_bytes: int = MAX_DECODED_BYTES) -> bytes:
    """Undo an HTTP Content-Encoding, never producing more than ``max_bytes`` (else
    ``DecodedTooLarge``). A body cut short yields what it holds (pages are often clipped)."""
    if encoding in ("gzip", "x-gzip"):
        return _inflate_capped(zlib.decompressobj(47), body, max_bytes)  # 47: gzip or zlib header, detected
    if encoding == "deflate":  # servers send both zlib-wrapped and raw deflate under this name
        try:
            return _inflate_capped(zlib.decompressobj(15), body, max_bytes)
        except zlib.error:
            return _inflate_capped(zlib.decompressobj(-15), body, max_bytes)
    if encoding == "br":
        try:
            import brotli  # optional (not in requirements.txt): only a br-encoded body needs it
        except ImportError:
            raise ValueError("brotli is not installed (pip install brotli)") from None
        return _brotli_capped(brotli, body, max_bytes)
    raise ValueError("unknown content encoding")


def _brotli_capped(brotli, body: bytes, limit: int) -> bytes:
    """Brotli with the decoder's own output limit (brotli >= 1.2): one call never returns
    much more than the room left, so a 1,681-byte body of gigabytes stops at ``limit``.
    An older brotli without the limit is given 64-byte steps, checked after each."""
    decompressor = brotli.Decompressor()
    out, size = [], 0

    def keep(piece: bytes) -> None:
        nonlocal size
        size += len(piece)
        if size > limit:
            raise DecodedTooLarge(f"{len(body)} bytes decode to more than {limit} bytes")
        out.append(piece)

    try:
        try:
            keep(decompressor.process(body, output_buffer_limit=limit + 1))
        except TypeError:  # brotli < 1.2: no output limit
            for i in range(0, len(body), 64):
                keep(decompressor.process(body[i : i + 64]))
            return b"".join(out)
        while not decompressor.is_finished() and not decompressor.can_accept_more_data():
            keep(decompressor.process(b"", output_buffer_limit=limit + 1 - size))
    except brotli.error as exc:
        raise ValueError(str(exc)) from None
    return b"".join(out)


_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


# A <meta> charset, searched for in lower-cased bytes: without IGNORECASE the search skips
# to "<meta" at C speed.
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-z0-9._:-]+)""")


# Labels browsers decode with a superset (WHATWG Encoding Standard): pages declaring the
# narrow charset routinely use the wider one's characters.
_WHATWG_SUPERSETS = {"latin-1": "cp1252", "iso8859-1": "cp1252", "ascii": "cp1252", "gb2312": "gbk"}


def decode_html(body: bytes, content_type: str = "") -> tuple[str, str]:
    """Decode an HTML body: byte-order mark, HTTP charset, <meta> charset, UTF-8, then cp1252."""
    for bom, charset in _BOMS:
        if body.startswith(bom):  # a BOM wins over any declared charset, as in browsers
            return body[len(bom) :].decode(charset, "replace"), charset
    candidates = []
    match = re.search(r"charset\s*=\s*[\"']?([A-Za-z0-9._:-]+)", content_type, re.IGNORECASE)
    if match:
        candidates.append(match.group(1))
    start = body[:4096].lower()  # (the charset name's case does not matter to codecs.lookup)
    meta = _META_CHARSET.search(start) if b"charset" in start else None
    if meta:
        candidates.append(meta.group(1).decode("ascii", "ignore"))
    for name in candidates:
        try:
            charset = codecs.lookup(name).name
        except LookupError:
            continue
        charset = _WHATWG_SUPERSETS.get(charset, charset)
        try:
            return body.decode(charset), charset
        except UnicodeDecodeError:
            continue
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("cp1252", "replace"), "cp1252"
