"""Word n-grams for train/test overlap audits: GPT-2's section 4 normalisation and a stable
64-bit hash per n-gram position, computed without building n-gram strings.

Normalisation (GPT-2, "Language Models are Unsupervised Multitask Learners", section 4:
"lower-cased alphanumeric words separated by a single space"). The paper leaves three
choices open; ``NgramConfig`` exposes them, the defaults are the paper-like reading:

- ``apostrophes="split"``: every non-alphanumeric character is a separator, so ``don't``
  gives ``don t``. ``"join"``: an apostrophe (``'`` or ``’``) *between* two word characters
  is deleted, so ``don't`` gives ``dont`` (a leading or trailing one still separates).
- ``unicode=True``: a word is a Unicode letter or digit (``str`` regex ``[^\\W_]``)
  followed by letters, digits and combining marks (category M, so Devanagari vowel signs
  and decomposed accents stay inside their word); words are then NFC-composed, so
  ``café`` written precomposed or decomposed is one word. No compatibility folding (NFKC):
  full-width ``１２`` stays as it is. ``unicode=False``: ASCII ``a-z0-9`` only, every other
  character (``é``, ``²``, the Kelvin sign) is a separator, as lm-evaluation-harness.
- Case: ``str.lower`` of each word (the paper's "lower-cased"; not ``casefold``, so ``ß``
  stays ``ß``). Underscore is a separator. Line breaks are separators like any other, so
  n-grams run across lines (and across paragraphs).

``words`` are found by one regular expression over the ORIGINAL text, so each word has a
character span in it (``ngram_char_spans``, for localisation) whatever lower-casing or NFC
does to its length. ``words`` is the definition; the hashing functions below reach the
same words faster (the tests compare them on real text):

- ASCII text: one ``bytes.translate`` lower-cases letters and digits and turns every other
  byte into a space (words are then the runs of non-space bytes);
- text with a little non-ASCII (<= 1/16 of its UTF-8 bytes): the same translate leaves the
  non-ASCII bytes alone, then each space-delimited token holding some is replaced by
  ``words`` of that token (exact: a word never spans a space, and lower-casing and NFC
  never act across one; memoised per token, as web text repeats its dashes and names);
- other text: ``words`` of the whole text.

In "join" mode an ASCII apostrophe left between two word bytes is then deleted, any other
becomes a space. A batch of texts is one byte stream (``normalised_stream``; two texts are
joined by ``" \\x00 "``, which the translate turns into ``" \\x7f "``, a one-byte pseudo-word
no text can produce: a NUL or DEL inside a text is a separator like any other), so all of
it is hashed by a few numpy passes with no Python loop per word: word boundaries where
``byte > 0x20`` changes, each word's first 8 bytes as one unaligned little-endian read,
masked to its length (longer words: one more pass per further 8 bytes, over those words
only), n-grams that contain a text separator dropped. Batches are cut into steps of
``_STREAM_BLOCK`` characters: temporaries of several MB would be fresh pages from the
kernel on every call, and their page faults cost more than the hashing.

Hash scheme (``HASH_ID``): a normalised word ``w`` is its UTF-8 bytes cut into 8-byte
chunks ``c_0 .. c_{q-1}``, each read little-endian, the last one zero-padded (no word holds
a zero byte, so the chunks determine the word); its hash is ``h = fmix64(c_0)``, then
``h = fmix64(h ^ c_j)`` for ``j = 1 .. q-1`` (``fmix64``: the MurmurHash3 64-bit finaliser,
a bijection, so words of up to 8 bytes never collide, nor do two words of the same number
of chunks). The n-gram starting at word ``j`` is ``fmix64(sum_i h[j+i] * B**(n-1-i) mod
2**64)`` with ``B = NGRAM_BASE`` (odd): a polynomial, evaluated for all positions at once
by doubling (widths 1, 2, 4, ... combined as ``P_{a+b}[j] = P_a[j] * B**b + P_b[j+a]``). A
text with ``1 <= k < n`` words has exactly one key, the same formula over its ``k`` words
(the "whole-text key", as NeMo Curator keeps short texts whole); it can only ever match
another text of exactly those ``k`` words, never a longer text's n-grams. A text without
words has no key. Nothing depends on Python's ``hash()``: values are the same in every
process and machine, for a given Unicode database (Python minor version). Change
``HASH_ID`` when any of this changes: filter files and exact indexes store it and refuse
to mix schemes.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from functools import cache

import numpy as np

HASH_ID = "ngram-v2:utf8-u64-chunks-fmix64:poly-9e3779b97f4a7c15:fmix64"  # bump on any scheme change

DEFAULT_N = 8  # GPT-2 section 4 (Bloom filters of 8-grams); GPT-3 / lm-evaluation-harness use 13
APOSTROPHE_MODES = ("split", "join")
_APOSTROPHES = "'\u2019"  # ASCII apostrophe and right single quotation mark (the typographic one)


@dataclass(frozen=True)
class NgramConfig:
    """How text becomes word n-grams; stored in filter files (``to_dict``/``from_dict``)."""

    n: int = DEFAULT_N
    apostrophes: str = "split"
    unicode: bool = True

    def __post_init__(self):
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"n must be an int >= 1, got {self.n!r}")
        if self.apostrophes not in APOSTROPHE_MODES:
            raise ValueError(f"apostrophes must be one of {APOSTROPHE_MODES}, got {self.apostrophes!r}")
        if not isinstance(self.unicode, bool):
            raise ValueError(f"unicode must be a bool, got {self.unicode!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> NgramConfig:
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            raise ValueError(f"an NgramConfig needs exactly the keys {sorted(names)}, got {sorted(data)}")
        return cls(**data)


DEFAULT = NgramConfig()


# --- words ----------------------------------------------------------------------------------

def _mark_ranges(lo: int, hi: int) -> str:
    """Regex class body with every Unicode category M code point in ``[lo, hi]``."""
    category = unicodedata.category
    ranges, start = [], None
    for cp in range(lo, hi + 2):
        mark = cp <= hi and category(chr(cp))[0] == "M"
        if mark and start is None:
            start = cp
        elif not mark and start is not None:
            ranges.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(ranges)


@cache
def _word_re(apostrophes: str, unicode: bool) -> re.Pattern:
    """The word pattern. Unicode: letters/digits, then letters, digits and combining marks.

    Speed: ``re`` turns a class of BMP code points only into a constant-time bitmap, but
    checks a class mixing ``\\w`` and ranges range by range; so the marks sit in their own
    classes, and the (rare, long) non-BMP class is only tried behind a one-range lookahead.
    The pattern is built on first use (~0.2 s to scan the Unicode database).
    """
    if unicode:
        bmp, astral = _mark_ranges(0, 0xFFFF), _mark_ranges(0x10000, sys.maxunicode)
        word = f"[^\\W_]+(?:(?:[{bmp}]|(?=[\\U00010000-\\U0010ffff])[{astral}])+[^\\W_]*)*"
    else:
        word = "[A-Za-z0-9]+"
    if apostrophes == "join":
        word = f"{word}(?:[{_APOSTROPHES}]{word})*"
    return re.compile(word)


def _normalise_matches(raw: list[str], config: NgramConfig) -> list[str]:
    """Matched raw words -> normalised words (one-to-one, same order)."""
    if not raw:
        return []
    joined = " ".join(raw)  # one call each for the whole text; no step can create or eat a space
    if config.apostrophes == "join":
        for mark in _APOSTROPHES:
            joined = joined.replace(mark, "")
    joined = joined.lower()
    if config.unicode and not joined.isascii():
        joined = unicodedata.normalize("NFC", joined)
    return joined.split(" ")


def _pattern(text: str, config: NgramConfig) -> re.Pattern:
    # On ASCII text (``str.isascii`` is O(1)) the Unicode pattern matches exactly what the
    # ASCII one does, and the ASCII one is ~1.5x faster.
    return _word_re(config.apostrophes, config.unicode and not text.isascii())


def words(text: str, config: NgramConfig = DEFAULT) -> list[str]:
    """The normalised words of ``text``; ``" ".join(words(...))`` is the normalised text."""
    return _normalise_matches(_pattern(text, config).findall(text), config)


def normalize(text: str, config: NgramConfig = DEFAULT) -> str:
    """The normalised text: lower-cased alphanumeric words joined by single spaces."""
    return " ".join(words(text, config))


def word_spans(text: str, config: NgramConfig = DEFAULT) -> list[tuple[int, int]]:
    """The ``[start, end)`` character span in ``text`` of each word of ``words(text)``."""
    return [m.span() for m in _pattern(text, config).finditer(text)]


# --- normalised byte streams ------------------------------------------------------------------
# A batch of texts becomes one bytes object: normalised words (UTF-8) separated by spaces,
# texts by b" \x7f ". Every byte of a word is > 0x20 and != 0x7F (letters, digits, UTF-8).

_SPACE, _QUOTE = 0x20, 0x27
_TEXT_SEPARATOR = 0x7F  # DEL: between two texts of a stream, with a space on each side (a one-byte "word")
_HEAVY_NON_ASCII = 16  # a text with more than 1/16 of its UTF-8 bytes non-ASCII goes to words() whole
_TOKEN_MEMO_SIZE = 1 << 16  # normalised non-ASCII tokens kept per process (emptied when full)
_TOKEN_MEMO: dict[tuple[str, bool, bytes], bytes] = {}


def _fold_table(join: bool) -> bytes:
    """``bytes.translate`` table: ASCII letters/digits lower-cased, NUL (joining the texts)
    to the text separator, ``'`` kept in "join" mode, every other ASCII byte (DEL in a text
    too) a space, bytes >= 0x80 (UTF-8 of non-ASCII characters) unchanged."""
    table = bytearray(range(256))
    for c in range(128):
        if join and c == _QUOTE:
            continue
        table[c] = ord(chr(c).lower()) if chr(c).isalnum() else _SPACE
    table[0] = _TEXT_SEPARATOR
    return bytes(table)


_FOLD = {False: _fold_table(False), True: _fold_table(True)}


def _normalised_token(token: bytes, config: NgramConfig) -> bytes:
    """``words`` of one space-delimited token (UTF-8, ASCII part already folded), joined by
    spaces, memoised."""
    key = (config.apostrophes, config.unicode, token)
    out = _TOKEN_MEMO.get(key)
    if out is None:
        if len(_TOKEN_MEMO) >= _TOKEN_MEMO_SIZE:
            _TOKEN_MEMO.clear()
        text = token.decode("utf-8", "surrogatepass")
        out = _TOKEN_MEMO[key] = " ".join(words(text, config)).encode("utf-8", "surrogatepass")
    return out


def _splice_non_ascii(folded: bytes, texts: list[str], config: NgramConfig) -> bytes:
    """Normalise what ``_FOLD`` left undone in ``folded`` (the joined texts, UTF-8,
    translated): each text with more than 1/_HEAVY_NON_ASCII of its bytes non-ASCII is
    replaced whole by its ``words``; in the others, every space-delimited token holding a
    non-ASCII byte is replaced by the ``words`` of that token."""
    a = np.frombuffer(folded, dtype=np.uint8)
    high = np.flatnonzero(a >= 0x80)
    if not high.size:
        return folded
    separators = np.flatnonzero(a == _TEXT_SEPARATOR)
    first = np.concatenate(([0], separators + 2))  # text t is folded[first[t]:last[t]]
    last = np.concatenate((separators - 1, [a.size]))
    text_of_high = np.searchsorted(separators, high)
    heavy = np.bincount(text_of_high, minlength=len(texts)) * _HEAVY_NON_ASCII > last - first
    high = high[~heavy[text_of_high]]
    delimiters = np.concatenate(([-1], np.flatnonzero(a == _SPACE), [a.size]))
    token = np.unique(np.searchsorted(delimiters, high))  # token t lies between delimiters t-1 and t
    heavy_texts = np.flatnonzero(heavy)
    starts = np.concatenate((delimiters[token - 1] + 1, first[heavy_texts]))
    ends = np.concatenate((delimiters[token], last[heavy_texts]))
    whole = np.concatenate((np.full(token.size, -1), heavy_texts))  # -1: a token, else the text
    order = np.argsort(starts, kind="stable")
    pieces, previous = [], 0
    for start, end, text in zip(starts[order].tolist(), ends[order].tolist(), whole[order].tolist(), strict=True):
        pieces.append(folded[previous:start])
        if text < 0:
            pieces.append(_normalised_token(folded[start:end], config))
        else:
            pieces.append(" ".join(words(texts[text], config)).encode("utf-8", "surrogatepass"))
        previous = end
    pieces.append(folded[previous:])
    return b"".join(pieces)


def _join_apostrophes(stream: bytes) -> bytes:
    """"join" mode: delete each ``'`` between two word bytes, turn every other into a space."""
    if b"'" not in stream:
        return stream
    a = np.frombuffer(stream, dtype=np.uint8)
    quote = np.flatnonzero(a == _QUOTE)
    before = a[np.maximum(quote - 1, 0)]
    after = a[np.minimum(quote + 1, a.size - 1)]
    joined = (quote > 0) & (quote < a.size - 1) & (before > _SPACE) & (before != _QUOTE) \
        & (after > _SPACE) & (after != _QUOTE)
    a = a.copy()
    a[quote[~joined]] = _SPACE
    return np.delete(a, quote[joined]).tobytes()


