"""The evaluation report: JSON, Markdown and HTML from real marks and real scores."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch

from corpus.records import Document
from corpus.shards import write_shards
from dedup.benchmark_sets import BenchmarkSet, load_benchmark
from model.eval.contamination import mark_examples, per_example_rows, summarize_benchmark
from model.eval.harness import table3_reference
from model.eval.metrics import ExampleScore
from model.eval.report import (
    FORMAT,
    benchmark_entry,
    build_report,
    format_summary,
    gpt2_size,
    load_report,
    render_html,
    render_markdown,
    write_report,
)

torch.set_num_threads(1)

PLANTED = [2, 40, 77]
METRICS = ["lastword_ppl", "acc:first_byte"]


@pytest.fixture(scope="module")
def parts(real_data, tmp_path_factory):
    """120 LAMBADA passages (3 planted in a training shard) and 60 PTB lines, marked, and
    scored by a byte-unigram model fitted with torch on WikiText-2 test."""
    lambada = load_benchmark(f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")
    lambada = BenchmarkSet("lambada", "test", lambada.examples[:120], lambada.source)
    ptb = load_benchmark(f"ptb:{real_data / 'lm_benchmarks/ptb/ptb.test.txt'}")
    ptb = BenchmarkSet("ptb", "test", ptb.examples[:60], ptb.source)
    rng = np.random.default_rng(1)
    vocab = sorted({w for e in lambada.examples[100:] for w in e.text.split()})
    docs = [Document(text=" ".join(rng.choice(vocab, 60)) + "\n" + lambada.examples[i].text, url=f"u{i}", timestamp="t")
            for i in PLANTED]
    shards = tmp_path_factory.mktemp("shards")
    write_shards(docs, shards, fmt="jsonl", num_shards=1)
    train = torch.tensor(list((real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_bytes()), dtype=torch.long)
    logp = torch.log((torch.bincount(train, minlength=256).double() + 1) / (len(train) + 256))
    top5 = set(torch.topk(logp, 5).indices.tolist())

    def score(example, target):
        raw = target.encode("utf-8")
        b = torch.tensor(list(raw), dtype=torch.long)
        return ExampleScore(example.id, nll=float(-logp[b].sum()), tokens=len(raw), words=len(target.split()),
                            bytes=len(raw), chars=len(target), correct={"first_byte": raw[0] in top5})

    entries = []
    for bench, metrics in ((lambada, METRICS), (ptb, ["token_ppl", "bpb"])):
        marks = mark_examples(bench, shards, progress=False)
        scores = [score(e, e.meta.get("target", e.text)) for e in bench.examples]
        summary = summarize_benchmark(bench.name, scores, metrics, marks, resamples=200, seed=3)
        entries.append(benchmark_entry(summary, kind="lm", split="test", reference=table3_reference(bench.name, "117M"),
                                       per_example=per_example_rows(scores, marks)))
    document = build_report(entries, model={"name": "byte-unigram", "gpt2_size": "117M"},
                            training={"source": str(shards), "kind": "exact", "n": 8, "threshold": 0.0},
                            settings={"resamples": 200, "confidence": 0.95, "seed": 3})
    return document


def test_json_round_trip_and_null_for_empty_subsets(parts, tmp_path):
    paths = write_report(parts, tmp_path / "out")
    loaded = load_report(paths["json"])
    assert loaded["format"] == FORMAT and [b["name"] for b in loaded["benchmarks"]] == ["lambada", "ptb"]
    lam = loaded["benchmarks"][0]
    assert lam["contamination"]["dirty_ids"] == [f"lambada-{i}" for i in PLANTED]
    assert lam["results"][0]["dirty"]["count"] == 3
    assert lam["reference"] == {"label": "GPT-2 117M (paper)", "values": {"lastword_ppl": 35.13, "acc:stopword": pytest.approx(0.4599)}}
    ptb = loaded["benchmarks"][1]
    assert ptb["results"][0]["dirty"] == {"count": 0, "value": None, "ci_low": None, "ci_high": None}
    assert ptb["reference"]["values"] == {"word_ppl": 65.85}
    assert len(lam["per_example"]) == 120 and sum(r["dirty"] for r in lam["per_example"]) == 3
    text = (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text


def test_html_has_a_table_and_a_plot_per_benchmark(parts):
    page = render_html(parts)
    ET.fromstring(page.split("\n", 1)[1])  # well-formed after the doctype
    assert page.count('<table class="results">') == 2 and page.count('<table class="buckets">') == 2
    images = re.findall(r'<img class="plot" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)"/>', page)
    assert len(images) == 2
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    assert "GPT-2 117M (paper)" in page and "35.13" in page


def test_markdown_table_matches_the_numbers(parts):
    md = render_markdown(parts)
    assert "| metric | all | clean | dirty | clean vs all | GPT-2 117M (paper) |" in md
    ptb = parts["benchmarks"][1]["results"][0]
    cell = f"{ptb['all']['value']:.2f} [{ptb['all']['ci_low']:.2f}, {ptb['all']['ci_high']:.2f}] (n=60)"
    # No PTB line is dirty: clean holds the same examples as all, so the same interval.
    assert f"| token_ppl | {cell} | {cell} | – (n=0) | +0.00% | – |" in md.replace("token perplexity", "token_ppl")
    acc = parts["benchmarks"][0]["results"][1]
    assert f"{100 * acc['clean']['value']:.2f}" in md  # accuracies shown in percent
    assert acc["all"]["value"] > 0 and f"{acc['relative_difference']:+.2f}%" in md and "| 35.13 |" in md
    assert "`lambada-2`, `lambada-40`, `lambada-77`" in md


def test_summary_table_lists_every_metric(parts):
    text = format_summary(parts)
    assert len(text.splitlines()) == 3 + 4
    assert re.search(r"lambada\s+lastword_ppl", text) and re.search(r"ptb\s+bpb", text)


def test_a_failed_render_writes_nothing(parts, tmp_path):
    broken = dict(parts, settings={"resamples": object()})
    with pytest.raises(TypeError):
        write_report(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_gpt2_sizes():
    assert gpt2_size({"arch": "gpt2", "n_layer": 12, "n_embd": 768}) == "117M"
    assert gpt2_size({"arch": "gpt2", "n_layer": 48, "n_embd": 1600}) == "1542M"
    assert gpt2_size({"arch": "gpt1", "n_layer": 12, "n_embd": 768}) is None
    assert gpt2_size({"arch": "gpt2", "n_layer": 2, "n_embd": 32}) is None
