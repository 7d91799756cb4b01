"""model/eval/metrics.py: every metric is a ratio of sums, so subsets aggregate the same way as the whole."""

from __future__ import annotations

import math

import pytest

from model.eval.metrics import ExampleScore, compute_metric


def _scores():
    return [
        ExampleScore("a", nll=2.0, tokens=2, words=1, bytes=4, chars=3, correct={"last_token": True}),
        ExampleScore("b", nll=1.0, tokens=1, words=2, bytes=2, chars=2, correct={"last_token": False}),
    ]


def test_perplexities_and_bits_are_ratios_of_sums():
    s = _scores()
    assert compute_metric(s, "token_ppl") == pytest.approx(math.exp(3.0 / 3))
    assert compute_metric(s, "word_ppl") == pytest.approx(math.exp(3.0 / 3))
    assert compute_metric(s, "bpb") == pytest.approx(3.0 / math.log(2) / 6)
    assert compute_metric(s, "bpc") == pytest.approx(3.0 / math.log(2) / 5)
    assert compute_metric(s[:1], "word_ppl") == pytest.approx(math.exp(2.0))


def test_accuracy_last_word_perplexity_and_empty_sets():
    s = _scores()
    assert compute_metric(s, "acc:last_token") == 0.5
    assert math.isnan(compute_metric(s, "acc:whole_word"))  # no example was scored that way
    assert compute_metric(s, "lastword_ppl") == pytest.approx(math.exp(1.5))
    assert math.isnan(compute_metric([], "word_ppl"))
    assert compute_metric([ExampleScore("x", nll=1e6, tokens=1)], "token_ppl") == math.inf


def test_unknown_metric_and_dict_round_trip():
    with pytest.raises(ValueError, match="unknown metric"):
        compute_metric(_scores(), "f1")
    a = _scores()[0]
    assert ExampleScore.from_dict(a.to_dict()) == a
