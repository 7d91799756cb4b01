"""Language identification: langdetect 1.0.9's answer with seed 0, bit for bit, faster.

The C4 recipe keeps a page iff ``langdetect.detect_langs(text)`` (seed 0) ranks ``en``
first with probability >= 0.99. ``detect_langs`` here returns exactly what
``[(l.lang, l.prob) for l in langdetect.detect_langs(text)]`` returns with
``DetectorFactory.seed = 0``: the same languages in the same order with bit-identical
float probabilities, and it raises ``LanguageDetectionError`` exactly when langdetect
raises ``LangDetectException`` (error code ``CantDetectError``, "No features in text.").
``reference_detect_langs`` calls langdetect itself, for comparison and as a fallback.

How langdetect decides (read from its source; the implementation below is our own):

1. Text preparation. URLs and e-mail addresses are replaced by a space, a Vietnamese
   base letter followed by a combining tone mark is composed into one character, and
   only the first 10,000 characters of the result are kept. If fewer than half as many
   ASCII ``A``..``z`` characters as "non-Latin" characters (>= U+0300, outside Latin
   Extended Additional) are present, every ``A``..``z`` character is removed.
2. N-grams. Every character is normalised (a pure function of the character: ASCII
   non-letters and some punctuation become a space, kana/hangul/bopomofo collapse to
   one character, Kanji to the representative of its class, ...). A window of the last
   three characters since the last space yields the 1-, 2- and 3-grams ending at each
   character, skipped while inside an all-capitals word; only n-grams present in some
   language profile are kept, in text order.
3. Sampling. With ``random.Random`` seeded 0: seven trials, each drawing
   ``alpha = 0.5 + gauss(0, 1) * 0.05`` and then n-grams with ``choice``; each draw
   multiplies the 55 language probabilities elementwise by ``alpha / 10000 + P(n-gram |
   language)``. Draw 0 and every fifth draw after it is followed by a normalisation
   (divide by the builtin ``sum``); a trial stops once the largest probability exceeds
   0.99999 or after draw 1000. The trial's vector / 7 is added to the result; languages
   above 0.1 are returned, highest first (stable on ties).

Where the speed comes from (langdetect spends ~75% of its time in step 2's Python loop
per character, ~15% in step 3's loop over 55 languages per draw):

- Step 1 runs each regex only where it can match (text containing ``http``; windows
  around each ``@``; a tone mark present), and on a long text only on a prefix long
  enough to yield the 10,000 characters (see ``_prepare_text``).
- Step 2 works on a NumPy array of code points. One lookup gives each character a code
  (``_code_tables``): space and the 59 letters most pages are made of (the English
  profile's first) have their own; any other letter of the profiles' 3,160-character
  alphabet shares ``CODE_OTHER``, any character outside it ``CODE_OUTSIDE`` (each with an
  upper-case twin). The 1-, 2- and 3-grams of codes index direct tables (64, 64**2 and
  64**3 entries) that already say "absent" where langdetect emits nothing (two spaces, a
  space inside a 3-gram, a character outside the alphabet): three gathers give every row
  of an English page. An n-gram with a ``CODE_OTHER`` letter is looked up instead by its
  key (the characters' alphabet numbers, packed) in an open-addressing hash table (2**18
  slots), which also serves text above the BMP (``_ngram_rows_by_hash``).
- Step 3 reads the random stream in bulk. ``choice`` on a list of ``n`` n-grams takes a
  32-bit Mersenne Twister word, keeps ``word >> (32 - n.bit_length())`` and rejects values
  ``>= n``; with seed 0 the word stream is the same for every call, so it is generated
  once and all the draws a text can make are read from it with array operations.
  ``gauss`` comes from a real ``random.Random`` positioned at the same word offset
  (memoised per offset). The updates stay elementwise IEEE products in langdetect's
  order, five at a time through ``np.multiply.reduce`` along the first axis (row after
  row); the normalising sum is the last value of ``np.add.accumulate``, which adds in
  langdetect's order with its rounding where the builtin ``sum`` adds one float after
  the other (CPython up to 3.11; elsewhere the builtin ``sum`` over ``tolist()`` is
  called); the convergence test avoids most ``max`` calls (``_run_trial``).

- Where a C compiler is present (``corpus.native``), each trial runs as one compiled loop
  (``TRIAL_SOURCE``): langdetect's multiply, sum, divide and maximum, element by element in
  its order, one IEEE double operation at a time (nothing fused or reassociated), reading
  the profile rows of the prepared draws directly. It replaces the per-block Python and
  numpy calls above (most of the time left in a page's detection) and is used only where
  the builtin ``sum`` adds in order (``_accumulate_matches_sum``) and after it scored
  ``_KERNEL_CHECK_TEXTS`` exactly as the numpy trial when the model loaded; otherwise the
  numpy trial (``_run_trial``) runs. ``tests/test_langid.py`` compares the two trials and
  langdetect itself on real pages.
- With the compiled trial in place, the rest of a detection runs compiled too
  (``_detect_native``): a text's n-gram rows in one loop over its code points through the
  same code tables, an n-gram the tables leave open looked up by linear probing in the same
  hash table (``cf_langid_coded_rows``); then, per Gaussian pair (two trials), one call
  draws each trial's n-grams from the seeded word stream exactly as ``choice`` does
  (``FIRST_TRIAL_DRAWS`` at first, all ``ITERATION_LIMIT + 1`` when a trial needs more), runs the
  trial above on them and adds its vector / 7 to the total (``cf_langid_trials``). Python
  keeps the text preparation, the Gaussians (``_SeededStream.gauss_pair``) and the ranking.
  It is used only after it scored ``_KERNEL_CHECK_TEXTS`` (English, German, French, CJK,
  accented and Cyrillic letters) exactly as the numpy path when the model loaded.

Assumptions that exactness rests on (the langdetect version; how ``random`` draws; that
``np.multiply.reduce`` does not reassociate) are checked once when the model loads; if
one fails, ``detect_langs`` logs a warning and uses ``reference_detect_langs``, so the
answer stays exact (whether ``np.add.accumulate`` is ``sum`` is checked then too). The
global ``random`` module is never touched. Profiles are read lazily, once per process,
from the installed langdetect package's ``profiles`` (``importlib.resources``) into ~14 MB of arrays
(langdetect's own dictionary of lists takes several times that).
``detect_langs`` keeps no mutable state between calls except a memo of Gaussian draws and
the grown word stream, and is safe to call from several threads.
"""

from __future__ import annotations

import codecs
import ctypes
import functools
import hashlib
import json
import logging
import os
import pickle
import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import numpy as np

from common.storage import write_atomically
from corpus import native
from corpus.inputs import cache_dir

log = logging.getLogger(__name__)

# langdetect 1.0.9 Detector constants (langdetect/detector.py).
MAX_TEXT_LENGTH = 10_000  # Detector.max_text_length: characters read from the text
N_TRIAL = 7  # Detector.n_trial
ALPHA_DEFAULT = 0.5  # Detector.ALPHA_DEFAULT: smoothing
ALPHA_WIDTH = 0.05  # Detector.ALPHA_WIDTH: spread of the per-trial smoothing
ITERATION_LIMIT = 1000  # Detector.ITERATION_LIMIT: last draw index of a trial
PROB_THRESHOLD = 0.1  # Detector.PROB_THRESHOLD: languages reported above this
CONV_THRESHOLD = 0.99999  # Detector.CONV_THRESHOLD: a trial stops above this
BASE_FREQ = 10000  # Detector.BASE_FREQ
CHECK_EVERY = 5  # a trial normalises and checks convergence at draws 0, 5, 10, ...
SEED = 0  # DetectorFactory.seed in the C4 pipeline
LANGDETECT_VERSION = "1.0.9"  # the version this module reproduces

# langdetect 1.0.9's URL and e-mail patterns (Detector.URL_RE / MAIL_RE); each match
# becomes one space before anything else happens.
URL_PATTERN = r"https?://[-_.?&~;+=/#0-9A-Za-z]{1,2076}"
MAIL_PATTERN = r"[-_.0-9A-Za-z]{1,64}@[-_0-9A-Za-z]{1,255}[-_.0-9A-Za-z]{1,255}"
_URL_RE = re.compile(URL_PATTERN)
_MAIL_RE = re.compile(MAIL_PATTERN)

