"""The audit report: Markdown table values, well-formed HTML with an SVG bar per benchmark, JSON round trip."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from dedup.report import GPT2_TABLE6, JSON_FORMAT, html_report, load_json, render_html, render_json, render_markdown

SVG = "{http://www.w3.org/2000/svg}"


def make_report(name, percent, token, own=None, rows=None, n=8):
    report = {
        "name": name, "n": n, "unique_ngrams": 10_000, "unique_found": 100,
        "percent_found": percent, "token_weighted_percent": token, "examples": 50, "dirty_examples": 3,
        "clean_examples": 47, "longest_run": 12,
        "fp_evidence": {"estimated_fp_rate": 1.234e-9, "empirical_found": 0, "empirical_queries": 1_000_000,
                        "empirical_upper_95": 2.996e-6},
        "per_example": rows if rows is not None else [
            {"id": f"{name}-1", "ngrams": 40, "found": 4, "fraction": 0.1, "dirty": True, "longest_run": 3},
            {"id": f"{name}-2", "ngrams": 40, "found": 0, "fraction": 0.0, "dirty": False, "longest_run": 0},
            {"id": f"{name}-3", "ngrams": 20, "found": 10, "fraction": 0.5, "dirty": True, "longest_run": 9},
            {"id": f"{name}-4", "ngrams": 10, "found": 5, "fraction": 0.5, "dirty": True, "longest_run": 5},
        ],
    }
    if own is not None:
        report["own_train_percent"] = own
    return report


@pytest.fixture
def reports():
    return [make_report("ptb", 0.912, 1.5, own=2.5), make_report("wikitext2", 1.6, 2.25),
            make_report("lambada", 1.234, 1.0, rows=[])]


def table(markdown: str) -> list[list[str]]:
    """The first Markdown table's rows as cells (header first, separator skipped)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        if not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_markdown_table6_rows_ours_and_papers(reports):
    md = render_markdown(reports, corpus_name="WebText-repro train")
    assert md.startswith("# Benchmark contamination audit\n")
    assert "## % of each test set's 8-grams found in the training data" in md
    assert table(md) == [
        ["", "PTB", "WikiText-2", "LAMBADA"],
        ["the dataset's own train split", "2.50", "–", "–"],
        ["WebText-repro train", "0.91", "1.60", "1.23"],
        ["the dataset's own train split (GPT-2 paper)", "2.67", "0.66", "–"],
        ["WebText train (GPT-2 paper)", "0.88", "1.63", "–"],
    ]
    assert "LAMBADA: 1.2% average 8-gram overlap" in md


def test_markdown_without_own_train_or_paper_columns():
    md = render_markdown([make_report("my_bench", 3.0, 4.0)])
    assert table(md) == [["", "my_bench"], ["training corpus", "3.00"]]
    md = render_markdown([make_report("my_bench", 3.0, 4.0) | {"corpus": "C4 sample"}])
    assert table(md)[1] == ["C4 sample", "3.00"]


def test_markdown_mixed_n_labels_columns():
    md = render_markdown([make_report("ptb", 1.0, 1.0), make_report("lambada", 2.0, 2.0, n=13)])
    assert table(md)[0] == ["", "PTB (n=8)", "LAMBADA (n=13)"]
    assert "found in the training data" in md and "n-grams found" in md


def test_markdown_summary_fp_and_top_dirty(reports):
    md = render_markdown(reports, top=2)
    summary = md.split("## Per-benchmark summary\n\n", 1)[1]
    assert table(summary)[0][:6] == ["benchmark", "n", "unique n-grams", "found", "% found", "% token-weighted"]
    assert table(summary)[1] == ["PTB", "8", "10,000", "100", "0.91", "1.50", "50", "3", "47", "12"]
    fp = md.split("## False-positive evidence\n\n", 1)[1]
    assert table(fp)[1] == ["PTB", "1.23e-09", "0 / 1,000,000", "3.00e-06"]
    dirty = md.split("### PTB\n\n", 1)[1]
    # fraction desc, then longest run desc; top 2 only; clean rows never listed
    assert table(dirty) == [["id", "n-grams", "found", "fraction", "longest run"],
                            ["ptb-3", "20", "10", "0.500", "9"], ["ptb-4", "10", "5", "0.500", "5"]]
    assert "### LAMBADA\n\nNo dirty examples." in md


