"""dedup.ngrams: GPT-2 section 4 normalisation, n-gram hashes, spans, stability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dedup.ngrams import (
    DEFAULT,
    HASH_ID,
    NgramConfig,
    ngram_char_spans,
    ngram_hashes,
    ngram_hashes_batch,
    ngram_hashes_many,
    ngram_strings,
    normalised_stream,
    normalize,
    word_spans,
    words,
)

ROOT = Path(__file__).resolve().parents[1]
MASK = (1 << 64) - 1
JOIN = NgramConfig(apostrophes="join")
ASCII = NgramConfig(unicode=False)


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def reference_word_hash(word: str) -> int:
    """UTF-8 bytes in 8-byte little-endian chunks: fmix64(c0), then fmix64(h ^ c_j)."""
    data = word.encode("utf-8")
    h = 0
    for j in range(0, len(data), 8):
        chunk = int.from_bytes(data[j:j + 8], "little")
        h = fmix64(chunk if j == 0 else h ^ chunk)
    return h


def reference_hashes(text: str, config: NgramConfig) -> list[int]:
    """The scheme from its description, one n-gram string at a time, in Python integers."""
    out = []
    for gram in ngram_strings(text, config):
        acc = 0
        for w in gram.split(" "):
            acc = (acc * 0x9E3779B97F4A7C15 + reference_word_hash(w)) & MASK
        out.append(fmix64(acc))
    return out


# --- normalisation ------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("Hello, World!", "hello world"),
    ("  The  U.S.A.--is (big)...  ", "the u s a is big"),
    ("e-mail me_now @ x.com", "e mail me now x com"),
    ("3.14 is pi; 1,000 vs 1000", "3 14 is pi 1 000 vs 1000"),
    ("abc123 DEF456", "abc123 def456"),
    ("line one\nline two\r\n\tthree", "line one line two three"),
    ("", ""),
    ("!!! ... ---", ""),
])
def test_punctuation_and_digits(text, expected):
    assert normalize(text) == expected


def test_apostrophes_split_and_join():
    text = "Don't stop — it’s the students' 'tis rock'n'roll"
    assert words(text) == ["don", "t", "stop", "it", "s", "the", "students", "tis", "rock", "n", "roll"]
    assert words(text, JOIN) == ["dont", "stop", "its", "the", "students", "tis", "rocknroll"]
    assert DEFAULT.apostrophes == "split"


def test_unicode_letters_and_digits_on_and_off():
    text = "Café NAÏVE Ελληνικά straße x² ４２ 中文"
    assert words(text) == ["café", "naïve", "ελληνικά", "straße", "x²", "４２", "中文"]
    assert words(text, ASCII) == ["caf", "na", "ve", "stra", "e", "x"]
    # decomposed accents and Devanagari vowel signs stay inside their word; NFC makes them equal
    assert words("cafe\u0301 CAFÉ") == ["café", "café"]
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert words("cafe\u0301", ASCII) == ["cafe"]
    assert words("\u212a", ASCII) == []  # the Kelvin sign is not ASCII, though it lower-cases to "k"


def test_ngrams_run_across_line_breaks():
    config = NgramConfig(n=3)
    assert ngram_strings("a b c\nd e", config) == ["a b c", "b c d", "c d e"]
    assert ngram_strings("a b\n\nc d", config) == ["a b c", "b c d"]


def test_short_and_empty_texts():
    config = NgramConfig(n=8)
    assert ngram_strings("Just four words here.", config) == ["just four words here"]
    short = ngram_hashes("Just four words here.", config)
    assert short.dtype == np.uint64 and len(short) == 1
    assert short.tolist() == reference_hashes("just four words here", config)
    assert ngram_char_spans("  Just four words here.", config) == [(2, 22)]
    for empty in ("", "   \n", "?!"):
        assert ngram_hashes(empty).dtype == np.uint64 and len(ngram_hashes(empty)) == 0
        assert ngram_strings(empty) == [] and ngram_char_spans(empty) == []
    assert len(ngram_hashes(" ".join("abcdefgh"), config)) == 1  # exactly n words: one n-gram
    assert len(ngram_hashes(" ".join("abcdefghi"), config)) == 2


def test_config_round_trip_and_validation():
    config = NgramConfig(n=13, apostrophes="join", unicode=False)
    assert config.to_dict() == {"n": 13, "apostrophes": "join", "unicode": False}
    assert NgramConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert DEFAULT == NgramConfig(n=8, apostrophes="split", unicode=True)
    for bad in ({"n": 0}, {"apostrophes": "drop"}, {"unicode": "yes"}):
        with pytest.raises(ValueError):
            NgramConfig(**bad)
    with pytest.raises(ValueError):
        NgramConfig.from_dict({"n": 8, "apostrophes": "split"})
    with pytest.raises(ValueError):
        NgramConfig.from_dict({"n": 8, "apostrophes": "split", "unicode": True, "x": 1})


# --- hashes ---------------------------------------------------------------------------------

def test_hashes_match_reference_on_constructed_text():
    text = "Don't  STOP!\nThe quick brown fox, jumps over 2 lazy dogs — naïve café x² _"
    for config in (DEFAULT, JOIN, ASCII, NgramConfig(n=1), NgramConfig(n=3), NgramConfig(n=13)):
        assert ngram_hashes(text, config).tolist() == reference_hashes(text, config)


def test_hashes_match_reference_on_wikitext(real_data):
    text = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")[:150_000]
    for config in (DEFAULT, NgramConfig(n=13, apostrophes="join", unicode=False)):
        got = ngram_hashes(text, config)
        assert len(got) == len(words(text, config)) - config.n + 1 > 10_000
        assert got.tolist() == reference_hashes(text, config)
    lines = text.split("\n")
    batch = ngram_hashes_many(lines, DEFAULT)
    assert len(batch) == len(lines)
    for line, hashes in zip(lines, batch, strict=True):
        assert hashes.tolist() == ngram_hashes(line).tolist()


def test_ascii_fast_path_equals_the_regex_path(real_data):
    printable = "".join(chr(c) for c in range(1, 128))
    text = f"{printable} Don't STOP_now 3.14\x0b\x0cx\x1fy {printable[::-1]}"
    assert text.isascii()
    for config in (DEFAULT, NgramConfig(n=2), NgramConfig(n=5, unicode=False)):
        assert ngram_hashes(text, config).tolist() == reference_hashes(text, config)
    lines = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8").split("\n")
    ascii_text = "\n".join(line for line in lines[:1200] if line.isascii())  # the first 55k words
    assert ascii_text.isascii() and len(words(ascii_text)) > 50_000
    assert ngram_hashes(ascii_text).tolist() == reference_hashes(ascii_text, DEFAULT)


def test_char_spans_map_back_to_the_words(real_data):
    text = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")[:60_000]
    for config in (DEFAULT, JOIN, ASCII):
        spans, grams = ngram_char_spans(text, config), ngram_strings(text, config)
        assert len(spans) == len(grams) == len(ngram_hashes(text, config))
        for (start, end), gram in zip(spans, grams, strict=True):
            assert normalize(text[start:end], config) == gram
    assert len(word_spans(text)) == len(words(text))


def test_char_spans_constructed():
    text = "Hi, don't\nSTOP now!"
    assert ngram_char_spans(text, NgramConfig(n=2)) == [(0, 7), (4, 9), (8, 14), (10, 18)]
    assert ngram_strings(text, NgramConfig(n=2)) == ["hi don", "don t", "t stop", "stop now"]
    assert ngram_char_spans(text, NgramConfig(n=2, apostrophes="join")) == [(0, 9), (4, 14), (10, 18)]


# --- stability ------------------------------------------------------------------------------

PINNED_TEXT = "The quick brown fox jumps over the lazy dog and more"
PINNED = [5631653996433289265, 10762892866874174233]  # computed by reference_hashes


def test_hashes_are_pinned():
    assert ngram_hashes(PINNED_TEXT)[:2].tolist() == PINNED
    assert ngram_hashes("hello world").tolist() == [41160683384164339]
    assert HASH_ID.startswith("ngram-v2:")


@pytest.mark.pipeline  # a fresh Python process
def test_hashes_stable_across_processes():
    code = ("import json; from dedup.ngrams import ngram_hashes, NgramConfig; "
            f"print(json.dumps([ngram_hashes({PINNED_TEXT!r}).tolist(), "
            f"ngram_hashes({PINNED_TEXT!r}, NgramConfig(n=3, apostrophes='join')).tolist()]))")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    default, join3 = json.loads(out.stdout)
    assert default == ngram_hashes(PINNED_TEXT).tolist()
    assert default[:2] == PINNED
    assert join3 == ngram_hashes(PINNED_TEXT, NgramConfig(n=3, apostrophes="join")).tolist()


# --- the fast batch paths against the reference -----------------------------------------

# Characters that stress every path: ASCII, light non-ASCII (token by token), heavy
# non-ASCII (whole text), apostrophes, marks (leading, inside a word, decomposed accents),
# final sigma, a multi-character lower case (İ), the Kelvin sign, NUL, a lone surrogate,
# astral letters and symbols, full-width digits.
TRICKY = ["a", "B", "z", "Q", "0", "7", " ", "  ", "\n", "\t", "'", "’", "-", "_", ".", "\x00",
          "é", "É", "e\u0301", "\u0301", "Σ", "σ", "ß", "İ", "\u212a", "中", "क", "\u093f", "😀",
          "\U0001d400", "４", "\ud800", "ΟΔΟΣ", "don't", "rock'n'roll", "antidisestablishment"]


def random_texts(count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    plain = ["The", "quick", "fox", "a", "IS", "x1", "12", "word's"]
    texts = []
    for _ in range(count):
        ascii_share = [1.0, 0.99, 0.95, 0.5, 0.0][rng.integers(5)]  # pure ASCII, light, mixed, heavy
        parts = []
        for _ in range(int(rng.integers(0, 80))):
            if rng.random() < ascii_share:
                parts.append(plain[rng.integers(len(plain))] + " ")
            else:
                parts.append(TRICKY[rng.integers(len(TRICKY))])
        texts.append("".join(parts))
    return texts


@pytest.mark.parametrize("config", [DEFAULT, JOIN, ASCII, NgramConfig(n=1), NgramConfig(n=3, apostrophes="join"),
                                    NgramConfig(n=13, unicode=False, apostrophes="join")])
def test_batch_of_random_texts_matches_the_reference(config):
    texts = random_texts(300, seed=config.n + 7 * config.unicode + 11 * (config.apostrophes == "join"))
    keys, counts = ngram_hashes_batch(texts, config)
    assert keys.dtype == np.uint64 and counts.dtype == np.int64 and len(counts) == len(texts)
    assert keys.tolist() == [h for text in texts for h in reference_hashes(text, config)]
    assert counts.tolist() == [len(ngram_strings(text, config)) for text in texts]
    stream = normalised_stream(texts, config)
    assert [part.decode("utf-8").split() for part in stream.split(b"\x7f")] == [words(t, config) for t in texts]


def test_batch_equals_one_text_at_a_time_across_steps(monkeypatch):
    texts = random_texts(120, seed=3) + ["", "one", "two words", " ".join("abcdefgh"), "x" * 1000]
    expected = [ngram_hashes(text).tolist() for text in texts]
    monkeypatch.setattr("dedup.ngrams._STREAM_BLOCK", 64)  # many steps, texts split across none
    keys, counts = ngram_hashes_batch(texts)
    assert counts.sum() == keys.size
    assert [a.tolist() for a in np.split(keys, np.cumsum(counts)[:-1])] == expected
    assert [a.tolist() for a in ngram_hashes_many(iter(texts))] == expected
    assert ngram_hashes_many([]) == [] and ngram_hashes_batch([])[0].size == 0


def test_word_hash_chunks_and_long_words():
    # words of 1..40 bytes, with multi-byte characters across the 8-byte chunk edges
    for length in range(1, 41):
        for word in ("x" * length, ("é" * length)[:length], "a" * (length - 1) + "中"):
            assert ngram_hashes(word, NgramConfig(n=1)).tolist() == reference_hashes(word, NgramConfig(n=1))
    assert len({int(h) for h in ngram_hashes(" ".join("x" * i for i in range(1, 200)), NgramConfig(n=1))}) == 199


def test_stream_edge_cases():
    assert normalised_stream(["A\x00B", "c\x7fd"]) == b"a b \x7f c d"  # a NUL or DEL inside a text separates
    joined = normalised_stream(["café's ΟΔΟΣ rock’n’roll"], JOIN)
    assert joined.split() == ["cafés".encode(), "\u03bf\u03b4\u03bf\u03c2".encode(), b"rocknroll"]  # final sigma
    assert normalised_stream(["'tis a''b x' don't"], JOIN).split() == [b"tis", b"a", b"b", b"x", b"dont"]
    assert normalised_stream(["naïve Straße \u212a"], ASCII).split() == [b"na", b"ve", b"stra", b"e"]
    assert normalised_stream(["\u0301abc e\u0301 \ud800x"]).split() == [b"abc", "é".encode(), b"x"]


@pytest.mark.parametrize("threshold", [0, 10**9])  # every non-ASCII text token by token / whole
def test_both_non_ascii_paths_match_the_reference(monkeypatch, threshold):
    monkeypatch.setattr("dedup.ngrams._HEAVY_NON_ASCII", threshold)
    texts = [t for t in random_texts(200, seed=21) if not t.isascii()]
    for config in (DEFAULT, JOIN, ASCII):
        assert ngram_hashes_batch(texts, config)[0].tolist() == [h for t in texts for h in reference_hashes(t, config)]