# Unicode blocks (as langdetect's table gives them) that normalisation treats specially.
BASIC_LATIN_END = 0x7F
GENERAL_PUNCTUATION = (0x2000, 0x206F)
LATIN_EXTENDED_ADDITIONAL = (0x1E00, 0x1EFF)
HIRAGANA = (0x3040, 0x309F)
KATAKANA = (0x30A0, 0x30FF)
BOPOMOFO = (0x3100, 0x312F)
BOPOMOFO_EXTENDED = (0x31A0, 0x31BF)
CJK_UNIFIED_IDEOGRAPHS = (0x4E00, 0x9FFF)
HANGUL_SYLLABLES = (0xAC00, 0xD7AF)
NON_LATIN_FROM = 0x0300  # text cleaning counts characters from here on as non-Latin

SPACE = 0x20
BMP = 0x10000
LETTER_BITS = 12  # a 2-/3-gram key packs the alphabet number (1..3160) of each character
ROW_BITS = 17  # a hash slot holds key << ROW_BITS | row (87,598 rows < 2**17)
HASH_BITS = 18  # 2**18 slots for ~84k 2- and 3-grams: load ~1/3, ~1.3 probes per lookup
HASH_MULTIPLIER = 0x9E3779B97F4A7C15  # Fibonacci hashing
FIRST_CHUNK_BLOCKS = 16  # a trial's blocks are prepared 16 at a time first, then 64 at a time
MIN_CHUNK_BLOCKS = 4  # fewer blocks' draws left than a chunk wants: prepare more draws below this
LATER_CHUNK_BLOCKS = 64
# How far past a match's start each replacement can look (longest match, plus one).
URL_REACH = len("https://") + 2076 + 1
MAIL_REACH = 64 + 1 + 255 + 255 + 1
MAIL_LOCAL_MAX = 64  # characters of an e-mail match before its '@'
MAIL_TAIL = 1 + 255 + 255 + 2  # characters from its '@' to past its end, with a margin
VI_REACH = 2 + 1
PREFIX_LENGTH = MAX_TEXT_LENGTH + URL_REACH + MAIL_REACH + VI_REACH + 4096  # see _prepare_text
PROBE_ROUNDS = 3  # vectorised hash probes before a binary search takes over
ROW_BYTES = 4  # a draw's profile row is an int32 (_Draws.rows)
INITIAL_DRAWS = 320  # draws prepared per text at first (7 trials of ~40 draws for English)
FIRST_TRIAL_DRAWS = 128  # the compiled draws: per trial at first (~40 for English), then ITERATION_LIMIT + 1
GAUSS_MEMO_LIMIT = 1 << 16
INITIAL_STREAM_WORDS = 1 << 15
# The direct n-gram tables (see _code_tables): each BMP character gets one of CODES codes;
# 2- and 3-grams of codes index tables of CODES**2 and CODES**3 rows (1 MB of int32).
CODES = 64
CODE_OUTSIDE, CODE_OUTSIDE_UPPER = 0, 1  # in no profile n-gram: every n-gram with it is absent
CODE_OTHER, CODE_OTHER_UPPER = CODES - 2, CODES - 1  # in the alphabet, without a code of its own
CODE_SPACE = 2  # then the other characters with a code of their own, up to CODE_OTHER
ABSENT, ASK_HASH = -1, -2  # table entries: no such n-gram; look the n-gram up in the hash table


class LanguageDetectionError(Exception):
    """langdetect's ``LangDetectException`` with code ``CantDetectError`` (5):
    "No features in text." -- no character n-gram of the text is in any profile
    (empty text; only spaces, digits, punctuation, URLs or e-mail addresses; ...)."""

    code = 5  # langdetect.lang_detect_exception.ErrorCode.CantDetectError


Prediction = list[tuple[str, float]]


# ----------------------------------------------------------------------------- baseline

_reference_lock = threading.Lock()


def reference_detect_langs(text: str) -> Prediction:
    """langdetect itself, seed 0, under a process-wide lock: the baseline and the fallback."""
    import langdetect
    from langdetect.lang_detect_exception import LangDetectException

    with _reference_lock:
        langdetect.DetectorFactory.seed = SEED
        try:
            found = langdetect.detect_langs(text)
        except LangDetectException as exc:
            raise LanguageDetectionError(str(exc)) from exc
    return [(item.lang, item.prob) for item in found]


# ------------------------------------------------------------------------------ model


@dataclass(frozen=True)
class _Model:
    langs: tuple[str, ...]
    # P(n-gram | language) as langdetect computes it. Rows below n_dense (n-grams known in
    # two or more languages) are dense; dense[n_dense] is all zeros. The others, known in
    # one language only, keep that language and its probability.
    n_dense: int
    dense: np.ndarray
    single_lang: np.ndarray
    single_prob: np.ndarray
    letter: np.ndarray  # BMP code point -> its number in the profiles' alphabet, 0 if in none
    alphabet: np.ndarray  # number -> code point (0 for number 0)
    slots: np.ndarray  # open addressing over 2- and 3-gram keys: key << ROW_BITS | row, 0 = empty
    sorted_key: np.ndarray  # every 2-/3-gram key, sorted, for keys the probing leaves over
    sorted_row: np.ndarray
    normalize: np.ndarray  # BMP code point -> normalised code point
    upper: np.ndarray  # BMP code point -> str.isupper()
    unigram_row: np.ndarray  # BMP code point -> row of that 1-gram, or -1
    code: np.ndarray  # BMP code point -> code of its normalised character (see _code_tables)
    code_upper: np.ndarray  # code -> upper case (the same for every character with that code)
    code_unigram: np.ndarray  # code -> row of its 1-gram, ABSENT, or ASK_HASH
    code_pairs: np.ndarray  # code * CODES + code -> row of the 2-gram, ABSENT, or ASK_HASH
    code_triples: np.ndarray  # (code * CODES + code) * CODES + code -> row of the 3-gram, ...
    vi_compose: dict[str, str]  # base letter + tone mark -> composed letter
    vi_marks: str
    vi_re: re.Pattern


def _langdetect_data() -> Traversable:
    """langdetect's package folder, through ``importlib.resources`` as every data file here.
    (langdetect itself opens ``messages.properties`` by path when it is imported, so it loads
    only where pip installed it, never from a zip: executors need it from requirements.txt.)"""
    return resources.files("langdetect")


def _read_messages() -> dict[str, str]:
    """langdetect's ``utils/messages.properties``: ``key=value`` lines, ``\\uXXXX`` escapes."""
    table = {}
    for line in _langdetect_data().joinpath("utils", "messages.properties").read_text(encoding="ascii").splitlines():
        key, _, value = line.strip().partition("=")
        table[key] = codecs.decode(value, "unicode_escape")
    return table


def _read_profiles() -> tuple[list[str], list[dict[str, float]]]:
    """Every profile, in the order langdetect's factory loads them: ``os.listdir`` order, which
    is the order a folder's ``iterdir`` gives."""
    folder = _langdetect_data() / "profiles"
    langs, probs = [], []
    for path in folder.iterdir():
        if path.name.startswith(".") or not path.is_file():
            continue
        profile = json.loads(path.read_bytes().decode("utf-8"))
        n_words = profile["n_words"]
        # Same expression as the factory, so the same rounding: 1.0 * count / n_words[len - 1].
        probs.append({gram: 1.0 * count / n_words[len(gram) - 1] for gram, count in profile["freq"].items() if 1 <= len(gram) <= 3})
        langs.append(profile["name"])
    if len(set(langs)) != len(langs):
        raise ValueError(f"duplicate language profile in {folder}")
    return langs, probs


def _hash_slots(keys: np.ndarray) -> np.ndarray:
    return (keys * np.uint64(HASH_MULTIPLIER)) >> np.uint64(64 - HASH_BITS)


