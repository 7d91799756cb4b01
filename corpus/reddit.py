"""WebText's link stage: outbound Reddit links with at least 3 karma (GPT-2, section 2.1).

From Pushshift submission dumps to one merged record per page worth fetching:

1. ``iter_dump_lines(path)`` streams the lines of a dump (``.zst`` with the 2**31 window
   of the newer dumps, ``.bz2``, ``.xz``, ``.gz`` or plain NDJSON), never holding it whole.
2. ``parse_submission(line)`` gives a ``Submission`` or the name of what is wrong with the
   line (``PARSE_PROBLEMS``).
3. ``submission_problem(sub, filt)`` says why a submission is no WebText link, checking
   ``SUBMISSION_PROBLEMS`` in their order, or ``None``.
4. Submissions are grouped by ``corpus.urls.url_key`` (a Beam ``GroupByKey`` at scale) and
   ``merge_submissions`` turns each group into a ``Link``; ``link_problem(link, filt)``
   drops the links below the karma threshold (``LINK_PROBLEMS``).
5. ``write_link_table`` / ``read_link_table`` store the links as Parquet.

The rules the pipeline runs return a ``common.decision.Decision`` (one unit: ``links``):
``filter_submission(line, filt)`` (steps 2-3: the ``Submission`` or the first problem, the
line or URL sampled) and ``merge_link(key, subs, filt)`` (step 4: the ``Link`` or
``low_score``). ``select_links`` runs steps 2-4 in memory through the same rules, for tests
and small dumps. Filters run per submission before merging, so the karma of a link counts
only its eligible submissions (a URL posted in an over_18 thread and elsewhere keeps only
the other posts' karma).
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import datetime as dt
import functools
import json
import lzma
import math
import os
import urllib.parse
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from common import storage
from common.decision import LINKS, PASSED, SUBMISSIONS, Decision
from corpus.inputs import is_remote, open_input
from corpus.shards import utf8_safe
from corpus.urls import WWW_LABEL, canonical_host, canonical_url, url_key

# Newer Pushshift dumps are compressed with ``zstd --long=31``; the reader must allow it.
PUSHSHIFT_MAX_WINDOW = 2**31
# Decompressed bytes handed to the UTF-8 decoder at a time; a line may span any number.
READ_CHUNK_BYTES = 1 << 20
# Compressed bytes read from a .zst file at a time, and given to zstd at a time: a zstd
# block of a few bytes can stand for 128 KiB, so 2 KiB of input decode to at most 64 MiB
# (a 197 KB file of 2 GiB of lines is read with bounded memory).
ZSTD_READ_BYTES = 1 << 20
ZSTD_FEED_BYTES = 2 << 10
# gzip/bz2/xz get the same small feeds, and each call may return at most this many bytes:
# a stream cut or corrupted part-way loses only what its last feed would have decoded to.
DECODE_PIECE_BYTES = 1 << 20
# Every codec's output is capped at this many times the compressed bytes read so far (after
# a first DECOMPRESSED_FLOOR_BYTES): real dumps compress 5-15x; a 131 KB frame of 4 GiB
# (which would also fill a 2**31 zstd window, 2.5 GB of memory) is a decompression bomb.
MAX_DECOMPRESSION_RATIO = 1000
DECOMPRESSED_FLOOR_BYTES = 128 << 20
# More empty lines than this in a row end the dump (``DumpReadError``): a file of newlines
# only would otherwise be read one empty line at a time for hours.
MAX_EMPTY_LINE_RUN = 1 << 16
# The longest dump line kept (Pushshift submissions are a few KiB; selftext at most 40k
# characters): a longer one is skipped as ``line_too_long`` without being held whole.
MAX_LINE_CHARS = 4 << 20
# Plausible ranges of numbers (anything outside them is a bad value, never a crash on an
# int64 column): created_utc from 1970 to the end of year 9999, scores and comment counts.
CREATED_UTC_RANGE = (0, 253_402_300_799)
SCORE_LIMIT = 10**9
# Dump compression by file suffix; anything else (.ndjson, .json, .jsonl, none) is plain.
COMPRESSION_SUFFIXES = {".zst": "zst", ".zstd": "zst", ".bz2": "bz2", ".xz": "xz", ".gz": "gz"}

# Why a dump line gives no Submission, in the order parse_submission checks.
PARSE_PROBLEMS = ("line_too_long", "malformed_json", "json_too_deep", "not_an_object", "missing_url", "bad_created_utc", "bad_score")
# Why a submission is no WebText link, in the order submission_problem checks: first what
# the post is (not an outbound link, not a usable URL, Reddit's own media, adult), then
# the choices of the run (subreddits, dates, hosts, file types). So before_range and
# after_range count only submissions that nothing about the post itself rules out.
SUBMISSION_PROBLEMS = (
    "self_post",  # is_self: a text post on Reddit, not an outbound link
    "bad_url",  # not an http(s) URL, or one corpus.urls.canonical_url rejects
    "reddit_internal",  # links to Reddit itself (REDDIT_HOSTS): threads, i.redd.it, v.redd.it
    "over_18",  # marked NSFW (openwebtext drops these too); LinkFilter.drop_over_18
    "blocked_subreddit",  # posted in a subreddit of LinkFilter.subreddit_blocklist
    "before_range",  # created before LinkFilter.since (00:00 UTC)
    "after_range",  # created after the whole UTC day LinkFilter.until
    "blocked_domain",  # host is, or is under, an entry of LinkFilter.domain_blocklist
    "blocked_extension",  # last path segment ends with .<ext> of LinkFilter.extension_blocklist
)
# Why a merged link is dropped.
LINK_PROBLEMS = ("low_score",)  # karma (max or sum per LinkFilter.score_mode) < min_score
# Reddit's own hosts (and every subdomain): threads, short links, image/video/media CDNs.
REDDIT_HOSTS = frozenset({"reddit.com", "redd.it", "redditmedia.com", "reddituploads.com", "redditstatic.com"})
# GPT-2 section 2.1: "at least 3 karma".
WEBTEXT_MIN_SCORE = 3
SCORE_MODES = ("max", "sum")

# The bundled lists, package resources (``importlib.resources``): a file in a checkout or an
# installed package, a member when the project is imported from a zip (``--py-files corpusforge.zip``).
DATA_DIR = resources.files(__package__) / "data"
# Image/video/audio/file hosts (rationale at the top of the file).
DEFAULT_DOMAIN_BLOCKLIST_PATH = DATA_DIR / "webtext_domain_blocklist.txt"
# Media, archive, executable, document, font and disk-image extensions.
DEFAULT_EXTENSION_BLOCKLIST_PATH = DATA_DIR / "webtext_extension_blocklist.txt"


class DumpReadError(IOError):
    """A dump that stopped decompressing part-way (truncated or corrupt); lines before it were read."""


# --- reading dumps ----------------------------------------------------------------------

def dump_compression(path: str | os.PathLike) -> str:
    """``zst``, ``bz2``, ``xz``, ``gz`` or ``plain``, from the file name (a URL's query ignored)."""
    name = os.fspath(path)
    if is_remote(name):
        name = urllib.parse.urlsplit(name).path
    return COMPRESSION_SUFFIXES.get(os.path.splitext(name)[1].lower(), "plain")


class _Budget:
    """Counts compressed bytes in and decompressed bytes out; raises past the ratio cap."""

    def __init__(self, name: str):
        self.name, self.read, self.written = name, 0, 0

    def took(self, size: int) -> None:
        self.read += size

    def gave(self, piece: bytes) -> Iterator[bytes]:
        """``piece`` as far as the cap allows; past it, ``DumpReadError``."""
        allowed = max(DECOMPRESSED_FLOOR_BYTES, MAX_DECOMPRESSION_RATIO * self.read) - self.written
        if piece[:allowed]:
            yield piece[:allowed] if allowed < len(piece) else piece
        self.written += len(piece)
        if allowed < len(piece):
            raise DumpReadError(
                f"{self.name}: {self.read:,} compressed bytes decompress to more than {self.written:,} "
                f"(over {MAX_DECOMPRESSION_RATIO}x: a decompression bomb)")


def _feeds(raw: BinaryIO, budget: _Budget) -> Iterator[bytes]:
    """The compressed bytes of ``raw`` in slices of ``ZSTD_FEED_BYTES``, counted."""
    while chunk := raw.read(ZSTD_READ_BYTES):
        for start in range(0, len(chunk), ZSTD_FEED_BYTES):
            data = chunk[start:start + ZSTD_FEED_BYTES]
            budget.took(len(data))
            yield data


def _zstd_pieces(raw: BinaryIO, name: str) -> Iterator[bytes]:
    """Decompress a .zst stream frame by frame, ``ZSTD_FEED_BYTES`` compressed bytes at a time.

    A frame-by-frame decompressor is used rather than ``ZstdDecompressor.stream_reader``
    because the stream reader ends quietly at the end of a truncated file, where this
    loop knows it stopped inside a frame and raises ``DumpReadError``. Pieces come out
    as zstd's blocks do (up to 128 KiB each).
    """
    decompressor = zstandard.ZstdDecompressor(max_window_size=PUSHSHIFT_MAX_WINDOW)
    frame = decompressor.decompressobj()
    in_frame = False
    budget = _Budget(name)
    for data in _feeds(raw, budget):
        while data:
            in_frame = True
            try:
                piece = frame.decompress(data)
            except zstandard.ZstdError as exc:
                raise DumpReadError(f"{name}: zstd: {exc}") from exc
            if piece:
                yield from budget.gave(piece)
            if not frame.eof:
                break
            data = frame.unused_data  # the next frame (or padding) begins in this slice
            frame = decompressor.decompressobj()
            in_frame = False
    if in_frame:
        raise DumpReadError(f"{name}: the file ends inside a zstd frame (truncated?)")


# One decompressor per gzip member / bz2 stream / xz stream (a file may hold several).
_STREAM_DECOMPRESSORS: dict[str, Callable[[], zlib._Decompress | bz2.BZ2Decompressor | lzma.LZMADecompressor]] = {
    "gz": lambda: zlib.decompressobj(zlib.MAX_WBITS | 16),
    "bz2": bz2.BZ2Decompressor,
    "xz": lzma.LZMADecompressor,
}
_STREAM_ERRORS = (zlib.error, OSError, EOFError, lzma.LZMAError)


def _drain(decompressor, data: bytes) -> Iterator[bytes]:
    """Everything ``data`` decodes to now, ``DECODE_PIECE_BYTES`` at most per call."""
    if isinstance(decompressor, type(zlib.decompressobj())):
        while True:
            piece = decompressor.decompress(data, DECODE_PIECE_BYTES)
            yield piece
            data = decompressor.unconsumed_tail
            if decompressor.eof or (not data and len(piece) < DECODE_PIECE_BYTES):
                return
    piece = decompressor.decompress(data, max_length=DECODE_PIECE_BYTES)
    yield piece
    while not decompressor.eof and not decompressor.needs_input:
        yield decompressor.decompress(b"", max_length=DECODE_PIECE_BYTES)


def _stream_pieces(raw: BinaryIO, name: str, compression: str) -> Iterator[bytes]:
    """Decompress a .gz/.bz2/.xz file with incremental decompressors fed small slices.

    ``gzip.GzipFile`` and friends decode a whole ``read`` before returning it, so a file
    cut or corrupted part-way lost everything that read had decoded (up to 2,712 lines);
    here each slice's output is handed on before the next slice is read. Several members
    or streams follow one another; zero bytes between or after them are padding. A stream
    still open at the end of the file raises ``DumpReadError`` after its bytes.
    """
    new = _STREAM_DECOMPRESSORS[compression]
    decompressor, in_stream = new(), False
    budget = _Budget(name)
    for data in _feeds(raw, budget):
        while data:
            if not in_stream:
                data = data.lstrip(b"\0")
                if not data:
                    break
            in_stream = True
            try:
                for piece in _drain(decompressor, data):
                    if piece:
                        yield from budget.gave(piece)
            except DumpReadError:
                raise
            except _STREAM_ERRORS as exc:
                raise DumpReadError(f"{name}: {compression}: {exc}") from exc
            if not decompressor.eof:
                break
            data = decompressor.unused_data
            decompressor, in_stream = new(), False
    if in_stream:
        raise DumpReadError(f"{name}: the file ends inside a {compression} stream (truncated?)")


def _rechunk(pieces: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The bytes of ``pieces`` again, cut every ``size`` bytes (the last piece may be shorter)."""
    pending = b""
    try:
        for piece in pieces:
            data = pending + piece if pending else piece
            whole = len(data) - len(data) % size
            for start in range(0, whole, size):
                yield data[start:start + size]
            pending = data[whole:]
    except DumpReadError:
        if pending:
            yield pending
        raise
    if pending:
        yield pending


def iter_dump_chunks(path: str | os.PathLike, chunk_size: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
    """The decompressed bytes of a dump, ``chunk_size`` bytes at a time (fewer at the end).

    Pieces end anywhere, even inside a character. A stream that fails part-way raises
    ``DumpReadError`` after the bytes decompressed before the damage.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, not {chunk_size}")
    name = os.fspath(path)
    compression = dump_compression(name)
    with open_input(name) as raw:
        if compression == "zst":
            yield from _rechunk(_zstd_pieces(raw, name), chunk_size)
        elif compression == "plain":
            while chunk := raw.read(chunk_size):
                yield chunk
        else:
            yield from _rechunk(_stream_pieces(raw, name, compression), chunk_size)


class TooLongLine(str):
    """Stands for a line longer than ``MAX_LINE_CHARS``, dropped while it was read."""


def decode_lines(chunks: Iterable[bytes], max_line_chars: int = MAX_LINE_CHARS,
                 max_empty_run: int = MAX_EMPTY_LINE_RUN) -> Iterator[str]:
    """Lines of UTF-8 text cut into arbitrary byte pieces, without their line ends.

    An incremental decoder carries a character split across two pieces over to the next
    one (a known rebuild dropped whole chunks there). Lines are split on ``\\n`` only: a
    title may hold a raw U+2028, which ``str.splitlines`` would split on. ``\\r`` before
    ``\\n`` and a leading byte-order mark are dropped; invalid UTF-8 becomes U+FFFD. A last
    line without a line end is still yielded, an empty one after the final ``\\n`` is not.
    When ``chunks`` raises ``DumpReadError``, the partial line read so far is yielded first.
    A line over ``max_line_chars`` is never held whole: it comes out as a ``TooLongLine``.
    More than ``max_empty_run`` empty lines in a row raise ``DumpReadError`` (a flood).
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    partial: list[str] = []  # the pieces of a line that has not ended yet
    held = 0  # characters in partial
    too_long = False
    first = True
    empty_run = 0  # empty lines in a row
    try:
        for chunk in chunks:
            text = decoder.decode(chunk)
            if first and text:
                text = text.removeprefix("\ufeff")
                first = False
            start = 0
            while (end := text.find("\n", start)) >= 0:
                if too_long or held + end - start > max_line_chars:
                    yield TooLongLine("")
                    empty_run = 0
                else:
                    partial.append(text[start:end])
                    line = _line("".join(partial))
                    empty_run = 0 if line else empty_run + 1
                    if empty_run > max_empty_run:
                        raise DumpReadError(f"more than {max_empty_run:,} empty lines in a row (an empty-line flood)")
                    yield line
                partial, held, too_long = [], 0, False
                start = end + 1
            if start < len(text) and not too_long:
                partial.append(text[start:])
                held += len(text) - start
                if held > max_line_chars:
                    partial, held, too_long = [], 0, True
    except DumpReadError:
        partial.append(decoder.decode(b"", final=True))
        if too_long:
            yield TooLongLine("")
        elif any(partial):
            yield _line("".join(partial))
        raise
    partial.append(decoder.decode(b"", final=True))
    if too_long:
        yield TooLongLine("")
    elif any(partial):
        yield _line("".join(partial))


def iter_dump_lines(path: str | os.PathLike, chunk_size: int = READ_CHUNK_BYTES) -> Iterator[str]:
    """The lines of a Pushshift dump (.zst, .bz2, .xz, .gz or plain NDJSON), in file order.

    Streams: one decompressed piece and one line are held at a time. The rules of
    ``decode_lines`` apply; a truncated or corrupt file raises ``DumpReadError`` after the
    lines before the damage.
    """
    return decode_lines(iter_dump_chunks(path, chunk_size))


def _line(text: str) -> str:
    return text[:-1] if text.endswith("\r") else text


# --- submissions ------------------------------------------------------------------------

@dataclass(frozen=True)
class Submission:
    """One Pushshift submission, with the fields the link stage uses.

    ``url`` is the link as submitted, except that the ``&amp;`` Reddit's API wrote for
    ``&`` in older dumps is undone; ``created_utc`` is whole seconds (floored).
    """

    id: str
    url: str
    score: int
    created_utc: int
    subreddit: str = ""
    over_18: bool = False
    is_self: bool = False
    domain: str = ""
    permalink: str = ""
    title: str = ""
    num_comments: int = 0


def parse_submission(line: str | bytes) -> Submission | str:
    """A dump line as a ``Submission``, or the first of ``PARSE_PROBLEMS`` that it has.

    Required: ``url`` (a non-empty string), ``created_utc`` (an int, a float or a numeric
    string, as Pushshift wrote it in different months). ``score`` may be absent or null
    (then 0: no karma was captured) but must otherwise be a whole number, possibly as a
    float or a string. Other fields default when absent or null: ``id``, ``subreddit``,
    ``permalink``, ``title`` to ""; ``over_18`` to False; ``num_comments`` to 0;
    ``is_self`` to whether ``domain`` starts with ``self.``; ``domain`` to the URL's host
    without ``www.``, as Reddit writes it. Strings are made storable as UTF-8 (lone
    surrogates from ``\\ud83d``-style escapes become U+FFFD).
    """
    if isinstance(line, TooLongLine):
        return "line_too_long"
    try:
        record = json.loads(line)
    except RecursionError:  # '[' nested a hundred thousand deep
        return "json_too_deep"
    except (ValueError, UnicodeDecodeError):  # also an integer of more than 4,300 digits
        return "malformed_json"
    if not isinstance(record, dict):
        return "not_an_object"
    url = record.get("url")
    if not isinstance(url, str) or not url.strip():
        return "missing_url"
    created = _whole_number(record.get("created_utc"), floor=True)
    if created is None or not CREATED_UTC_RANGE[0] <= created <= CREATED_UTC_RANGE[1]:
        return "bad_created_utc"
    score = 0 if record.get("score") is None else _whole_number(record["score"], floor=False)
    if score is None or abs(score) > SCORE_LIMIT:
        return "bad_score"
    url = utf8_safe(url.strip().replace("&amp;", "&"))
    domain = _text(record.get("domain")) or _reddit_domain(url)
    is_self = record.get("is_self")
    return Submission(
        id=_text(record.get("id")),
        url=url,
        score=score,
        created_utc=created,
        subreddit=_text(record.get("subreddit")),
        over_18=record.get("over_18") is True,
        is_self=(is_self is True) if is_self is not None else domain.startswith("self."),
        domain=domain,
        permalink=_text(record.get("permalink")),
        title=utf8_safe(_text(record.get("title")).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")),
        num_comments=min(max(_whole_number(record.get("num_comments"), floor=True) or 0, 0), SCORE_LIMIT),
    )


def _whole_number(value: object, floor: bool) -> int | None:
    """An int from an int, a float or a numeric string; ``None`` for anything else.

    With ``floor`` a fraction is dropped (timestamps); without, it makes the value invalid.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and (floor or value.is_integer()):
        return math.floor(value)
    return None


def _text(value: object) -> str:
    if value is None:
        return ""
    return utf8_safe(value if isinstance(value, str) else str(value))


def _reddit_domain(url: str) -> str:
    """The ``domain`` Reddit shows for a link: its host without ``www.``."""
    try:
        host = urllib.parse.urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix(WWW_LABEL)


# --- the filter -------------------------------------------------------------------------

def load_blocklist(path: str | os.PathLike | Traversable) -> frozenset[str]:
    """The entries of a one-per-line list; ``#`` starts a comment, blank lines are skipped.
    ``path`` is a file or URL (``open_input``), or a package resource (``DEFAULT_*_PATH``)."""
    if isinstance(path, (str, os.PathLike)):
        with open_input(os.fspath(path)) as f:
            text = f.read().decode("utf-8")
    else:
        text = path.read_bytes().decode("utf-8")
    entries = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return frozenset(entry for entry in entries if entry)


@functools.cache
def _default_list(name: str) -> frozenset[str]:
    return load_blocklist(DATA_DIR / name)


def default_domain_blocklist() -> frozenset[str]:
    return _default_list(DEFAULT_DOMAIN_BLOCKLIST_PATH.name)


def default_extension_blocklist() -> frozenset[str]:
    return _default_list(DEFAULT_EXTENSION_BLOCKLIST_PATH.name)


@dataclass(frozen=True)
class LinkFilter:
    """WebText's link rules; ``LinkFilter()`` is the paper's recipe with the bundled lists.

    ``since``/``until`` are UTC dates (a ``date``, or ``YYYY-MM-DD``), both inclusive:
    ``until=2017-12-31`` keeps everything created up to 2017-12-31 23:59:59 UTC, the
    cut-off of the paper's preliminary release. Blocklist entries are normalised on
    construction: subreddits lower-cased without ``r/``; domains as
    ``corpus.urls.canonical_host`` writes them, without ``www.``; extensions lower-cased
    without the dot. An entry that is no valid host name raises ``ValueError``.
    """

    min_score: int = WEBTEXT_MIN_SCORE
    score_mode: str = "max"
    since: dt.date | str | None = None
    until: dt.date | str | None = None
    drop_over_18: bool = True
    subreddit_blocklist: frozenset[str] = frozenset()
    domain_blocklist: frozenset[str] = field(default_factory=default_domain_blocklist)
    extension_blocklist: frozenset[str] = field(default_factory=default_extension_blocklist)

    def __post_init__(self) -> None:
        if self.score_mode not in SCORE_MODES:
            raise ValueError(f"score_mode must be one of {SCORE_MODES}, not {self.score_mode!r}")
        since, until = _as_date(self.since), _as_date(self.until)
        if since and until and since > until:
            raise ValueError(f"since ({since}) is after until ({until})")
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "until", until)
        object.__setattr__(self, "subreddit_blocklist", frozenset(map(_subreddit_entry, self.subreddit_blocklist)))
        object.__setattr__(self, "domain_blocklist", frozenset(map(_domain_entry, self.domain_blocklist)))
        object.__setattr__(self, "extension_blocklist", frozenset(map(_extension_entry, self.extension_blocklist)))

    @classmethod
    def from_files(
        cls,
        domain_blocklist: str | os.PathLike | Traversable | None = DEFAULT_DOMAIN_BLOCKLIST_PATH,
        extension_blocklist: str | os.PathLike | Traversable | None = DEFAULT_EXTENSION_BLOCKLIST_PATH,
        subreddit_blocklist: str | os.PathLike | Traversable | None = None,
        **options,
    ) -> LinkFilter:
        """A filter whose blocklists come from files (``None``: an empty list)."""
        def load(path):
            return load_blocklist(path) if path is not None else frozenset()

        return cls(domain_blocklist=load(domain_blocklist), extension_blocklist=load(extension_blocklist),
                   subreddit_blocklist=load(subreddit_blocklist), **options)

    @property
    def window(self) -> tuple[int | None, int | None]:
        """The kept ``created_utc`` range as (first second, first second after), ``None`` = open."""
        since, until = cast("dt.date | None", self.since), cast("dt.date | None", self.until)  # dates since __post_init__
        start = _utc_seconds(since) if since else None
        end = _utc_seconds(until + dt.timedelta(days=1)) if until else None
        return start, end


def _as_date(value: dt.date | str | None) -> dt.date | None:
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))


