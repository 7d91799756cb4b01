"""Benchmark loaders: the real files (CORPUSFORGE_TEST_DATA) and small fixtures for the rest."""

from __future__ import annotations

import json

import pytest

from dedup.benchmark_sets import (
    BenchmarkSpecError,
    load_1bw,
    load_benchmark,
    load_cbt,
    load_enwik8,
    load_jsonl,
    load_lambada,
    load_ptb,
    load_text,
    load_text8,
    load_wikitext,
    split_from_filename,
)


@pytest.fixture(scope="module")
def lm(real_data):
    return real_data / "lm_benchmarks"


# ----------------------------------------------------------------------------- real files

def test_wikitext2_raw_articles(lm):
    path = lm / "wikitext2_raw" / "wiki.test.raw"
    bset = load_benchmark(f"wikitext2:{path}")
    assert (bset.name, bset.split, bset.source) == ("wikitext2", "test", str(path))
    # 60 articles plus two equation lines of "Constant k filter" formatted like titles
    assert len(bset) == 62
    assert [e.meta["title"] for e in bset.examples[:3]] == ["Robert Boulter", "Du Fu", "Kiss You ( One Direction song )"]
    assert bset.examples[0].id == "wikitext2-0"
    assert bset.examples[0].text.startswith("= Robert Boulter =\nRobert Boulter is an English film , television")
    assert bset.examples[0].text.count("\n") == 13  # 14 non-blank lines from title to the next title
    assert bset.examples[29].meta == {"title": "1 henry and capacitance C", "line": 1433}
    last = bset.examples[-1]
    assert (last.id, last.meta) == ("wikitext2-61", {"title": "The Hustler ( film )", "line": 2850})
    assert last.text.endswith("including Ronnie Allen , Ed Taylor , Ed Parker , and Eddie Pelkey .")
    assert "\r" not in "".join(bset.texts())
    # full text is the file as written (this copy has CRLF line endings)
    assert bset.full_text == path.read_bytes().decode("utf-8")
    assert len(bset.full_text) == 1_288_513


def test_wikitext2_paragraphs(lm):
    bset = load_wikitext(lm / "wikitext2_raw" / "wiki.test.raw", unit="paragraph")
    assert len(bset) == 2185
    assert bset.examples[0].text.startswith("Robert Boulter is an English film")
    assert bset.examples[0].meta == {"title": "Robert Boulter", "article": 0}
    assert all(not e.text.startswith("= ") or not e.text.endswith(" =") for e in bset.examples)
    assert bset.examples[-1].meta == {"title": "The Hustler ( film )", "article": 61}


def test_ptb_test_lines(lm):
    bset = load_benchmark(f"ptb:{lm / 'ptb' / 'ptb.test.txt'}")
    assert (bset.name, bset.split, len(bset)) == ("ptb", "test", 3761)
    assert bset.examples[0].text == "no it was n't black monday"
    assert bset.examples[-1].text == ("we want to see nelson <unk> and all our <unk> out of prison and if we are "
                                      "n't disciplined we may not see them here with us")
    assert bset.examples[-1].meta == {"line": 3760}
    # 82,430 tokens with one end-of-sentence per line, the usual PTB test count
    assert sum(len(e.text.split()) + 1 for e in bset) == 82_430


def test_lambada_passages(lm):
    bset = load_benchmark(f"lambada:{lm / 'lambada' / 'lambada_test.jsonl'}")
    assert (bset.name, bset.split, len(bset)) == ("lambada", "test", 5153)
    first, last = bset.examples[0], bset.examples[-1]
    assert first.id == "lambada-0" and last.id == "lambada-5152"
    assert first.text.startswith("In my palm is a clear stone, and inside it is a small ivory statuette.")
    assert first.meta["target"] == "signs"
    assert first.meta["context"].endswith("I don't care about ")
    assert last.meta["target"] == "Grandmother"
    assert all(e.meta["context"] + e.meta["target"] == e.text for e in bset)


