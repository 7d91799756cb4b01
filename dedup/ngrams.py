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
does to its length.

Hash scheme (``HASH_ID``): each word ``w`` gets ``blake2b(utf8(w), digest_size=8)`` read
little-endian (``dedup.minhash.word_hashes`` and its per-process memo); the n-gram starting
at word ``j`` is ``fmix64(sum_i h[j+i] * B**(n-1-i) mod 2**64)`` with ``B =
SHINGLE_BASE`` (odd) and ``fmix64`` the MurmurHash3 64-bit finaliser (Horner's rule over
the n word hashes, vectorised over all positions in numpy). A text with ``1 <= k < n``
words has exactly one key, the same formula over its ``k`` words (the "whole-text key",
as NeMo Curator keeps short texts whole); it can only ever match another text of exactly
those ``k`` words, never a longer text's n-grams. A text without words has no key. Nothing
depends on Python's ``hash()``: values are the same in every process and machine, for a
given Unicode database (Python minor version). Change ``HASH_ID`` when any of this changes:
filter files store it and refuse to mix schemes.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

import numpy as np

from dedup.minhash import _WORD_CACHE as _WORD_MEMO  # shared memo: word -> its 8-byte digest
from dedup.minhash import SHINGLE_BASE, _fmix64, word_hashes

HASH_ID = "ngram-v1:blake2b64-words:poly-9e3779b97f4a7c15:fmix64"  # bump on any scheme change

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
    def from_dict(cls, data: Mapping) -> "NgramConfig":
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


@lru_cache(maxsize=None)
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


# --- n-gram hashes ----------------------------------------------------------------------------

def _horner(h: np.ndarray, width: int) -> np.ndarray:
    """``sum_i h[j+i] * B**(width-1-i)`` mod 2**64 for every start ``j`` (a new array)."""
    count = len(h) - width + 1
    acc = h[:count].copy()
    for i in range(1, width):
        acc *= SHINGLE_BASE
        acc += h[i:i + count]
    return acc


def _word_hashes(tokens: list[str]) -> np.ndarray:
    """``dedup.minhash.word_hashes``, with a faster path when every word is in its memo."""
    try:
        return np.frombuffer(b"".join(map(_WORD_MEMO.__getitem__, tokens)), dtype="<u8").astype(np.uint64, copy=False)
    except KeyError:
        return word_hashes(tokens)  # fills the memo (or empties it when full)


def _keys_of_word_hashes(h: np.ndarray, n: int) -> np.ndarray:
    if not len(h):
        return np.zeros(0, dtype=np.uint64)
    return _fmix64(_horner(h, min(n, len(h))))


_ASCII_FOLD = bytes(c if chr(c).isalnum() and c < 128 else 32 for c in range(256)).lower()  # A-Z -> a-z, other -> " "
_ASCII_MEMO: dict[bytes, bytes] = {}  # ASCII word -> its 8-byte digest (same values as word_hashes)
_ASCII_MEMO_SIZE = 1 << 18


def _ascii_digests(text: str) -> bytes:
    """The 8-byte digests of ``words(text)``, concatenated, for an ASCII text in "split"
    mode, without the regex: one ``bytes.translate`` (lower-case, non-alphanumerics to
    spaces) and ``split``.
    """
    tokens = text.encode("ascii").translate(_ASCII_FOLD).split()
    memo = _ASCII_MEMO
    try:
        return b"".join(map(memo.__getitem__, tokens))
    except KeyError:
        if len(memo) >= _ASCII_MEMO_SIZE:
            memo.clear()
        missing = list(set(tokens).difference(memo))
        digests = word_hashes([w.decode("ascii") for w in missing]).astype("<u8").tobytes()
        memo.update(zip(missing, (digests[8 * i:8 * i + 8] for i in range(len(missing)))))
        return b"".join(map(memo.__getitem__, tokens))


def _ascii_word_hashes(text: str) -> np.ndarray:
    """``_word_hashes(words(text))`` for an ASCII text in "split" mode (``_ascii_digests``)."""
    return np.frombuffer(_ascii_digests(text), dtype="<u8").astype(np.uint64, copy=False)


def _text_word_hashes(text: str, config: NgramConfig) -> np.ndarray:
    if config.apostrophes == "split" and text.isascii():
        return _ascii_word_hashes(text)  # ~2x faster on ASCII text; same words (tested)
    return _word_hashes(words(text, config))


def _text_digests(text: str, split: bool, config: NgramConfig) -> bytes:
    """``_text_word_hashes(text, config)`` as little-endian bytes (8 per word)."""
    if split and text.isascii():
        return _ascii_digests(text)
    return _word_hashes(words(text, config)).astype("<u8", copy=False).tobytes()


def ngram_hashes(text: str, config: NgramConfig = DEFAULT) -> np.ndarray:
    """uint64, one per n-gram position in order (``len(words) - n + 1`` of them).

    A text of ``1 <= k < n`` words gives one whole-text key; a text without words, none.
    """
    return _keys_of_word_hashes(_text_word_hashes(text, config), config.n)


def ngram_hashes_many(texts: Iterable[str], config: NgramConfig = DEFAULT) -> list[np.ndarray]:
    """``[ngram_hashes(t, config) for t in texts]``, with one hashing pass for the batch.

    The arrays are views into one buffer (copy one to keep it alone alive).
    """
    n = config.n
    split = config.apostrophes == "split"
    per_text = [_text_digests(text, split, config) for text in texts]  # bytes: no array per text
    counts = [len(d) >> 3 for d in per_text]
    h = np.frombuffer(b"".join(per_text), dtype="<u8").astype(np.uint64, copy=False)
    full = _keys_of_word_hashes(h, n) if len(h) >= n else np.zeros(0, dtype=np.uint64)
    out = []
    offset = 0
    for k in counts:
        if k >= n:
            out.append(full[offset:offset + k - n + 1])
        else:
            out.append(_keys_of_word_hashes(h[offset:offset + k], n))
        offset += k
    return out


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
