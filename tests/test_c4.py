"""C4's rules one by one (corpus/c4.py, corpus/urls.py, dedup/lines.py, dedup/spans.py, corpus/sentences.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pickle
import random
import subprocess
import sys

import pytest

from common.decision import Decision
from corpus import c4, langid
from corpus.sentences import (
    PunktMissingError,
    count_line_sentences,
    count_sentences,
    has_sentences,
    import_punkt,
    punkt_tokenizer,
    shipped_punkt,
    split_sentences,
)
from corpus.urls import normalize_url, url_digest
from corpus.warc import read_archive
from dedup.lines import line_key, page_line_keys, remove_duplicate_lines
from dedup.spans import page_span_keys, remove_duplicate_spans
from pipelines.c4.pages import registered_domain_parts

GOOD = "This line is long enough and ends with a period."


def page(text: str, url: str = "http://example.com/a", timestamp: str = "2019-04-20T00:00:00Z", order=(0, 0)) -> c4.C4Page:
    return c4.C4Page(url=url, text=text, timestamp=timestamp, order=order)


def clean(text: str) -> Decision:
    return c4.clean_page(page(text), count_line_sentences)


def text_of(decision: Decision) -> str | None:
    return decision.record.text if decision.record is not None else None


def lines_dedup(text: str, owned, min_num_sentences: int) -> Decision:
    return remove_duplicate_lines((page(text), owned), min_num_sentences=min_num_sentences, has_sentences=has_sentences)


def spans_dedup(text: str, owned, min_num_sentences: int) -> Decision:
    return remove_duplicate_spans((page(text), owned), min_num_sentences=min_num_sentences, split_line=split_sentences,
                                  has_sentences=has_sentences)


@pytest.mark.parametrize("url, expected", [
    ("https://www.example.com/a/b/", "example.com/a/b"),
    ("http://example.com/story?utm_source=x&y=1", "example.com/story"),
    ("http://example.com/story?ref=rss", "example.com/story"),
    ("http://example.com/story?feed=1#top", "example.com/story"),
    ("http://example.com/story?id=3&utm_source=x", "example.com/story?id=3&utm_source=x"),  # only a query that *starts* so
    ("http://Example.com/A#frag", "Example.com/A#frag"),  # no lower-casing, fragment kept
    ("HTTPS://www.example.com/", "HTTPS://www.example.com"),  # the scheme regex is case-sensitive
    ("http://a.com/go?to=https://www.b.com/x", "a.com/go?to=b.com/x"),  # unanchored: inner scheme stripped too
    ("https://www.example.com///", "example.com"),
])
def test_normalize_url_is_the_references(url, expected):
    assert normalize_url(url) == expected


def test_crawl_id_expands_to_its_manifest():
    assert c4.crawl_manifest_url("CC-MAIN-2019-18") == "https://data.commoncrawl.org/crawl-data/CC-MAIN-2019-18/wet.paths.gz"
    assert c4.crawl_manifest_url("2019-18", "warc").endswith("/CC-MAIN-2019-18/warc.paths.gz")
    assert c4.crawl_manifest_url("CC-MAIN-2019-18", base="/mirror") == "/mirror/crawl-data/CC-MAIN-2019-18/wet.paths.gz"
    with pytest.raises(ValueError, match="crawl id"):
        c4.crawl_manifest_url("2019")


# TFDS c4 3.1.0 c4.py OPENWEBTEXT_CC_VERSIONS ("August 2018 - July 2019"), written out here to check ours against
TFDS_OPENWEBTEXT_CC_VERSIONS = ("2019-18", "2019-30", "2019-26", "2019-22", "2019-13", "2019-09", "2019-04",
                                "2018-51", "2018-47", "2018-43", "2018-39", "2018-34")


def test_openwebtext_crawls_are_the_references_twelve():
    assert c4.OPENWEBTEXT_CRAWLS == tuple(f"CC-MAIN-{v}" for v in TFDS_OPENWEBTEXT_CC_VERSIONS)
    assert len(set(c4.OPENWEBTEXT_CRAWLS)) == 12
    assert min(c4.OPENWEBTEXT_CRAWLS) == "CC-MAIN-2018-34" and max(c4.OPENWEBTEXT_CRAWLS) == "CC-MAIN-2019-30"


def test_wet_page_problems_in_reference_order():
    assert c4.wet_page_problem("", "", "") == "filtered:no_url"
    assert c4.wet_page_problem("http://a", "", "") == "filtered:no_content"
    assert c4.wet_page_problem("http://a", "text", "") == "filtered:no_timestamp"
    assert c4.wet_page_problem("http://a", "text", "2019-01-01T00:00:00Z") is None


def test_length_limit_is_inclusive_of_190000_characters():
    assert c4.is_valid_length("x" * 190_000)
    assert not c4.is_valid_length("x" * 190_001)


def test_newest_page_wins_and_first_seen_breaks_ties():
    old, new = c4.capture(page("a", timestamp="2019-04-01T00:00:00Z", order=(0, 10))), c4.capture(page("b", timestamp="2019-04-02T00:00:00Z", order=(1, 0)))
    assert c4.newest_capture(old, new) is new and c4.newest_capture(new, old) is new
    first, second = c4.capture(page("a", order=(0, 5))), c4.capture(page("b", order=(0, 9)))
    assert c4.newest_capture(first, second) is first and c4.newest_capture(second, first) is first
    # The staged form the pipeline shuffles, (timestamp, order, reference), follows the same rule.
    assert c4.newest_capture(("2019-04-02", (1, 0), "ref-b"), ("2019-04-02", (0, 7), "ref-a"))[2] == "ref-a"


def test_url_dedup_counts_the_duplicates_and_samples_the_url():
    kept = c4.keep_newest("example.com/a", (("2019", (0, 1), "ref"), 3))
    assert kept.record == ("2019", (0, 1), "ref")
    assert dict(kept.counts) == {"filtered": 2, "passed": 1} and kept.dropped == (("filtered", "example.com/a"),)
    single = c4.keep_newest("example.com/b", (("2019", (0, 2), "ref"), 1))
    assert dict(single.counts) == {"filtered": 0, "passed": 1} and single.dropped == ()  # 0 is counted, as the reference does


def test_webtextlike_join_keeps_listed_pages_only():
    capture = ("2019", (0, 1), "ref")
    assert c4.webtextlike_filter("example.com/a", ([capture], [None])).record == capture
    unlisted = c4.webtextlike_filter("example.com/b", ([capture], []))
    assert unlisted.record is None and unlisted.dropped == (("filtered", "example.com/b"),)
    missing = c4.webtextlike_filter("example.com/c", ([], [None]))
    assert missing.record is None and dict(missing.counts) == {"missing-page": 1} and dict(missing.units) == {"missing-page": "other"}


def test_clean_page_keeps_good_lines_and_counts_sentences():
    original = page("\n".join([GOOD, "  " + GOOD + "  ", "Another line here. It has two sentences!"]))
    decision = c4.clean_page(original, count_line_sentences)
    assert decision.record is not None
    assert decision.record.text == "\n".join([GOOD, GOOD, "Another line here. It has two sentences!"])
    assert dict(decision.counts) == {"line-passed": 3, "passed": 1}
    assert original.text.startswith(GOOD + "\n  ")  # a new page; the one given is unchanged


@pytest.mark.parametrize("line, reason", [
    ("word " * 4 + "x" * 1001 + ".", "line-filtered:too_long_word"),
    ("This line has no end mark at all", "line-filtered:no_endmark"),
    ("This line trails off with an ellipsis...", "line-filtered:no_endmark"),
    ("Too short a line.", "line-filtered:too_short"),
    ("Please enable JavaScript to view this page.", "line-filtered:javascript"),
    ("By using this site you agree to our Terms of Use.", "line-filtered:policy"),
    ("This website uses cookies to improve things.", "line-filtered:policy"),
])
def test_each_line_rule_drops_only_its_line(line, reason):
    decision = clean("\n".join([GOOD, line, GOOD, GOOD]))
    assert decision.record is not None and line.strip() not in decision.record.text
    assert counts_of(decision)[reason] == 1 and counts_of(decision)["line-passed"] == 3
    assert (reason, line.strip()) in decision.dropped


@pytest.mark.parametrize("line, reason", [
    ("Lorem ipsum dolor sit amet, consectetur.", "filtered:loremipsum"),
    ("The function body is { return x; } here.", "filtered:squigglybracket"),
])
def test_page_rules_drop_the_whole_page(line, reason):
    decision = clean("\n".join([GOOD, GOOD, line, GOOD]))
    assert decision.record is None
    assert counts_of(decision) == {"line-passed": 2, reason: 1}


def test_rule_order_short_line_with_curly_brace_is_only_a_short_line():
    # Rule 4 (too short) runs before rule 7 ({): the page survives.
    decision = clean("\n".join([GOOD, "Use {x}.", GOOD, GOOD]))
    assert decision.record is not None and counts_of(decision)["line-filtered:too_short"] == 1


def test_citations_are_removed_before_the_end_mark_check():
    decision = clean("\n".join([GOOD, "The river is long and wide.[1][edit]", "It floods often in the spring.[citation needed]", GOOD]))
    assert "The river is long and wide." in decision.record.text
    assert "[1]" not in decision.record.text and "[citation needed]" not in decision.record.text


def test_quote_is_an_end_mark_and_curly_quotes_are_not():
    decision = clean("\n".join([GOOD, 'He said it was "fine by me."', "She said it was \u201cfine by me.\u201d", GOOD]))
    assert 'He said it was "fine by me."' in decision.record.text
    assert counts_of(decision)["line-filtered:no_endmark"] == 1


def test_fewer_than_three_sentences_drops_the_page():
    decision = clean("\n".join([GOOD, GOOD]))
    assert decision.record is None and counts_of(decision)["filtered:too_few_sentences"] == 1


def counts_of(decision: Decision) -> dict:
    return dict(decision.counts)


def test_line_key_is_md5_of_stripped_lowercased_line():
    assert line_key("  Hello World. ") == hashlib.md5(b"hello world.").digest()


def test_line_dedup_owner_is_smallest_md5_url_and_local_repeats_go():
    text = "\n".join([GOOD, "Shared line across pages here.", GOOD])
    urls = ["http://a.com/1", "http://b.com/2"]
    owner = min(urls, key=url_digest)
    other = [u for u in urls if u != owner][0]
    shared = line_key("Shared line across pages here.")
    owner_keys = page_line_keys(text) | {shared}
    decision = lines_dedup(text, owner_keys, 0)
    assert text_of(decision) == "\n".join([GOOD, "Shared line across pages here."])
    assert counts_of(decision) == {"line-passed": 2, "line-filtered:local_duplicate": 1, "passed": 1}
    other_keys = page_line_keys(text) - {shared}
    decision = lines_dedup(text, other_keys, 0)
    assert text_of(decision) == GOOD and counts_of(decision)["line-filtered:global_duplicate"] == 1
    assert ("line-filtered:global_duplicate", "Shared line across pages here.") in decision.dropped
    assert other  # both URLs exist; the rule is the digest order, not the name


def test_line_dedup_empty_and_sentence_floor():
    text = "\n".join([GOOD, "Second good line is here."])
    assert counts_of(lines_dedup(text, [], 3))["filtered:empty"] == 1
    decision = lines_dedup(text, page_line_keys(text), 3)
    assert decision.record is None and counts_of(decision)["filtered:too_few_sentences"] == 1
    decision = lines_dedup(text, page_line_keys(text), 0)
    assert text_of(decision) == text and counts_of(decision)["passed"] == 1


def test_span_dedup_removes_a_shared_three_sentence_span_from_non_owners():
    shared = "The first shared sentence. The second shared sentence. The third shared sentence."
    own = "An own sentence here. Another own sentence. A last own sentence."
    text = own + "\n" + shared
    keys = page_span_keys(text, split_sentences)
    shared_key = page_span_keys(shared, split_sentences).pop()
    decision = spans_dedup(text, keys - {shared_key}, 3)
    assert text_of(decision) == own  # the shared span's three sentences are gone, the line with them too
    assert counts_of(decision)["span-filtered:global_duplicate"] == 1 and counts_of(decision)["sentence-removed"] == 3
    assert decision.dropped[0] == ("span-filtered:global_duplicate", shared)
    decision = spans_dedup(text, keys, 3)
    assert text_of(decision) == text and counts_of(decision)["sentence-removed"] == 0


def test_span_dedup_keeps_the_first_of_a_span_repeated_in_one_page():
    span = "One two three four. Five six seven eight. Nine ten eleven twelve."
    text = "\n".join([span, "Something else entirely here.", span])
    decision = spans_dedup(text, page_span_keys(text, split_sentences), 0)
    assert text_of(decision) == "\n".join([span, "Something else entirely here."])
    assert counts_of(decision)["span-filtered:local_duplicate"] == 1


class _Detector:
    def __init__(self, result):
        self.result = result

    def __call__(self, text):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize("result, counter", [
    ([("en", 0.9999)], "passed"),
    ([("en", 0.98)], "filtered:low_confidence"),
    ([("fr", 0.9999)], "filtered:ignored_language"),
    ([], "filtered:no_predictions"),
    (LookupError("no features"), "filtered:langdetect_exception"),
])
def test_detect_english_branches(result, counter):
    decision = c4.detect_english(page(GOOD), _Detector(result), LookupError)
    assert counts_of(decision)[counter] == 1
    assert (decision.record is not None) == (counter == "passed")
    if counter == "filtered:ignored_language":
        assert counts_of(decision)["filtered:ignored_language-fr"] == 1


def test_detect_english_with_real_language_id():
    english = "The committee met on Tuesday to discuss the budget. Members agreed to postpone the vote until next month."
    french = "Le comité s'est réuni mardi pour discuter du budget. Les membres ont accepté de reporter le vote."
    assert c4.detect_english(page(english), langid.detect_langs, langid.LanguageDetectionError).record is not None
    assert c4.detect_english(page(french), langid.detect_langs, langid.LanguageDetectionError).counts == (("filtered:ignored_language", 1), ("filtered:ignored_language-fr", 1))
    assert c4.detect_english(page("12345 67890"), langid.detect_langs, langid.LanguageDetectionError).counts == (("filtered:langdetect_exception", 1),)


def test_badwords_whole_word_escaped_and_empty_entries_ignored():
    words = c4.parse_badwords("nipple\n\n  a+b \nfoo bar\n")
    assert words == ["a+b", "foo bar", "nipple"]
    regex = c4.BadwordsMatcher(words)
    assert c4.badwords_filter(page("A bottle NIPPLE, cracked."), regex).record is None
    assert c4.badwords_filter(page("Nipples are plural and not listed."), regex).record is not None
    assert c4.badwords_filter(page("Say a+b twice."), regex).record is None
    assert c4.badwords_filter(page("Say aab twice."), regex).record is not None  # + is escaped
    assert c4.badwords_filter(page("nipple"), regex).counts == (("filtered", 1),)  # ^ and $ count as boundaries
    with pytest.raises(ValueError, match="empty"):
        c4.compile_badwords(["", ""])


def test_badwords_real_list_matches_the_sample_badword(real_data):
    words = c4.parse_badwords((real_data / "badwords" / "en").read_text(encoding="utf-8"))
    assert len(words) == 403
    matcher = c4.BadwordsMatcher(words)
    assert c4.badwords_filter(page("Check the bottle nipple for cracks."), matcher).record is None
    assert c4.badwords_filter(page("A perfectly ordinary sentence about the weather."), matcher).record is not None
    # The fast matcher answers exactly what the reference's one big pattern answers.
    texts = [doc.text.lower() for path in (real_data / "warc" / "ccscalatools" / "filter_test_1.wet.gz",)
             for doc in read_archive(str(path)) if hasattr(doc, "text")]
    texts += [w for w in words] + [f"x{w}" for w in words] + [f"({w})" for w in words] + [f"{w}_" for w in words]
    texts += [f"say {w}!" for w in words] + [f"{w}\n" for w in words] + [f"{w[:-1]}" for w in words]
    texts += ["2 girls 1 cupboard", "the 2 girls 1 cup.", "\U0001f595", "a\U0001f595b", "strip clubs", "barely legal."]
    # Real prose with every listed entry planted once, at a seeded place (phrases and the emoji too).
    prose = (real_data / "lm_benchmarks" / "wikitext2_raw" / "wiki.test.raw").read_text(encoding="utf-8").lower()[:400_000]
    rng = random.Random(0)
    for w in words:
        at = rng.randrange(0, len(prose) - 2000)
        chunk = prose[at:at + 2000]
        cut = rng.randrange(0, 2000)
        texts += [chunk, chunk[:cut] + " " + w + " " + chunk[cut:], chunk[:cut] + w + chunk[cut:]]
    hits = 0
    for text in texts:
        expected = matcher.regex.search(text) is not None
        assert matcher.search(text) == expected, text
        hits += expected
    assert 0 < hits < len(texts)


def test_split_is_md5_of_normalised_url_mod_1000():
    validation = next(f"example.com/{i}" for i in range(100_000) if int(hashlib.md5(f"example.com/{i}".encode()).hexdigest(), 16) % 1000 == 0)
    assert c4.split_of(validation) == "validation"
    assert c4.split_of(validation + "x") == "train"


def test_realnews_domain_and_subdomain_rules():
    domains = c4.load_realnews_domains('{"bbc.co.uk": ["news", "www"], "nytimes.com": null}')
    assert c4.realnews_domain_problem("news.bbc.co.uk/story", domains, registered_domain_parts) is None
    assert c4.realnews_domain_problem("sport.bbc.co.uk/story", domains, registered_domain_parts) == "filtered:bad_subdomain"
    assert c4.realnews_domain_problem("cooking.nytimes.com/x", domains, registered_domain_parts) is None
    assert c4.realnews_domain_problem("example.com/x", domains, registered_domain_parts) == "filtered:bad_domain"
    assert c4.load_realnews_domains("# news\nnytimes.com\n\nbbc.co.uk\n") == {"nytimes.com": None, "bbc.co.uk": None}


def _real_lines(real_data, sample_crawl):
    paths = [real_data / "warc" / "ccscalatools" / "filter_test_1.wet.gz", real_data / "warc" / "whirlwind" / "whirlwind.warc.wet.gz", *sample_crawl.wet_paths]
    for path in paths:
        for doc in read_archive(str(path), text_mode="c4"):
            if hasattr(doc, "text"):
                yield from (line.strip() for line in doc.text.splitlines())
    wiki = (real_data / "lm_benchmarks" / "wikitext2_raw" / "wiki.test.raw").read_text(encoding="utf-8")
    yield from (line.strip() for line in wiki.splitlines()[:3000])


def test_line_sentence_shortcut_equals_punkt_on_real_lines(real_data, sample_crawl):
    lines = [line for line in _real_lines(real_data, sample_crawl) if line]
    assert len(lines) > 3000
    shortcut = [line for line in lines if "." not in line[:-1] and "?" not in line[:-1] and "!" not in line[:-1]]
    assert len(shortcut) > 500  # the fast path is exercised, not just the cache
    for line in lines + ["", "   ", " a. b ", "x!", "Mr. Smith went. Then he left!", 'He said "hi."']:
        assert count_line_sentences(line) == count_sentences(line), line


def test_has_sentences_equals_counting_all_of_them(real_data, sample_crawl):
    texts = ["", "One.", "One. Two.", "One. Two. Three.", "Mr. Smith went. Then he left! Why? Because.", "No end mark at all"]
    for path in [real_data / "warc" / "ccscalatools" / "filter_test_1.wet.gz", *sample_crawl.wet_paths]:
        texts += [doc.text for doc in read_archive(str(path), text_mode="c4") if hasattr(doc, "text")]
    assert len(texts) > 300
    for text in texts:
        count = count_sentences(text)
        for minimum in (1, 2, 3, 4):
            assert has_sentences(text, minimum) == (count >= minimum)


_PUNKT_PROBE = """
import importlib.util, json, sys
text = open(sys.argv[1], encoding="utf-8").read()[:200000]
if sys.argv[2] == "ours":
    from corpus.sentences import split_sentences
    sentences = split_sentences(text)
