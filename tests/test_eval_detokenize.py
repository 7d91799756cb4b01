"""Invertible detokenizers: the real test files line by line, hand-checked lines, counts, offsets."""

from __future__ import annotations

import json
import random
import re
import warnings

import pytest

from model.eval.detokenize import (
    DETOKENIZERS,
    count_bytes,
    count_chars,
    count_words,
    detokenize,
    detokenize_line,
    detokenize_with_offsets,
    detokenizer_for,
    retokenize,
    split_lines,
)


def _lines(text: str) -> list[str]:
    """Lines without their endings, computed independently of the module (LF or CRLF)."""
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    return lines[:-1] if text.endswith("\n") else lines


@pytest.fixture(scope="module")
def lm(real_data):
    return real_data / "lm_benchmarks"


@pytest.fixture(scope="module")
def wikitext(lm):
    return (lm / "wikitext2_raw" / "wiki.test.raw").read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def ptb(lm):
    return (lm / "ptb" / "ptb.test.txt").read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def lambada(lm):
    with open(lm / "lambada" / "lambada_test.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def _check_invertible_by_line(original: str, kind: str):
    """Every line of ``original`` comes back from its own detokenized line; returns the result."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a line that cannot be restored would warn
        result = detokenize_with_offsets(original, kind)
    assert result.not_invertible == ()
    before, after = _lines(original), _lines(result.text)
    assert len(after) == len(before) == result.lines
    for number, (line, detok_line) in enumerate(zip(before, after, strict=True)):
        assert retokenize(detok_line, kind) == line, f"{kind} line {number}"
    assert retokenize(result.text, kind) == original
    return result, before, after


# ----------------------------------------------------------------------------- real files

@pytest.mark.slow  # a sweep of a whole real corpus: every line of WikiText-2's test set (PTB's and LAMBADA's sweeps stay in the unit tier)
def test_wikitext2_test_every_line_inverts(wikitext):
    result, before, after = _check_invertible_by_line(wikitext, "wikitext")
    assert len(before) == 2891
    assert result.changed_lines == 2891  # every line loses at least its edge spaces
    assert result.kept_groups <= 30  # "Jr . ," and the like, left as written (18 measured)
    # the artificial tokens are gone except inside the few groups left as written
    assert wikitext.count("@-@") == 2114
    assert result.text.count("@-@") <= 5 and result.text.count("@,@") == 0
    assert result.text.count(" , ") <= 5 and result.text.count(" .\r\n") <= 5
    assert after[0] == "= Robert Boulter ="
    assert after[1].startswith("Robert Boulter is an English film, television and theatre actor. He had a "
                               "guest-starring role on the television series The Bill in 2000.")
    assert 'a role as "Craig" in the episode "Teddy\'s Story" of the' in after[1]
    assert after[3:5] == ["== Career ==", "=== 2000 – 2005 ==="]
    # the file's CRLF endings are kept by default, or rewritten on request and restored
    assert result.text.count("\r\n") == 2891
    lf = detokenize(wikitext, "wikitext", newline="\n")
    assert "\r" not in lf and lf.count("\n") == 2891
    assert retokenize(lf, "wikitext", newline="\r\n") == wikitext


@pytest.mark.slow  # a sweep of a whole real corpus: every line of WikiText-2's test set, under the 1BW rules
def test_wikitext2_also_inverts_under_the_1bw_rules(wikitext):
    # WikiText is Moses-tokenized like 1BW: the 1BW rules (no @-@ or headings) must keep it intact too
    result, _, after = _check_invertible_by_line(wikitext, "1bw")
    assert "guest @-@ starring" in after[1] and "English film, television" in after[1]


def test_ptb_test_every_line_inverts(ptb):
    result, before, after = _check_invertible_by_line(ptb, "ptb")
    assert len(before) == 3761 and result.kept_groups == 0
    assert after[0] == "no it wasn't black monday"
    assert " n't" not in result.text and " 's " not in result.text and "$ N" not in result.text
    assert result.text.count("<unk>") == ptb.count("<unk>") == 4794  # kept as written
    assert re.findall(r"\bN\b", result.text) == re.findall(r"\bN\b", ptb)  # so is every N
    assert "capital cities/abc philip morris" in after[6]


def test_lambada_every_passage_inverts(lambada):
    assert len(lambada) == 5153
    text = "\n".join(lambada) + "\n"
    result, before, _ = _check_invertible_by_line(text, "lambada")
    assert len(before) == 5153 + sum(p.count("\n") for p in lambada)  # passages hold line breaks
    assert result.text == text and result.changed_lines == 0  # OpenAI's file is already detokenized
    assert all(detokenize_line(p, "lambada") == p for p in lambada)


def test_real_file_counts(wikitext, ptb, lambada, lm):
    # PTB test: 78,669 tokens + one <eos> for each of the 3,761 lines = the usual 82,430 words
    tokens = sum(len(line.split(" ")) - 2 for line in _lines(ptb))  # lines are " w1 ... wn "
    assert tokens == 78_669 and ptb.count("\n") == 3761
    assert count_words(ptb, "ptb") == 82_430 == tokens + 3761
    assert count_words(ptb, "ptb", eos=False) == 78_669
    assert count_words(detokenize(ptb, "ptb"), "ptb") < 82_430  # why the ORIGINAL text is counted
    assert count_bytes(ptb) == (lm / "ptb" / "ptb.test.txt").stat().st_size == count_chars(ptb) == 449_945
    # WikiText-2 test (this copy drops the blank lines): 241,211 tokens + 2,891 lines
    tokens = sum(len([t for t in line.split(" ") if t]) for line in _lines(wikitext))
    assert tokens == 241_211
    assert count_words(wikitext, "wikitext") == 244_102 == tokens + 2891
    # Merity et al.'s 245,569 counts an <eos> on each of the 1,467 blank lines of wiki.test.tokens too
    assert count_words(wikitext.replace("\r\n", "\r\n\r\n", 1467), "wikitext") == 245_569
    path = lm / "wikitext2_raw" / "wiki.test.raw"
    assert count_bytes(wikitext) == path.stat().st_size == 1_290_547
    assert count_chars(wikitext) == 1_288_513 < count_bytes(wikitext)  # non-ASCII characters ("–")
    # LAMBADA: words are whitespace-separated, no end-of-line word
    text = lambada[0]
    assert count_words(text, "lambada") == len(re.findall(r"\S+", text))


# ----------------------------------------------------------------------------- hand-checked lines

@pytest.mark.parametrize("line, expected", [
    (" He had a guest @-@ starring role in 2000 . ", "He had a guest-starring role in 2000."),
    (" It cost 1 @,@ 000 @.@ 5 dollars ( about 3 @.@ 5 % ) . ", "It cost 1,000.5 dollars (about 3.5%)."),
    (" a 10 @-@ year @-@ old , 7 @.@ 92 @-@ millimetre gun ", "a 10-year-old, 7.92-millimetre gun"),
    (' He played " Craig " in " Teddy \'s Story " . ', 'He played "Craig" in "Teddy\'s Story".'),
    (" = Robert Boulter = ", "= Robert Boulter ="),
    (" = = Career = = ", "== Career =="),
    (" = = = 2000 – 2005 = = = ", "=== 2000 – 2005 ==="),
    (" I don 't know ; it 's Boulter 's [ 1 ] { x } ! ", "I don't know; it's Boulter's [1] {x}!"),
    (" U.S. troops under Gen. Smith and No. 2 Squadron left ... ",
     "U.S. troops under Gen. Smith and No. 2 Squadron left..."),
    (" the players ' union : $ 5 @,@ 000 ? ", "the players' union: $5,000?"),
    (" the 1990 's and F @-@ 5'd moves ", "the 1990's and F-5'd moves"),
    # "Jr." stays one token for the tokenizer, so the "Jr . ," of a sentence end is left as written
    (" by Smith Jr . , the actor ", "by Smith Jr . , the actor"),
    # an odd number of quotes: their direction is unknown, they stay apart
    (' a 12 " gun and a 9 " gun , he said " no ', 'a 12 " gun and a 9 " gun, he said " no'),
])
def test_wikitext_lines(line, expected):
    assert detokenize_line(line, "wikitext") == expected
    assert retokenize(expected, "wikitext") == line


@pytest.mark.parametrize("line, expected", [
    (" no it was n't black monday ", "no it wasn't black monday"),
    (" we ca n't and wo n't ", "we can't and won't"),
    (" the dow 's $ N billion drop at <unk> inc. was N N ", "the dow's $N billion drop at <unk> inc. was N N"),
    (" capital cities\\/abc and investors ' money ", "capital cities/abc and investors' money"),
    (" they 're sure we 've seen i 'm told he 'd go we 'll see ", "they're sure we've seen i'm told he'd go we'll see"),
    (" mr. <unk> 's firm and corp. 's chief ", "mr. <unk>'s firm and corp.'s chief"),
])
def test_ptb_lines(line, expected):
    assert detokenize_line(line, "ptb") == expected
    assert retokenize(expected, "ptb") == line


@pytest.mark.parametrize("line, expected", [
    # 1BW style (Moses): straight quotes, "don 't", "$ 800", hyphens and thousands kept whole
    ('" We don \'t know , " said Mr. Smith , 52 , of Boston .', '"We don\'t know," said Mr. Smith, 52, of Boston.'),
    ("Shares of XYZ Corp. rose $ 1.50 , or 3 % , to $ 52.25 ( after hours ) .",
     "Shares of XYZ Corp. rose $1.50, or 3%, to $52.25 (after hours)."),
    ("The firm paid £ 100,000 -- about $ 160,000 -- for a go-ahead .",
     "The firm paid £100,000 -- about $160,000 -- for a go-ahead."),
    ("It 's a deal that won 't close before Jan. 1 , the company 's spokesman said .",
     "It's a deal that won't close before Jan. 1, the company's spokesman said."),
    ("TORONTO ( AP ) - Rodriguez hit his 13th home run ; what now ?",
     "TORONTO (AP) - Rodriguez hit his 13th home run; what now?"),
    # PTB-like and WikiText-like lines through the 1BW rules
    # PTB's "n't" is not a 1BW clitic (1BW writes "don 't"): it stays apart, and whole
    ("it was n't <unk> 's fault said mr. <unk>", "it was n't <unk>'s fault said mr. <unk>"),
    ("a guest @-@ starring role , he said .", "a guest @-@ starring role, he said."),
])
def test_1bw_lines(line, expected):
    assert detokenize_line(line, "1bw") == expected
    assert retokenize(expected, "1bw") == line


def test_lambada_and_none_are_the_identity():
    passage = 'I look at him.\n\n"Figured if you\'re going to be out , fine." I don\'t care about signs'
    for kind in ("lambada", "none"):
        assert detokenize(passage, kind) == passage == retokenize(passage, kind)
        assert detokenize_line(passage, kind) == passage


def test_random_token_lines_always_invert():
    vocabulary = [",", ".", "(", ")", '"', "@-@", "@,@", "@.@", "'s", "'t", "n't", "=", "U.S.", "Jr.", "No.", "...",
                  "$", "£", "1", "2000", "word", "Word", "s", "ships", "'", "%", ";", "?", "[", "]", "-", "--", "N",
                  "<unk>", "mr.", "a", "I", "c", "x\\/y", "–"]
    rng = random.Random(7)
    for kind in ("wikitext", "ptb", "1bw"):
        edge = DETOKENIZERS[kind].edge_spaces
        lines = []
        for _ in range(400):
            body = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 10)))
            lines.append(f" {body} " if edge else body)
        text = "\n".join(lines) + "\n"
        result, _, _ = _check_invertible_by_line(text, kind)
        assert result.changed_lines > 200  # the rules did act on these lines


# ----------------------------------------------------------------------------- lines and offsets

def test_line_structure_and_offsets():
    original = " a , b \r\n\n = = H = = \r\n c ( d ) . "  # CRLF, LF, a blank line, no final line ending
    result = detokenize_with_offsets(original, "wikitext")
    assert result.text == "a, b\r\n\n== H ==\r\nc (d)."
    assert [line for line, _ in split_lines(result.text)] == ["a, b", "", "== H ==", "c (d)."]
    assert result.lines == 4 and result.starts == (0, 6, 7, 16, 22)
    assert result.original_starts == (0, 9, 10, 23, 34)
    assert result.line_span(2) == (7, 16) and result.text[slice(*result.line_span(2))] == "== H ==\r\n"
    assert result.line_span(1, 4) == (6, 22)
    assert original[slice(*result.original_line_span(3))] == " c ( d ) . "
    assert [result.line_of(k) for k in (0, 5, 6, 7, 21)] == [0, 0, 1, 2, 3]
    with pytest.raises(IndexError):
        result.line_span(3, 5)
    assert retokenize(result.text, "wikitext") == original
    assert detokenize("", "wikitext") == "" and detokenize("\n\n", "ptb") == "\n\n"


def test_a_stripped_line_is_counted_and_explained():
    # the loaders strip WikiText lines; retokenize cannot know the edge spaces were missing
    stripped = "= Robert Boulter =\nRobert Boulter is an actor .\n"
    with pytest.warns(UserWarning, match="lacks it; was the text stripped"):
        result = detokenize_with_offsets(stripped, "wikitext")
    assert result.not_invertible == (0, 1)
    assert result.text == "= Robert Boulter =\nRobert Boulter is an actor.\n"  # still detokenized
    with pytest.raises(ValueError, match="line 0 cannot be restored"):
        detokenize(stripped, "wikitext", strict=True)


# ----------------------------------------------------------------------------- counts and names

def test_counts_on_small_texts():
    text = " a @-@ b , c \n\n d 's \n"  # 7 tokens on 3 lines (one blank)
    assert count_words(text, "wikitext") == 7 + 3
    assert count_words(text, "ptb") == 10 and count_words(text, "1bw") == 10
    assert count_words(text, "wikitext", eos=False) == 7
    assert count_words(text, "lambada") == 7 == count_words(text, "none")
    assert count_words("x y", "ptb") == 3  # a last line without a line ending still ends a sentence
    assert count_words("", "ptb") == 0
    # counts add up over line slices, as the harness sums them per example
    slices = [" a b \n", " c \r\n", "\n", " d e f \n"]
    assert sum(count_words(s, "wikitext") for s in slices) == count_words("".join(slices), "wikitext") == 10
    assert count_bytes("café — naïve\r\n") == len("café — naïve\r\n".encode()) == 18
    assert count_chars("café — naïve\r\n") == 14
    with pytest.raises(TypeError, match="must be str"):
        count_bytes(b"abc")


def test_detokenizer_names():
    assert {name: detokenizer_for(name) for name in ("wikitext2", "wikitext103", "ptb", "1bw", "lambada", "cbt-cn",
                                                      "enwik8", "text8", "wsc273")} == {
        "wikitext2": "wikitext", "wikitext103": "wikitext", "ptb": "ptb", "1bw": "1bw", "lambada": "lambada",
        "cbt-cn": "none", "enwik8": "none", "text8": "none", "wsc273": "none"}
    assert set(DETOKENIZERS) == {"wikitext", "ptb", "1bw", "lambada", "none"}
    with pytest.raises(ValueError, match="unknown detokenizer 'wiki'.*wikitext, ptb, 1bw, lambada, none"):
        detokenize("x", "wiki")
    with pytest.raises(TypeError, match="decode bytes"):
        detokenize(b"x", "ptb")
