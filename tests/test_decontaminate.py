"""GPT-3-style decontamination of one training document: exact character arithmetic."""

from __future__ import annotations

import pytest

from common.decision import Decision
from corpus.records import Document
from dedup.audit import build_indexes
from dedup.benchmark_sets import BenchmarkSet, Example
from dedup.decontaminate import (
    MASK_TOKEN,
    Decontaminated,
    Decontamination,
    Matched,
    decontaminate,
    decontaminate_document,
    match_documents,
    merge_spans,
)
from dedup.ngrams import NgramConfig


def doc(n: int) -> str:
    """A text whose characters say where they are: 'abcdefghij' repeated."""
    return ("abcdefghij" * (n // 10 + 1))[:n]


def test_clean_document_is_kept_whole_in_every_mode():
    text = "short"
    assert decontaminate_document(text, []) == Decontaminated(["short"], 0, "clean")
    assert decontaminate_document(text, [], mode="drop") == Decontaminated("short", 0, "clean")
    assert decontaminate_document(text, [(2, 2)], mode="mask") == Decontaminated("short", 0, "clean")


def test_spans_mode_removes_match_and_margin_on_both_sides():
    text = doc(1000)
    result = decontaminate_document(text, [(500, 513)])
    # removed [300, 713): pieces [0, 300) and [713, 1000)
    assert result.kept == [text[:300], text[713:]]
    assert [len(p) for p in result.pieces] == [300, 287]
    assert result.removed_chars == 413
    assert result.reason == "split"
    assert not result.dropped


def test_margin_is_clipped_at_the_document_edges():
    text = doc(1000)
    result = decontaminate_document(text, [(50, 60)])
    assert result.kept == [text[260:]]
    assert result.removed_chars == 260
    result = decontaminate_document(text, [(950, 1000)])
    assert result.kept == [text[:750]]
    assert result.removed_chars == 250


def test_touching_regions_merge_and_separate_ones_do_not():
    # widened (100..350) and (350..600): they touch, one region [100, 600)
    assert merge_spans([(300, 310), (550, 560)], 1000, margin=40) == [(260, 350), (510, 600)]
    assert merge_spans([(300, 310), (390, 400)], 1000, margin=40) == [(260, 440)]
    assert merge_spans([(300, 310), (390, 400)], 1000, margin=39) == [(261, 349), (351, 439)]
    assert merge_spans([(300, 320), (305, 310)], 1000) == [(300, 320)]
    text = doc(2000)
    result = decontaminate_document(text, [(1000, 1010), (1410, 1420)])  # 810..1210 and 1210..1620 touch
    assert result.kept == [text[:800], text[1620:]]
    assert result.removed_chars == 820
    # unsorted input gives the same result
    assert decontaminate_document(text, [(1410, 1420), (1000, 1010)]) == result


def test_short_pieces_are_discarded_and_counted_as_removed():
    text = doc(1000)
    # regions [0, 413) and [612, 1000): middle piece [413, 612) is 199 chars < 200
    result = decontaminate_document(text, [(200, 213), (812, 813)])
    assert result.kept is None and result.reason == "no_piece_left" and result.removed_chars == 1000
    result = decontaminate_document(text, [(200, 213), (813, 814)])  # middle piece is exactly 200
    assert result.kept == [text[413:613]]
    assert result.removed_chars == 800
    result = decontaminate_document(text, [(200, 213), (812, 813)], min_piece=199)
    assert result.kept == [text[413:612]]


def test_more_than_max_splits_pieces_drops_the_document():
    text = doc(10_000)
    # matches every 1000 chars with margin 200: regions of 410 chars leave pieces of 590
    spans = [(1000 * i + 500, 1000 * i + 510) for i in range(10)]  # 11 pieces
    result = decontaminate_document(text, spans)
    assert result.reason == "too_many_pieces" and result.kept is None and result.removed_chars == 10_000
    result = decontaminate_document(text, spans[:9])  # 10 pieces: allowed
    assert result.reason == "split" and len(result.pieces) == 10
    assert result.removed_chars == 9 * 410
    assert decontaminate_document(text, spans[:9], max_splits=9).reason == "too_many_pieces"


def test_pieces_are_counted_before_short_ones_are_discarded():
    text = doc(3000)
    # regions [300, 710) [900, 1310) [1500, 1910) [2100, 2510): pieces 300, 190, 190, 190, 490
    spans = [(500, 510), (1100, 1110), (1700, 1710), (2300, 2310)]
    assert decontaminate_document(text, spans, max_splits=4).reason == "too_many_pieces"
    result = decontaminate_document(text, spans, max_splits=5)
    assert result.kept == [text[:300], text[2510:]]
    assert result.removed_chars == 3000 - 300 - 490


def test_drop_mode_drops_any_contaminated_document():
    text = doc(5000)
    assert decontaminate_document(text, [(10, 11)], mode="drop") == Decontaminated(None, 5000, "contaminated")
    assert decontaminate_document(text, [], mode="drop").kept == text


def test_mask_mode_replaces_each_merged_region_with_one_token():
    text = doc(1000)
    result = decontaminate_document(text, [(500, 513), (520, 530)], mode="mask")
    assert result.kept == text[:300] + MASK_TOKEN + text[730:]
    assert result.removed_chars == 430 and result.reason == "masked"
    blank = decontaminate_document(text, [(5, 6)], mode="mask", margin=2, mask_token=" ")
    assert blank.kept == "abc " + text[8:] and blank.removed_chars == 5
    # mask mode keeps the document however many regions, and keeps short pieces
    many = decontaminate_document(text, [(i, i + 1) for i in range(0, 1000, 50)], mode="mask", margin=0,
                                  mask_token="#")
    assert many.kept == "".join("#" + text[i + 1:i + 50] for i in range(0, 1000, 50))
    assert many.removed_chars == 20


def test_is_deterministic_and_validates_input():
    text = doc(800)
    assert decontaminate_document(text, [(400, 410)]) == decontaminate_document(text, [(400, 410)])
    with pytest.raises(ValueError):
        decontaminate_document(text, [(10, 5)])
    with pytest.raises(ValueError):
        decontaminate_document(text, [(790, 801)])
    with pytest.raises(ValueError):
        decontaminate_document(text, [(1, 2)], mode="erase")
    with pytest.raises(ValueError):
        decontaminate_document(text, [(1, 2)], margin=-1)


# --- the job's rule: match_documents + decontaminate -> Decision --------------------------------
BENCH_TEXT = "the quick brown fox jumps over the lazy dog near the quiet river bank today"


def _indexes():
    sets = [BenchmarkSet("bench", "test", [Example("e0", BENCH_TEXT)], "-")]
    return build_indexes(sets, NgramConfig(n=8))


def test_match_documents_finds_every_benchmark_span():
    inside = "x" * 300 + " " + BENCH_TEXT + " " + "y" * 300
    docs = [("a", Document(text=inside, url="https://a.example/", timestamp="")),
            ("b", Document(text="nothing of the benchmark here at all, just other words", url="https://b.example/", timestamp=""))]
    matched = list(match_documents(_indexes(), docs))
    assert [m.doc for m in matched] == [doc for _, doc in docs]
    assert matched[0].benchmarks == ("bench",) and matched[0].spans
    start = inside.index(BENCH_TEXT)
    assert min(s for s, _ in matched[0].spans) == start and max(e for _, e in matched[0].spans) == start + len(BENCH_TEXT)
    assert matched[1] == Matched(docs[1][1], (), ())


def test_decontaminate_rule_splits_counts_and_leaves_the_document_alone():
    text = "a" * 500 + BENCH_TEXT + "b" * 500
    doc = Document(text=text, url="https://a.example/", timestamp="t", meta={"k": "v"})
    span = (500, 500 + len(BENCH_TEXT))
    decision = decontaminate(Matched(doc, ("bench",), (span,)))
    result = decontaminate_document(text, [span])
    assert isinstance(decision, Decision) and decision.kept
    assert [p.text for p in decision.record.pieces] == result.pieces
    assert [p.meta for p in decision.record.pieces] == [{"k": "v", "piece": "0"}, {"k": "v", "piece": "1"}]
    assert decision.record.removed == {"url": doc.url, "benchmarks": ["bench"], "reason": "split",
                                       "removed_chars": result.removed_chars, "spans": 1}
    assert decision.counts == (("split", 1), ("removed_chars", result.removed_chars)) and decision.dropped == ()
    assert doc.meta == {"k": "v"}  # the input's meta is not the pieces' meta
    dropped = decontaminate(Matched(doc, ("bench",), (span,)), mode="drop")
    assert dropped.record.pieces == () and dropped.dropped == (("contaminated", f"{doc.url} {text}"),)
    clean = decontaminate(Matched(doc, (), ()))
    assert clean.record == Decontamination((doc,), None) and clean.counts == (("clean", 1), ("removed_chars", 0))
    assert dict(clean.units) == {"clean": "documents", "removed_chars": "other"}