def _build_hash(keys: list[int], rows: list[int]) -> np.ndarray:
    """Open addressing with linear probing; entries go in in the order given (most common
    n-grams first, so they mostly sit in their home slot)."""
    size, mask = 1 << HASH_BITS, (1 << HASH_BITS) - 1
    slots = np.zeros(size, dtype=np.uint64)
    home = _hash_slots(np.array(keys, dtype=np.uint64)).tolist()
    taken = bytearray(size)
    for key, row, slot in zip(keys, rows, home, strict=True):
        while taken[slot]:
            slot = (slot + 1) & mask
        taken[slot] = 1
        slots[slot] = (key << ROW_BITS) | row
    return slots


def _normalization_table(messages: dict[str, str]) -> np.ndarray:
    """Our own statement of langdetect's per-character normalisation, for the whole BMP
    (characters above it are never changed)."""
    table = np.arange(BMP, dtype=np.uint32)
    ascii_codes = np.arange(BASIC_LATIN_END + 1)
    letters = ((ascii_codes >= ord("A")) & (ascii_codes <= ord("Z"))) | ((ascii_codes >= ord("a")) & (ascii_codes <= ord("z")))
    table[: BASIC_LATIN_END + 1][~letters] = SPACE
    for ch in messages["NGram.LATIN1_EXCLUDE"]:
        table[ord(ch)] = SPACE
    table[0x0219] = 0x015F  # Romanian s with comma below -> s with cedilla
    table[0x021B] = 0x0163  # Romanian t with comma below -> t with cedilla
    table[GENERAL_PUNCTUATION[0] : GENERAL_PUNCTUATION[1] + 1] = SPACE
    table[0x06CC] = 0x064A  # Farsi yeh -> Arabic yeh
    table[0x1EA0 : LATIN_EXTENDED_ADDITIONAL[1] + 1] = 0x1EC3
    table[HIRAGANA[0] : HIRAGANA[1] + 1] = 0x3042
    table[KATAKANA[0] : KATAKANA[1] + 1] = 0x30A2
    table[BOPOMOFO[0] : BOPOMOFO[1] + 1] = 0x3105
    table[BOPOMOFO_EXTENDED[0] : BOPOMOFO_EXTENDED[1] + 1] = 0x3105
    for key, members in messages.items():
        if key.startswith("NGram.KANJI_"):
            for ch in members:  # each Kanji class maps to its first member
                if CJK_UNIFIED_IDEOGRAPHS[0] <= ord(ch) <= CJK_UNIFIED_IDEOGRAPHS[1]:
                    table[ord(ch)] = ord(members[0])
    table[HANGUL_SYLLABLES[0] : HANGUL_SYLLABLES[1] + 1] = 0xAC00
    return table


def _vietnamese(messages: dict[str, str]) -> tuple[dict[str, str], str, re.Pattern]:
    bases, marks = messages["TO_NORMALIZE_VI_CHARS"], messages["DMARK_CLASS"]
    compose: dict[str, str] = {}
    for mark in marks:
        composed = messages[f"NORMALIZED_VI_CHARS_{ord(mark):04X}"]
        for b, base in enumerate(bases):
            compose.setdefault(base + mark, composed[b])
    pattern = re.compile("[" + re.escape(bases) + "][" + re.escape(marks) + "]")
    return compose, marks, pattern


def _load_model() -> _Model:
    messages = _read_messages()
    langs, probs = _read_profiles()
    entries: dict[str, list[tuple[int, float]]] = {}
    for lang_index, table in enumerate(probs):
        for gram, p in table.items():
            entries.setdefault(gram, []).append((lang_index, p))
    grams = sorted(entries, key=lambda g: (len(entries[g]) == 1, g))  # dense rows first
    n_dense = sum(1 for g in grams if len(entries[g]) > 1)
    cells = [(row, lang, p) for row, gram in enumerate(grams[:n_dense]) for lang, p in entries[gram]]
    dense = np.zeros((n_dense + 1, len(langs)))
    dense[[c[0] for c in cells], [c[1] for c in cells]] = [c[2] for c in cells]
    single_lang = np.array([entries[g][0][0] for g in grams[n_dense:]], dtype=np.int64)
    single_prob = np.array([entries[g][0][1] for g in grams[n_dense:]], dtype=np.float64)

    alphabet_codes = sorted({ord(ch) for g in grams for ch in g})
    if len(alphabet_codes) >= 1 << LETTER_BITS or alphabet_codes[-1] >= BMP or len(grams) > 1 << ROW_BITS:
        raise ValueError("profiles outside the key layout")  # not so for langdetect 1.0.9
    alphabet = np.array([0] + alphabet_codes, dtype=np.uint32)
    letter = np.zeros(BMP, dtype=np.uint16)
    letter[alphabet[1:]] = np.arange(1, len(alphabet), dtype=np.uint16)
    number = {chr(code): i for i, code in enumerate(alphabet_codes, 1)}
    unigram_row = np.full(BMP, -1, dtype=np.int32)
    longer = []  # (key, row, -(sum of its probabilities)) of every 2- and 3-gram
    for row, gram in enumerate(grams):
        if len(gram) == 1:
            unigram_row[ord(gram)] = row
        else:
            key = 0
            for ch in gram:
                key = (key << LETTER_BITS) | number[ch]
            longer.append((key, row, -sum([p for _, p in entries[gram]])))
    longer.sort()
    sorted_key = np.array([item[0] for item in longer], dtype=np.uint64)
    sorted_row = np.array([item[1] for item in longer], dtype=np.int32)
    longer.sort(key=lambda item: item[2])
    slots = _build_hash([item[0] for item in longer], [item[1] for item in longer])
    normalize = _normalization_table(messages)
    upper = np.array([chr(c).isupper() for c in range(BMP)], dtype=bool)
    vi_compose, vi_marks, vi_re = _vietnamese(messages)
    # Characters with a code of their own, most useful first: the English profile's letters
    # by their 1-gram probability, then the letters known to the most profiles.
    english = probs[langs.index("en")] if "en" in langs else {}
    ranked = sorted(alphabet_codes, key=lambda c: (-english.get(chr(c), 0.0), -sum(1 for table in probs if chr(c) in table), c))
    coded = _code_tables(ranked, normalize, upper, letter, unigram_row, sorted_key, sorted_row)
    return _Model(
        tuple(langs), n_dense, dense, single_lang, single_prob, letter, alphabet, slots, sorted_key, sorted_row, normalize, upper, unigram_row,
        *coded, vi_compose, vi_marks, vi_re)


