"""Layer 1 of reading a crawl file (``corpus/warc.py`` frames the records): the raw file as
decompressed pieces. Gzip members are inflated one by one (Common Crawl writes one record per
member) with zlib-ng (zlib's output, faster); a file that is one long gzip stream, or not
compressed at all, is read too. A damaged or truncated member becomes a ``Break``, and reading
resumes at the next gzip member header.
"""

from __future__ import annotations

import types
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from corpus.records import CORRUPT_GZIP, READ_FAILED, TRUNCATED_GZIP

RAW_READ_SIZE = 1 << 16  # small reads keep zlib's unused_data copies short between members


@dataclass(frozen=True)
class Break:
    """The decompressed stream is not contiguous here: bytes between were lost."""

    reason: str
    offset: int
    detail: str


inflate: types.ModuleType
try:  # zlib-ng inflates the same bytes to the same output as zlib, about 1.6x as fast
    from zlib_ng import zlib_ng as inflate
except ImportError:  # pragma: no cover - zlib-ng is pinned in requirements.txt
    inflate = zlib


UNCOMPRESSED = -1  # member offset of bytes from a file that is not gzip-compressed


def byte_stream(raw: BinaryIO) -> Iterator[tuple[bytes, int] | Break]:
    """Yield (decompressed bytes, compressed offset of their gzip member) and ``Break``s."""
    try:
        head = raw.read(RAW_READ_SIZE)
    except OSError as exc:
        yield Break(READ_FAILED, 0, str(exc))
        return
    if head[:2] != b"\x1f\x8b":
        yield from _plain_stream(raw, head)
        return
    yield from _gzip_stream(raw if is_seekable(raw) else Rewindable(raw, head), head)


def is_seekable(raw) -> bool:
    try:
        return bool(raw.seekable())
    except (AttributeError, OSError, ValueError):
        return False


# How far back a stream that cannot seek (an HTTP body) can be re-read: the compressed
# bytes of the current gzip member, up to this many (Common Crawl members are a few KiB).
MAX_REWIND_BYTES = 64 << 20


class Rewindable:
    """A forward-only stream made seekable back to the start of the current gzip member,
    so recovery can rescan a damaged member's bytes for the members it ran through."""

    def __init__(self, raw: BinaryIO, head: bytes):
        self.raw = raw
        self.history = bytearray(head)  # bytes from file offset self.base on
        self.base = 0
        self.pos = len(head)  # file offset of the next read

    def seekable(self) -> bool:
        return True

    def read(self, n: int) -> bytes:
        buffered_end = self.base + len(self.history)
        if self.pos < buffered_end:
            start = self.pos - self.base
            chunk = bytes(self.history[start : start + n])
        else:
            chunk = self.raw.read(n)
            self.history += chunk
            if len(self.history) > MAX_REWIND_BYTES:
                self.forget_before(self.base + len(self.history) - MAX_REWIND_BYTES)
        self.pos += len(chunk)
        return chunk

    def seek(self, offset: int) -> None:
        if not self.base <= offset <= self.base + len(self.history):
            raise OSError(f"cannot go back to byte {offset} of a stream (kept from byte {self.base})")
        self.pos = offset

    def forget_before(self, offset: int) -> None:
        drop = min(offset, self.pos) - self.base
        if drop > 0:
            del self.history[:drop]
            self.base += drop


def forget_before(raw, offset: int) -> None:
    if isinstance(raw, Rewindable):
        raw.forget_before(offset)


def _plain_stream(raw: BinaryIO, head: bytes) -> Iterator[tuple[bytes, int] | Break]:
    offset = 0
    chunk = head
    while chunk:
        yield chunk, UNCOMPRESSED
        offset += len(chunk)
        try:
            chunk = raw.read(RAW_READ_SIZE)
        except OSError as exc:
            yield Break(READ_FAILED, offset, str(exc))
            return


def _gzip_stream(raw: BinaryIO | Rewindable, head: bytes) -> Iterator[tuple[bytes, int] | Break]:
    pending = head  # compressed bytes not yet given to a decompressor
    pending_offset = 0  # file offset of pending[0]
    member_offset = 0  # file offset where the current member starts
    inflater = inflate.decompressobj(31)
    while True:
        broken = None  # after a damaged member: the compressed bytes still in memory
        if not pending:
            try:
                pending = raw.read(RAW_READ_SIZE)
            except OSError as exc:
                yield Break(READ_FAILED, pending_offset, str(exc))
                return
            if not pending:
                if pending_offset <= member_offset:
                    return
                # The file ends inside a member: cut short, or a damaged member whose
                # decoder never failed and ran on through the members after it.
                yield Break(TRUNCATED_GZIP, member_offset, "file ends inside a gzip member")
                broken = b""
        if broken is None:
            # To replay a failing read byte by byte: the state before it (a fresh member needs none).
            before = inflater.copy() if pending_offset > member_offset else None
            try:
                out = inflater.decompress(pending)
            except inflate.error as exc:  # bad deflate data, or bytes after a member that are not one
                good = inflate_until_error(before or inflate.decompressobj(31), pending)
                if good:
                    yield good, member_offset  # everything before the bad byte
                yield Break(CORRUPT_GZIP, member_offset, str(exc))
                broken = pending
        if broken is not None:
            resumed = _resume_after(raw, broken, pending_offset, member_offset)
            if resumed is None:
                return
            pending, pending_offset = resumed
            member_offset = pending_offset
            inflater = inflate.decompressobj(31)
            continue
        if out:
            yield out, member_offset
        if inflater.eof:  # the member closed; what is left over starts the next one
            rest = inflater.unused_data
            pending_offset += len(pending) - len(rest)
            pending, member_offset = rest, pending_offset
            inflater = inflate.decompressobj(31)
            forget_before(raw, member_offset)
        else:
            pending_offset += len(pending)
            pending = b""


def inflate_until_error(inflater, data: bytes) -> bytes:
    """What ``inflater`` (a copy taken before ``data``) gives, one byte at a time, up to the
    byte zlib rejects: the good records before a bad byte are not thrown away with it."""
    out = []
    for i in range(len(data)):
        try:
            out.append(inflater.decompress(data[i : i + 1]))
        except inflate.error:
            break
        if inflater.eof:
            break
    return b"".join(out)


def _resume_after(raw: BinaryIO | Rewindable, pending: bytes, pending_offset: int,
                  member_offset: int) -> tuple[bytes, int] | None:
    """Where to go on after a damaged member: the next gzip member header after the byte
    where the damaged member starts. A damaged member can run on through the members after
    it (its end was lost), so the search starts there, not where zlib gave up: by seeking
    back (a stream is wrapped in ``Rewindable``), else in what is still in memory."""
    if is_seekable(raw) and pending_offset > member_offset + 1:
        try:
            raw.seek(member_offset + 1)
            return _seek_next_member(raw, b"", member_offset + 1, member_offset)
        except OSError:
            pass
    return _seek_next_member(raw, pending, pending_offset, member_offset)


def _seek_next_member(raw: BinaryIO | Rewindable, pending: bytes, pending_offset: int, after: int) -> tuple[bytes, int] | None:
    """Find the next gzip member header (1f 8b 08) after file offset ``after``."""
    window = pending
    window_offset = pending_offset
    while True:
        start = max(0, after + 1 - window_offset)
        found = window.find(b"\x1f\x8b\x08", start)
        if found >= 0:
            return window[found:], window_offset + found
        try:
            more = raw.read(RAW_READ_SIZE)
        except OSError:
            return None
        if not more:
            return None
        keep = window[-2:]  # a header may straddle two reads
        window_offset += len(window) - len(keep)
        window = keep + more
