"""corpus.langid: the same answer as langdetect 1.0.9 (seed 0), bit for bit, on real and odd text.

Every comparison runs ``detect_langs`` and ``reference_detect_langs`` (langdetect itself)
on the same text and asserts that both return the identical list of (lang, prob) pairs,
or that both raise ``LanguageDetectionError``.
"""

from __future__ import annotations

import dataclasses
import gzip
import html as html_lib
import json
import random
import re
import shutil
import sys
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import langdetect.detector_factory as factory
import numpy as np
import pytest
from langdetect.detector import Detector
from langdetect.utils.ngram import NGram

from corpus import c4, langid
from corpus.langid import LanguageDetectionError, detect_langs, reference_detect_langs
from corpus.records import Document, HtmlPage
from corpus.warc import read_archive


def outcome(detect, text):
    try:
        return detect(text)
    except LanguageDetectionError as exc:
        return ("LanguageDetectionError", str(exc))


def assert_same(texts, what: str) -> int:
    """Both detectors on every text; fails on the first text where they differ."""
    count = 0
    for i, text in enumerate(texts):
        ours, theirs = outcome(detect_langs, text), outcome(reference_detect_langs, text)
        assert ours == theirs, f"{what} #{i} ({len(text)} chars, {text[:80]!r}): ours {ours} != langdetect {theirs}"
        count += 1
    return count


def crude_text(markup: str) -> str:
    """HTML to text the crude way: no script/style, tags to spaces, entities decoded."""
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", markup)
    return html_lib.unescape(re.sub(r"(?s)<[^>]*>", " ", markup))


def wet_texts(path: Path, text_mode: str) -> list[str]:
    return [d.text for d in read_archive(str(path), text_mode=text_mode) if isinstance(d, Document)]


# ------------------------------------------------------------------------- real data


@pytest.mark.parametrize("text_mode", ["c4", "faithful"])
@pytest.mark.parametrize("name", ["ccscalatools/filter_test_1.wet.gz", "whirlwind/whirlwind.warc.wet.gz"])
def test_real_wet_records(real_data, name, text_mode):
    texts = wet_texts(real_data / "warc" / name, text_mode)
    assert texts
    assert assert_same(texts, f"{name} ({text_mode})") == len(texts)


def test_real_wet_pages_are_english(real_data):
    """A sanity anchor: the English WET pages come out English, as langdetect says."""
    texts = wet_texts(real_data / "warc/ccscalatools/filter_test_1.wet.gz", "c4")
    top = [detect_langs(t)[0][0] for t in texts]
    assert top.count("en") == len(texts) - 1 == 24  # one short page comes out Italian


def html_gold_pages(real_data: Path) -> list[str]:
    pages = sorted((real_data / "html_gold/trafilatura_eval_en/eval").glob("*.html.gz"))
    assert len(pages) >= 80
    return [gzip.decompress(p.read_bytes()).decode("utf-8", "replace") for p in pages]


@pytest.mark.slow  # langdetect itself (pure Python) on every text of a real corpus
def test_real_html_gold_crude_text(real_data):
    texts = [crude_text(markup) for markup in html_gold_pages(real_data)]
    assert assert_same(texts, "html_gold crude") == len(texts)


@pytest.mark.slow  # langdetect itself (pure Python) on every text of a real corpus
def test_real_html_gold_trafilatura_text(real_data):
    trafilatura = pytest.importorskip("trafilatura")
    texts = [trafilatura.extract(markup) or "" for markup in html_gold_pages(real_data)]
    assert sum(bool(t) for t in texts) >= 80
    assert assert_same(texts, "html_gold trafilatura") == len(texts)


@pytest.mark.slow  # langdetect itself (pure Python) on every text of a real corpus
def test_real_wikitext_chunks_and_lines(real_data):
    lines = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8").split("\n")
    chunks = ["\n".join(lines[i : i + 40]) for i in range(0, len(lines), 40)]
    assert assert_same(chunks, "wikitext chunk") == len(chunks)
    short = [line for line in lines if line.strip()][::10]  # headings and paragraphs, spread out
    assert assert_same(short, "wikitext line") == len(short)