def _code_tables(ranked: list[int], normalize: np.ndarray, upper: np.ndarray, letter: np.ndarray, unigram_row: np.ndarray,
                 sorted_key: np.ndarray, sorted_row: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Direct tables for the n-grams of the characters most pages are made of.

    Every BMP character gets a code from its normalised character: space and the first
    ``ranked`` characters their own code; any other character of the profiles' alphabet
    ``CODE_OTHER``, any character outside it ``CODE_OUTSIDE`` (each with an upper-case twin,
    so that a code says whether its character is upper case). The tables give, for a
    code 1-, 2- or 3-gram, the profile row of the n-gram, ``ABSENT`` when no profile has it
    or langdetect never emits it (a character outside the alphabet; two spaces; a space
    before the last character of a 3-gram), or ``ASK_HASH`` when a ``CODE_OTHER`` character
    leaves the n-gram unknown (``_ngram_rows`` then looks it up in the hash table)."""
    own = [SPACE] + [c for c in ranked if c != SPACE][: CODE_OTHER - CODE_SPACE - 1]
    code_of = np.where(letter != 0, CODE_OTHER, CODE_OUTSIDE).astype(np.intp)
    code_of += upper  # CODE_OUTSIDE_UPPER = CODE_OUTSIDE + 1, CODE_OTHER_UPPER = CODE_OTHER + 1
    code_of[own] = np.arange(CODE_SPACE, CODE_SPACE + len(own))
    code = code_of[normalize]
    code_upper = np.zeros(CODES, dtype=bool)
    code_upper[[CODE_OUTSIDE_UPPER, CODE_OTHER_UPPER]] = True
    code_upper[CODE_SPACE : CODE_SPACE + len(own)] = upper[own]
    code_letter = np.zeros(CODES, dtype=np.uint64)  # 0 for codes without a character of their own
    code_letter[CODE_SPACE : CODE_SPACE + len(own)] = letter[own]
    outside = np.zeros(CODES, dtype=bool)
    outside[[CODE_OUTSIDE, CODE_OUTSIDE_UPPER]] = True
    other = np.zeros(CODES, dtype=bool)
    other[[CODE_OTHER, CODE_OTHER_UPPER]] = True

    def rows_of(keys: np.ndarray) -> np.ndarray:
        where = np.minimum(np.searchsorted(sorted_key, keys), len(sorted_key) - 1)
        return np.where(sorted_key[where] == keys, sorted_row[where], ABSENT).astype(np.int32)

    code_unigram = np.full(CODES, ABSENT, dtype=np.int32)
    code_unigram[other] = ASK_HASH
    code_unigram[CODE_SPACE + 1 : CODE_SPACE + len(own)] = unigram_row[own[1:]]  # a space is never a 1-gram

    a: np.ndarray  # 2-D for the pairs, 3-D for the triples
    b: np.ndarray
    a, b = np.meshgrid(np.arange(CODES), np.arange(CODES), indexing="ij")
    pairs = rows_of((code_letter[a] << np.uint64(LETTER_BITS)) | code_letter[b])
    pairs[other[a] | other[b]] = ASK_HASH
    pairs[outside[a] | outside[b] | ((a == CODE_SPACE) & (b == CODE_SPACE))] = ABSENT

    a, b, c = np.meshgrid(np.arange(CODES), np.arange(CODES), np.arange(CODES), indexing="ij")
    triples = rows_of((code_letter[a] << np.uint64(2 * LETTER_BITS)) | (code_letter[b] << np.uint64(LETTER_BITS)) | code_letter[c])
    triples[other[a] | other[b] | other[c]] = ASK_HASH
    triples[outside[a] | outside[b] | outside[c] | (b == CODE_SPACE)] = ABSENT
    return code, code_upper, code_unigram, pairs.ravel(), triples.ravel()


# ------------------------------------------------------------------ the random stream


class _SeededStream:
    """The 32-bit words ``random.Random(SEED)`` hands out, in order, grown on demand,
    and the Gaussian draws a ``Random`` makes at a given word offset."""

    GAUSS_WORDS = 4  # one gauss() pair = two random() calls = four words

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rng = random.Random(SEED)
        self._seed_state = random.Random(SEED).getstate()
        self.words = self._draw(INITIAL_STREAM_WORDS)
        self._gauss: dict[int, tuple[float, float]] = {}

    def _draw(self, count: int) -> np.ndarray:
        # getrandbits(32 * count) concatenates `count` successive words, first word lowest.
        return np.frombuffer(self._rng.getrandbits(32 * count).to_bytes(4 * count, "little"), dtype="<u4")

    def upto(self, end: int) -> np.ndarray:
        words = self.words
        if len(words) >= end:
            return words
        with self._lock:
            while len(self.words) < end:
                self.words = np.concatenate([self.words, self._draw(len(self.words))])
            return self.words

    def gauss_pair(self, offset: int) -> tuple[float, float]:
        """The two values of ``gauss(0.0, 1.0)`` drawn back to back at word ``offset``."""
        pair = self._gauss.get(offset)
        if pair is None:
            rng = random.Random()
            rng.setstate(self._seed_state)
            if offset:
                rng.getrandbits(32 * offset)
            pair = (rng.gauss(0.0, 1.0), rng.gauss(0.0, 1.0))
            if len(self._gauss) >= GAUSS_MEMO_LIMIT:
                self._gauss.clear()
            self._gauss[offset] = pair
        return pair

    def choices(self, start: int, count: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` successive ``choice`` indices into a list of ``n`` items, drawn from word
        ``start`` on, and the word offset (from ``start``) each was taken at."""
        shift = np.uint32(32 - n.bit_length())
        span = 2 * count + 64  # acceptance is > 1/2, so this almost always suffices
        while True:
            values = self.upto(start + span)[start : start + span] >> shift
            taken = np.flatnonzero(values < n)
            if len(taken) >= count:
                taken = taken[:count]
                return values[taken], taken
            span *= 2


def _accumulate_matches_sum() -> bool:
    """Whether ``np.add.accumulate(p)[-1]`` is the builtin ``sum(p.tolist())``, bit for bit.
    It is where ``sum`` adds floats one after the other (CPython up to 3.11); where ``sum``
    compensates its rounding (3.12 on), the builtin is called instead."""
    check = random.Random(2)
    for _ in range(200):
        values = [check.uniform(0.0, 1.0) ** check.choice((1, 5, 40)) for _ in range(55)]
        if np.add.accumulate(np.array(values))[-1].item() != sum(values):
            return False
    return sum([1.0, 1e100, 1.0, -1e100]) == 0.0  # compensated summation gives 2.0


def _emulation_holds(stream: _SeededStream) -> bool:
    """Checks the assumptions exactness rests on: how ``random.Random`` hands out words,
    Gaussians and choices, and that ``np.multiply.reduce`` along the first axis multiplies
    row after row (no reassociation)."""
    check = random.Random(1)
    for _ in range(50):
        block = np.array([[check.uniform(1e-12, 1.0) ** check.choice((1, 3, 9)) for _ in range(55)] for _ in range(CHECK_EVERY + 1)])
        stepwise = block[0].copy()
        for factor in block[1:]:
            stepwise = stepwise * factor
        if np.multiply.reduce(block, axis=0).tobytes() != stepwise.tobytes():
            return False
    rng = random.Random(SEED)
    if [rng.getrandbits(32) for _ in range(8)] != stream.upto(8)[:8].tolist():
        return False
    rng = random.Random(SEED)
    first = (rng.gauss(0.0, 1.0), rng.gauss(0.0, 1.0))
    if first != stream.gauss_pair(0) or rng.getrandbits(32) != int(stream.words[_SeededStream.GAUSS_WORDS]):
        return False
    rng = random.Random(SEED)
    offset = 0
    for n in (1, 2, 3, 5, 64, 65, 1000, 1024, 1025, 40000):
        real = [rng.choice(range(n)) for _ in range(40)]
        values, taken = stream.choices(offset, 40, n)
        if real != values.tolist():
            return False
        offset += int(taken[-1]) + 1
    return rng.getrandbits(32) == int(stream.upto(offset + 1)[offset])


# ----------------------------------------------------------------------- the detector

_init_lock = threading.Lock()
_state: tuple[_Model, _SeededStream] | None = None
_fallback: Callable[[str], Prediction] | None = None
_accumulate_is_sum = False  # set when the model loads (_accumulate_matches_sum)
_trial_kernel: Callable | None = None  # the compiled trial (_load_trial_kernel), where it holds
# The compiled n-gram rows and whole detection (_load_trial_kernel), where they hold.
_rows_kernel: Callable[[np.ndarray], np.ndarray] | None = None
_detect_kernel: Callable[[str, tuple], Prediction] | None = None

# One trial in C, exactly langdetect's loop (``_detect_block``): for draw i = 0, 1, ...
# multiply every probability by ``weight + row_i[lang]``; at i % every == 0 divide each by
# the sum added left to right (the builtin ``sum`` where it is not compensated, see
# _accumulate_matches_sum), track the largest share, and stop above ``threshold`` or at
# ``limit``. Returns the last draw's index, or -1 when the ``available`` rows ran out
# (``prob`` is then garbage: the caller prepares more draws and runs the trial again).
# Draw i's factors come from its profile row ``rows[i]`` as ``_profile_rows`` lays it out:
# a dense row below ``n_dense``, else P in one language and 0.0 in the others.
# Every operation is one IEEE double operation in langdetect's order (corpus.native
# compiles with -ffp-contract=off), so the vector is bit-identical to langdetect's.
TRIAL_SOURCE = native.source("corpus", "langid_trial.c")  # the C, package data (corpus/data/)
# Texts the compiled trial must score exactly as the numpy trial before it is used.
_KERNEL_CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog while the committee reviews its annual report.",
    "Der schnelle braune Fuchs springt über den faulen Hund, während der Ausschuss berichtet.",
    "Le renard brun rapide saute par-dessus le chien paresseux; la commission publie son rapport.",
    "Tokyo 東京 is big",
    "Señor Müller ordered a café au lait and açaí in São Paulo; ÉTÉ, Ωmega.",
    "Немного русского текста, and some English after it.",
)


