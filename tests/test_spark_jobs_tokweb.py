"""``tokenize`` and ``webtext --pages crawl`` on the native Spark engine against Beam's
DirectRunner: every file of the ``_SUCCESS`` list the same bytes (token shards, their
tokenizer and meta.json, the link table, the WebText shards, the errors file), the same
_stats.json counters, units and examples, on real text and real Pushshift lines and WARC
files of the shared data and on the bundled sample crawl; the CLI and the spark-submit
entry point run both jobs.

The session is conftest's ``spark`` (``local[2]``, one a test process); the jobs use it
as the active session.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
import zstandard
from test_spark_engine import assert_same_output
from test_webtext_pipeline import article, paragraphs, submission, write_warc

from common import storage
from corpus.records import Document, HtmlPage
from corpus.shards import shard_relpath
from corpus.warc import read_archive
from pipelines import cli, spark_main
from pipelines.jobs import STATS_FILE
from pipelines.shard_io import ERRORS_FILE
from pipelines.tokenize import job as tokenize_pipeline
from pipelines.webtext import job as webtext_pipeline

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")
pytestmark = [pytest.mark.pipeline, pytest.mark.usefixtures("java")]  # runs Beam and Spark jobs: not in `make test-fast`; skipped without Java

TOKENIZE_ARGS = ["--vocab_size", "400", "--shard_tokens", "4000", "--buckets", "3", "--prefix", "real"]
REAL_WARCS = ("warc/resiliparse/warcfile.warc.gz", "warc/whirlwind/whirlwind.warc.gz", "warc/warcio/example.warc.gz")


def same_files(beam_out: Path, spark_out: Path) -> list[dict]:
    """Both folders' ``_SUCCESS`` lists equal, _stats.json included, and every listed file the
    same bytes; returns the list."""
    entries = storage.read_success(str(beam_out))["files"]
    assert entries == storage.read_success(str(spark_out))["files"]
    for entry in entries:
        assert (spark_out / entry["name"]).read_bytes() == (beam_out / entry["name"]).read_bytes(), entry["name"]
    return entries


# --- tokenize ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def documents(real_data, tmp_path_factory) -> Path:
    """Document shards of real text: the WET conversion records of two real Common Crawl
    files (C4 JSON, gzip) and WikiText-2 paragraphs (JSON lines), with a malformed row, an
    empty text and a row without text."""
    folder = tmp_path_factory.mktemp("documents")
    wet = [item for name in ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz")
           for item in read_archive(str(real_data / name)) if isinstance(item, Document)]
    with gzip.open(folder / "c4-train.00000-of-00001.json.gz", "wt", encoding="utf-8") as f:
        for doc in wet:
            f.write(json.dumps({"text": doc.text, "url": doc.url, "timestamp": doc.timestamp}) + "\n")
    with open(folder / "wiki.jsonl", "w", encoding="utf-8") as f:
        for paragraph in paragraphs(real_data, 120):
            f.write(json.dumps({"text": paragraph}) + "\n")
        f.write("{not json\n" + json.dumps({"text": " \n "}) + "\n" + json.dumps({"url": "no text"}) + "\n")
    assert len(wet) > 20
    return folder


@pytest.fixture(scope="module")
def beam_tokens(documents, tmp_path_factory) -> tuple[Path, dict]:
    """Beam's token shards of ``documents``: what the Spark runs must equal."""
    out = tmp_path_factory.mktemp("beam-tokens") / "tokens"
    return out, tokenize_pipeline.run(["--input", str(documents), "--output", str(out), "--val_fraction", "0.1", *TOKENIZE_ARGS])