def test_real_non_english_warc(real_data):
    pages = [p for p in read_archive(str(real_data / "warc/resiliparse/warcfile.warc.gz")) if isinstance(p, HtmlPage)]
    assert len(pages) == 16
    texts = [crude_text(p.html) for p in pages] + [p.html for p in pages]
    assert assert_same(texts, "resiliparse") == 32
    top = {found[0][0] for found in map(partial(outcome, detect_langs), texts[:16]) if isinstance(found, list)}
    assert len(top - {"en"}) >= 3  # really several languages


@pytest.mark.slow  # langdetect itself (pure Python) on every document of the sample crawl
def test_sample_crawl_documents(sample_crawl):
    texts = [d.text for path in sample_crawl.wet_paths for d in read_archive(path) if isinstance(d, Document)]
    assert len(texts) >= 100
    assert assert_same(texts, "sample crawl") == len(texts)


# ------------------------------------------------------------------------ edge cases

ENGLISH = (
    "The quick brown fox jumps over the lazy dog. Language identification is the task of "
    "deciding which natural language a text is written in, and it is the first filter of "
    "the Colossal Clean Crawled Corpus. "
)
EDGE_CASES = {
    "empty": "",
    "space": " ",
    "whitespace": " \t\n\r\x0b\x0c \u3000 \u00a0 \u2003 ",
    "digits": "0123456789 42 3.14159 2024-05-01",
    "punctuation": "!?.,;:'\"()[]{}<>-_=+*/\\|@#$%^&`~",
    "latin range non-letters": "[\\]^_` [[[ ]]] ^^^ ___ ```",
    "url": "http://example.com/path/to/page.html?query=1&x=2#frag",
    "https url": "https://www.example.org/",
    "urls and text": "see https://example.com/a and http://b.example.net/c?d=e for more",
    "email": "write to jane.doe+news@example.co.uk today",
    "email only": "jane.doe@example.com",
    "single word": "hello",
    "single letter": "a",
    "single capital": "I",
    "capital word": "HELLO",
    "capitals and words": "THE QUICK brown FOX jumps OVER the LAZY dog NASA UNESCO",
    "camel case": "McDonald iPhone eBay YouTube JavaScript",
    "mixed scripts": "Hello world, привет мир, 你好世界, مرحبا بالعالم, γειά σου κόσμε, שלום עולם",
    "latin minority": "Это русский текст with a few English words inside it и ещё немного",
    "cjk": "中文文本的语言识别测试。这是一个简单的句子，用来检查汉字的规范化。",
    "traditional chinese": "這是一個繁體中文的句子，用來測試語言識別。",
    "japanese": "これは日本語の文章です。カタカナとひらがなと漢字が含まれています。",
    "korean": "한국어 문장입니다. 언어 식별을 시험합니다.",
    "arabic": "هذا نص عربي قصير لاختبار التعرف على اللغة في النصوص",
    "farsi yeh": "این یک متن فارسی است که برای آزمایش نوشته شده است",
    "hebrew": "זהו טקסט בעברית לבדיקת זיהוי שפה",
    "thai": "นี่คือข้อความภาษาไทยสำหรับการทดสอบ",
    "hindi": "यह भाषा पहचान के परीक्षण के लिए एक हिंदी पाठ है",
    "greek": "Αυτό είναι ένα ελληνικό κείμενο για δοκιμή",
    "vietnamese composed": "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được sử dụng rộng rãi.",
    "vietnamese decomposed": unicodedata.normalize("NFD", "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được sử dụng rộng rãi."),
    "romanian comma": "Școala și țara sunt în România, așa că știința contează",
    "latin extended additional": "Ḁḁ Ḃḃ ẞ ẠạẢả Ỳỳ Ỵỵ Ỷỷ ḍḥḷṃṇṛṣṭ",
    "bopomofo": "ㄅㄆㄇㄈ ㄉㄊㄋㄌ ㆠㆡㆢ",
    "general punctuation": "“Quoted” — dash… ‘single’ ‰ ‱ ‼ ⁇ text here",
    "latin-1": "naïve café résumé « guillemets » 90° Ñandú façade",
    "nul bytes": "some\x00text\x00with NUL\x00 bytes in English words here",
    "lone surrogates": "abc\ud800def \udfff ghi \ud83d English text around lone surrogates",
    "surrogate pair as two code points": "text \ud83d\ude00 with a split surrogate pair and English words",
    "astral": "emoji 😀🎉 and 𝐁𝐨𝐥𝐝 𝐋𝐞𝐭𝐭𝐞𝐫𝐬 and 𐐀𐐁 Deseret 𠀀𠀁 ext-B",
    "astral only": "😀😀😀 🎉🎉 𝐀𝐁𝐂",  # (the "astral" case runs all trials to the 1,000-draw limit)
    "control characters": "\x01\x02\x7f text \x1b[0m colour codes \x85 and \u200b zero width",
    "spaces runs": "word     another      word  \n\n\n   more    words",
    "long word": "a" * 3000,
    "exactly 10000": (ENGLISH * 60)[:10_000],
    "10001 with tail": (ENGLISH * 60)[:10_000] + "Ж" * 5000,
    "50000 english": (ENGLISH * 300)[:50_000],
    "50000 mixed": ("Немного русского текста. " * 800 + ENGLISH * 200)[:50_000],
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_case(name):
    assert_same([EDGE_CASES[name]], name)


@pytest.mark.parametrize("text", ["", " ", "    ", "\n\t", "123 456", "http://example.com/x", "a@b.cd", "!!!", "\x00"])
def test_no_features_raises_like_langdetect(text):
    with pytest.raises(LanguageDetectionError, match="No features in text"):
        detect_langs(text)
    with pytest.raises(LanguageDetectionError, match="No features in text"):
        reference_detect_langs(text)
    assert issubclass(LanguageDetectionError, Exception) and LanguageDetectionError.code == 5


def test_long_texts_with_replacements_across_the_cut():
    """Long texts take the prefix path: URLs, e-mails and tone marks around every cut point."""
    url, mail = "http://example.com/" + "a" * 2000, "someone.with.a.long.name@" + "b" * 200 + ".example.org"
    vi = unicodedata.normalize("NFD", "Việt ")
    texts = []
    for lead in (9_990, 10_000, 12_000, 12_085, 12_700, 14_200, 16_500, 17_000):
        for piece in (url, mail, vi, url + " " + mail):
            body = (ENGLISH * 200)[:lead]
            texts.append(body + piece + " " + ENGLISH * 40)
    texts.append((url + " ") * 30 + ENGLISH * 40)  # URLs eat the prefix: the whole text is used
    texts.append((mail + " ") * 60 + ENGLISH * 40)
    texts.append((vi * 4000)[:40_000])
    model, _ = langid._ensure_loaded()
    for text in texts:
        assert langid._prepare_text(text, model) == langid._replace(text, model)[: langid.MAX_TEXT_LENGTH]
    assert_same(texts, "long text")


def test_mail_replacement_near_each_at_is_the_regex():
    rng = random.Random(7)
    alphabet = "ab.-_@ x1Z@.."
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.choice([1, 3, 10, 70, 200, 700]))) for _ in range(3000)]
    for _ in range(600):  # local parts and domains around the length limits, '@' clusters
        pieces = []
        for _ in range(rng.randint(1, 6)):
            pieces.append(
                rng.choice([" ", "", "..", "@", "x"])
                + "a" * rng.choice([0, 1, 5, 63, 64, 65, 100])
                + rng.choice(["@", "@@", "", ".@"])
                + rng.choice(["b", "-"]) * rng.choice([0, 1, 254, 255, 256, 520])
                + rng.choice(["", "."])
                + "c" * rng.choice([0, 1, 255, 256, 600])
            )
        texts.append("".join(pieces))
    for text in texts:
        assert langid._replace_mail(text) == langid._MAIL_RE.sub(" ", text), text