def _cached_model() -> _Model:
    """``_load_model()``, kept between processes: building the tables from langdetect's JSON
    profiles takes about 1.5 s, loading them back about 0.05 s, in every process and every
    Beam worker. The copy lives in ``corpus.inputs.cache_dir()`` under a name made from
    langdetect's version and this module's source, so a change to either builds afresh; a
    copy that cannot be read is rebuilt."""
    source = (resources.files(__package__) / "langid.py").read_bytes()  # a file, or a zip member (--py-files)
    digest = hashlib.sha256(source + LANGDETECT_VERSION.encode() + np.__version__.encode()).hexdigest()[:16]
    path = os.path.join(cache_dir(), f"langid-model-{digest}.pickle")
    try:
        with open(path, "rb") as f:
            model = pickle.load(f)
        if isinstance(model, _Model):
            return model
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
        pass
    model = _load_model()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as exc:  # a read-only home: build in every process, as before
        log.debug("cannot keep the language model at %s: %s", path, exc)
    return model


def _ensure_loaded() -> tuple[_Model, _SeededStream] | None:
    global _state, _fallback, _accumulate_is_sum
    if _state is None and _fallback is None:
        with _init_lock:
            if _state is None and _fallback is None:
                from importlib.metadata import version

                stream = _SeededStream()
                installed = version("langdetect")
                if installed != LANGDETECT_VERSION:
                    log.warning("langdetect %s installed, %s reproduced: using langdetect itself", installed, LANGDETECT_VERSION)
                    _fallback = reference_detect_langs
                elif not _emulation_holds(stream):
                    log.warning("random or numpy behave differently than assumed: using langdetect itself")
                    _fallback = reference_detect_langs
                else:
                    _accumulate_is_sum = _accumulate_matches_sum()
                    try:
                        _state = (_cached_model(), stream)
                    except ValueError as exc:
                        log.warning("cannot lay out langdetect's profiles (%s): using langdetect itself", exc)
                        _fallback = reference_detect_langs
                    else:
                        _load_trial_kernel(_state)
    return _state


def _load_trial_kernel(state: tuple[_Model, _SeededStream]) -> None:
    """Use the compiled trial (``TRIAL_SOURCE``) where ``corpus.native`` can build it, its
    sum is the builtin's and it scores ``_KERNEL_CHECK_TEXTS`` exactly as ``_run_trial``;
    then the compiled n-gram rows and the compiled draws and trials (``_detect_native``),
    where they too score those texts exactly as ``_run_trial``."""
    global _trial_kernel, _rows_kernel, _detect_kernel
    if not _accumulate_is_sum:
        return
    library = native.load("langid-trial", TRIAL_SOURCE)
    if library is None:
        return
    trial = library.cf_langid_trial
    double, long, pointer = ctypes.c_double, ctypes.c_long, ctypes.c_void_p
    trial.argtypes = [pointer, long, long, double, pointer, pointer, long, long, double, pointer, long, pointer, pointer]
    trial.restype = long
    model = state[0]
    arrays = ((model.dense, np.float64), (model.single_lang, np.int64), (model.single_prob, np.float64))
    if not all(array.dtype == dtype and array.flags.c_contiguous for array, dtype in arrays):
        native.fell_back("langid-trial", "langdetect's profile tables are not laid out as the compiled trial reads them")
        return
    tables = (_address(model.dense), model.n_dense, _address(model.single_lang), _address(model.single_prob))
    candidate = functools.partial(_run_trial_native, trial, tables)
    expected = [_detect(text, state, _run_trial) for text in _KERNEL_CHECK_TEXTS]
    if [_detect(text, state, candidate) for text in _KERNEL_CHECK_TEXTS] != expected:
        native.fell_back("langid-trial", "it disagrees with the numpy trial on the check texts")
        return
    _trial_kernel = candidate
    rows_kernel = _bind_rows_kernel(library, model)
    if rows_kernel is None:
        return
    detect_kernel = _bind_detect_kernel(library, model, tables)
    compiled_rows = [rows_kernel(_code_points(text)) for text in _KERNEL_CHECK_TEXTS]
    numpy_rows = [_coded_ngram_rows(_code_points(text), model).tolist() for text in _KERNEL_CHECK_TEXTS]
    if ([rows.tolist() for rows in compiled_rows] != numpy_rows
            or [detect_kernel(text, state) for text in _KERNEL_CHECK_TEXTS] != expected):
        native.fell_back("langid-trial", "its n-grams or draws disagree with the numpy path on the check texts")
        return
    _rows_kernel, _detect_kernel = rows_kernel, detect_kernel


def _bind_rows_kernel(library: ctypes.CDLL, model: _Model) -> Callable[[np.ndarray], np.ndarray] | None:
    """``cf_langid_coded_rows`` over the model's code and hash tables: BMP code points ->
    the rows ``_coded_ngram_rows`` gives."""
    rows = library.cf_langid_coded_rows
    rows.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    rows.restype = ctypes.c_long
    arrays = ((model.code, np.int64), (model.code_upper, np.bool_), (model.code_unigram, np.int32), (model.code_pairs, np.int32),
              (model.code_triples, np.int32), (model.normalize, np.uint32), (model.letter, np.uint16), (model.unigram_row, np.int32),
              (model.slots, np.uint64))
    if not all(array.dtype == dtype and array.flags.c_contiguous for array, dtype in arrays):
        native.fell_back("langid-trial", "langdetect's code tables are not laid out as the compiled n-grams read them")
        return None
    code, code_upper, unigram, pairs, triples, normalize, letter, unigram_row, slots = (_address(array) for array, _ in arrays)
    tables = _RowTables(code, code_upper, unigram, pairs, triples, CODES, CODE_SPACE, ASK_HASH, normalize, letter, unigram_row, slots,
                        HASH_BITS, ROW_BITS, LETTER_BITS, int(model.letter[SPACE]))
    tables_at = ctypes.addressof(tables)

    def coded_rows(cps: np.ndarray, keep=(tables, model)) -> np.ndarray:  # `keep`: what the addresses point into stays alive
        cps = np.ascontiguousarray(cps, dtype="<u4")
        out = np.empty(3 * len(cps), dtype=np.int32)
        return out[: rows(_address(cps), len(cps), tables_at, _address(out))]

    return coded_rows


def _bind_detect_kernel(library: ctypes.CDLL, model: _Model, tables: tuple) -> Callable[[str, tuple], Prediction]:
    """``_detect_native`` bound to ``cf_langid_trials`` and the profile tables (``tables``:
    their addresses, as ``_load_trial_kernel`` checked them)."""
    trials = library.cf_langid_trials
    double, long, pointer = ctypes.c_double, ctypes.c_long, ctypes.c_void_p
    trials.argtypes = [pointer, long, long, pointer, long, long, double, double, long, pointer, pointer]
    trials.restype = long
    start = np.full(len(model.langs), 1.0 / len(model.langs))  # every trial starts uniform, as _Draws.uniform
    dense, n_dense, single_lang, single_prob = tables
    constants = _TrialTables(len(model.langs), _address(start), ITERATION_LIMIT, CHECK_EVERY, CONV_THRESHOLD, FIRST_TRIAL_DRAWS,
                             float(N_TRIAL), dense, n_dense, single_lang, single_prob)
    constants.keep = (start, model)  # what the addresses point into stays alive
    return functools.partial(_detect_native, trials, ctypes.addressof(constants), constants)