else:
    from nltk.tokenize.punkt import PunktTokenizer
    sentences = PunktTokenizer("english").tokenize(text)
loaded = {name: name in sys.modules for name in ("scipy", "sklearn")}
import scipy.stats  # still importable afterwards
print(json.dumps({"sentences": sentences, "loaded": loaded, "scipy_after": scipy.stats.__name__}))
"""


@pytest.mark.pipeline  # two fresh interpreters that each import NLTK (and SciPy, scikit-learn)
def test_punkt_loads_without_nltks_optional_scipy_and_sklearn_imports(real_data):
    if importlib.util.find_spec("scipy") is None or importlib.util.find_spec("sklearn") is None:
        pytest.skip("SciPy and scikit-learn are not installed here: nothing to keep out")
    wiki = str(real_data / "lm_benchmarks" / "wikitext2_raw" / "wiki.test.raw")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    ours, plain = (json.loads(subprocess.run([sys.executable, "-c", _PUNKT_PROBE, wiki, side], capture_output=True, text=True,
                                             check=True, env=env).stdout) for side in ("ours", "plain"))
    assert ours["loaded"] == {"scipy": False, "sklearn": False}  # NLTK's own import pulls both in
    assert plain["loaded"] == {"scipy": True, "sklearn": True}
    assert ours["scipy_after"] == "scipy.stats"
    assert len(ours["sentences"]) > 1000 and ours["sentences"] == plain["sentences"]


def test_remembered_break_decisions_split_exactly_as_punkt_itself(real_data, sample_crawl):
    """The process's tokenizer remembers punkt's break decision per context; every span it
    gives equals a plain punkt tokenizer's, on real WET pages, their lines and edge cases."""
    ours, plain = punkt_tokenizer(), import_punkt().PunktTokenizer("english")
    assert "text_contains_sentbreak" in vars(ours) and "text_contains_sentbreak" not in vars(plain)
    texts = ["", "\n\n\n", "   ", "One.", "Mr.\nSmith went. Then he left!", "(Sent1.) Sent2.", "He said \"hi.\" She left.",
             # 2,000 one-letter sentences: a break in every context, as 20,000 would show, at a tenth of punkt's time
             "Größe. Über alles! Ça va? Oui. 日本語。 Déjà vu... Fin.", "\u00a0Nbsp. Lines.\u2028Sep. End.", "a. " * 2000,
             "Very long line " + "word " * 50000 + "end. Next one. Last!", "U.S.A. is big. Dr. No. 3.14 is pi. e.g. this."]
    for path in [real_data / "warc" / "ccscalatools" / "filter_test_1.wet.gz", *sample_crawl.wet_paths]:
        pages = [doc.text for doc in read_archive(str(path), text_mode="c4") if hasattr(doc, "text")]
        texts += pages + [line for text in pages for line in text.split("\n")]
    assert len(texts) > 3000
    expected = [list(plain.span_tokenize(text)) for text in texts]  # plain punkt remembers nothing: once is enough
    hits = ours.text_contains_sentbreak.cache_info().hits
    for text, spans in [*zip(texts, expected, strict=True), *zip(texts, expected, strict=True)]:  # the second round answers from remembered decisions
        assert list(ours.span_tokenize(text)) == spans, text[:200]
    assert ours.text_contains_sentbreak.cache_info().hits - hits > 1000


