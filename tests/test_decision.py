"""The one shape every rule returns (common/decision.py), and C4's rules keeping to it:
declared units, sampled drops, and a page never changed in place."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from common.decision import LINES, OTHER, PAGES, Decision
from corpus import c4
from corpus.records import Document
from corpus.sentences import count_line_sentences, has_sentences, split_sentences
from corpus.warc import read_archive
from dedup.lines import line_claims, remove_duplicate_lines
from dedup.spans import remove_duplicate_spans, span_claims

KEEPS = {"passed", "line-passed", "span-passed", "extracted"}  # counters of what a rule kept


def test_keep_counts_one_of_its_unit_and_reuses_its_tuples():
    plain = Decision.keep("r")
    assert plain.record == "r" and plain.counts == () and plain.dropped == () and plain.units == () and plain.kept
    first, second = Decision.keep("a", "passed"), Decision.keep("b", "passed")
    assert first.counts == (("passed", 1),) and first.units == (("passed", PAGES),) and first.dropped == ()
    assert second.counts is first.counts and second.units is first.units  # the keep path allocates no tuples
    lines = Decision.keep("c", "passed", LINES)
    assert lines.units == (("passed", LINES),) and Decision.keep("d", "passed").units == (("passed", PAGES),)


def test_drop_counts_and_samples_its_reason():
    dropped = Decision.drop("filtered:too_long", "http://example.com/")
    assert dropped.record is None and not dropped.kept
    assert dropped.counts == (("filtered:too_long", 1),)
    assert dropped.dropped == (("filtered:too_long", "http://example.com/"),)
    assert dropped.units == (("filtered:too_long", PAGES),)
    assert Decision.drop("line-filtered:x", "a line", LINES).units == (("line-filtered:x", LINES),)


def test_tally_counts_without_a_record_or_an_example():
    tally = Decision.tally("wet-file")
    assert tally.record is None and tally.counts == (("wet-file", 1),) and tally.dropped == () and tally.units == (("wet-file", OTHER),)
    assert Decision.tally("pages-seen", 7, PAGES).counts == (("pages-seen", 7),)


def test_decision_is_immutable():
    decision = Decision.keep("r", "passed")
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.record = "other"
    changed = dataclasses.replace(decision, record="other")
    assert changed.record == "other" and decision.record == "r"


GOOD = "This line is long enough and ends with a period."


def _page(text: str, url: str = "http://example.com/a") -> c4.C4Page:
    return c4.C4Page(url=url, text=text, timestamp="2019-04-20T00:00:00Z", order=(0, 0))


def test_a_c4_page_cannot_be_changed_in_place():
    page = _page(GOOD)
    with pytest.raises(dataclasses.FrozenInstanceError):
        page.text = "other"
    assert page.normalized_url == "example.com/a"


class _English:
    def __call__(self, text):
        return [("fr", 0.9999)] if "Le " in text else [("en", 0.9999)]


def _rules(matcher):
    """Every C4 rule over a page, bound to its resources as the pipeline binds them."""
    return {
        "length": c4.length_filter,
        "realnews": lambda p: c4.realnews_filter(p, {"example.com": None}, lambda url: ("", url.split("/")[0].split(".")[0], "com")),
        "clean": lambda p: c4.clean_page(p, count_line_sentences),
        "lines": lambda p: remove_duplicate_lines((p, line_claims(p)[1]), min_num_sentences=3, has_sentences=has_sentences),
        "lines-none-owned": lambda p: remove_duplicate_lines((p, ()), min_num_sentences=3, has_sentences=has_sentences),
        "spans": lambda p: remove_duplicate_spans((p, span_claims(p)[1]), min_num_sentences=3, split_line=split_sentences,
                                                  has_sentences=has_sentences),
        "english": lambda p: c4.detect_english(p, _English(), LookupError),
        "badwords": lambda p: c4.badwords_filter(p, matcher),
        "document": c4.to_document,
    }


PAGES_TO_TRY = [
    "\n".join([GOOD, "  " + GOOD + "  ", "Another line here. It has two sentences!", "menu", GOOD]),
    "\n".join([GOOD, "Please enable JavaScript to view this page.", GOOD, GOOD]),
    "\n".join([GOOD, "Lorem ipsum dolor sit amet, consectetur.", GOOD]),
    "\n".join([GOOD, GOOD]),
    "\n".join(["Le comité s'est réuni mardi pour discuter du budget.", GOOD, GOOD]),
    "\n".join([GOOD, "Check the bottle nipple for cracks.", GOOD]),
    "x" * 190_001,
]


@pytest.mark.parametrize("text", PAGES_TO_TRY)
def test_every_c4_rule_keeps_the_contract(text):
    matcher = c4.BadwordsMatcher(["nipple"])
    for name, rule in _rules(matcher).items():
        page = _page(text)
        before = dataclasses.astuple(page)
        decision = rule(page)
        assert isinstance(decision, Decision), name
        assert dataclasses.astuple(page) == before, f"{name} changed its input"
        units = dict(decision.units)
        for counter, _ in decision.counts:
            assert counter in units, f"{name}: {counter} has no declared unit"
        for reason, _ in decision.dropped:
            assert reason in dict(decision.counts), f"{name}: {reason} sampled but not counted"
        if decision.record is None:  # a drop is counted and sampled
            drops = [c for c, n in decision.counts if n and units[c] != OTHER and c not in KEEPS]
            assert drops and all(reason in dict(decision.dropped) for reason in drops), name
        elif name != "document":
            assert decision.record.url == page.url and isinstance(decision.record, c4.C4Page)
        else:
            assert isinstance(decision.record, Document) and decision.record.text == text


def test_wet_records_become_pages_or_counted_drops(real_data):
    wet = real_data / "warc" / "ccscalatools" / "filter_test_1.wet.gz"
    decisions = [c4.wet_page(doc, 3) for doc in read_archive(str(wet), text_mode="c4") if isinstance(doc, Document)]
    kept = [d.record for d in decisions if d.record is not None]
    assert kept and all(p.order[0] == 3 for p in kept)
    assert c4.wet_page(Document(text="", url="http://a.example/", timestamp="2019"), 0).dropped == (("filtered:no_content", "http://a.example/"),)
    assert dict(c4.warcinfo_records(str(Path(wet)), 0).counts) == {"filtered:no_url": 0}  # the counter exists even at 0