class _RowTables(ctypes.Structure):
    """``struct row_tables`` of ``TRIAL_SOURCE``."""

    _fields_ = [("code", ctypes.c_void_p), ("code_upper", ctypes.c_void_p), ("unigram", ctypes.c_void_p), ("pairs", ctypes.c_void_p),
                ("triples", ctypes.c_void_p), ("codes", ctypes.c_long), ("space", ctypes.c_long), ("ask", ctypes.c_int32),
                ("normalize", ctypes.c_void_p), ("letter", ctypes.c_void_p), ("unigram_row", ctypes.c_void_p), ("slots", ctypes.c_void_p),
                ("hash_bits", ctypes.c_long), ("row_bits", ctypes.c_long), ("letter_bits", ctypes.c_long), ("space_letter", ctypes.c_long)]


class _TrialTables(ctypes.Structure):
    """``struct trial_tables`` of ``TRIAL_SOURCE``."""

    _fields_ = [("n_langs", ctypes.c_long), ("start", ctypes.c_void_p), ("limit", ctypes.c_long), ("every", ctypes.c_long),
                ("threshold", ctypes.c_double), ("first_draws", ctypes.c_long), ("n_trial", ctypes.c_double), ("dense", ctypes.c_void_p),
                ("n_dense", ctypes.c_long), ("single_lang", ctypes.c_void_p), ("single_prob", ctypes.c_void_p)]


def _replace_mail(text: str) -> str:
    """``_MAIL_RE.sub(" ", text)``, searching only near each ``@``.

    A match is 1-64 characters of ``[-_.0-9A-Za-z]``, one ``@`` (which that class lacks),
    then at most 510 more characters, so it holds exactly one ``@`` and starts at most 64
    characters before it. Taking the ``@``s in order, a search from ``max(end of the last
    match, @ - 64)`` that may read up to ``MAIL_TAIL`` characters past the ``@`` finds
    what the whole-text scan finds next, if it starts before this ``@``; a match found
    further on belongs to a later ``@`` and is looked for again from there.
    """
    at = text.find("@")
    if at < 0:
        return text  # no match without "@"
    out, done = [], 0
    while at >= 0:
        if at >= done:
            found = _MAIL_RE.search(text, max(done, at - MAIL_LOCAL_MAX), at + MAIL_TAIL)
            if found is not None and found.start() < at:
                out.append(text[done : found.start()])
                out.append(" ")
                done = found.end()
        at = text.find("@", at + 1)
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _replace_urls(text: str) -> str:
    return _URL_RE.sub(" ", text) if "http" in text else text  # no match without "http"


def _compose_vietnamese(text: str, model: _Model) -> str:
    if not any(mark in text for mark in model.vi_marks):
        return text
    compose = model.vi_compose
    return model.vi_re.sub(lambda m: compose[m.group()], text)


def _replace(text: str, model: _Model, cut: bool = False) -> str:
    """URLs and e-mails to a space, Vietnamese letter + tone mark to the composed letter,
    in langdetect's order. With ``cut``, each step drops the last ``reach`` characters of
    its result: what is left is a prefix of what the same steps make of any longer text
    that starts with this one (see ``_prepare_text``)."""
    for step, reach in ((_replace_urls, URL_REACH), (_replace_mail, MAIL_REACH), (None, VI_REACH)):
        text = step(text) if step is not None else _compose_vietnamese(text, model)
        if cut:
            text = text[:-reach]
    return text


def _prepare_text(text: str, model: _Model) -> str:
    """The characters langdetect reads: replacements done, first 10,000 characters kept.

    langdetect replaces in the whole text before cutting it. On a long text we replace in
    a prefix instead: a replacement only shortens text, and whether a match starts at
    ``i`` depends on ``text[i:i + reach]`` alone, so after each replacement all but the
    last ``reach`` characters of the prefix's result are a prefix of the whole text's
    result. When that leaves fewer than 10,000 characters (many URLs), the whole text is
    used.
    """
    if len(text) > PREFIX_LENGTH:
        part = _replace(text[:PREFIX_LENGTH], model, cut=True)
        if len(part) >= MAX_TEXT_LENGTH:
            return part[:MAX_TEXT_LENGTH]
    # langdetect also squeezes runs of ' ' here; normalisation maps ' ' to itself and the
    # n-gram window ignores a space after a space, so that step changes nothing observable.
    return _replace(text, model)[:MAX_TEXT_LENGTH]


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


def _ngram_rows(text: str, model: _Model) -> np.ndarray:
    """The profile rows of the text's n-grams, in the order langdetect lists them.

    langdetect keeps a window of the last three normalised characters since the last
    space (the window starts as a space); at each character it emits the window's last 1,
    2 and 3 characters that exist, except a lone space, and nothing inside an all-capitals
    word (this character and the one before both upper case). A space right after a space
    changes nothing and emits nothing. So at position ``i`` the n-grams are ``c[i]``,
    ``c[i-1:i+1]`` and, if ``c[i-1]`` is no space, ``c[i-2:i+1]``, with a virtual space
    before the text.
    """
    cps = _code_points(_prepare_text(text, model))
    if cps.size == 0:
        return np.empty(0, dtype=np.int32)
    top = int(cps.max())
    if top >= NON_LATIN_FROM:
        ascii_latin = (cps >= ord("A")) & (cps <= ord("z"))
        latin = int(np.count_nonzero(ascii_latin))
        non_latin = int(np.count_nonzero(cps >= NON_LATIN_FROM))
        if non_latin > latin * 2:
            non_latin -= int(np.count_nonzero((cps >= LATIN_EXTENDED_ADDITIONAL[0]) & (cps <= LATIN_EXTENDED_ADDITIONAL[1])))
            if latin * 2 < non_latin:  # mostly another script: langdetect drops the A..z characters
                cps = cps[~ascii_latin]
                if cps.size == 0:
                    return np.empty(0, dtype=np.int32)
    if top < BMP:
        return _rows_kernel(cps) if _rows_kernel is not None else _coded_ngram_rows(cps, model)
    return _ngram_rows_by_hash(cps, model)


def _coded_ngram_rows(cps: np.ndarray, model: _Model) -> np.ndarray:
    """``_ngram_rows`` for BMP text: one gather per n-gram length from the code tables,
    the hash table only for n-grams with a ``CODE_OTHER`` character."""
    m = len(cps)
    codes = np.empty(m + 2, dtype=np.intp)
    codes[:2] = CODE_SPACE  # the virtual space before the text, twice for the first 3-gram
    model.code.take(cps, out=codes[2:], mode="clip")
    here, before = codes[2:], codes[1:-1]
    pairs = before * CODES
    pairs += here
    triples = codes[:-2] * (CODES * CODES)
    triples += pairs
    grams = np.empty((3, m), dtype=np.int32)
    model.code_unigram.take(here, out=grams[0], mode="clip")
    model.code_pairs.take(pairs, out=grams[1], mode="clip")
    model.code_triples.take(triples, out=grams[2], mode="clip")
    upper = model.code_upper[codes]
    capital = upper[2:] & upper[1:-1]  # inside an all-capitals word: nothing is emitted
    if capital.any():
        grams[:, capital] = ABSENT
    if int(codes.max()) >= CODE_OTHER:
        flat = grams.ravel()
        ask = np.flatnonzero(flat == ASK_HASH)
        if ask.size:
            n = ask // m
            at = ask - n * m + 2  # the n-gram's last character, in `codes` positions
            chars = np.empty(m + 2, dtype=np.intp)
            chars[:2] = SPACE
            chars[2:] = model.normalize[cps]
            letter = model.letter[chars].astype(np.uint64)
            one = n == 0
            flat[ask[one]] = model.unigram_row[chars[at[one]]]
            n, at = n[~one], at[~one]
            keys = (letter[at - 1] << np.uint64(LETTER_BITS)) | letter[at]
            keys[n == 2] |= letter[at[n == 2] - 2] << np.uint64(2 * LETTER_BITS)
            flat[ask[~one]] = _lookup(keys, model)
    rows = grams.T.ravel()  # position by position: the 1-, 2- and 3-gram ending there
    return rows[rows >= 0]