def test_tokenize_on_real_text_is_byte_identical(spark, documents, beam_tokens, tmp_path):
    beam_out, beam_result = beam_tokens
    out = tmp_path / "tokens"
    result = tokenize_pipeline.run(["--input", str(documents), "--output", str(out), "--val_fraction", "0.1", *TOKENIZE_ARGS,
                                    "--engine", "spark", "--spark_master", "local[2]"])
    names = {entry["name"] for entry in same_files(beam_out, out)}
    assert result["stats"] == beam_result["stats"] and result["meta"] == beam_result["meta"]
    counters = result["stats"]["counters"]
    assert counters["val_documents"] > 0 and counters["train_documents"] > counters["val_documents"]
    assert counters["error:bad_json"] == 1 and counters["error:no_text_field"] == 1 and counters["empty_dropped"] == 1
    assert counters["shards_written"] == result["meta"]["splits"]["train"]["shards"] + result["meta"]["splits"]["val"]["shards"] > 2
    assert {"meta.json", "tokenizer/vocab.json", ERRORS_FILE, STATS_FILE} <= names
    assert result["stats"]["examples"]["empty_dropped"] == [" \n "]


def test_tokenize_val_docs_through_the_spark_submit_entry_point_is_byte_identical(spark, documents, beam_tokens, tmp_path, capsys):
    tokenizer = str(beam_tokens[0] / "tokenizer")
    args = ["--input", str(documents), "--tokenizer", tokenizer, "--val_docs", "9", "--shard_tokens", "2500", "--buckets", "2"]
    beam_result = tokenize_pipeline.run([*args, "--output", str(tmp_path / "beam")])
    assert spark_main.main(["tokenize", *args, "--output", str(tmp_path / "spark")]) == 0
    assert "train" in capsys.readouterr().out  # the job's summary
    same_files(tmp_path / "beam", tmp_path / "spark")
    assert beam_result["meta"]["splits"]["val"]["documents"] == 9


# --- webtext --pages crawl --------------------------------------------------------------
def webtext_both(args: list[str], out: Path, run_spark) -> tuple[dict, dict]:
    """Beam's WebText into out/beam, then ``run_spark(args + output)``'s into out/spark."""
    beam_stats = webtext_pipeline.run([*args, "--output", str(out / "beam")])
    run_spark([*args, "--output", str(out / "spark")])
    return beam_stats, json.loads((out / "spark" / STATS_FILE).read_text(encoding="utf-8"))


def test_webtext_crawl_join_on_the_sample_crawl_is_byte_identical(spark, sample_crawl, tmp_path):
    args = ["--submissions", sample_crawl.submissions_zst_path, "--pages", "crawl", "--warc", *sample_crawl.warc_paths,
            "--format", "parquet", "jsonl", "--num_shards", "2", "--num_link_shards", "2"]
    beam_stats, spark_stats = webtext_both(args, tmp_path, lambda argv: webtext_pipeline.run([*argv, "--engine", "spark"]))
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    counters = spark_stats["counters"]
    assert counters["webtext-crawl-join"]["matched"] > 10 and counters["webtext-near-dedup"]["passed"] > 10
    assert counters["webtext-karma"]["low_score"] > 0 and counters["webtext-exact-dedup"]["passed"] > 10
    names = {entry["name"] for entry in storage.read_success(str(tmp_path / "spark"))["files"]}
    assert {"links/links-00000-of-00002.parquet", "links/links-00001-of-00002.parquet",
            shard_relpath("webtext", "train", 1, 2, "parquet", ("parquet", "jsonl"))} <= names


