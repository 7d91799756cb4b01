"""pipelines/steps.py: a rule's decisions counted with their declared units, drops sampled,
the keyed step, and the counter table's shares computed within a unit."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from common.decision import LINES, OTHER, PAGES, Decision
from pipelines.steps import EXAMPLES_PER_REASON, Steps, Tally, collect_examples, count, format_counter_table, units_of

COUNTERS = {
    "split-wet-file": {"filtered:no_url": 3, "passed": 296, "wet-file": 3},
    "extract-main-text": {"extracted": 298, "empty": 2},
    "webtextlike-filter": {"filtered": 189, "missing-page": 2, "passed": 99},
    "clean-page": {"filtered:loremipsum": 3, "line-filtered:no_endmark": 4921, "line-passed": 2011, "passed": 279},
    "dedupe-spans": {"filtered:empty": 5, "passed": 274, "sentence-removed": 99, "span-filtered:global_duplicate": 80, "span-passed": 3099},
    "english-filter": {"filtered:ignored_language": 10, "filtered:ignored_language-de": 4, "passed": 264},
    "train": {"examples": 259},
}
UNITS = {
    "split-wet-file": {"filtered:no_url": "pages", "passed": "pages", "wet-file": "other"},
    "extract-main-text": {"extracted": "pages", "empty": "pages"},
    "webtextlike-filter": {"filtered": "pages", "missing-page": "other", "passed": "pages"},
    "clean-page": {"filtered:loremipsum": "pages", "line-filtered:no_endmark": "lines", "line-passed": "lines", "passed": "pages"},
    "dedupe-spans": {"filtered:empty": "pages", "passed": "pages", "sentence-removed": "other", "span-filtered:global_duplicate": "spans",
                     "span-passed": "spans"},
    "english-filter": {"filtered:ignored_language": "pages", "filtered:ignored_language-de": "other", "passed": "pages"},
    "train": {"examples": "other"},
}
# The table as it was printed before units were declared (shares guessed from counter names).
TABLE = """\
C4 en (spans dedup), 3 file(s)
stage                  counter                                       count    share
split-wet-file         filtered:no_url                                   3    1.00%
split-wet-file         passed                                          296   99.00%
split-wet-file         wet-file                                          3         
extract-main-text      extracted                                       298   99.33%
extract-main-text      empty                                             2    0.67%
webtextlike-filter     filtered                                        189   65.62%
webtextlike-filter     missing-page                                      2         
webtextlike-filter     passed                                           99   34.38%
clean-page             filtered:loremipsum                               3    1.06%
clean-page             line-filtered:no_endmark                      4,921   70.99%
clean-page             line-passed                                   2,011   29.01%
clean-page             passed                                          279   98.94%
dedupe-spans           filtered:empty                                    5    1.79%
dedupe-spans           passed                                          274   98.21%
dedupe-spans           sentence-removed                                 99         
dedupe-spans           span-filtered:global_duplicate                   80    2.52%
dedupe-spans           span-passed                                   3,099   97.48%
english-filter         filtered:ignored_language                        10    3.65%
english-filter         filtered:ignored_language-de                      4         
english-filter         passed                                          264   96.35%
train                  examples                                        259         """


def test_counter_table_computes_shares_within_each_declared_unit():
    assert format_counter_table("C4 en (spans dedup), 3 file(s)", COUNTERS, list(COUNTERS), UNITS) == TABLE


def test_counter_table_gives_an_undeclared_counter_no_share():
    table = format_counter_table("t", {"s": {"passed": 3, "filtered": 1}}, ["s", "absent"], {"s": {"passed": PAGES}})
    rows = table.splitlines()[2:]
    assert rows[0].startswith("s ") and rows[0].rstrip().endswith("100.00%")  # the only declared pages counter
    assert not rows[1].rstrip().endswith("%") and len(rows) == 2


def _length_rule(text: str) -> Decision:
    if len(text) > 5:
        return Decision.drop("filtered:too_long", text)
    return Decision.keep(text, "passed")


def _lines_rule(text: str) -> Decision:
    """A rule that counts lines (kept ones, blank ones dropped) and passes the page on."""
    lines = text.split("|")
    blank = [line for line in lines if not line]
    counts = (("line-passed", len(lines) - len(blank)), ("line-filtered:blank", len(blank)), ("passed", 1))
    units = (("line-passed", LINES), ("line-filtered:blank", LINES), ("passed", PAGES))
    return Decision(text.replace("||", "|"), counts, tuple(("line-filtered:blank", text) for _ in blank), units)


def _majority(key: str, votes) -> Decision:
    votes = list(votes)
    if len(votes) < 2:
        return Decision.drop("filtered:single", key)
    return Decision.keep(len(votes), "passed")


def _tally(text: str) -> Decision:
    return Decision.tally("seen")


@pytest.mark.pipeline
def test_steps_count_declare_units_and_sample_every_drop(tmp_path):
    out = str(tmp_path)
    texts = ["a|b", "abcdefgh", "c||d", "xyzxyzxyz", "e|f"]
    with beam.Pipeline() as p:
        run_step = Steps()
        pages = run_step(p | beam.Create(texts), "Length", "length", _length_rule)
        pages = run_step(pages, "Lines", ("lines", "lines-en"), _lines_rule)
        run_step(pages, "Tally", "tally", _tally)
        keyed = p | "Votes" >> beam.Create([("k1", 1), ("k1", 2), ("k2", 3)]) | beam.GroupByKey()
        kept = run_step.keyed(keyed, "Majority", "vote", _majority)
        run_step.write_examples(out)
        assert_that(kept, equal_to([("k1", 2)]))
    result = p.result
    counters = {}
    for metric in result.metrics().query()["counters"]:
        counters.setdefault(metric.key.metric.namespace, {})[metric.key.metric.name] = metric.committed
    assert counters["length"] == {"filtered:too_long": 2, "passed": 3}
    assert counters["lines"] == counters["lines-en"] == {"line-passed": 6, "line-filtered:blank": 1, "passed": 3}
    assert counters["vote"] == {"filtered:single": 1, "passed": 1}
    assert counters["tally"] == {"seen": 3}
    units = units_of(result)
    assert units["length"] == {"filtered:too_long": PAGES, "passed": PAGES}
    assert units["lines"] == units["lines-en"] == {"line-passed": LINES, "line-filtered:blank": LINES, "passed": PAGES}
    assert units["vote"] == {"filtered:single": PAGES, "passed": PAGES} and units["tally"] == {"seen": OTHER}
    examples = collect_examples(out)
    # Every counter of a drop has sampled examples (the first namespace of a step holds them).
    assert sorted(examples["length"]["filtered:too_long"]) == ["abcdefgh", "xyzxyzxyz"]
    assert examples["lines"]["line-filtered:blank"] == ["c||d"] and "lines-en" not in examples
    assert examples["vote"]["filtered:single"] == ["k2"]
    assert "tally" not in examples


def test_examples_keep_the_same_few_per_reason_whatever_the_order():
    first, second = Tally(), Tally()
    drops = [Decision.drop("filtered:x", f"example {i}") for i in range(3 * EXAMPLES_PER_REASON)]
    for decision in drops:
        first.add(decision)
    for decision in reversed(drops):
        second.add(decision)
    assert sorted(first.examples.items()) == sorted(second.examples.items())
    assert len(list(first.examples.items())) == EXAMPLES_PER_REASON
    assert first.counts == {"filtered:x": 3 * EXAMPLES_PER_REASON} and first.units == {"filtered:x": PAGES}


class _CountFn(beam.DoFn):
    def process(self, element):
        count("reader", {"records:response": element, "error:bad": 0}, OTHER)
        count(("conflict",), {"n": 1}, PAGES if element == 1 else LINES)
        yield element


@pytest.mark.pipeline
def test_a_raw_tally_declares_its_unit_and_a_conflict_shows_no_share():
    with beam.Pipeline() as p:
        p | beam.Create([1, 2]) | beam.ParDo(_CountFn())
    units = units_of(p.result)
    assert units["reader"] == {"records:response": OTHER, "error:bad": OTHER}
    assert units["conflict"] == {"n": OTHER}  # declared as pages and as lines: a rule's bug, never a guessed share
