"""The damage generator: seeded damage on real archives, and for each variant the
records that must survive it, computed from the intact file alone (used by
tests/test_damage.py and benchmarks/damage.py).

A file written one gzip member per record (as Common Crawl writes them) gets:

- ``zeroed``: 4 KiB overwritten with zeros (a bad disk block); every record whose member
  lies wholly outside those bytes must come out;
- ``flipped``: one byte inverted; every record whose member does not hold that byte;
- ``length``: one record's Content-Length made huge, +1000, or its blank line removed;
  every other record.

A one-stream file (``gzip`` of the whole archive) gets a flipped byte; every record that
decompresses wholly from before it must come out.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import zlib


class Unseekable(io.RawIOBase):
    """A stream that cannot go back (an HTTP body, say)."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self._inner.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def gzip_members(data: bytes) -> list[tuple[int, int, bytes]]:
    """(start, end, decompressed) of every gzip member of an intact file."""
    out, pos = [], 0
    while pos < len(data):
        inflater = zlib.decompressobj(31)
        text = inflater.decompress(data[pos:])
        end = len(data) - len(inflater.unused_data)
        out.append((pos, end, text))
        pos = end
    return out


def ids_in(text: bytes) -> list[str]:
    return [m.decode() for m in re.findall(rb"WARC-Record-ID: (<[^>]+>)", text)]


def intact_records_before(data: bytes, damage_at: int) -> list[str]:
    """Records of a one-stream file whose bytes all decompress from before ``damage_at``."""
    prefix = zlib.decompressobj(31).decompress(data[:damage_at])
    starts = [m.start() for m in re.finditer(rb"WARC/1\.0\r\n", prefix)]
    ends = starts[1:]  # a record is whole when the next one has begun
    return [ids_in(prefix[s:e])[0] for s, e in zip(starts, ends)]


def damaged_variants(data: bytes, seed: int, count: int):
    """Seeded variants of a one-member-per-record file: (name, damaged bytes, required ids)."""
    rng = random.Random(seed)
    members = gzip_members(data)
    for _ in range(count):
        start = rng.randrange(members[1][0], len(data) - 4096)
        damaged = data[:start] + b"\x00" * 4096 + data[start + 4096 :]
        required = [i for s, e, text in members if e <= start or s >= start + 4096 for i in ids_in(text)[:1]]
        yield f"zeroed@{start}", damaged, required
    for _ in range(count):
        at = rng.randrange(members[1][0], len(data))
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        required = [i for s, e, text in members if not s <= at < e for i in ids_in(text)[:1]]
        yield f"flipped@{at}", bytes(damaged), required


LENGTH_EDITS = {
    "huge": lambda t: re.sub(rb"Content-Length: \d+", b"Content-Length: 999999999999", t, count=1),
    "plus-1000": lambda t: re.sub(rb"Content-Length: (\d+)", lambda m: b"Content-Length: %d" % (int(m[1]) + 1000), t, count=1),
    "no-blank-line": lambda t: t.rstrip(b"\r\n"),
}


def with_member_replaced(data: bytes, index: int, edit) -> tuple[bytes, list[str]]:
    """The file with member ``index`` edited (decompressed, ``edit``, recompressed), and
    the ids of every other record."""
    out, ids = [], []
    for i, (start, end, text) in enumerate(gzip_members(data)):
        if i == index:
            out.append(gzip.compress(edit(text), mtime=0))
        else:
            out.append(data[start:end])
            ids.extend(ids_in(text)[:1])
    return b"".join(out), ids


def length_variants(data: bytes, seed: int, count: int):
    """Seeded wrong Content-Lengths and missing blank lines: (name, damaged bytes, required ids)."""
    rng = random.Random(seed)
    members = len(gzip_members(data))
    for _ in range(count):
        index = rng.randrange(1, members)
        kind = rng.choice(sorted(LENGTH_EDITS))
        damaged, required = with_member_replaced(data, index, LENGTH_EDITS[kind])
        yield f"{kind}@record{index}", damaged, required