def test_markdown_escapes_pipes_and_missing_values():
    report = make_report("a|b", float("nan"), None, rows=[])
    report["fp_evidence"] = {}
    md = render_markdown([report])
    assert "| a\\|b |" in md
    assert table(md)[1] == ["training corpus", "–"]
    assert "| a\\|b | – | – / – | – |" in md


def test_report_validation_names_missing_keys():
    report = make_report("ptb", 1.0, 1.0)
    del report["longest_run"]
    with pytest.raises(ValueError, match=r"report 0 \(ptb\) lacks longest_run"):
        render_markdown([report])


class Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_html_is_well_formed_with_one_bar_per_benchmark(tmp_path, reports):
    path = tmp_path / "report.html"
    render_html(reports, path, "Audit <WebText>")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert os.listdir(tmp_path) == ["report.html"]  # no temporary left behind
    root = ET.fromstring(text)  # well-formed XML, not just tag soup
    assert root.tag == "html"
    assert root.find("head/title").text == "Audit <WebText>"
    svgs = root.findall(f".//{SVG}svg")
    assert len(svgs) == 1
    rects = svgs[0].findall(f"{SVG}rect")
    unique = [r for r in rects if "bar-unique" in r.get("class").split()]
    token = [r for r in rects if "bar-token" in r.get("class").split()]
    assert len(unique) == len(token) == len(reports) == 3
    # scale: the largest value (2.25) rounds up to 5%, bars 480 px wide at 5%
    assert [float(r.get("width")) for r in unique] == pytest.approx([480 * 0.912 / 5, 480 * 1.6 / 5, 480 * 1.234 / 5], abs=0.005)
    assert [float(r.get("width")) for r in token] == pytest.approx([480 * 1.5 / 5, 480 * 2.25 / 5, 480 * 1.0 / 5], abs=0.005)
    marks = [line for line in svgs[0].findall(f"{SVG}line") if line.get("class") == "paper-mark"]
    assert len(marks) == 2  # PTB and WikiText-2 have a Table 6 number, LAMBADA has none
    labels = [t.text for t in svgs[0].findall(f"{SVG}text") if t.get("class") == "label"]
    assert labels == ["PTB", "WikiText-2", "LAMBADA"]
    # the Table-6-like table, with the paper's rows marked
    rows = root.findall(".//table[@class='table6']/tbody/tr")
    assert [[td.text for td in row] for row in rows][1] == ["training corpus", "0.91", "1.60", "1.23"]
    assert [row.get("class") for row in rows] == [None, None, "paper", "paper"]
    assert [td.text for td in rows[3]] == ["WebText train (GPT-2 paper)", "0.88", "1.63", "–"]
    # a collapsible dirty list per benchmark, FP evidence present
    details = root.findall(".//details")
    assert len(details) == 3
    assert details[0].find("summary").text == "PTB: 3 dirty of 50 examples (top 3 shown)"
    assert [tr[0].text for tr in details[0].findall(".//tbody/tr")] == ["ptb-3", "ptb-4", "ptb-1"]
    assert root.find(".//table[@class='fp']/tbody/tr").findall("td")[1].text == "1.23e-09"
    # html.parser agrees
    collector = Collector()
    collector.feed(text)
    assert sum(1 for tag, attrs in collector.tags if tag == "rect" and "bar-unique" in attrs.get("class", "")) == 3


def test_html_escapes_names(reports):
    reports[0]["name"] = "<script>&"
    text = html_report(reports)
    ET.fromstring(text)
    assert "<script>&" not in text and "&lt;script&gt;&amp;" in text


def test_json_round_trip(tmp_path, reports):
    path = tmp_path / "report.json"
    render_json(reports, path)
    assert load_json(path) == reports
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["format"] == JSON_FORMAT and document["version"] == 1
    assert document["gpt2_table6"]["wikitext2"] == {"own_train": 0.66, "webtext": 1.63}
    first = path.read_bytes()
    render_json(reports, path)
    assert path.read_bytes() == first  # deterministic
    reports[0]["percent_found"] = float("inf")
    render_json(reports, path)
    assert load_json(path)[0]["percent_found"] is None
    bad = tmp_path / "other.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="not a corpusforge-contamination-report"):
        load_json(bad)


def test_paper_table6_constant():
    assert GPT2_TABLE6["ptb"] == {"own_train": 2.67, "webtext": 0.88}
    assert GPT2_TABLE6["1bw"] == {"own_train": 13.19, "webtext": 3.75}
    assert set(GPT2_TABLE6) == {"ptb", "wikitext2", "enwik8", "text8", "wikitext103", "1bw"}