def normalised_stream(texts: Iterable[str], config: NgramConfig = DEFAULT) -> bytes:
    """The normalised words of every text, UTF-8, words separated by spaces (one or more),
    texts by ``b" \\x7f "`` (DEL, a byte no text keeps):
    ``stream.split(b"\\x7f")[i].split()`` is ``words(texts[i], config)``, each encoded."""
    texts = texts if isinstance(texts, list) else list(texts)
    joined = " \x00 ".join(texts)
    raw = joined.encode("utf-8", "surrogatepass")
    if raw.count(b"\x00") != len(texts) - 1:  # a NUL inside a text: a separator there, like a space
        texts = [text.replace("\x00", " ") for text in texts]
        joined = " \x00 ".join(texts)
        raw = joined.encode("utf-8", "surrogatepass")
    join = config.apostrophes == "join"
    stream = raw.translate(_FOLD[join])
    if not joined.isascii():  # O(1) for a str
        stream = _splice_non_ascii(stream, texts, config)
    # the spliced words hold no apostrophe, and a whole text's have separators on both sides
    return _join_apostrophes(stream) if join else stream


# --- n-gram hashes ----------------------------------------------------------------------------

NGRAM_BASE = 0x9E3779B97F4A7C15  # odd 64-bit base of the n-gram polynomial (2^64 / golden ratio)
_MASK64 = (1 << 64) - 1
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)  # MurmurHash3 fmix64 multipliers (Appleby, public domain)
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT_33 = np.uint64(33)
_LOW_BYTES = np.array([(1 << (8 * b)) - 1 for b in range(8)] + [_MASK64], dtype=np.uint64)  # b low bytes
_STREAM_BLOCK = 1 << 18  # characters hashed per step: temporaries of a few 100 KB, reused by malloc
_U64_LE = np.dtype("<u8")  # word chunks are read little-endian whatever the machine


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, in place (uint64 arithmetic wraps mod 2**64)."""
    t = x >> _SHIFT_33
    x ^= t
    x *= _FMIX_1
    np.right_shift(x, _SHIFT_33, out=t)
    x ^= t
    x *= _FMIX_2
    np.right_shift(x, _SHIFT_33, out=t)
    x ^= t
    return x


def _stream_word_hashes(stream: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every word of ``stream`` in order, the index of each text separator among
    them) — see ``HASH_ID``. A separator (one DEL byte between spaces) is read as a one-byte
    word and gets a hash too; the n-grams that contain one are dropped later."""
    buf = b" " + stream + bytes(8)  # a delimiter in front; room for an 8-byte read at the end
    a = np.frombuffer(buf, dtype=np.uint8)
    word = a > _SPACE
    edges = (word[1:] != word[:-1]).nonzero()[0] + 1  # alternately a word's start and its end
    starts, ends = edges[0::2], edges[1::2]
    lengths = ends - starts
    # every position of buf read as a little-endian uint64 (unaligned, overlapping views)
    at = np.ndarray((len(buf) - 7,), dtype=_U64_LE, buffer=buf, strides=(1,))
    h = at.take(starts)  # take: one aligned copy of at, then a fast gather
    if h.dtype != np.uint64:  # a big-endian machine
        h = h.astype(np.uint64)
    h &= _LOW_BYTES[np.minimum(lengths, 8)]
    separators = (h == _TEXT_SEPARATOR).nonzero()[0]  # no real word is the lone byte 0x7F
    _fmix64(h)
    index = (lengths > 8).nonzero()[0]  # words with a second chunk
    first, size, acc = starts[index] + 8, lengths[index] - 8, h[index]
    while index.size:  # chunk j of every word that has one, then only the longer words
        chunk = at[first].astype(np.uint64, copy=False)  # fancy indexing: take() would copy all of at
        chunk &= _LOW_BYTES[np.minimum(size, 8)]
        acc ^= chunk
        h[index] = _fmix64(acc)
        more = (size > 8).nonzero()[0]
        index, first, size, acc = index[more], first[more] + 8, size[more] - 8, acc[more]
    return h, separators