SHIPPED_PUNKT_PROBE = """
import pickle, sys
model = pickle.loads(sys.stdin.buffer.read())
texts = ["Mr. Smith went to Washington. He arrived at 5 p.m. on Jan. 3. Then he left!", "No end mark", "Dr. No. Yes."]
print(([model.split_sentences(t) for t in texts], [model.count_line_sentences(t) for t in texts], model.has_sentences(texts[0], 3)))
"""


@pytest.mark.pipeline  # a fresh Python process with no NLTK data, as a Dataflow worker or a clean Spark executor
def test_a_shipped_punkt_model_splits_on_a_worker_without_nltk_data_as_the_launcher_does(tmp_path):
    model = shipped_punkt()
    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    env.update(HOME=str(tmp_path), TMPDIR=str(tmp_path))  # no ~/nltk_data; the model's files land under this temporary folder
    done = subprocess.run([sys.executable, "-c", SHIPPED_PUNKT_PROBE], input=pickle.dumps(model), capture_output=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    texts = ["Mr. Smith went to Washington. He arrived at 5 p.m. on Jan. 3. Then he left!", "No end mark", "Dr. No. Yes."]
    assert done.stdout.decode().strip() == str(([split_sentences(t) for t in texts], [count_line_sentences(t) for t in texts], has_sentences(texts[0], 3)))
    without = subprocess.run([sys.executable, "-c", "from corpus.sentences import require_punkt; require_punkt()"], capture_output=True, env=env, cwd=tmp_path)
    assert without.returncode != 0 and b"PunktMissingError" in without.stderr  # the worker really had no punkt of its own


def test_a_shipped_punkt_model_that_arrives_damaged_is_refused():
    state = shipped_punkt().__getstate__()
    state["digest"] = "0" * 64
    with pytest.raises(PunktMissingError, match="arrived damaged"):
        pickle.loads(pickle.dumps(shipped_punkt())).__setstate__(state)
