"""Streaming, fault-tolerant reading of Common Crawl WARC and WET files.

Three layers, each a generator, so memory stays at one record per file:

1. ``corpus.gzip_stream.byte_stream`` turns the raw file into decompressed pieces. It walks gzip members
   one by one (Common Crawl writes one record per member), inflating with zlib-ng (zlib's
   output, faster), and also reads a file that is one long gzip stream or not compressed
   at all. A damaged or truncated member becomes a ``Break``; reading resumes at the
   next gzip member header.
2. ``iter_records`` frames WARC records by their ``Content-Length``. A record cut short,
   a wrong length, garbage between records, an unknown version, a second ``warcinfo`` or
   a malformed target URI becomes a ``ReadError``, and framing resynchronises on the next
   ``WARC/`` line, so every complete record before and after the damage is still read.
   A piece that is exactly one well-formed record (a Common Crawl member) skips the
   buffer; anything else takes the general path, which gives the same records.
3. ``read_archive`` turns records into what the pipelines want: WET ``conversion``
   records into ``Document``s, WARC ``response`` records with an HTML body into
   ``HtmlPage``s (HTTP head parsed as warcio parses it: the usual head split here, any
   other by warcio; chunking and content-encoding undone, charset decoded: ``corpus/http_decode.py``). Other
   record types are skipped and counted.

Every record carries its provenance: the file and the compressed byte offset of the
gzip member it starts in (the offset Common Crawl's index gives), plus its offset in the
decompressed stream.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import itertools
import logging
import operator
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from warcio.statusandheaders import StatusAndHeadersParserException

from corpus.c4 import c4_text_of_block
from corpus.gzip_stream import UNCOMPRESSED, Break, byte_stream
from corpus.http_decode import MAX_DECODED_BYTES, decode_html, get_header, http_body, parse_http
from corpus.inputs import excerpt, open_input
from corpus.records import (
    BAD_HEADER,
    BAD_HTTP_HEAD,
    CLIPPED_RECORD,
    EMPTY_FILE,
    EXTRA_WARCINFO,
    GARBAGE,
    MISSING_TARGET_URI,
    MISSING_TERMINATOR,
    READ_FAILED,
    RECORD_TOO_LARGE,
    SPACE_IN_TARGET_URI,
    UNKNOWN_VERSION,
    WRONG_LENGTH,
    Document,
    HtmlPage,
    ReadError,
    normalize_timestamp,
)

log = logging.getLogger(__name__)


MAX_HEADER_BYTES = 1 << 20


# Largest record block read into memory, and largest body a Content-Encoding may decode
# to: bounded memory whatever a header claims (Common Crawl truncates payloads at 1 MiB).
MAX_RECORD_BYTES = 50 << 20


# 0.17 and 0.18 (drafts: Heritrix, ClueWeb09/12) frame records exactly as 1.0 does.
KNOWN_VERSIONS = (b"WARC/1.0", b"WARC/1.1", b"WARC/0.18", b"WARC/0.17")


HTML_MIME_TYPES = ("text/html", "application/xhtml+xml")


TEXT_MODES = ("faithful", "c4")


LOGGED_ERRORS_PER_REASON = 10


@dataclass(frozen=True)
class WarcRecord:
    """One framed record: its header fields (lower-cased names), its block, where it was."""

    version: str
    headers: dict[str, str]
    block: bytes
    source: str
    offset: int  # compressed offset of the gzip member the record starts in (or file offset)
    stream_offset: int  # offset in the decompressed stream

    @property
    def rec_type(self) -> str:
        return self.headers.get("warc-type", "").lower()

    def get(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


class _Framer:
    """Holds the decompressed bytes of the current record and where they came from."""

    def __init__(self, pieces: Iterator[tuple[bytes, int] | Break]):
        self.pieces = pieces
        self.buf = bytearray()
        self.pos = 0  # parse position in buf
        self.stream_base = 0  # stream offset of buf[0]
        self.members: list[tuple[int, int]] = []  # (stream offset, member offset), ascending
        self.exhausted = False
        self.pending_break: Break | None = None

    def fill(self) -> bool:
        """Read one more piece; False at end of stream or at a break (see pending_break)."""
        if self.exhausted or self.pending_break is not None:
            return False
        piece = next(self.pieces, None)
        if piece is None:
            self.exhausted = True
            return False
        if isinstance(piece, Break):
            self.pending_break = piece
            return False
        self._accept(*piece)
        return True

    def _accept(self, data: bytes, member: int) -> None:
        stream_end = self.stream_base + len(self.buf)
        if not self.members or self.members[-1][1] != member:
            self.members.append((stream_end, member))
        self.buf += data

    def take_whole_record(self, max_record_bytes: int) -> tuple[str, dict[str, str], bytes, int, int] | None:
        """The fast path, when nothing is buffered: if the next piece is exactly one
        well-formed record (header, block of its Content-Length, blank line) -- what a
        gzip member of a Common Crawl file decompresses to -- return (version, headers,
        block, offset, stream offset) without copying it through the buffer. Anything else
        (part of a record, several, damage, a break, the end) is buffered or noted just as
        ``fill`` does, and None tells the caller to frame it the general way."""
        piece = next(self.pieces, None)
        if piece is None:
            self.exhausted = True
            return None
        if isinstance(piece, Break):
            self.pending_break = piece
            return None
        data, member = piece
        if data[:5] == b"WARC/" and data[-4:] == b"\r\n\r\n":
            head_end = data.find(b"\r\n\r\n")
            # (a bare-LF blank line before the CRLF one ends the header there: general path)
            if head_end > 0 and data.find(b"\n\n", 0, head_end + 2) < 0:
                version, headers, problem = _parse_warc_head(data[:head_end])
                if not problem:
                    length = int(headers["content-length"])
                    end = head_end + 4 + length
                    if end + 4 == len(data) and length <= max_record_bytes:
                        stream = self.stream_base
                        self.stream_base = stream + len(data)
                        self.members = [(stream, member)]
                        return version, headers, data[head_end + 4 : end], stream if member == UNCOMPRESSED else member, stream
        self._accept(data, member)
        return None

    def available(self) -> int:
        return len(self.buf) - self.pos

    def member_offset(self, stream_offset: int) -> int:
        """The gzip member a stream position lies in; in a plain file, the position itself."""
        result = 0
        for start, member in self.members:
            if start > stream_offset:
                break
            result = member
        return stream_offset if result == UNCOMPRESSED else result

    def consume(self, n: int) -> None:
        self.pos += n
        if self.pos > (1 << 20) or self.pos == len(self.buf):
            self._compact()

    def _compact(self) -> None:
        del self.buf[: self.pos]
        self.stream_base += self.pos
        self.pos = 0
        while len(self.members) > 1 and self.members[1][0] <= self.stream_base:
            self.members.pop(0)

    def restart_after_break(self) -> Break:
        """Drop what is buffered (it cannot be completed) and continue after the break."""
        broken = self.pending_break
        assert broken is not None  # called only at a break
        self.pending_break = None
        self.stream_base += len(self.buf)
        self.buf = bytearray()
        self.pos = 0
        self.members = []
        return broken


def iter_records(raw: BinaryIO, source: str, max_record_bytes: int | None = None) -> Iterator[WarcRecord | ReadError]:
    """Frame every WARC record in a (possibly compressed, possibly damaged) stream.

    A record whose Content-Length is over ``max_record_bytes`` (default
    ``MAX_RECORD_BYTES``) is skipped without being buffered; one that ends past the start
    of a valid record header, or is cut short, is dropped and reading resumes at the next
    ``WARC/`` line after its header, so the records its wrong length would swallow are kept.
    """
    max_record_bytes = MAX_RECORD_BYTES if max_record_bytes is None else max_record_bytes
    framer = _Framer(byte_stream(raw))
    seen_other_than_warcinfo = False
    resyncing = False  # the last error already explains the bytes we are about to skip
    while True:
        whole = None
        if not framer.buf and framer.pending_break is None and not framer.exhausted:
            whole = framer.take_whole_record(max_record_bytes)
        if whole is not None:
            version, headers, block, offset, record_stream = whole
            resyncing = False
        else:
            framed = yield from _frame_one(framer, source, max_record_bytes, resyncing)
            if framed is None:
                return
            resyncing, record = framed
            if record is None:
                continue
            version, headers, block, offset, record_stream = record
        if version.encode() not in KNOWN_VERSIONS:
            yield ReadError(source, offset, UNKNOWN_VERSION, excerpt(version, 40))
            continue
        rec_type = headers.get("warc-type", "").lower()
        if rec_type == "warcinfo" and seen_other_than_warcinfo:
            yield ReadError(source, offset, EXTRA_WARCINFO, "warcinfo record after other records (files concatenated?)")
        if rec_type != "warcinfo":
            seen_other_than_warcinfo = True
        uri = headers.get("warc-target-uri")
        if uri is not None:
            clean = uri.strip().strip("<>")
            if " " in clean:
                yield ReadError(source, offset, SPACE_IN_TARGET_URI, excerpt(clean, 200))
                clean = clean.replace(" ", "%20")
            headers["warc-target-uri"] = clean
        yield WarcRecord(version, headers, block, source, offset, record_stream)


def _frame_one(framer: _Framer, source: str, max_record_bytes: int, resyncing: bool):
    """The general framing of one record from the buffer, through any damage: yields the
    ``ReadError``s met on the way and returns (resyncing, (version, headers, block, offset,
    stream offset) or None when no record came out this time), or None at the end."""
    while True:
        while framer.available() and framer.buf[framer.pos] in b"\r\n":
            framer.consume(1)
        if framer.available() or not framer.fill():
            break
    if not framer.available():
        if framer.pending_break is not None:
            yield _after_break(framer, source)
            return False, None
        return None
    record_stream = framer.stream_base + framer.pos
    # A record must start with "WARC/"; otherwise skip to the next line that does.
    if not _starts_with_warc(framer):
        if framer.pending_break is not None and framer.available() < 5:
            yield _after_break(framer, source)
            return False, None
        if not resyncing:
            yield ReadError(source, framer.member_offset(record_stream), GARBAGE, _snippet(framer))
        _skip_to_next_warc_line(framer)
        return True, None
    header_end, sep_len = _find_header_end(framer)
    if header_end < 0:
        if framer.pending_break is not None:
            yield _after_break(framer, source)
            return False, None
        yield ReadError(source, framer.member_offset(record_stream), CLIPPED_RECORD, "stream ends inside the record header")
        framer.consume(framer.available())
        return resyncing, None
    offset = framer.member_offset(record_stream)
    head = bytes(framer.buf[framer.pos : header_end])
    version, headers, problem = _parse_warc_head(head)
    if problem:
        yield ReadError(source, offset, BAD_HEADER, problem)
        framer.consume(4)  # past "WARC", then look for the next record
        _skip_to_next_warc_line(framer)
        return True, None
    length = int(headers["content-length"])
    block_start = header_end + sep_len
    if length > max_record_bytes:  # never buffered: the next record is looked for instead
        yield ReadError(source, offset, RECORD_TOO_LARGE, f"Content-Length {length} is over the {max_record_bytes}-byte limit")
        framer.consume(block_start - framer.pos)
        _skip_to_next_warc_line(framer)
        return True, None
    while len(framer.buf) - block_start < length and framer.fill():
        pass
    if len(framer.buf) - block_start < length:
        # Cut short by a damaged member or the end of the file, or a Content-Length
        # that is too large: records after this header are still in what was read.
        if framer.pending_break is None:  # (a damaged member is reported once, when reached)
            yield ReadError(source, offset, CLIPPED_RECORD, f"Content-Length {length}, {len(framer.buf) - block_start} bytes present")
        framer.consume(block_start - framer.pos)
        _skip_to_next_warc_line(framer)
        return True, None
    end = block_start + length
    while len(framer.buf) < end + sep_len and framer.fill():
        pass
    next_record = _record_start_inside(framer.buf, block_start, end)
    if next_record >= 0:  # the Content-Length runs past the next record's header
        yield ReadError(source, offset, WRONG_LENGTH,
                        f"Content-Length {length} runs into a record header {next_record - block_start} bytes into the block")
        framer.consume(next_record - framer.pos)
        return False, None
    block = bytes(framer.buf[block_start:end])
    framer.consume(end - framer.pos)
    terminated = _consume_terminator(framer, sep_len)
    if not terminated:
        yield ReadError(source, offset, MISSING_TERMINATOR, f"record not followed by a blank line; Content-Length {length} may be wrong")
    return not terminated, (version, headers, block, offset, record_stream)


def _after_break(framer: _Framer, source: str) -> ReadError:
    broken = framer.restart_after_break()
    return ReadError(source, broken.offset, broken.reason, broken.detail)


_RECORD_HEAD = re.compile(rb"WARC/(?:0\.1[78]|1\.[01])\r?\n(?:WARC-[A-Za-z-]+|Content-Length|Content-Type): ")


def _record_start_inside(buf: bytearray, start: int, end: int) -> int:
    """Where a valid-looking record header (version line, then a WARC header line) begins
    inside ``buf[start:end]`` when the block is not followed by its blank line; else -1.
    A block whose end is where it should be is never searched, so an archived WARC inside
    a payload is not mistaken for a record."""
    expected_end = (buf[end : end + 4] == b"\r\n\r\n") or (buf[end : end + 2] == b"\n\n") or end >= len(buf)
    if expected_end:
        return -1
    found = _RECORD_HEAD.search(buf, start, min(len(buf), end + 256))
    return found.start() if found and found.start() < end else -1


def _starts_with_warc(framer: _Framer) -> bool:
    while framer.available() < 5 and framer.fill():
        pass
    return framer.buf[framer.pos : framer.pos + 5] == b"WARC/"


# Where reading resumes after damage: a ``WARC/`` line, or a record header anywhere, even
# straight after junk with no line end (a junk gzip member, a clipped line before a record).
_RESYNC = re.compile(rb"\nWARC/|" + _RECORD_HEAD.pattern)


# Bytes kept across reads while searching, so a header split between two reads is found.
_RESYNC_OVERLAP = 512


def _skip_to_next_warc_line(framer: _Framer) -> None:
    """Advance to the next record start: ``WARC/`` right here or at a line start, or a
    version line and a WARC header anywhere (reading more as needed)."""
    while framer.available() < 5 and framer.fill():
        pass
    if framer.buf[framer.pos : framer.pos + 5] == b"WARC/":
        return  # e.g. after a block that declared more bytes than there were: the next record
    while True:
        found = _RESYNC.search(framer.buf, framer.pos)
        if found is not None:
            start = found.start() + (framer.buf[found.start()] == 0x0A)
            framer.consume(start - framer.pos)
            return
        keep = min(framer.available(), _RESYNC_OVERLAP)
        framer.consume(framer.available() - keep)
        if not framer.fill():
            framer.consume(framer.available())
            return


def _find_header_end(framer: _Framer) -> tuple[int, int]:
    searched = framer.pos
    while True:
        crlf = framer.buf.find(b"\r\n\r\n", searched)
        # Files written with bare LF line ends exist in the wild; look for "\n\n" only
        # before the first CRLF blank line, never through the record's block.
        lf = framer.buf.find(b"\n\n", searched, crlf + 2 if crlf >= 0 else len(framer.buf))
        if lf >= 0 and (crlf < 0 or lf < crlf):
            return lf, 2
        if crlf >= 0:
            return crlf, 4
        if len(framer.buf) - framer.pos > MAX_HEADER_BYTES:
            return -1, 0
        searched = max(framer.pos, len(framer.buf) - 3)
        if not framer.fill():
            return -1, 0


_COLONS = itertools.repeat(":")


_NAME, _SEP, _VALUE = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _parse_warc_head(head: bytes) -> tuple[str, dict[str, str], str]:
    """Parse a WARC header block; returns (version, headers, problem or '')."""
    text = head.decode("utf-8", "replace")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    version = lines[0].strip()
    # The common case at C speed: every line "name: value", no folded lines, no name twice.
    fields = list(map(str.partition, lines[1:], _COLONS))
    if "\n " not in text and "\n\t" not in text and "" not in map(_SEP, fields):
        headers = dict(zip(map(str.lower, map(str.strip, map(_NAME, fields))), map(str.strip, map(_VALUE, fields)), strict=True))
        if len(headers) == len(fields):
            length = headers.get("content-length")
            if length is not None and length.isdigit():
                return version, headers, ""
    headers = {}
    name = ""
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and name:  # folded continuation line
            headers[name] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            return version, headers, f"header line without a colon: {line[:80]!r}"
        name = key.strip().lower()
        headers.setdefault(name, value.strip())
    length = headers.get("content-length")
    if length is None:
        return version, headers, "no Content-Length"
    if not length.isdigit():
        return version, headers, f"Content-Length is not a number: {length[:40]!r}"
    return version, headers, ""


def _consume_terminator(framer: _Framer, sep_len: int) -> bool:
    """Consume the blank line after a block; False when it is not there."""
    expected = b"\r\n\r\n" if sep_len == 4 else b"\n\n"
    while framer.available() < len(expected) and framer.fill():
        pass
    got = bytes(framer.buf[framer.pos : framer.pos + len(expected)])
    if got == expected:
        framer.consume(len(expected))
        return True
    if not got and framer.pending_break is None:
        return True  # a file's last record may end without the blank line
    return False


def _snippet(framer: _Framer) -> str:
    """The first bytes of what was skipped, escaped: input never reaches a log raw."""
    return excerpt(bytes(framer.buf[framer.pos : framer.pos + 60]), 60)


@dataclass
class ReadStats:
    """Counts by record type, outcome and error reason, for one or many files."""

    counts: Counter = field(default_factory=Counter)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def errors(self) -> dict[str, int]:
        return {k.split(":", 1)[1]: v for k, v in sorted(self.counts.items()) if k.startswith("error:")}


def read_archive(
    source: str,
    *,
    text_mode: str = "faithful",
    stats: ReadStats | None = None,
    fileobj: BinaryIO | None = None,
    max_record_bytes: int = MAX_RECORD_BYTES,
    verify_digest: bool = False,
) -> Iterator[Document | HtmlPage | ReadError]:
    """Read one WARC/WET file: ``Document``s from WET, ``HtmlPage``s from WARC, ``ReadError``s.

    ``max_record_bytes`` bounds memory: a record block longer than that is skipped
    (``record_too_large``), and so is an HTTP body whose Content-Encoding would decode to
    more (``decoded_too_large``). ``verify_digest`` checks each record's
    ``WARC-Block-Digest`` and ``WARC-Payload-Digest`` (sha1/sha256/md5, base32 or hex) and
    counts ``digest:block_ok``/``digest:block_mismatch`` (and ``payload_``) in the stats; a
    record with a mismatching digest is still read, as warcio does.

    ``text_mode='faithful'`` keeps WET text as Common Crawl wrote it; ``'c4'`` applies
    the C4 reference's quirks (lines stripped, blank lines dropped, lines starting
    ``WARC``/``CONTENT-``/``Content-`` dropped). Never raises on bad input.
    """
    if text_mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, not {text_mode!r}")
    stats = stats if stats is not None else ReadStats()
    stats.add("files")
    logged: Counter = Counter()
    try:
        raw = fileobj if fileobj is not None else open_input(source)
    except OSError as exc:
        error = ReadError(source, 0, READ_FAILED, str(exc))
        _note_error(error, stats, logged)
        yield error
        return
    seen = False
    with raw:
        for item in iter_records(raw, source, max_record_bytes):
            seen = True
            if isinstance(item, ReadError):
                _note_error(item, stats, logged)
                yield item
                continue
            rec_type = item.rec_type or "unknown"
            stats.add(f"records:{rec_type}")
            if verify_digest:
                _check_digests(item, stats, logged)
            produced: Document | HtmlPage | ReadError | None
            if rec_type == "conversion":
                produced = _conversion_to_document(item, text_mode)
            elif rec_type == "response":
                produced = _response_to_page(item, stats, max_record_bytes)
            else:
                stats.add(f"skipped:{rec_type}")
                continue
            if isinstance(produced, ReadError):
                _note_error(produced, stats, logged)
            elif produced is not None:
                stats.add(f"produced:{rec_type}")
                if isinstance(produced, Document) and "invalid_utf8" in produced.meta:
                    stats.add("repaired:invalid_utf8")
                    logged["invalid_utf8"] += 1
                    if logged["invalid_utf8"] <= LOGGED_ERRORS_PER_REASON:
                        log.warning("%s @%d: invalid UTF-8 in %s, bad bytes replaced with U+FFFD", source, item.offset, produced.url)
            if produced is not None:
                yield produced
    if not seen:
        error = ReadError(source, 0, EMPTY_FILE, "the file holds no WARC record")
        _note_error(error, stats, logged)
        yield error


def digest_matches(declared: str, data: bytes) -> bool | None:
    """Whether ``data`` has the digest a WARC header declares (``sha1:<base32>``, also
    sha256/md5 and hex); None when the algorithm or the encoding is not known."""
    algorithm, _, value = declared.strip().partition(":")
    try:
        digest = hashlib.new(algorithm.strip().lower().replace("-", ""), data).digest()
    except (ValueError, TypeError):
        return None
    value = value.strip()
    if len(value) == 2 * len(digest) and all(c in "0123456789abcdefABCDEF" for c in value):
        return digest.hex() == value.lower()
    try:
        return base64.b32decode(value.upper() + "=" * (-len(value) % 8)) == digest
    except (binascii.Error, ValueError):
        return None


def _check_digests(record: WarcRecord, stats: ReadStats, logged: Counter) -> None:
    checks = [("block", record.get("warc-block-digest"), lambda: record.block)]
    if record.rec_type in ("response", "request"):  # a revisit names the payload of an earlier record
        checks.append(("payload", record.get("warc-payload-digest"), lambda: _after_http_head(record.block)))
    for part, declared, data in checks:
        if not declared:
            continue
        verdict = digest_matches(declared, data())
        outcome = "unknown" if verdict is None else "ok" if verdict else "mismatch"
        stats.add(f"digest:{part}_{outcome}")
        if outcome == "mismatch":
            logged[f"digest_{part}"] += 1
            if logged[f"digest_{part}"] <= LOGGED_ERRORS_PER_REASON:
                log.warning("%s @%d: WARC-%s-Digest does not match the record", record.source, record.offset, part.title())


def _after_http_head(block: bytes) -> bytes:
    end = block.find(b"\r\n\r\n")
    return block[end + 4 :] if end >= 0 else b""


def _note_error(error: ReadError, stats: ReadStats, logged: Counter) -> None:
    stats.add(f"error:{error.reason}")
    logged[error.reason] += 1
    if logged[error.reason] <= LOGGED_ERRORS_PER_REASON:
        log.warning("%s @%d: %s %s", error.source, error.offset, error.reason, error.detail)
        if logged[error.reason] == LOGGED_ERRORS_PER_REASON:
            log.warning("%s: further %s errors are counted, not logged", error.source, error.reason)


def _provenance(record: WarcRecord) -> dict[str, str]:
    headers = record.headers
    meta = {
        "source": record.source,
        "offset": str(record.offset),
        "stream_offset": str(record.stream_offset),
        "record_id": headers.get("warc-record-id", ""),
    }
    language = headers.get("warc-identified-content-language")
    if language:
        meta["language"] = language
    return meta


def _conversion_to_document(record: WarcRecord, text_mode: str) -> Document | ReadError:
    url = record.headers.get("warc-target-uri")
    if not url:
        return ReadError(record.source, record.offset, MISSING_TARGET_URI, f"{record.rec_type} record {record.get('warc-record-id')}")
    meta = _provenance(record)
    try:
        text = record.block.decode("utf-8")
    except UnicodeDecodeError:  # kept, with U+FFFD for the bad bytes, and counted
        text = record.block.decode("utf-8", "replace")
        meta["invalid_utf8"] = "true"
    if text_mode == "c4":
        text = c4_text_of_block(record.block, text, "invalid_utf8" not in meta)
    return Document(text, url, warc_timestamp(record.headers.get("warc-date", "")), meta)


def warc_timestamp(value: str) -> str:
    """``normalize_timestamp``, with a shortcut for the form WARC-Dates nearly always take
    (``2019-04-18T12:41:33Z``): the same result without strftime."""
    if len(value) == 20 and value[19] == "Z" and value[10] == "T" and value[4] == value[7] == "-" and value[13] == value[16] == ":":
        try:
            parsed = _dt.datetime.fromisoformat(value[:19])
        except ValueError:
            parsed = None
        if parsed is not None and parsed.year >= 1000 and parsed.tzinfo is None:  # (strftime's %Y does not pad years before 1000)
            return parsed.isoformat(timespec="seconds") + "Z"
    return normalize_timestamp(value)


def _response_to_page(record: WarcRecord, stats: ReadStats, max_decoded_bytes: int = MAX_DECODED_BYTES) -> HtmlPage | ReadError | None:
    url = record.get("warc-target-uri")
    if not url:
        return ReadError(record.source, record.offset, MISSING_TARGET_URI, f"response record {record.get('warc-record-id')}")
    try:
        code, http_headers, body = parse_http(record.block)
        status = int((code or "0")[:3])
    except (StatusAndHeadersParserException, ValueError, EOFError) as exc:
        return ReadError(record.source, record.offset, BAD_HTTP_HEAD, str(exc)[:200])
    content_type = get_header(http_headers, "content-type") or ""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime not in HTML_MIME_TYPES:
        stats.add(f"skipped:non_html:{mime or 'none'}")
        return None
    body, problem = http_body(body, http_headers, max_decoded_bytes)
    if problem:
        return ReadError(record.source, record.offset, problem[0], problem[1])
    html, charset = decode_html(body, content_type)
    return HtmlPage(
        url=url,
        timestamp=warc_timestamp(record.headers.get("warc-date", "")),
        status=status,
        headers=dict(http_headers),
        html=html,
        charset=charset,
        source=record.source,
        offset=record.offset,
        record_id=record.get("warc-record-id"),
    )


@dataclass
class ArchiveSummary:
    """What one file holds: records by type, MIME types, language headers, errors."""

    source: str
    records: Counter = field(default_factory=Counter)
    mime_types: Counter = field(default_factory=Counter)
    languages: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    first_errors: list[ReadError] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "records": dict(self.records.most_common()),
            "mime_types": dict(self.mime_types.most_common()),
            "languages": dict(self.languages.most_common()),
            "errors": dict(self.errors.most_common()),
            "first_errors": [e.to_dict() for e in self.first_errors],
        }


def inspect_archive(source: str, fileobj: BinaryIO | None = None, keep_errors: int = 5) -> ArchiveSummary:
    """Count a file's records by type, payload MIME type and language header; never raises."""
    summary = ArchiveSummary(source)
    try:
        raw = fileobj if fileobj is not None else open_input(source)
    except OSError as exc:
        summary.errors[READ_FAILED] += 1
        summary.first_errors.append(ReadError(source, 0, READ_FAILED, str(exc)))
        return summary
    with raw:
        for item in iter_records(raw, source):
            if isinstance(item, ReadError):
                summary.errors[item.reason] += 1
                if len(summary.first_errors) < keep_errors:
                    summary.first_errors.append(item)
                continue
            rec_type = item.rec_type or "unknown"
            summary.records[rec_type] += 1
            if rec_type in ("conversion", "response") and not item.get("warc-target-uri"):  # as read_archive finds it
                error = ReadError(source, item.offset, MISSING_TARGET_URI, f"{rec_type} record {item.get('warc-record-id')}")
                summary.errors[error.reason] += 1
                if len(summary.first_errors) < keep_errors:
                    summary.first_errors.append(error)
            summary.mime_types[f"{rec_type}:{payload_mime(item)}"] += 1
            language = item.get("warc-identified-content-language")
            if language:
                summary.languages[language] += 1
    return summary


def payload_mime(record: WarcRecord) -> str:
    """The MIME type of what a record carries: the HTTP Content-Type for responses."""
    if record.rec_type == "response" and record.block.startswith(b"HTTP/"):
        end = record.block.find(b"\r\n\r\n")
        head = record.block[: end if end >= 0 else 1 << 16]
        match = re.search(rb"(?im)^content-type:[ \t]*([^;\r\n]*)", head)
        return match.group(1).strip().lower().decode("latin-1") if match and match.group(1).strip() else "none"
    return record.get("content-type", "none").split(";", 1)[0].strip().lower() or "none"