@cache
def _power(exponent: int) -> np.uint64:
    return np.uint64(pow(NGRAM_BASE, exponent, 1 << 64))


def _polynomial(h: np.ndarray, width: int) -> np.ndarray:
    """``sum_i h[j+i] * B**(width-1-i)`` mod 2**64 for every start ``j`` (a new array)."""
    total = h.size
    result, result_width = None, 0
    block, block_width = h, 1  # block[j] covers words j .. j + block_width - 1
    remaining = width
    while True:
        if remaining & 1:
            if result is None:  # (block is h itself only at width 1: never return h)
                result, result_width = (block.copy() if block is h else block), block_width
            else:
                count = total - (result_width + block_width) + 1
                result = result[:count] * _power(block_width)
                result += block[result_width : result_width + count]
                result_width += block_width
        remaining >>= 1
        if not remaining:
            assert result is not None  # width >= 1: its top bit set result
            return result
        count = total - 2 * block_width + 1
        doubled = block[:count] * _power(block_width)
        doubled += block[block_width : block_width + count]
        block, block_width = doubled, 2 * block_width


def _keys_of_word_hashes(h: np.ndarray, separators: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys of all texts in order, keys per text) from the hashes of their words, with the
    positions in ``h`` of the texts' separators."""
    if not separators.size:  # one text: its n-grams, or its one whole-text key (the same formula)
        if not h.size:
            return np.zeros(0, dtype=np.uint64), np.zeros(1, dtype=np.int64)
        return _fmix64(_polynomial(h, min(n, h.size))), np.array([max(h.size - n + 1, 1)], dtype=np.int64)
    offsets = np.concatenate(([0], separators + 1))  # each text's first word in h
    counts = np.concatenate((separators, [h.size])) - offsets
    key_counts = np.where(counts >= n, counts - n + 1, np.minimum(counts, 1))
    if h.size >= n:  # every window, then drop those holding a separator
        keys = _polynomial(h, n)
        keep = np.ones(keys.size, dtype=bool)
        cross = (separators[:, None] - np.arange(n)[None, :]).ravel()
        keep[cross[(cross >= 0) & (cross < keys.size)]] = False
        keys = keys[keep]
    else:
        keys = np.zeros(0, dtype=np.uint64)
    short = np.flatnonzero((counts >= 1) & (counts < n))
    if short.size:  # whole-text keys: Horner's rule over each short text's own words
        first, size = offsets[short], counts[short]
        acc = h[first]
        for i in range(1, n - 1):
            more = np.flatnonzero(size > i)
            if not more.size:
                break
            acc[more] = acc[more] * np.uint64(NGRAM_BASE) + h[first[more] + i]
        slots = np.cumsum(key_counts) - key_counts
        merged = np.empty(int(key_counts.sum()), dtype=np.uint64)
        is_short = np.zeros(merged.size, dtype=bool)
        is_short[slots[short]] = True
        merged[~is_short] = keys
        merged[slots[short]] = acc
        keys = merged
    return _fmix64(keys), key_counts