def _ngram_rows_by_hash(cps: np.ndarray, model: _Model) -> np.ndarray:
    """``_ngram_rows`` for any text (characters above the BMP included), by the hash table."""
    astral = cps >= BMP
    if astral.any():  # never changed by normalisation, never in a profile
        bmp = ~astral
        chars = cps.copy()
        chars[bmp] = model.normalize[cps[bmp]]
        upper = np.zeros(len(chars), dtype=bool)
        upper[bmp] = model.upper[chars[bmp]]
        upper[astral] = [chr(c).isupper() for c in chars[astral].tolist()]
        unigram = np.full(len(chars), -1, dtype=np.int32)
        unigram[bmp] = model.unigram_row[chars[bmp]]
        letter = np.zeros(len(chars), dtype=np.uint64)
        letter[bmp] = model.letter[chars[bmp]]
    else:
        chars = model.normalize[cps]
        upper = model.upper[chars]
        unigram = model.unigram_row[chars]
        letter = model.letter[chars].astype(np.uint64)

    m = len(chars)
    space = chars == SPACE
    prev_space = np.empty(m, dtype=bool)
    prev_space[0] = True  # the virtual space before the text
    prev_space[1:] = space[:-1]
    prev_upper = np.empty(m, dtype=bool)
    prev_upper[0] = False
    prev_upper[1:] = upper[:-1]
    emits = ~((space & prev_space) | (upper & prev_upper))

    # 2- and 3-gram keys from alphabet numbers; a character outside the alphabet (number
    # 0) is in no profile n-gram, so no n-gram containing it is looked up.
    space_letter = model.letter[SPACE]
    prev = np.empty(m, dtype=np.uint64)
    prev[0] = space_letter
    prev[1:] = letter[:-1]
    prev2 = np.empty(m, dtype=np.uint64)
    prev2[: min(m, 2)] = space_letter
    prev2[2:] = letter[:-2]
    keys = np.empty((m, 2), dtype=np.uint64)
    keys[:, 0] = (prev << np.uint64(LETTER_BITS)) | letter
    keys[:, 1] = (prev2 << np.uint64(2 * LETTER_BITS)) | keys[:, 0]
    asked = np.empty((m, 2), dtype=bool)
    asked[:, 0] = emits & (letter != 0) & (prev != 0)
    asked[:, 1] = asked[:, 0] & ~prev_space & (prev2 != 0)  # a trigram needs two characters since the last space

    rows: np.ndarray = np.full((m, 3), -1, dtype=np.int32)
    rows[:, 0] = np.where(emits & ~space, unigram, -1)
    rows[:, 1:] = np.where(asked, _lookup(keys.ravel(), model).reshape(m, 2), -1)
    rows = rows.ravel()
    return rows[rows >= 0]


def _lookup(keys: np.ndarray, model: _Model) -> np.ndarray:
    """Row of each 2-/3-gram key, -1 where absent: linear probing, the first probe for all
    keys at once, a few more rounds for the keys whose home slot holds another key, and a
    binary search for any key still unresolved after that."""
    row_bits, row_mask = np.uint64(ROW_BITS), np.uint64((1 << ROW_BITS) - 1)
    slots = _hash_slots(keys).astype(np.intp)
    entry = model.slots.take(slots)
    hit = (entry >> row_bits) == keys
    rows = np.where(hit, entry & row_mask, -1).astype(np.int32)
    pending = np.flatnonzero((entry != 0) & ~hit)
    if not pending.size:
        return rows
    keys, slots = keys[pending], slots[pending]
    mask = (1 << HASH_BITS) - 1
    for _ in range(PROBE_ROUNDS):
        slots = (slots + 1) & mask
        entry = model.slots[slots]
        hit = (entry >> row_bits) == keys
        rows[pending[hit]] = entry[hit] & row_mask
        go_on = (entry != 0) & ~hit
        pending, keys, slots = pending[go_on], keys[go_on], slots[go_on]
        if not pending.size:
            return rows
    where = np.minimum(np.searchsorted(model.sorted_key, keys), len(model.sorted_key) - 1)
    hit = model.sorted_key[where] == keys
    rows[pending[hit]] = model.sorted_row[where[hit]]
    return rows


def _profile_rows(model: _Model, rows: np.ndarray) -> np.ndarray:
    """Dense ``P(n-gram | language)`` for each row (0.0 where the language lacks it)."""
    single = rows >= model.n_dense
    out = model.dense.take(np.where(single, model.n_dense, rows), axis=0)
    if single.any():
        which = np.flatnonzero(single)
        index = rows[which] - model.n_dense
        out[which, model.single_lang[index]] = model.single_prob[index]
    return out


