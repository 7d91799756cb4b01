"""The byte-level BPE tokenizer: GPT-2's byte table and id layout, lossless round trips on
any string (lone surrogates, NUL, emoji, CJK, whitespace runs), offsets, files, and ids
equal to Hugging Face ``tokenizers`` and ``transformers``' pure-Python GPT-2 tokenizer."""

from __future__ import annotations

import bisect
import json
import pickle
import random
import re
import sys
from pathlib import Path

import pytest
import regex
import transformers  # its tokenizer classes load on first use, only in the test that builds one

from model.tokenizer import (
    EOT,
    GPT2_SPLIT_PATTERN,
    TOKENIZE_LIBRARIES,
    BPETokenizer,
    MissingLibraryError,
    TokenizerFileError,
    bytes_to_unicode,
    missing_library_line,
    require_tokenize_libraries,
    train_tokenizer,
)

ROOT = Path(__file__).resolve().parents[1]

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    ".,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`",
    " \t\n\r\x0b\x0c",
    "\x00\x01\x7f",
    "àéîõüçñßÆøÅ",
    "日本語中文字漢字かなカナ한국어",
    "😀🎉👍🏽🚀𝔘𝕟𝕚",
    "\u00a0\u2028\u3000\u200b\u0301",
    "ابتثجحخدذ",
    "\ud800\udbff\udc00\udfff",  # lone surrogates
]
PIECES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", EOT, "  ", "\n\n", "   \n", "don't", "the", " the"]


def random_string(rng: random.Random, surrogates: bool = True) -> str:
    alphabets = ALPHABETS if surrogates else ALPHABETS[:-1]
    parts = []
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.2:
            parts.append(rng.choice(PIECES))
        else:
            alphabet = rng.choice(alphabets)
            parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))))
    return "".join(parts)


def training_text(rng: random.Random, n: int = 400) -> list[str]:
    words = ["the", "cat", "sat", "on", "mat", "don't", "it's", "日本", "語", "naïve", "café", "😀", "42", "2019", "hello", "world"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 30))) + rng.choice([".", "!\n", "\n\n", "  "]) for _ in range(n)]


@pytest.fixture(scope="module")
def small():
    return train_tokenizer(training_text(random.Random(1)), vocab_size=300, show_progress=False)