def test_prefix_replacement_is_the_whole_text_replacement():
    """Random long texts with URLs, e-mails and tone marks anywhere: the prefix shortcut
    gives what replacing in the whole text gives."""
    model, _ = langid._ensure_loaded()
    rng = random.Random(11)
    pieces = [
        "http://example.com/" + "p" * 2070, "https://x.org/a?b=c ", "http://", "name@" + "d" * 300 + ".org",
        "a" * 64 + "@b.c", unicodedata.normalize("NFD", "ệ ạ ỷ "), " ", ENGLISH, "@@@", "\u0300",
    ]
    for _ in range(150):
        text = ENGLISH * rng.randint(80, 200)
        for _ in range(rng.randint(1, 12)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(pieces) * rng.randint(1, 8) + text[at:]
        assert len(text) > langid.PREFIX_LENGTH
        assert langid._prepare_text(text, model) == langid._replace(text, model)[: langid.MAX_TEXT_LENGTH]


@pytest.mark.parametrize("value", [b"bytes are not text", None])
def test_non_text_raises_type_error_like_langdetect(value):
    with pytest.raises(TypeError):
        detect_langs(value)
    with pytest.raises(TypeError):
        reference_detect_langs(value)


def test_random_strings():
    rng = random.Random(20240501)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCXYZ    ..,éüßøçñ" + "абвгдежзий" + "αβγδε" + "日本語中文" + "ひらがなカタカナ" + "한국어" + "عربي" + "0123"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.choice([1, 2, 3, 5, 8, 20, 60, 200]))) for _ in range(150)]
    assert_same(texts, "random string")


# ------------------------------------------------------------- the pieces, one by one


def test_normalization_table_matches_langdetect_on_every_bmp_character():
    model, _ = langid._ensure_loaded()
    theirs = [ord(NGram.normalize(chr(c))) for c in range(langid.BMP)]
    assert model.normalize.tolist() == theirs
    for c in (0x10000, 0x1F600, 0x20000, 0x2A6DF, 0x10FFFF):
        assert NGram.normalize(chr(c)) == chr(c)


def test_prepared_text_matches_langdetect_append():
    """Our prepared text, with runs of spaces squeezed, is langdetect's ``Detector.text``."""
    factory.init_factory()
    model, _ = langid._ensure_loaded()
    for text in list(EDGE_CASES.values()):
        detector = factory._factory.create()
        detector.append(text)
        assert re.sub(" +", " ", langid._prepare_text(text, model)) == detector.text


def test_ngram_lists_match_langdetect(real_data):
    factory.init_factory()
    model, _ = langid._ensure_loaded()
    grams = {}  # row -> n-gram, from the model's own tables
    for code, row in enumerate(model.unigram_row.tolist()):
        if row >= 0:
            grams[row] = chr(code)
    for key, row in zip(model.sorted_key.tolist(), model.sorted_row.tolist(), strict=True):
        chars = []
        while key:
            chars.append(chr(int(model.alphabet[key & ((1 << langid.LETTER_BITS) - 1)])))
            key >>= langid.LETTER_BITS
        grams[row] = "".join(reversed(chars))
    assert len(grams) == len(model.dense) - 1 + len(model.single_lang)

    resiliparse = [p for p in read_archive(str(real_data / "warc/resiliparse/warcfile.warc.gz")) if isinstance(p, HtmlPage)]
    texts = (list(EDGE_CASES.values()) + wet_texts(real_data / "warc/ccscalatools/filter_test_1.wet.gz", "c4")[:5]
             + [crude_text(p.html) for p in resiliparse])  # several scripts: n-grams outside the code tables
    for text in texts:
        detector = factory._factory.create()
        detector.append(text)
        detector.cleaning_text()
        assert [grams[r] for r in langid._ngram_rows(text, model).tolist()] == detector._extract_ngrams()


def lambada_passages(real_data: Path, count: int) -> list[str]:
    with open(real_data / "lm_benchmarks/lambada/lambada_test.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line, _ in zip(f, range(count), strict=False)]


def test_code_tables_give_the_hash_tables_rows(real_data, sample_crawl):
    """The direct code tables (BMP text) and the hash table (any text) give the same n-gram
    rows, on real pages in many scripts and on strings of characters without a code."""
    model, _ = langid._ensure_loaded()
    pages = [p for p in read_archive(str(real_data / "warc/resiliparse/warcfile.warc.gz")) if isinstance(p, HtmlPage)]
    texts = list(EDGE_CASES.values()) + [crude_text(p.html) for p in pages] + [p.html for p in pages]
    for name in ("ccscalatools/filter_test_1.wet.gz", "whirlwind/whirlwind.warc.wet.gz"):
        texts += wet_texts(real_data / "warc" / name, "faithful")
    texts += [crude_text(markup) for markup in html_gold_pages(real_data)]
    texts += [d.text for path in sample_crawl.wet_paths for d in read_archive(path) if isinstance(d, Document)]
    texts += lambada_passages(real_data, 500)
    rng = random.Random(5)
    uncoded = "ÀÆÐÞßøĀőŒſƏǅǈΣσЖжЉљ一丁中日本語한국ア" + "ｱＡａ"  # letters without a code of their own, or outside every profile
    texts += ["".join(rng.choice(uncoded + "aeT Q.") for _ in range(rng.choice([1, 2, 3, 9, 40, 300]))) for _ in range(400)]
    coded = 0
    for text in texts:
        cps = langid._code_points(langid._prepare_text(text, model))
        if cps.size and cps.max() < langid.BMP:
            rows = langid._coded_ngram_rows(cps, model).tolist()
            assert rows == langid._ngram_rows_by_hash(cps, model).tolist(), text[:80]
            if langid._rows_kernel is not None:  # the compiled n-grams, where a C compiler is present
                assert langid._rows_kernel(cps).tolist() == rows, text[:80]
            coded += 1
    assert coded > 1000
    codes = {ch: int(model.code[ord(ch)]) for ch in " eé一ЖжŒ"}
    assert codes[" "] == langid.CODE_SPACE and langid.CODE_SPACE < codes["e"] < codes["é"] < codes["一"] < langid.CODE_OTHER
    assert (codes["Ж"], codes["ж"], codes["Œ"]) == (langid.CODE_OTHER_UPPER, langid.CODE_OTHER, langid.CODE_OUTSIDE_UPPER)


@pytest.mark.slow  # langdetect itself (pure Python) on every text of a real corpus
def test_lambada_passages(real_data):
    assert assert_same(lambada_passages(real_data, 300), "lambada") == 300


def trial_kernel_or_skip():
    langid._ensure_loaded()
    if langid._trial_kernel is None:
        reason = "no C compiler here" if shutil.which("cc") is None else "the builtin sum compensates (Python >= 3.12)"
        pytest.skip(f"{reason}: corpus.langid runs its numpy trial only")
    return langid._trial_kernel


def test_compiled_trial_is_used_where_a_compiler_and_an_uncompensated_sum_exist():
    langid._ensure_loaded()
    expected = shutil.which("cc") is not None and langid._accumulate_is_sum
    assert (langid._trial_kernel is not None) == expected


def test_compiled_trial_gives_the_numpy_trials_answers_on_real_pages(real_data):
    """Every language, order and probability bit for bit: the compiled trial, the numpy
    trial and (on a spread subset) langdetect itself, on real WET pages in C4's text mode,
    pages in several languages and LAMBADA passages."""
    kernel = trial_kernel_or_skip()
    state = langid._state
    resiliparse = [p for p in read_archive(str(real_data / "warc/resiliparse/warcfile.warc.gz")) if isinstance(p, HtmlPage)]
    texts = (wet_texts(real_data / "warc/ccscalatools/filter_test_1.wet.gz", "c4")
             + wet_texts(real_data / "warc/whirlwind/whirlwind.warc.wet.gz", "c4")
             + [crude_text(p.html) for p in resiliparse] + lambada_passages(real_data, 400))
    compiled = [outcome(partial(langid._detect, state=state, run_trial=kernel), t) for t in texts]
    numpy_trial = [outcome(partial(langid._detect, state=state, run_trial=langid._run_trial), t) for t in texts]
    for i, (ours, theirs) in enumerate(zip(compiled, numpy_trial, strict=True)):
        assert ours == theirs, f"text #{i} ({texts[i][:60]!r}): compiled {ours} != numpy {theirs}"
    assert len({found[0][0] for found in compiled if isinstance(found, list)}) >= 4  # several languages
    assert [compiled[i] for i in range(0, len(texts), 9)] == [outcome(reference_detect_langs, texts[i]) for i in range(0, len(texts), 9)]


def test_compiled_trial_prepares_more_draws_when_a_trial_outruns_them():
    """A text whose trials do not converge quickly (mixed languages) runs past the draws
    prepared at first; the compiled trial asks for more and gives langdetect's answer."""
    kernel = trial_kernel_or_skip()
    text = " ".join(["the house", "das Haus", "la maison", "la casa", "het huis", "a casa"] * 30)
    compiled = langid._detect(text, langid._state, kernel)
    assert compiled == langid._detect(text, langid._state, langid._run_trial) == reference_detect_langs(text)


def test_compiled_detection_is_used_where_the_compiled_trial_is():
    langid._ensure_loaded()
    assert (langid._detect_kernel is not None) == (langid._rows_kernel is not None) == (langid._trial_kernel is not None)


def test_compiled_detection_gives_the_old_decisions_on_real_pages(real_data, monkeypatch):
    """The whole detection in C (n-gram rows, draws and trials, one call per Gaussian pair:
    ``_detect_native``) against the path before it (n-grams in numpy, draws prepared in
    numpy, one compiled trial per trial), the numpy trial and, on the WET pages, langdetect
    itself: every language and probability bit for bit, and C4's keep/drop decision with its
    counters, on real WET pages in both text modes, pages in several scripts, and LAMBADA."""
    trial_kernel_or_skip()
    state = langid._state
    wet = [t for name in ("ccscalatools/filter_test_1.wet.gz", "whirlwind/whirlwind.warc.wet.gz") for mode in ("c4", "faithful")
           for t in wet_texts(real_data / "warc" / name, mode)]
    resiliparse = [p for p in read_archive(str(real_data / "warc/resiliparse/warcfile.warc.gz")) if isinstance(p, HtmlPage)]
    texts = wet + [crude_text(p.html) for p in resiliparse] + lambada_passages(real_data, 300) + list(EDGE_CASES.values())
    assert langid._detect_kernel is not None
    new = [outcome(detect_langs, t) for t in texts]
    new_decisions = [c4.detect_english(c4.C4Page("u", t, "t"), detect_langs, LanguageDetectionError) for t in wet]
    monkeypatch.setattr(langid, "_detect_kernel", None)
    monkeypatch.setattr(langid, "_rows_kernel", None)
    old = [outcome(detect_langs, t) for t in texts]  # numpy n-grams and draws, the compiled trial
    old_decisions = [c4.detect_english(c4.C4Page("u", t, "t"), detect_langs, LanguageDetectionError) for t in wet]
    numpy_trial = [outcome(partial(langid._detect, state=state, run_trial=langid._run_trial), t) for t in texts]
    for i, (ours, before, numpy_answer) in enumerate(zip(new, old, numpy_trial, strict=True)):
        assert ours == before == numpy_answer, f"text #{i} ({texts[i][:60]!r}): compiled {ours}, before {before}, numpy {numpy_answer}"
    assert new[: len(wet)] == [outcome(reference_detect_langs, t) for t in wet]
    assert new_decisions == old_decisions
    assert len({d.counts for d in new_decisions}) >= 2  # kept and dropped pages
    assert len({found[0][0] for found in new if isinstance(found, list) and found}) >= 4  # several languages


def test_compiled_detection_grows_the_stream_when_it_runs_out(monkeypatch):
    """A stream shorter than a text's draws need: the compiled draws ask for more words and
    give langdetect's answer (the stream of a fresh state, so the shared one is untouched)."""
    trial_kernel_or_skip()
    model, _ = langid._state
    monkeypatch.setattr(langid, "INITIAL_STREAM_WORDS", 64)  # a few draws' worth
    stream = langid._SeededStream()
    text = " ".join(["the house", "das Haus", "la maison", "la casa"] * 20)
    assert langid._detect_kernel(text, (model, stream)) == reference_detect_langs(text)
    assert len(stream.words) > 64


def test_the_builtin_sum_gives_the_same_answer_as_the_running_sum(monkeypatch):
    """Where ``sum`` adds floats in order (CPython <= 3.11), the trials take the running sum's
    last value; elsewhere they call ``sum`` itself. Both are langdetect's answer."""
    langid._ensure_loaded()
    assert langid._accumulate_matches_sum() == (sys.version_info < (3, 12))
    texts = [ENGLISH, EDGE_CASES["mixed scripts"], EDGE_CASES["latin minority"], "short", EDGE_CASES["astral only"]]
    fast = [outcome(detect_langs, t) for t in texts]
    monkeypatch.setattr(langid, "_accumulate_is_sum", False)
    assert [outcome(detect_langs, t) for t in texts] == fast
    assert [outcome(reference_detect_langs, t) for t in texts] == fast


def test_language_order_and_patterns_are_langdetects():
    factory.init_factory()
    model, _ = langid._ensure_loaded()
    assert list(model.langs) == factory._factory.get_lang_list()
    assert Detector.URL_RE.pattern == langid.URL_PATTERN and Detector.MAIL_RE.pattern == langid.MAIL_PATTERN


def test_emulation_assumptions_hold():
    _, stream = langid._ensure_loaded()
    assert langid._emulation_holds(stream)


def test_global_random_state_untouched():
    random.seed(12345)
    before = random.getstate()
    detect_langs(ENGLISH)
    detect_langs(EDGE_CASES["mixed scripts"])
    assert random.getstate() == before


def test_thread_safe():
    texts = [ENGLISH * k for k in range(1, 9)] + list(EDGE_CASES.values())[:24]
    expected = [outcome(detect_langs, t) for t in texts]
    barrier = threading.Barrier(4)

    def run(shift: int):
        barrier.wait()
        order = texts[shift:] + texts[:shift]
        return [outcome(detect_langs, t) for t in order]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, range(4)))
    for shift, got in enumerate(results):
        assert got == expected[shift:] + expected[:shift]