def _utc_seconds(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp())


def _subreddit_entry(name: str) -> str:
    name = name.strip().lower()
    for prefix in ("/r/", "r/"):
        name = name.removeprefix(prefix)
    return name.strip("/")


def _domain_entry(entry: str) -> str:
    host = canonical_host(entry.strip().removeprefix("*.").lstrip("."))
    if host is None:
        raise ValueError(f"domain blocklist entry {entry!r} is not a host name")
    return _site(host)


def _extension_entry(entry: str) -> str:
    return entry.strip().lower().lstrip(".")


def _site(host: str) -> str:
    """A host without a leading ``www.`` label (``www.com`` stays as it is)."""
    rest = host.removeprefix(WWW_LABEL)
    return rest if "." in rest else host


def host_in(host: str, domains: Iterable[str] | frozenset[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or a subdomain of one (``i.imgur.com`` in ``imgur.com``)."""
    labels = host.split(".")
    return any(".".join(labels[i:]) in domains for i in range(len(labels)))


def url_extension(url: str) -> str:
    """The lower-cased extension of a URL's last path segment, without the dot ('' if none)."""
    segment = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    stem, dot, extension = segment.rpartition(".")
    return extension.lower() if dot and stem else ""


def submission_problem(sub: Submission, filt: LinkFilter) -> str | None:
    """The first of ``SUBMISSION_PROBLEMS`` that ``sub`` has under ``filt``, or ``None``."""
    if sub.is_self:
        return "self_post"
    canonical = canonical_url(sub.url)
    if canonical is None:
        return "bad_url"
    host = urllib.parse.urlsplit(canonical).hostname or ""
    if host_in(host, REDDIT_HOSTS):
        return "reddit_internal"
    if filt.drop_over_18 and sub.over_18:
        return "over_18"
    if filt.subreddit_blocklist and sub.subreddit.lower() in filt.subreddit_blocklist:
        return "blocked_subreddit"
    start, end = filt.window
    if start is not None and sub.created_utc < start:
        return "before_range"
    if end is not None and sub.created_utc >= end:
        return "after_range"
    if host_in(host, filt.domain_blocklist):
        return "blocked_domain"
    if url_extension(canonical) in filt.extension_blocklist:
        return "blocked_extension"
    return None


def filter_submission(line: str, filt: LinkFilter) -> Decision:
    """A dump line -> its ``Submission`` (counted ``passed``), or dropped for the first of
    ``PARSE_PROBLEMS`` (the line sampled) or ``SUBMISSION_PROBLEMS`` (the URL sampled)."""
    sub = parse_submission(line)
    if isinstance(sub, str):
        return Decision.drop(sub, line, SUBMISSIONS)
    problem = submission_problem(sub, filt)
    if problem is not None:
        return Decision.drop(problem, sub.url, SUBMISSIONS)
    return Decision.keep(sub, PASSED, SUBMISSIONS)


# --- links ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    """Every eligible submission of one page, merged: the unit the fetch stage works on.

    ``url`` is the canonical URL to fetch, ``key`` the dedup key all submissions share,
    ``domain`` the URL's host without ``www.``. Tuples are sorted and free of repeats;
    ``title`` is the earliest submission's.
    """

    url: str
    key: str
    domain: str
    submission_urls: tuple[str, ...]
    subreddits: tuple[str, ...]
    ids: tuple[str, ...]
    max_score: int
    sum_score: int
    first_created_utc: int
    title: str
    num_submissions: int


def _submission_order(sub: Submission) -> tuple:
    return (sub.created_utc, sub.id, sub.url, sub.score, sub.subreddit, sub.title, sub.permalink, sub.domain,
            sub.num_comments, sub.over_18, sub.is_self)


def _distinct_submissions(subs: Iterable[Submission]) -> list[Submission]:
    """One submission per id (dumps overlap: the same post may be read twice), id-less ones all.

    Of two copies of one id the one with the higher score is kept (the later capture),
    then the one first in ``_submission_order``; so the choice never depends on input order.
    """
    by_id: dict[str, Submission] = {}
    without_id = []
    for sub in subs:
        if not sub.id:
            without_id.append(sub)
            continue
        seen = by_id.get(sub.id)
        if seen is None or (-sub.score, _submission_order(sub)) < (-seen.score, _submission_order(seen)):
            by_id[sub.id] = sub
    return sorted([*by_id.values(), *without_id], key=_submission_order)


def merge_submissions(subs: Iterable[Submission]) -> Link:
    """The ``Link`` of submissions that share one ``url_key``; the same for any input order.

    Copies of one submission id count once. The URL to fetch is the group's most
    https-like canonical URL: https before http, then the spelling submitted most often,
    then the smallest string. Raises ``ValueError`` for no submissions, a bad URL, or
    submissions of different keys.
    """
    unique = _distinct_submissions(subs)
    if not unique:
        raise ValueError("merge_submissions needs at least one submission")
    keys = {url_key(sub.url) for sub in unique}
    if None in keys or len(keys) != 1:
        raise ValueError(f"submissions do not share one URL key: {sorted(map(str, keys))}")
    spellings = Counter(cast(str, canonical_url(sub.url)) for sub in unique)  # each has a key, so a canonical URL
    url = min(spellings, key=lambda u: (not u.startswith("https://"), -spellings[u], u))
    first = unique[0]  # sorted by _submission_order: earliest first
    return Link(
        url=url,
        key=cast(str, keys.pop()),
        domain=_site(urllib.parse.urlsplit(url).hostname or ""),
        submission_urls=tuple(sorted({sub.url for sub in unique})),
        subreddits=tuple(sorted({sub.subreddit for sub in unique if sub.subreddit})),
        ids=tuple(sorted({sub.id for sub in unique if sub.id})),
        max_score=max(sub.score for sub in unique),
        sum_score=sum(sub.score for sub in unique),
        first_created_utc=first.created_utc,
        title=first.title,
        num_submissions=len(unique),
    )


def link_score(link: Link, filt: LinkFilter) -> int:
    """The karma ``filt`` judges a link by: its best submission's, or all of them together."""
    return link.max_score if filt.score_mode == "max" else link.sum_score


def link_problem(link: Link, filt: LinkFilter) -> str | None:
    """``low_score`` when the link's karma is below ``filt.min_score``, else ``None``."""
    return "low_score" if link_score(link, filt) < filt.min_score else None


def merge_link(key: str, subs: Iterable[Submission], filt: LinkFilter) -> Decision:
    """The submissions of one URL key -> their ``Link`` (``merge_submissions``, counted
    ``passed``), or dropped as ``low_score`` (its URL and karma sampled)."""
    link = merge_submissions(subs)
    problem = link_problem(link, filt)
    if problem is not None:
        return Decision.drop(problem, f"{link.url} karma max {link.max_score} sum {link.sum_score}", LINKS)
    return Decision.keep(link, PASSED, LINKS)


def select_links(lines: Iterable[str], filt: LinkFilter) -> tuple[list[Link], Counter]:
    """The whole link stage in memory: the kept links (sorted by key) and a count per reason.

    The counter holds every reason that occurred (``PARSE_PROBLEMS``,
    ``SUBMISSION_PROBLEMS``, ``LINK_PROBLEMS``) and ``lines``, ``kept_submissions``,
    ``links``, ``kept_links``. The Beam pipeline does the same with a ``GroupByKey``.
    """
    counts: Counter = Counter()
    groups: dict[str, list[Submission]] = {}
    for line in lines:
        counts["lines"] += 1
        decision = filter_submission(line, filt)
        if not decision.kept:
            counts.update(dict(decision.counts))
            continue
        counts["kept_submissions"] += 1
        groups.setdefault(cast(str, url_key(decision.record.url)), []).append(decision.record)  # kept: its URL is canonical
    kept = []
    for key in sorted(groups):
        decision = merge_link(key, groups[key], filt)
        counts["links"] += 1
        if not decision.kept:
            counts.update(dict(decision.counts))
        else:
            counts["kept_links"] += 1
            kept.append(decision.record)
    return kept, counts


# --- the link table ---------------------------------------------------------------------

LINK_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("url", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("max_score", pa.int64(), nullable=False),
        pa.field("sum_score", pa.int64(), nullable=False),
        pa.field("num_submissions", pa.int64(), nullable=False),
        pa.field("first_created_utc", pa.int64(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("subreddits", pa.list_(pa.string()), nullable=False),
        pa.field("ids", pa.list_(pa.string()), nullable=False),
        pa.field("submission_urls", pa.list_(pa.string()), nullable=False),
    ]
)


# Rows per row group of the link table: what its writer holds at once as Python rows, then
# as Arrow columns (about 260 bytes a link), whatever the number of links (issue 25).
LINK_ROW_GROUP_ROWS = 10_000


def _link_row(link: Link) -> dict:
    """A table row: tuples as lists, strings made storable as UTF-8 (``utf8_safe``)."""
    def storable(value):
        if isinstance(value, str):
            return utf8_safe(value)
        if isinstance(value, tuple):
            return [utf8_safe(item) for item in value]
        return value

    return {f.name: storable(getattr(link, f.name)) for f in LINK_SCHEMA}


class LinkTableWriter:
    """Streams one link table to ``path`` (Parquet, ``LINK_SCHEMA``, zstd) from links added
    in (key, url) order: every ``row_group_rows`` links become one row group, written as
    they come, so memory is one row group whatever the table's size. Nothing is at ``path``
    until ``commit`` (atomic); ``discard`` drops what was written.

    A table of at most ``row_group_rows`` links has the bytes of ``pyarrow.parquet.write_table``
    of the whole table; a larger one has the same rows, order and schema in several row groups."""

    def __init__(self, path: str | os.PathLike, row_group_rows: int = LINK_ROW_GROUP_ROWS):
        self.path, self.row_group_rows = os.fspath(path), row_group_rows
        self.rows: list[dict] = []
        self.target: storage.AtomicFile | None = None
        self.writer: pq.ParquetWriter | None = None

    def add(self, link: Link) -> None:
        self.rows.append(_link_row(link))
        if len(self.rows) == self.row_group_rows:
            self._write_row_group()

    def _write_row_group(self) -> None:
        if self.writer is None:
            self.target = storage.AtomicFile(self.path)
            self.writer = pq.ParquetWriter(self.target.stream, LINK_SCHEMA, compression="zstd")
        table = pa.Table.from_pylist(self.rows, schema=LINK_SCHEMA)
        self.rows = []
        self.writer.write_table(table)

    def commit(self) -> str:
        """Writes the last row group (an empty one for a table without links) and makes the file ``path``."""
        try:
            if self.rows or self.writer is None:
                self._write_row_group()
            assert self.writer is not None and self.target is not None  # _write_row_group made both
            self.writer.close()
        except BaseException:
            self.discard()
            raise
        self.target.commit()
        return self.path

    def discard(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        if self.target is not None:
            self.target.discard()
        self.rows, self.target, self.writer = [], None, None


def write_link_table(links: Iterable[Link], path: str | os.PathLike, *, sorted_by_key: bool = False) -> str:
    """Write links as Parquet (``LINK_SCHEMA``, zstd), rows sorted by key, atomically
    (``sorted_by_key``: they already come in (key, url) order, and are streamed)."""
    writer = LinkTableWriter(path)
    try:
        for link in links if sorted_by_key else sorted(links, key=lambda link: (link.key, link.url)):
            writer.add(link)
    except BaseException:
        writer.discard()
        raise
    return writer.commit()


def read_link_table(path: str | os.PathLike) -> list[Link]:
    """The links of a table written by ``write_link_table``, in its (key) order."""
    with storage.open_read(os.fspath(path)) as stream:
        table = pq.read_table(stream, schema=LINK_SCHEMA)
    return [
        Link(**cast("dict[str, Any]", {name: tuple(value) if isinstance(value, list) else value for name, value in row.items()}))
        for row in table.to_pylist()
    ]
