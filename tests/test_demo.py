"""The demo as `make demo` runs it, and the sample crawl read by corpusforge's own reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from corpus.inputs import cache_dir
from corpus.records import Document, HtmlPage, ReadError
from corpus.shards import read_documents
from corpus.warc import read_archive
from model.token_shards import find_token_shards, read_token_shard
from model.tokenizer import BPETokenizer
from pipelines.demo.job import DemoFolders, run_demo
from pipelines.jobs import STATS_FILE

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


def test_demo_builds_every_output(java, tmp_path, capsys):  # its Spark run needs Java
    result = run_demo(str(tmp_path), seed=0, pages=120)
    out = capsys.readouterr().out
    crawl = result["crawl"]
    wet_docs = [d for p in crawl.wet_paths for d in read_archive(p) if isinstance(d, Document)]
    counters = result["read"]["counters"]["read-archive"]
    assert counters["produced:conversion"] == len(wet_docs) > 100
    assert not any(k.startswith("error:") for k in counters)
    shards = sorted(p.relative_to(tmp_path / "documents").as_posix() for p in (tmp_path / "documents").rglob("sample-*"))
    assert shards == ["c4json/sample-train.00000-of-00002.json.gz", "c4json/sample-train.00001-of-00002.json.gz",
                      "parquet/sample-train.00000-of-00002.parquet", "parquet/sample-train.00001-of-00002.parquet"]
    from_json = sorted((d.url, d.text) for d in read_documents(str(tmp_path / "documents/c4json/*.json.gz")))
    from_parquet = sorted((d.url, d.text) for d in read_documents(str(tmp_path / "documents/parquet/*.parquet")))
    assert from_json == from_parquet == sorted((d.url, d.text) for d in wet_docs)
    inspection = json.loads((tmp_path / "inspect.json").read_text())
    assert set(inspection) == {p.rsplit("/", 1)[1] for p in crawl.wet_paths + crawl.warc_paths}
    assert (tmp_path / "document-lengths.png").read_bytes()[:4] == b"\x89PNG"
    c4_docs = list(read_documents(str(tmp_path / "c4" / "c4json" / "c4-*.json.gz")))
    split = result["c4"]["counters"]
    assert len(c4_docs) == split["train"]["examples"] + split.get("validation", {}).get("examples", 0)
    assert 0 < len(c4_docs) < len(wet_docs)
    assert {d.url for d in c4_docs} <= {d.url for d in wet_docs}
    assert json.loads((tmp_path / "corpus-stats.json").read_text())["documents"] == len(c4_docs)
    assert json.loads((tmp_path / "c4" / STATS_FILE).read_text())["counters"]["clean-page"]["passed"] > 0
    manifest = json.loads((tmp_path / "c4" / "_SUCCESS").read_text())
    assert {f["name"] for f in manifest["files"]} >= {"c4json/c4-train.00000-of-00002.json.gz", "parquet/c4-train.00001-of-00002.parquet", STATS_FILE}
    assert result["object_store"]["identical"] and "byte-identical to the local run" in out
    assert result["spark"]["identical"] and "C4 on Spark" in out  # the native Spark engine, beside Beam
    assert sorted(p.name for p in (tmp_path / "c4-spark").glob("*/c4-*")) == sorted(p.name for p in (tmp_path / "c4").glob("*/c4-*"))
    assert "demo outputs" in out and "length histogram" in out and "line-filtered:no_endmark" in out
    webtext = result["webtext"]["counters"]
    webtext_docs = list(read_documents(str(tmp_path / "webtext" / "parquet" / "webtext-train.*.parquet")))
    assert webtext["webtext-crawl-join"]["matched"] > 0 and len(webtext_docs) > 0
    assert all(d.meta["score_max"] and int(d.meta["score_max"]) >= 3 for d in webtext_docs)
    assert not any("wikipedia.org" in d.url for d in webtext_docs)
    assert (tmp_path / "webtext" / "links" / "links-00000-of-00001.parquet").exists() and "webtext-karma" in out
    row = result["audit"]["rows"][0]
    benchmark = [json.loads(line) for line in open(crawl.benchmark_path, encoding="utf-8")]
    leaked = {b["id"] for b in benchmark if b["expected"] == "leaked"}
    assert row["dirty_examples"] > 0 and set(row["dirty_ids"]) <= leaked and row["agreement"]["false_negatives"] == 0
    assert (tmp_path / "audit" / "report.html").exists() and "report.md" in out
    assert result["decontaminated"]["counters"]["split"] + result["decontaminated"]["counters"].get("no_piece_left", 0) >= 1

    # 7-9: token shards of the C4 corpus, a tiny GPT-2 trained on them, evaluated all / clean / dirty

    meta = json.loads((tmp_path / "tokens" / "meta.json").read_text())
    tokenizer = BPETokenizer.load(tmp_path / "tokens" / "tokenizer")
    assert meta["vocab_size"] == tokenizer.vocab_size == 1024
    train_tokens = sum(len(read_token_shard(p)) for p in find_token_shards(tmp_path / "tokens", "train"))
    assert train_tokens == meta["splits"]["train"]["tokens"] > 10_000
    assert meta["splits"]["train"]["documents"] + meta["splits"]["val"]["documents"] == len(c4_docs)
    training = result["train"]
    assert training["status"] == "finished" and training["steps"] == 40
    losses = [json.loads(line) for line in open(tmp_path / "model" / "metrics.jsonl", encoding="utf-8")]
    train_losses = [m["loss"] for m in losses if "loss" in m]
    assert train_losses[-1] < train_losses[0]  # it learned something from the corpus
    assert (tmp_path / "model" / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "model" / "hf" / "model.safetensors").exists() and isinstance(result["sample"], str)
    finetuned = result["finetune"]  # GPT-1's transformations on the demo's two-topic task
    assert finetuned["status"] == "finished" and finetuned["steps"] == 40 and finetuned["task"] == "classification"
    scores = finetuned["eval"]
    assert scores["all"]["n"] == scores["clean"]["n"] + scores["dirty"]["n"] == finetuned["eval_examples"] == 20
    assert scores["all"]["accuracy"] >= 0.7  # chance is 0.5 on the two balanced classes (120 pages: 0.75; the 300-page demo: 1.0)
    assert (tmp_path / "finetune" / "run" / "hf" / "config.json").exists() and "fine-tuned model" in out
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    entry = report["benchmarks"][0]
    assert set(entry["contamination"]["dirty_ids"]) == set(row["dirty_ids"])  # the audit's marking, reused
    by_metric = {r["metric"]: r for r in entry["results"]}
    token_ppl = by_metric["token_ppl"]
    assert token_ppl["all"]["count"] == len(benchmark)
    assert token_ppl["dirty"]["count"] == row["dirty_examples"] and token_ppl["clean"]["count"] == len(benchmark) - row["dirty_examples"]
    assert all(token_ppl[s]["ci_low"] <= token_ppl[s]["value"] <= token_ppl[s]["ci_high"] for s in ("all", "clean", "dirty"))
    assert "<table" in (tmp_path / "eval" / "report.html").read_text() and "evaluation report" in out
    tasks = {e["name"]: e for e in report["benchmarks"][1:]}  # the CoQA and NQ samples, generated greedily
    assert set(tasks) == {"coqa", "nq"}
    assert tasks["coqa"]["results"][0]["metric"] == "mean:f1" and tasks["coqa"]["results"][0]["all"]["count"] == 12
    assert tasks["nq"]["results"][0]["all"]["count"] == 6 and len(tasks["nq"]["most_confident"]) == 6
    first = [b["id"] for b in benchmark[:6]]  # the CoQA stories are those passages: dirty where the audit found them
    assert tasks["coqa"]["results"][0]["dirty"]["count"] == 2 * len(set(first) & set(row["dirty_ids"]))


def test_sample_crawl_reads_cleanly_with_languages_and_pages(sample_crawl):
    docs, pages, errors = [], [], []
    for path in sample_crawl.wet_paths + sample_crawl.warc_paths:
        for item in read_archive(path):
            {Document: docs, HtmlPage: pages, ReadError: errors}[type(item)].append(item)
    assert not errors
    assert {d.meta.get("language") for d in docs} >= {"eng", "deu", "fra", "spa"}
    assert any(p.status == 404 for p in pages) and any(p.charset == "cp1252" for p in pages)
    wet_urls = {d.url for d in docs}
    assert len(wet_urls & {p.url for p in pages}) > 100  # the same pages in both forms


def test_demo_runs_the_c4_steps_without_nltks_punkt_model_on_beam_and_spark(java, small_crawl, tmp_path):
    # The case: on a clone without ../shared, `make demo` stopped at step 4 (punkt). Without
    # the model the demo trains a punkt stand-in on its own pages, saves it as NLTK data and says
    # so; its Spark run's Python workers (separate processes) load that same stand-in through
    # NLTK_DATA and write what Beam wrote. The 120-page crawl (the size the demo test runs at) is
    # enough: the stand-in is trained and C4 keeps pages with it.
    pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")
    docs, stand_in, beam_out, spark_out = (str(tmp_path / name) for name in ("docs", "punkt", "c4", "c4-spark"))
    script = f"""
import logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from corpus.sentences import PunktMissingError, punkt_data_environment, require_punkt
try:
    require_punkt()
    sys.exit("punkt is installed here: this test needs a machine without it")
except PunktMissingError:
    pass
from pipelines.demo.job import _compare_manifests, _ensure_sentence_model
from pipelines.jobs import STATS_FILE
from pipelines.read.job import run as read
from pipelines.c4.job import run as c4
read(["--input", *{small_crawl.wet_paths!r}, "--output", {docs!r}])
c4_args = ["--input", *{small_crawl.wet_paths!r}, "--badwords", {small_crawl.badwords_path!r}]
with punkt_data_environment(_ensure_sentence_model({docs!r}, {stand_in!r})):
    stats = c4([*c4_args, "--output", {beam_out!r}])
    c4([*c4_args, "--output", {spark_out!r}, "--engine", "spark", "--spark_master", "local[2]"])
print("NLTK_DATA after", os.environ.get("NLTK_DATA"))
print("spark", _compare_manifests({beam_out!r}, {spark_out!r}, skip=(STATS_FILE,))["summary"])
print("passed", stats["counters"]["clean-page"]["passed"])
"""
    env = {k: v for k, v in os.environ.items() if k not in ("NLTK_DATA", "CORPUSFORGE_TEST_DATA")}
    env["HOME"] = str(tmp_path)  # no ~/nltk_data
    env["CORPUSFORGE_CACHE"] = cache_dir()  # the compiled kernels and language tables are found where they are (or built there)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the demo trains a punkt model on its sample pages" in result.stderr
    assert "nltk.download" in result.stderr
    assert (tmp_path / "punkt/tokenizers/punkt_tab/english/abbrev_types.txt").is_file()
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.split(" ", 1)[0] in ("NLTK_DATA", "spark", "passed"))
    assert lines["NLTK_DATA"] == "after None"  # put back as it was once the steps are done
    assert lines["spark"].endswith("files byte-identical to the local run"), lines["spark"]
    assert int(lines["passed"]) > 10


@pytest.mark.parametrize("jdk", ["missing", "exits at once"])
def test_the_demo_skips_its_spark_run_in_one_line_without_a_java_that_starts(tmp_path, jdk):
    # `make demo` needs Python and make, not Java: without a JVM (or with one that cannot run this
    # Spark) the Spark run is skipped and says why, as without pyspark, and the demo goes on,
    # instead of ending in pyspark's traceback. In a fresh process: a Spark session this test
    # process already runs would be used as it is.
    home = tmp_path / "jdk"
    if jdk == "exits at once":
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "java").write_text("#!/bin/sh\necho 'this java is too old for Spark' >&2\nexit 1\n")
        (home / "bin" / "java").chmod(0o755)
    folders = DemoFolders.under(str(tmp_path / "demo"))
    script = f"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from pipelines.demo.job import DemoFolders, build_c4_on_spark
from samplecrawl.crawl import write_sample_crawl
crawl = write_sample_crawl({str(tmp_path / "crawl")!r}, seed=0, pages=68)
print(json.dumps(build_c4_on_spark(DemoFolders.under({folders.out!r}), crawl)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, JAVA_HOME=str(home)))
    assert done.returncode == 0, done.stderr[-3000:]
    spark = json.loads(done.stdout.splitlines()[-1])
    assert spark["identical"] is None
    if jdk == "missing":
        assert spark["summary"].startswith(f"not run: JAVA_HOME={home} holds no bin/java")
        assert "no Java for Spark's JVM, no Spark run" in done.stderr
    else:
        assert spark["summary"].startswith(f"not run: Spark's JVM did not start (java: {home / 'bin' / 'java'};")
        assert "4/11 no Spark run: Spark's JVM did not start" in done.stderr
        assert "this java is too old for Spark" in done.stderr
    assert "Traceback" not in done.stderr
    assert not os.path.exists(os.path.join(folders.c4_spark, "_SUCCESS"))