def _batch_keys(texts: list[str], config: NgramConfig) -> tuple[np.ndarray, np.ndarray]:
    if not texts:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    return _keys_of_word_hashes(*_stream_word_hashes(normalised_stream(texts, config)), config.n)


def ngram_hashes_batch(texts: Iterable[str], config: NgramConfig = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, counts)``: the n-gram hashes of all texts, concatenated in order (uint64),
    and how many belong to each text (int64): ``keys`` is
    ``np.concatenate([ngram_hashes(t, config) for t in texts])``, computed in a few numpy
    passes over the whole batch (the fastest way to fill or query a filter)."""
    texts = texts if isinstance(texts, list) else list(texts)
    keys, counts, batch, size = [], [], [], 0
    for text in texts:  # steps of ~_STREAM_BLOCK characters keep the temporaries bounded
        batch.append(text)
        size += len(text)
        if size >= _STREAM_BLOCK:
            k, c = _batch_keys(batch, config)
            keys.append(k)
            counts.append(c)
            batch, size = [], 0
    if batch or not counts:
        k, c = _batch_keys(batch, config)
        keys.append(k)
        counts.append(c)
    if len(keys) == 1:
        return keys[0], counts[0]
    return np.concatenate(keys), np.concatenate(counts)


def ngram_hashes(text: str, config: NgramConfig = DEFAULT) -> np.ndarray:
    """uint64, one per n-gram position in order (``len(words) - n + 1`` of them).

    A text of ``1 <= k < n`` words gives one whole-text key; a text without words, none.
    """
    return _batch_keys([text], config)[0]


def ngram_hashes_many(texts: Iterable[str], config: NgramConfig = DEFAULT) -> list[np.ndarray]:
    """``[ngram_hashes(t, config) for t in texts]``, with one hashing pass for the batch.

    The arrays are views into one buffer (copy one to keep it alone alive).
    """
    keys, counts = ngram_hashes_batch(texts, config)
    return np.split(keys, np.cumsum(counts)[:-1]) if counts.size else []


def ngram_char_spans(text: str, config: NgramConfig = DEFAULT) -> list[tuple[int, int]]:
    """The ``[start, end)`` span of the original ``text`` covered by each n-gram position
    (from its first word's start to its last word's end), aligned with ``ngram_hashes``.
    """
    spans = word_spans(text, config)
    if not spans:
        return []
    width = min(config.n, len(spans))
    return [(spans[j][0], spans[j + width - 1][1]) for j in range(len(spans) - width + 1)]


def ngram_strings(text: str, config: NgramConfig = DEFAULT) -> list[str]:
    """The normalised n-gram strings, aligned with ``ngram_hashes`` (slow; tests, debugging)."""
    w = words(text, config)
    if not w:
        return []
    width = min(config.n, len(w))
    return [" ".join(w[j:j + width]) for j in range(len(w) - width + 1)]