class _Draws:
    """Every ``choice`` the detector could make over this text's n-gram list: the accepted
    words of the seeded stream, from word 0 on, with the drawn n-gram's profile row.
    Trials read consecutive stretches of it; the words a trial's Gaussian takes are skipped."""

    def __init__(self, model: _Model, stream: _SeededStream, ngrams: np.ndarray, dense: bool = True):
        self.model, self.stream, self.ngrams, self.dense = model, stream, ngrams, dense
        self.examined = 0  # stream words looked at so far
        self.count = 0  # draws prepared so far
        self.offsets = np.empty(0, dtype=np.int64)  # stream word of each draw
        self.rows = np.empty(0, dtype=np.int32)  # profile row of each draw's n-gram
        # P(n-gram | language) of each draw, laid out dense (only when ``dense``: the numpy
        # trial reads it; the compiled trial reads the profile tables by ``rows``)
        self.probs = np.empty((0, len(model.langs)))
        self.uniform = np.full(len(model.langs), 1.0 / len(model.langs))  # a trial's start
        self.scratch = np.empty(len(model.langs))  # the compiled trial's output
        # addresses for the compiled trial: the rows (renewed by ensure), uniform, scratch
        self.rows_at, self.uniform_at, self.scratch_at = 0, _address(self.uniform), _address(self.scratch)

    def ensure(self, count: int) -> None:
        have = self.count
        if have >= count:
            return
        more = max(count - have, have // 2, INITIAL_DRAWS)
        values, taken = self.stream.choices(self.examined, more, len(self.ngrams))
        rows = self.ngrams[values]
        probs = _profile_rows(self.model, rows) if self.dense else self.probs
        taken += self.examined
        if have:
            self.offsets = np.concatenate([self.offsets, taken])
            self.rows = np.concatenate([self.rows, rows])
            if self.dense:
                self.probs = np.concatenate([self.probs, probs])
        else:
            self.offsets, self.rows, self.probs = taken, rows, probs
        if self.rows.dtype != np.int32 or not self.rows.flags.c_contiguous:
            self.rows = np.ascontiguousarray(self.rows, dtype=np.int32)
        self.rows_at = _address(self.rows)
        self.examined = int(taken[-1]) + 1
        self.count = have + more

    def first_at(self, word: int) -> int:
        """Index of the first draw taken at stream word ``word`` or later."""
        while True:
            index = int(self.offsets.searchsorted(word))
            if index < self.count:
                return index
            self.ensure(2 * self.count + 1)


def _largest_share(values: list[float], total: float) -> float:
    """langdetect's own ``max(0.0, p / total for p in values)`` (raises on a zero total)."""
    return max([0.0] + [v / total for v in values])


def _run_trial(draws: _Draws, first: int, weight: float) -> tuple[np.ndarray, int]:
    """One trial starting at draw ``first``: its normalised probabilities and its last draw.

    Draw 0 is taken as a block of its own: the uniform vector times its factor and four
    factors of 1.0 (exact), so every block is the same five products, one normalisation
    and one check. langdetect's check is ``max(p / sum(p)) > 0.99999``. Division by a
    positive number is monotone, so ``max(p / s) == max(p) / s``. And ``max`` itself is
    mostly not needed: we follow the language that led last time (``lead``). If it holds
    more than 99% of the sum it is the maximum; if it holds between 1% and 99%, no language
    can pass 0.99999 (the sum is exact to ~1e-14, far inside those margins). Only otherwise
    is the maximum computed, langdetect's way. (This needs positive probabilities, so
    weight > 0; with a non-positive weight, which seed 0 never draws, the maximum is always
    computed.)
    """
    n_langs = len(draws.model.langs)
    lead = -1  # no leader yet: the first check computes the maximum
    done, start = -1, first  # blocks finished (draw 0's counts as block -1); next draw
    last_block = ITERATION_LIMIT // CHECK_EVERY
    multiply_rows, divide, accumulate = np.multiply.reduce, np.divide, np.add.accumulate
    by_accumulate = _accumulate_is_sum
    prob, sums = np.empty(n_langs), np.empty(n_langs)
    carry = draws.uniform
    while True:
        wanted = FIRST_CHUNK_BLOCKS if done < 0 else LATER_CHUNK_BLOCKS
        size = min(wanted, last_block - done)
        ready = (draws.count - start + (CHECK_EVERY - 1 if done < 0 else 0)) // CHECK_EVERY  # blocks whose draws are there
        if ready < min(size, MIN_CHUNK_BLOCKS):
            draws.ensure(start + CHECK_EVERY * size)
        else:
            size = min(size, ready)
        # blocks[b, 0] holds the normalised vector entering block b, blocks[b, 1:] its five factors.
        blocks = np.empty((size + 1, CHECK_EVERY + 1, n_langs))
        blocks[0, 0] = carry
        if done < 0:  # draw 0: one factor, then four of 1.0
            np.add(draws.probs[start], weight, out=blocks[0, 1])
            blocks[0, 2:] = 1.0
            factors = draws.probs[start + 1 : start + 1 + CHECK_EVERY * (size - 1)].reshape(size - 1, CHECK_EVERY, n_langs)
            np.add(factors, weight, out=blocks[1:size, 1:])
            ends = start - CHECK_EVERY  # block b ends at draw ends + CHECK_EVERY * (b + 1), block 0 at `first`
        else:
            np.add(draws.probs[start : start + CHECK_EVERY * size].reshape(size, CHECK_EVERY, n_langs), weight, out=blocks[:size, 1:])
            ends = start - 1
        entering_rows = blocks[1:, 0]
        for b in range(size):
            multiply_rows(blocks[b], 0, None, out=prob)  # ((p * f1) * f2) ... * f5, per element
            if by_accumulate:  # the running sum's last value: the builtin sum, same order, same rounding
                accumulate(prob, 0, None, sums)
                total = sums.item(-1)
            else:
                total = sum(prob.tolist())  # the builtin sum, in langdetect's order
            entering = entering_rows[b]
            divide(prob, total, entering)
            done += 1
            share = prob.item(lead) if lead >= 0 else 0.0
            if lead >= 0 and share > 0.99 * total:
                converged = share / total > CONV_THRESHOLD
            elif lead >= 0 and share >= 0.01 * total > 0.0:
                converged = False
            elif weight > 0 and total > 0.0:  # positive values: max(p / total) == max(p) / total
                lead = int(prob.argmax())  # the first of the largest, as list.index(max(...)) finds it
                converged = prob.item(lead) / total > CONV_THRESHOLD
            else:
                converged = _largest_share(prob.tolist(), total) > CONV_THRESHOLD
            if converged or done == last_block:
                return entering, ends + CHECK_EVERY * (b + 1)
        carry = blocks[size, 0]
        start = ends + CHECK_EVERY * size + 1


def _address(array: np.ndarray) -> int:
    """The address of an array's first element (cheaper than ``array.ctypes.data``)."""
    return array.__array_interface__["data"][0]


def _run_trial_native(trial: Callable, tables: tuple, draws: _Draws, first: int, weight: float) -> tuple[np.ndarray, int]:
    """``_run_trial`` through the compiled ``TRIAL_SOURCE`` (``trial``; ``tables``: the
    addresses of the model's profile tables): the same vector and last draw. When the
    prepared draws run out, more are prepared and the trial runs again."""
    n_langs = len(draws.model.langs)
    while True:
        last = trial(draws.rows_at + first * ROW_BYTES, draws.count - first, n_langs, weight, draws.uniform_at,
                     draws.scratch_at, ITERATION_LIMIT, CHECK_EVERY, CONV_THRESHOLD, *tables)
        if last >= 0:
            return draws.scratch.copy(), first + last
        draws.ensure(draws.count + 1)  # grows by at least half


def detect_langs(text: str) -> Prediction:
    """``[(lang, prob), ...]`` exactly as langdetect 1.0.9 with seed 0 ranks them.

    Raises ``LanguageDetectionError`` where langdetect raises ``LangDetectException``
    ("No features in text."). Thread-safe; does not touch the global ``random``.
    """
    state = _ensure_loaded()
    if state is None:
        assert _fallback is not None  # set whenever the emulation is not
        return _fallback(text)
    native.mark_used("langid-trial")  # compiled or not: the job's _stats.json says which (corpus.native.take_used)
    if _detect_kernel is not None:
        return _detect_kernel(text, state)
    return _detect(text, state, _trial_kernel or _run_trial)


def _detect_native(trials: Callable, tables_at: int, tables: ctypes.Structure, text: str, state: tuple[_Model, _SeededStream]) -> Prediction:
    """``_detect`` with the draws and trials in C (``cf_langid_trials``, its ``struct
    trial_tables`` at ``tables_at``): one call per Gaussian pair, that is per two trials,
    instead of preparing the draws in numpy and calling the compiled trial once per trial.
    The same words of the stream, draws, products and sums in the same order: the same
    answer."""
    model, stream = state
    ngrams = _ngram_rows(text, model)
    n = len(ngrams)
    if n == 0:
        raise LanguageDetectionError("No features in text.")
    ngrams = np.ascontiguousarray(ngrams, dtype=np.int32)
    total = np.zeros(len(model.langs))
    ngrams_at, total_at = _address(ngrams), _address(total)
    words = stream.words
    words_at = _address(words)
    shift, word, left = 32 - n.bit_length(), 0, N_TRIAL
    while left:
        first, second = stream.gauss_pair(word)  # gauss() draws a pair; the second serves the next trial
        word += _SeededStream.GAUSS_WORDS
        count = min(2, left)
        while (after := trials(ngrams_at, n, shift, words_at, len(words), word, (ALPHA_DEFAULT + first * ALPHA_WIDTH) / BASE_FREQ,
                               (ALPHA_DEFAULT + second * ALPHA_WIDTH) / BASE_FREQ, count, total_at, tables_at)) < 0:
            words = stream.upto(2 * len(words))  # the stream ran out: grow it and run the pair again
            words_at = _address(words)
        word, left = after, left - count
    return _ranked(model, total)

def _detect(text: str, state: tuple[_Model, _SeededStream], run_trial: Callable) -> Prediction:
    """``detect_langs`` with the given trial: ``_run_trial`` or the compiled one."""
    model, stream = state
    ngrams = _ngram_rows(text, model)
    if ngrams.size == 0:
        raise LanguageDetectionError("No features in text.")
    draws = _Draws(model, stream, ngrams, dense=run_trial is _run_trial)
    total = np.zeros(len(model.langs))
    word = 0  # next unused word of the stream
    pending_gauss = None  # gauss() draws in pairs and keeps the second for the next call
    for _ in range(N_TRIAL):
        if pending_gauss is None:
            gauss, pending_gauss = stream.gauss_pair(word)
            word += _SeededStream.GAUSS_WORDS
        else:
            gauss, pending_gauss = pending_gauss, None
        alpha = ALPHA_DEFAULT + gauss * ALPHA_WIDTH
        prob, last = run_trial(draws, draws.first_at(word), alpha / BASE_FREQ)
        word = int(draws.offsets[last]) + 1
        total += prob / N_TRIAL
    return _ranked(model, total)


def _ranked(model: _Model, total: np.ndarray) -> Prediction:
    """The languages above ``PROB_THRESHOLD``, highest first (stable: ties keep profile order)."""
    ranked = [(lang, p) for lang, p in zip(model.langs, total.tolist(), strict=True) if p > PROB_THRESHOLD]
    ranked.sort(key=lambda pair: pair[1], reverse=True)
    return ranked
