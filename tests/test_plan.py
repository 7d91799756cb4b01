"""A job declared once (``pipelines.plan``) and run by both engines' interpretations
(``pipelines.beam.plan``, ``pipelines.spark.plan``): a rule added to a recipe is one line in
its declaration, and both engines then write the same bytes and count the same."""

from __future__ import annotations

import functools
import hashlib
import json
import types

import pytest
from test_spark_engine import assert_same_output, both_engines, variant_args

from common.decision import Decision
from pipelines.c4 import job as c4_pipeline
from pipelines.plan import DedupeText, FileCounts, NewestPerKey, Plan, ReadFiles, Rule, WriteShards

ADDED = "test-added-rule"


def with_added_rule(monkeypatch):
    """C4's declaration with one more ``Rule`` before the split: the one line a user adds."""
    declared = c4_pipeline.plan

    def plan(args, resources):
        def drop_by_digest(page, first: str) -> Decision:
            """A rule a user might add: drop the pages whose md5(url) starts with ``first``
            (nested, so that Spark's workers get it by value, not from this test module)."""
            if hashlib.md5(page.url.encode("utf-8")).hexdigest().startswith(first):
                return Decision.drop("dropped", page.url)
            return Decision.keep(page, "passed")

        base = declared(args, resources)
        return Plan(base.job, base.read, (*base.steps, Rule("9b Drop md5 0", ADDED, functools.partial(drop_by_digest, first="0"))), base.write)

    monkeypatch.setattr(c4_pipeline, "plan", plan)


def written(stats: dict) -> int:
    """Pages written, both splits (a small crawl may have no validation page)."""
    return sum(stats["counters"].get(split, {}).get("examples", 0) for split in ("train", "validation"))


@pytest.mark.pipeline  # a Beam job and a Spark job
def test_a_rule_added_to_a_declaration_runs_the_same_on_both_engines(spark, small_crawl, tmp_path, monkeypatch):
    args = variant_args("en", small_crawl, tmp_path)
    plain = c4_pipeline.run(args + ["--output", str(tmp_path / "plain")])
    with_added_rule(monkeypatch)
    beam_stats, spark_stats = both_engines(c4_pipeline.run, tmp_path, args)
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    added = beam_stats["counters"][ADDED]
    assert added["dropped"] > 0 and added["passed"] > 0
    assert added["dropped"] + added["passed"] == written(plain)
    assert written(beam_stats) == added["passed"]
    assert set(beam_stats["examples"][ADDED]) == {"dropped"}
    assert beam_stats["kernels"] == spark_stats["kernels"] and set(beam_stats["kernels"]) == {"langid-trial"}  # langdetect's trial ran
    assert beam_stats["units"][ADDED] == {"dropped": "pages", "passed": "pages"}
    for split in ("train", "validation"):
        path = tmp_path / "beam" / f"c4-{split}.00000-of-00001.json.gz"
        if path.exists():
            import gzip  # noqa: PLC0415

            urls = [json.loads(line)["url"] for line in gzip.open(path, "rt", encoding="utf-8")]
            assert not any(hashlib.md5(u.encode()).hexdigest().startswith("0") for u in urls)


def test_c4s_declaration_lists_the_specs_steps_in_order(small_crawl, tmp_path):
    args = c4_pipeline_args(small_crawl, tmp_path, "--dedup", "spans")
    punkt = types.SimpleNamespace(count_line_sentences=len)  # the declaration binds it; nothing runs here
    steps = c4_pipeline.plan(args, {"punkt": punkt, "badwords": object()}).steps
    labels = [getattr(step, "label", None) or f"{step.step} {type(step).__name__}" for step in steps]
    assert labels == ["1 Length filter", "3 NewestPerKey", "5 clean_page", "7 Dedupe spans", "8 langdetect en", "9 Bad words"]
    assert isinstance(steps[1], NewestPerKey) and steps[1].join is None
    assert isinstance(steps[3], DedupeText) and steps[3].mode == "spans"


def c4_pipeline_args(crawl, tmp_path, *more):
    from pipelines.cli import command_parser, load_command, parse_command  # noqa: PLC0415

    module = load_command("c4")
    argv = ["--input", *crawl.wet_paths, "--badwords", crawl.badwords_path, "--output", str(tmp_path / "out"), *more]
    return parse_command(command_parser("c4", module), module, argv)


def test_a_step_no_engine_interprets_is_refused_when_declared():
    read = ReadFiles("Read", lambda: None)
    with pytest.raises(TypeError, match="not a step kind every engine interprets"):
        Plan("job", read, (lambda page: page,), WriteShards("x", ("c4json",), (("train", 1),)))
    with pytest.raises(TypeError, match="needs to_document"):
        Plan("job", read, (), WriteShards("x", ("c4json",), (("train", 1), ("validation", 1)), split_of=lambda page: 0))


def test_file_counts_keep_one_tally_per_namespace_and_skip_empty_counts():
    counted = FileCounts()
    counted.add("read-archive", {}, "other")
    assert counted.items() == []
    counted.add("read-archive", {"records:response": 2}, "other")
    counted.add(("read-archive",), {"records:response": 1, "error:bad": 1}, "other")
    counted.tally(("a", "b")).add(Decision.drop("short", "text"))
    (first, tally), (second, other) = counted.items()
    assert first == ("read-archive",) and tally.counts == {"records:response": 3, "error:bad": 1}
    assert tally.units == {"records:response": "other", "error:bad": "other"}
    assert second == ("a", "b") and other.counts == {"short": 1} and dict(other.examples.items())["short"][1] == "text"