@pytest.fixture(scope="module")
def wiki_text(real_data):
    return (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def wiki(wiki_text):
    docs = [d for d in wiki_text.split("\n = ") if d.strip()]
    return train_tokenizer(docs, vocab_size=3000, show_progress=False)


# --- the byte table and the id layout --------------------------------------------------
def test_bytes_to_unicode_is_gpt2_table():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    # GPT-2's familiar glyphs: space is Ġ, newline Ċ, byte 0 Ā; printable bytes stand for themselves.
    assert (table[ord(" ")], table[ord("\n")], table[0], table[0xAD]) == ("Ġ", "Ċ", "Ā", "Ń")
    assert table[ord("a")] == "a" and table[0xE9] == "é"


def test_trained_ids_follow_gpt2_layout(small):
    vocab = small.vocab
    assert small.vocab_size == 300 and small.eot_id == 299 and vocab[EOT] == 299
    assert vocab["!"] == 0 and vocab["Ā"] == 188 and vocab["Ń"] == 255  # GPT-2's encoder.json order
    merged = [vocab[left + right] for left, right in small.merges]
    assert merged == list(range(256, 256 + len(merged)))
    assert small.merge_ordered()


def test_small_corpus_gives_smaller_vocabulary():
    tokenizer = train_tokenizer(["ab ab ab"], vocab_size=1000, show_progress=False)
    assert tokenizer.vocab_size < 1000 and tokenizer.eot_id == tokenizer.vocab_size - 1


def test_vocab_size_too_small_is_refused():
    with pytest.raises(ValueError, match="at least 257"):
        train_tokenizer(["x"], vocab_size=256, show_progress=False)


def test_training_text_with_lone_surrogates_is_accepted():
    tokenizer = train_tokenizer(["a\ud800b a\ud800b"] * 5 + ["abc abc"] * 5, vocab_size=270, show_progress=False)
    assert tokenizer.decode(tokenizer.encode("a\ud800b")) == "a\ud800b"


# --- round trips ------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["tiktoken", "tokenizers"])
def test_round_trip_on_random_strings(small, engine):
    tokenizer = BPETokenizer(small.vocab, small.merges, engine=engine)
    assert tokenizer.engine == engine
    rng = random.Random(7)
    strings = [random_string(rng) for _ in range(1500)]
    assert any("\ud800" <= c <= "\udfff" for s in strings for c in s)
    for text in strings:
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text, repr(text)
        assert all(0 <= i < tokenizer.vocab_size for i in ids)
    assert tokenizer.encode_batch(strings) == [tokenizer.encode(s) for s in strings]


def test_edge_strings_round_trip(small):
    for text in ["", "\x00", "\x00" * 50, " " * 1000, "\n" * 7 + "x", "\ud800", "\udfff\ud800", "\ud83d\ude00",
                 "😀" * 100, EOT * 3, "a" * 5000, "\ufffd", "\U0010ffff"]:
        assert small.decode(small.encode(text)) == text


def test_engines_agree_on_text_without_surrogates(small):
    rng = random.Random(11)
    fast = BPETokenizer(small.vocab, small.merges, engine="tiktoken")
    reference = BPETokenizer(small.vocab, small.merges, engine="tokenizers")
    strings = [random_string(rng, surrogates=False) for _ in range(1500)]
    assert [fast.encode(s) for s in strings] == reference.encode_batch(strings)
    assert [fast.encode(s) for s in strings[:500]] == [reference_encode(small.vocab, small.merges, s) for s in strings[:500]]


def test_surrogates_split_like_symbols(small):
    # A lone surrogate is pre-tokenised as a symbol: it joins neither the letters nor the space.
    ids = small.encode("ab\ud800cd")
    assert small.decode(ids) == "ab\ud800cd"
    pieces = [small.token_bytes(i) for i in ids]
    assert b"".join(pieces) == "ab\ud800cd".encode("utf-8", "surrogatepass")
    assert small.encode("ab") == ids[: len(small.encode("ab"))]
    assert small.encode("cd") == ids[len(ids) - len(small.encode("cd")):]


def test_eot_in_text_is_plain_text(small):
    ids = small.encode(f"one{EOT}two")
    assert small.eot_id not in ids
    assert small.decode(ids) == f"one{EOT}two"
    assert small.decode([small.eot_id]) == EOT and small.token_bytes(small.eot_id) == EOT.encode()


def test_decode_of_arbitrary_ids_replaces_invalid_utf8(small):
    byte_id = {b: small.vocab[c] for b, c in bytes_to_unicode().items()}
    assert small.decode([byte_id[0xFF], byte_id[ord("a")]]) == "\ufffda"
    assert small.decode([byte_id[0xE6], byte_id[ord("x")]]) == "\ufffdx"  # a lead byte cut short
    assert small.decode([byte_id[0xED], byte_id[0xA0], byte_id[0x80]]) == "\ud800"  # the surrogate form is kept
    assert small.decode_bytes([byte_id[0xFF]]) == b"\xff"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        small.decode([small.vocab_size])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        small.decode([-1])


# --- offsets ------------------------------------------------------------------------------
def expected_offsets(tokenizer, text, ids):
    char_starts, at = [], 0
    for char in text:
        char_starts.append(at)
        at += len(char.encode("utf-8", "surrogatepass"))
    offsets, at = [], 0
    for i in ids:
        offsets.append(bisect.bisect_right(char_starts, at) - 1)
        at += len(tokenizer.token_bytes(i))
    return offsets


def test_offsets_point_at_each_tokens_first_character(small):
    rng = random.Random(3)
    for _ in range(500):
        text = random_string(rng)
        ids, offsets = small.encode_with_offsets(text)
        assert ids == small.encode(text)
        assert offsets == expected_offsets(small, text, ids)
    ids, offsets = small.encode_with_offsets("x\U0001F680")  # a rocket: 4 bytes, never seen in training
    assert len(ids) >= 3 and offsets == [0] + [1] * (len(ids) - 1)
    assert small.encode_with_offsets("") == ([], [])


# --- files --------------------------------------------------------------------------------
def test_save_and_load_round_trip(small, tmp_path):
    small.save(tmp_path / "tok")
    lines = (tmp_path / "tok/merges.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == len(small.merges) + 1
    assert json.loads((tmp_path / "tok/vocab.json").read_text(encoding="utf-8"))[EOT] == small.eot_id
    for where in (tmp_path / "tok", tmp_path / "tok/vocab.json", tmp_path / "tok/merges.txt"):
        loaded = BPETokenizer.load(where)
        assert loaded.vocab == small.vocab and loaded.merges == small.merges
    text = "the cat's café 日本 😀\x00\ud800"
    assert BPETokenizer.load(tmp_path / "tok").encode(text) == small.encode(text)


def test_loads_openai_file_names(small, tmp_path):
    small.save(tmp_path)
    (tmp_path / "vocab.json").rename(tmp_path / "encoder.json")
    (tmp_path / "merges.txt").rename(tmp_path / "vocab.bpe")
    loaded = BPETokenizer.load(tmp_path)
    assert loaded.eot_id == small.eot_id and loaded.encode("don't stop") == small.encode("don't stop")


def test_bad_tokenizer_files_say_what_is_wrong(small, tmp_path):
    with pytest.raises(TokenizerFileError, match="no tokenizer files"):
        BPETokenizer.load(tmp_path)
    with pytest.raises(TokenizerFileError, match="no such"):
        BPETokenizer.load(tmp_path / "missing")
    small.save(tmp_path)
    (tmp_path / "merges.txt").write_text("#version: 0.2\nt h e\n", encoding="utf-8")
    with pytest.raises(TokenizerFileError, match=r"merges.txt:2"):
        BPETokenizer.load(tmp_path)
    (tmp_path / "merges.txt").write_text("#version: 0.2\nzz q\n", encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="missing from the vocabulary"):
        BPETokenizer.load(tmp_path)
    (tmp_path / "merges.txt").unlink()
    with pytest.raises(TokenizerFileError, match="partner merges.txt"):
        BPETokenizer.load(tmp_path / "vocab.json")
    (tmp_path / "vocab.json").write_text('{"a": 0}', encoding="utf-8")
    (tmp_path / "merges.txt").write_text("", encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="256 byte tokens"):
        BPETokenizer.load(tmp_path)


def test_vocabulary_not_in_merge_order_uses_tokenizers(small):
    vocab = dict(small.vocab)
    first, second = (left + right for left, right in small.merges[:2])
    vocab[first], vocab[second] = vocab[second], vocab[first]
    shuffled = BPETokenizer(vocab, small.merges)
    assert not shuffled.merge_ordered() and shuffled.engine == "tokenizers"
    with pytest.raises(ValueError, match="merge order"):
        BPETokenizer(vocab, small.merges, engine="tiktoken")
    text = "the cat sat on the mat"
    assert shuffled.decode(shuffled.encode(text)) == text
    assert shuffled.encode(text) == shuffled.hf_tokenizer().encode(text).ids


def test_pickles_for_beam_workers(small):
    copy = pickle.loads(pickle.dumps(small))
    assert copy.vocab == small.vocab and copy.encode("the mat") == small.encode("the mat")


# --- real text ------------------------------------------------------------------------------
def reference_encode(vocab: dict, merges: list, text: str) -> list[int]:
    """GPT-2's algorithm as its paper's code describes it, in plain Python: split with the
    pattern (the `regex` module), map bytes to characters, then repeatedly merge every
    occurrence of the adjacent pair of lowest merge rank."""
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    table = bytes_to_unicode()
    ids = []
    for piece in regex.findall(GPT2_SPLIT_PATTERN, text):
        word = [table[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            best = min(zip(word, word[1:], strict=False), key=lambda pair: ranks.get(pair, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        ids += [vocab[token] for token in word]
    return ids


def test_real_text_round_trips_and_matches_gpt2_reference(wiki, wiki_text, real_data, tmp_path):
    """Ids equal GPT-2's algorithm written out in Python, and transformers' GPT2TokenizerFast
    loaded from our saved files."""
    wiki.save(tmp_path)
    fast = transformers.GPT2TokenizerFast(vocab=str(tmp_path / "vocab.json"), merges=str(tmp_path / "merges.txt"))
    ptb = (real_data / "lm_benchmarks/ptb/ptb.test.txt").read_text(encoding="utf-8")
    lambada = [json.loads(line)["text"] for line in (real_data / "lm_benchmarks/lambada/lambada_test.jsonl").open(encoding="utf-8")]
    samples = [wiki_text[:60_000], ptb[:30_000], "\n".join(lambada[:100])]
    for text in samples:
        ids = wiki.encode(text)
        assert ids == reference_encode(wiki.vocab, wiki.merges, text)
        assert ids == fast.encode(text, add_special_tokens=False)
        assert wiki.decode(ids) == text
    for text in [wiki_text, ptb] + lambada:
        assert wiki.decode(wiki.encode(text)) == text


def test_real_text_engines_agree(wiki, wiki_text):
    reference = BPETokenizer(wiki.vocab, wiki.merges, engine="tokenizers")
    lines = wiki_text.splitlines(keepends=True)
    assert wiki.engine == "tiktoken"
    assert wiki.encode_batch(lines) == reference.encode_batch(lines)
    ids, offsets = wiki.encode_with_offsets(wiki_text[:20_000])
    assert offsets == expected_offsets(wiki, wiki_text[:20_000], ids)


def test_the_tokenize_libraries_pins_are_requirements_model_txts():
    pins = dict(re.findall(r"^(tokenizers|tiktoken)==(\S+)", (ROOT / "requirements-model.txt").read_text(), re.M))
    assert TOKENIZE_LIBRARIES == pins and set(pins) == {"tokenizers", "tiktoken"}


@pytest.mark.parametrize("library", ["tokenizers", "tiktoken"])
def test_a_missing_tokenizer_library_is_named_in_one_line_with_the_pip_command(monkeypatch, library):
    require_tokenize_libraries("a worker")  # both import here
    monkeypatch.setitem(sys.modules, library, None)  # `import <library>` now raises ImportError
    with pytest.raises(MissingLibraryError) as caught:
        require_tokenize_libraries("a worker")
    line = str(caught.value)
    assert "\n" not in line and caught.value.name == library
    assert line.startswith(f"the tokenize job needs {library} on the launcher and on every worker, and a worker (")
    assert f"{sys.executable}) cannot import it" in line
    assert "pip install tokenizers==0.23.3 tiktoken==0.14.0 there" in line and "corpusforge[model]" in line
    # found again inside an engine's report of the failed task (a worker's traceback, Java frames around it)
    report = f"Job aborted.\nTraceback (most recent call last):\n  File \"x.py\"\nmodel.tokenizer.MissingLibraryError: {line}\n\tat org.apache"
    assert missing_library_line(report) == line
    assert missing_library_line("Job aborted.\nModuleNotFoundError: No module named 'tiktoken'") is None