def test_wsc273_and_all(lm):
    path = lm / "wsc" / "WSCollection.xml"
    bset = load_benchmark(f"wsc:{path}")
    assert (bset.name, len(bset)) == ("wsc273", 273)
    first = bset.examples[0]
    assert first.text == ("The city councilmen refused the demonstrators a permit because they feared violence.\n"
                          "The city councilmen\nThe demonstrators")
    assert first.meta["label"] == 0 and first.meta["options"] == ["The city councilmen", "The demonstrators"]
    assert first.meta["pron"] == "they" and first.meta["source"] == "(Winograd 1972)"
    last = bset.examples[-1]
    assert last.meta["sentence"] == "Carol believed that Rebecca regretted that she had stolen the watch."
    assert last.meta["label"] == 1
    # "A." / "B." answers are read as letters; no space before a txt2 that is only punctuation
    assert bset.examples[40].meta["sentence"] == "The older students were bullying the younger ones, so we punished them."
    assert sum(e.meta["label"] for e in bset) == 136
    everything = load_benchmark(f"wsc:{path}:all")
    assert len(everything) == 283 and everything.name == "wsc"
    assert everything.examples[273].meta["label"] == 0


# ----------------------------------------------------------------------------- fixtures

def test_wikitext_tokens_with_blank_lines_and_lf(tmp_path):
    path = tmp_path / "wiki.valid.tokens"
    path.write_text(" \n = Alpha = \n \n Alpha is a <unk> . \n \n = = History = = \n \n It began . \n \n"
                    " = Beta = \n \n Beta @-@ two . \n \n", encoding="utf-8")
    bset = load_benchmark(f"wikitext103:{path}")
    assert (bset.name, bset.split, len(bset)) == ("wikitext103", "valid", 2)
    assert bset.examples[0].text == "= Alpha =\nAlpha is a <unk> .\n= = History = =\nIt began ."
    assert bset.examples[1].text == "= Beta =\nBeta @-@ two ."
    assert bset.full_text == path.read_text(encoding="utf-8")
    paragraphs = load_benchmark(f"wikitext103:{path}:paragraph")
    assert paragraphs.texts() == ["Alpha is a <unk> .", "It began .", "Beta @-@ two ."]
    assert [e.meta["article"] for e in paragraphs] == [0, 0, 1]


def test_cbt_examples(tmp_path):
    lines = []
    for k in range(2):
        lines += [f"{i} Sentence {i} of story {k} ." for i in range(1, 21)]
        lines += [f"21 The XXXXX ran away .\tdog{k}\t\tcat|dog{k}|fox", ""]
    path = tmp_path / "cbtest_NE_test_2500ex.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bset = load_benchmark(f"cbt:{path}")
    assert (bset.name, bset.split, len(bset)) == ("cbt-ne", "test", 2)
    assert bset.examples[1].text.splitlines()[0] == "Sentence 1 of story 1 ."
    assert bset.examples[1].text.splitlines()[-1] == "The dog1 ran away ."
    assert len(bset.examples[0].text.splitlines()) == 21
    assert bset.examples[0].meta["query"] == "The XXXXX ran away ."
    assert bset.examples[0].meta["candidates"] == ["cat", "dog0", "fox"]
    assert bset.examples[0].meta["answer"] == "dog0"
    bad = tmp_path / "cbtest_CN_valid_2000ex.txt"
    bad.write_text("1 one .\n2 two .\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected 1..21"):
        load_cbt(bad)


def test_enwik8_chunks_pages_and_replaced_bytes(tmp_path):
    path = tmp_path / "enwik8.small"
    data = b"<page>one \xc3\xa9</page>\n<page>two \xff</page>\n"
    path.write_bytes(data)
    bset = load_enwik8(path, chunk_chars=10)
    text = data.decode("utf-8", errors="replace")
    assert bset.split == "all" and bset.meta["bytes"] == len(data) and bset.full_text == text
    assert "\ufffd" in text and "é" in text
    assert bset.texts() == [text[i:i + 10] for i in range(0, len(text), 10)]
    assert len(bset) == 4 and bset.examples[3].meta == {"offset": 30}
    pages = load_benchmark(f"enwik8:{path}:page")
    assert pages.texts() == ["<page>one é</page>", "<page>two \ufffd</page>"]
    assert load_benchmark(f"enwik8:{path}:7").meta["chunk_chars"] == 7


def test_text8_word_chunks(tmp_path):
    path = tmp_path / "text8"
    path.write_text(" " + " ".join(f"w{i}" for i in range(25)), encoding="utf-8")
    bset = load_text8(path, chunk_words=10)
    assert bset.texts() == [" ".join(f"w{i}" for i in range(a, min(a + 10, 25))) for a in (0, 10, 20)]
    assert [e.meta["first_word"] for e in bset] == [0, 10, 20]
    assert bset.split == "all"
    assert len(load_benchmark(f"text8:{path}:5")) == 5