@pytest.fixture(scope="module")
def real_crawl_join(real_data, tmp_path_factory) -> list[str]:
    """Real Pushshift lines with submissions of every page of real Common Crawl WARC files
    and of a site of WikiText-2 articles (an exact copy, a near copy, a Wikipedia page),
    a dump cut short, and a damaged WARC file: the job's arguments."""
    folder = tmp_path_factory.mktemp("real-join")
    p = paragraphs(real_data, 8)
    near = [p[0].replace(p[0].split(". ")[0], "An entirely different opening sentence replaces the first one here", 1), p[1]]
    base = "http://news.example.com"
    site = {f"{base}/story-a": article("Story A", p[:2]), f"{base}/copy-of-a": article("Story A", p[:2]),
            f"{base}/near-a": article("Story A, revised", near), f"{base}/story-d": article("Story D", p[2:4]),
            "https://en.m.wikipedia.org/wiki/Story_E": article("Story E", p[4:6]), f"{base}/story-f": article("Story F", p[6:8])}
    write_warc(folder / "site.warc.gz", site)
    warcs = [str(real_data / name) for name in REAL_WARCS] + [str(folder / "site.warc.gz")]
    captured = sorted({page.url for path in warcs for page in read_archive(path) if isinstance(page, HtmlPage)})
    lines = (real_data / "reddit" / "pushshift_importer" / "test_submissions.json").read_text(encoding="utf-8").splitlines()
    lines += [submission(f"w{i}", url, 3 + i % 7, subreddit=("news", "worldnews")[i % 2]) for i, url in enumerate(captured)]
    lines += [submission("low", f"{base}/story-f", 1), submission("repeat", f"{base}/story-a/?utm_source=reddit", 4), "{not json"]
    (folder / "RS_2019-04.ndjson").write_text("\n".join(lines) + "\n", encoding="utf-8")
    packed = zstandard.ZstdCompressor().compress("\n".join(lines[:20]).encode("utf-8"))
    (folder / "RS_2019-05.zst").write_bytes(packed[: len(packed) // 2])  # cut short: its first lines, then an error row
    malformed = sorted(str(p) for p in (real_data / "warc_malformed").rglob("*.warc.gz"))[:2]
    return ["--submissions", str(folder / "RS_2019-04.ndjson"), str(folder / "RS_2019-05.zst"), "--pages", "crawl", "--warc", *warcs, *malformed]


def test_webtext_crawl_join_of_real_files_with_span_dedup_through_the_cli_is_byte_identical(spark, real_crawl_join, tmp_path):
    args = [*real_crawl_join, "--format", "parquet", "jsonl", "c4json", "--num_shards", "3", "--num_link_shards", "3", "--span_dedup"]
    beam_stats, spark_stats = webtext_both(args, tmp_path, lambda argv: cli.main(["webtext", *argv, "--engine", "spark", "--spark_master", "local[2]"]))
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"), beam_stats, spark_stats)
    counters = spark_stats["counters"]
    assert counters["webtext-submissions"]["error:unreadable_dump"] == 1 and counters["webtext-submissions"]["malformed_json"] == 1
    assert any(name.startswith("error:") for name in counters["read-archive"])
    assert counters["webtext-crawl-join"]["matched"] > 15
    assert counters["webtext-clean"]["wikipedia"] == 2 and counters["webtext-exact-dedup"]["filtered"] == 1  # Story E and the real an.wikipedia page
    assert counters["webtext-near-dedup"]["filtered"] == 1 and counters["dedupe-spans"]["passed"] > 0
    errors = [json.loads(line) for line in (tmp_path / "spark" / ERRORS_FILE).read_text(encoding="utf-8").splitlines()]
    assert {row["reason"] for row in errors} >= {"unreadable_dump"} and len({row["source"] for row in errors}) >= 2


def test_spark_refuses_a_live_fetch_in_one_line_before_work(tmp_path, caplog):
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text(submission("x1", "http://example.com/", 12) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    with caplog.at_level(logging.ERROR):
        code = cli.main(["webtext", "--submissions", str(dump), "--pages", "fetch", "--output", str(out), "--engine", "spark"])
    assert code == 2 and not out.exists()
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert "--engine spark runs --pages crawl" in line and "\n" not in line


def test_spark_submit_entry_point_names_every_job_it_runs(capsys):
    assert spark_main.main(["fetch"]) == 2
    usage = capsys.readouterr().err
    assert "{c4,read,tokenize,webtext,audit,decontaminate}" in usage