def test_fallback_is_langdetect_itself(monkeypatch):
    """If the random module ever drew differently, detect_langs would use langdetect itself."""
    monkeypatch.setattr(langid, "_state", None)
    monkeypatch.setattr(langid, "_fallback", None)
    monkeypatch.setattr(langid, "_emulation_holds", lambda stream: False)
    assert detect_langs(ENGLISH) == reference_detect_langs(ENGLISH)
    assert langid._fallback is langid.reference_detect_langs


def test_the_cached_language_model_is_the_built_one_and_a_bad_copy_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("CORPUSFORGE_CACHE", str(tmp_path))
    assert not list(tmp_path.glob("langid-model-*.pickle"))
    built = langid._cached_model()  # no copy yet: builds with _load_model and keeps a copy
    (kept,) = tmp_path.glob("langid-model-*.pickle")
    second = langid._cached_model()  # reads the copy
    assert second is not built  # one build (about 1.5 s) is the reference; a second _load_model() would equal it
    for field in dataclasses.fields(built):
        a, b = getattr(built, field.name), getattr(second, field.name)
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, field.name
    kept.write_bytes(b"not a pickle")
    builds = []  # the build itself is the one above: here only whether a bad copy asks for one, and keeps it
    monkeypatch.setattr(langid, "_load_model", lambda: builds.append(1) or built)
    third = langid._cached_model()
    assert builds == [1] and third is built  # rebuilt ...
    assert np.array_equal(langid._cached_model().dense, built.dense)  # ... and kept again: read back, no second build
    assert builds == [1]