def test_1bw_lines(tmp_path):
    path = tmp_path / "news.en.heldout-00000-of-00050"
    path.write_text("The first sentence .\n\nThe second one .\n", encoding="utf-8")
    bset = load_benchmark(f"1bw:{path}")
    assert (bset.name, bset.split, bset.texts()) == ("1bw", "heldout", ["The first sentence .", "The second one ."])
    assert [e.meta["line"] for e in bset] == [0, 2]
    assert load_1bw(path).examples[1].id == "1bw-1"


def test_text_lines_and_paragraphs(tmp_path):
    path = tmp_path / "my_bench.txt"
    path.write_text("  one\r\ntwo  \r\n\r\n\r\nthree\n", encoding="utf-8")
    lines = load_benchmark(f"text:{path}")
    assert (lines.name, lines.texts()) == ("my_bench", ["one", "two", "three"])
    assert [e.id for e in lines] == ["my_bench-0", "my_bench-1", "my_bench-2"]
    paragraphs = load_text(path, unit="paragraph")
    assert paragraphs.texts() == ["one\ntwo", "three"]
    assert [e.meta["line"] for e in paragraphs] == [0, 4]
    assert load_benchmark(f"text:{path}:paragraph").texts() == ["one\ntwo", "three"]


def test_jsonl_field_ids_and_meta(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [{"id": "q1", "question": "Who?", "answer": "Me"}, {"id": "q2", "question": "Why?", "answer": "So"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    bset = load_benchmark(f"jsonl:{path}:question")
    assert bset.texts() == ["Who?", "Why?"]
    assert [e.id for e in bset] == ["q1", "q2"]
    assert bset.examples[1].meta == {"line": 1, "answer": "So"}
    no_ids = tmp_path / "plain.jsonl"
    no_ids.write_text('{"text": "a"}\n{"text": "b", "id": 3}\n', encoding="utf-8")
    assert [e.id for e in load_jsonl(no_ids)] == ["plain-0", "plain-1"]
    with pytest.raises(ValueError, match=r"qa.jsonl:1: no string field 'text'"):
        load_benchmark(f"jsonl:{path}")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "a"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken.jsonl:2: not a JSON line"):
        load_jsonl(broken)


def test_lambada_target_after_a_newline(tmp_path):
    path = tmp_path / "lambada_test.jsonl"
    path.write_text(json.dumps({"text": "He said:\n\"Go\nhome\""}) + "\n", encoding="utf-8")
    example = load_lambada(path).examples[0]
    assert example.meta == {"line": 0, "context": "He said:\n\"Go\n", "target": "home\""}


def test_registry_errors(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("a\n", encoding="utf-8")
    with pytest.raises(BenchmarkSpecError, match="unknown benchmark kind 'squad'"):
        load_benchmark(f"squad:{path}")
    with pytest.raises(BenchmarkSpecError, match="not kind:path"):
        load_benchmark(str(path).lstrip("/"))
    with pytest.raises(BenchmarkSpecError, match="not kind:path"):
        load_benchmark("ptb:")
    with pytest.raises(FileNotFoundError, match="benchmark file not found"):
        load_benchmark(f"ptb:{tmp_path / 'missing.txt'}")
    with pytest.raises(FileNotFoundError, match="benchmark file not found"):
        load_ptb(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="not a file"):
        load_ptb(tmp_path)
    with pytest.raises(BenchmarkSpecError, match="takes no option"):
        load_benchmark(f"ptb:{path}:extra")
    with pytest.raises(BenchmarkSpecError, match="chunk_words must be an integer"):
        load_benchmark(f"text8:{path}:many")
    with pytest.raises(ValueError, match="unit must be"):
        load_benchmark(f"text:{path}:sentences")


def test_path_with_colon(tmp_path):
    path = tmp_path / "odd:name.txt"
    path.write_text("x\n", encoding="utf-8")
    assert load_benchmark(f"text:{path}").texts() == ["x"]
    assert load_benchmark(f"text:{path}:paragraph").texts() == ["x"]


def test_split_from_filename():
    assert split_from_filename("wiki.test.raw") == "test"
    assert split_from_filename("ptb.valid.txt") == "valid"
    assert split_from_filename("dev-v2.0.jsonl") == "dev"
    assert split_from_filename("benchmark.jsonl") == "test"
    assert split_from_filename("latest.txt") == "test"
