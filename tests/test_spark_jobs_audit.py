"""``corpusforge audit`` and ``decontaminate`` on the native Spark engine against Beam's
DirectRunner: every file of the output the same bytes (the reports, the Bloom filter parts
and ``bloom.json``, the decontaminated shards of every split, ``_removed.jsonl``), the same
``_SUCCESS`` list and the same stats, on real Common Crawl WET text with planted passages
of real benchmarks (LAMBADA, WikiText-2: the first lines of their files,
``test_audit_pipeline.BENCHMARK_LINES``); the audit reading its corpus from a moto S3
server, in a fresh process; decontamination through ``pipelines.spark_main`` (the spark-submit
entry point), called in this process on the test process's session.

The session is conftest's ``spark`` (``local[2]``, one a test process); the S3 run starts its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_audit_pipeline import benchmark_heads
from test_object_store import BUCKET, s3  # noqa: F401  (the moto S3 server fixture)

from common import storage
from corpus.records import Document
from corpus.shards import read_documents, shard_relpath, write_shard
from dedup.benchmark_sets import load_benchmark
from pipelines import spark_main
from pipelines.audit import job as audit
from pipelines.audit import shards as audit_shards
from pipelines.jobs import STATS_FILE
from pipelines.read import job as read_pipeline

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")

pytestmark = [pytest.mark.pipeline, pytest.mark.usefixtures("java")]  # runs Beam and Spark jobs, and the corpusforge command in a subprocess; skipped without Java

ROOT = Path(__file__).resolve().parents[1]
WET_FILES = ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz")
FP_QUERIES = "20000"
# A file that names the job's own output folder (audit.json: the reports' paths; _stats.json:
# _removed.jsonl's path) is compared with that folder's name replaced.
NAMES_ITS_FOLDER = ("audit.json", STATS_FILE)


FILLER = ("The committee met again on Tuesday to go over the budget for the coming year, and most of the "
          "members agreed that the library needed new shelves before anything else was bought. ")


@pytest.fixture(scope="module")
def corpus(real_data, tmp_path_factory) -> dict:
    """Real WET text read into document shards, plus train and validation shards of pages
    that quote LAMBADA and WikiText-2: a quote inside long prose (split in pieces), a bare
    quote (no piece left), a page quoting twelve passages (too many pieces)."""
    root = tmp_path_factory.mktemp("audit-corpus")
    read_pipeline.run(["--input", *(str(real_data / name) for name in WET_FILES), "--output", str(root / "docs"),
                       "--num_shards", "2", "--format", "jsonl"])
    specs = list(benchmark_heads(real_data, root / "benchmarks", ("lambada", "wikitext2")).values())  # the files' first lines
    lambada, wikitext = (load_benchmark(spec) for spec in specs)

    def quote(example) -> str:
        return " ".join(example.text.split()[:40])

    def page(url: str, text: str) -> Document:
        return Document(text=text, url=f"http://planted.example/{url}", timestamp="2019-04-20T00:00:00Z")

    long_wiki = [e for e in wikitext.examples if len(e.text.split()) >= 40][:3]
    train = [page(f"lambada/{i}", FILLER * 3 + quote(lambada.examples[i]) + " " + FILLER * 3) for i in (7, 300, 400)]
    train += [page(f"wikitext/{n}", FILLER * 2 + quote(e) + " " + FILLER * 2) for n, e in enumerate(long_wiki)]
    train.append(page("bare", quote(lambada.examples[11])))
    many = range(20, 32)  # twelve quotes with prose around each: thirteen pieces, more than GPT-3's 10
    validation = [page("many", FILLER * 4 + (FILLER * 4).join(quote(lambada.examples[i]) for i in many) + FILLER * 4),
                  page("clean", FILLER * 5), page("lambada/50", FILLER * 3 + quote(lambada.examples[50]) + " " + FILLER * 3)]
    write_shard(train, root / "planted" / "planted-train.00000-of-00001.jsonl", "jsonl")
    write_shard(validation, root / "planted" / "planted-validation.00000-of-00001.jsonl", "jsonl")
    return {"folders": [root / "docs", root / "planted"], "benchmarks": specs,
            "planted": {"lambada": {lambada.examples[i].id for i in (7, 300, 400, 11, 50, *many)},
                        "wikitext2": {e.id for e in long_wiki}}}


def audit_args(corpus: dict, folders: list[str]) -> list[str]:
    return ["--corpus", *folders, "--benchmark", *corpus["benchmarks"], "--filter_parts", "2", "--fp_queries", FP_QUERIES]


@pytest.fixture(scope="module")
def beam_audit(corpus, tmp_path_factory) -> tuple[Path, dict]:
    """Beam's audit of the corpus on local disk: what every Spark audit must equal."""
    out = tmp_path_factory.mktemp("beam-audit") / "audit"
    return out, audit.run_audit(audit_args(corpus, [str(f) for f in corpus["folders"]]) + ["--output", str(out)])


def manifest(folder: str) -> dict[str, dict]:
    return {entry["name"]: entry for entry in storage.read_success(folder)["files"]}


def assert_same_output(beam_out: str, spark_out: str) -> None:
    """Every file ``_SUCCESS`` lists, byte for byte; a file naming its own folder with the folder's name replaced."""
    expected, got = manifest(beam_out), manifest(spark_out)
    assert sorted(got) == sorted(expected)
    for name, entry in expected.items():
        beam_bytes = storage.read_bytes(storage.join(beam_out, name))
        spark_bytes = storage.read_bytes(storage.join(spark_out, name))
        if name in NAMES_ITS_FOLDER:
            assert beam_out.encode() in beam_bytes and spark_out.encode() in spark_bytes, name
            spark_bytes = spark_bytes.replace(spark_out.encode(), beam_out.encode())
        else:
            assert got[name] == entry, name
        assert spark_bytes == beam_bytes, name


def planted_found(corpus: dict, report: dict) -> None:
    rows = {row["name"]: row for row in report}
    assert set(rows) == {"lambada", "wikitext2"}
    for name, row in rows.items():
        assert corpus["planted"][name] <= set(row["dirty_ids"]), name
        assert row["agreement"]["false_negatives"] == 0 and row["agreement"]["exact_found"] == row["unique_found"] > 0


def test_audit_on_spark_is_byte_identical_to_beam(spark, corpus, beam_audit, tmp_path):
    beam_out, beam_result = beam_audit
    out = tmp_path / "audit"
    result = audit.run_audit(audit_args(corpus, [str(f) for f in corpus["folders"]]) + ["--output", str(out), "--engine", "spark"])
    assert_same_output(str(beam_out), str(out))
    assert {"report.json", "report.md", "report.html", "bloom/bloom-part-00000-of-00002.bin", "bloom/bloom-part-00001-of-00002.bin",
            "bloom/bloom.json"} <= set(manifest(str(out)))
    assert result["filter"] == beam_result["filter"]
    documents = sum(1 for folder in corpus["folders"] for _ in read_documents(str(folder)))
    assert result["filter"]["counters"][audit_shards.AUDIT][audit_shards.DOCUMENTS_HASHED] == documents
    planted_found(corpus, result["rows"])


def test_decontaminate_through_the_spark_submit_entry_point_is_byte_identical(spark, corpus, tmp_path, capsys):
    args = ["--corpus", *(str(f) for f in corpus["folders"]), "--benchmark", *corpus["benchmarks"], "--num_shards", "2",
            "--format", "jsonl", "parquet", "--name", "clean"]
    beam_stats = audit.run_decontaminate(args + ["--output", str(tmp_path / "beam")])
    assert spark_main.main(["decontaminate", *args, "--output", str(tmp_path / "spark")]) == 0  # the session is conftest's
    assert "decontaminated against lambada, wikitext2" in capsys.readouterr().out
    assert_same_output(str(tmp_path / "beam"), str(tmp_path / "spark"))
    spark_stats = json.loads((tmp_path / "spark" / STATS_FILE).read_text(encoding="utf-8"))
    assert {k: v for k, v in spark_stats.items() if k != "removed"} == {k: v for k, v in beam_stats.items() if k != "removed"}
    counters = spark_stats["counters"]
    assert counters["clean"] > 0
    assert set(spark_stats["examples"]) == {"no_piece_left", "too_many_pieces"} and spark_stats["units"]["split"] == "documents"
    names = set(manifest(str(tmp_path / "spark")))
    formats = ("jsonl", "parquet")
    assert {shard_relpath("clean", "train", 1, 2, "parquet", formats), shard_relpath("clean", "validation", 1, 2, "jsonl", formats),
            audit.REMOVED_FILE} <= names
    removed = [json.loads(line) for line in (tmp_path / "spark" / audit.REMOVED_FILE).read_text(encoding="utf-8").splitlines()]
    assert {row["url"] for row in removed if row["reason"] == "too_many_pieces"} == {"http://planted.example/many"}
    for reason in ("split", "no_piece_left", "too_many_pieces"):  # every matched document has its row, counted once
        assert sum(row["reason"] == reason for row in removed) == counters[reason], reason
    by_reason = {reason: {row["url"] for row in removed if row["reason"] == reason} for reason in counters if reason != "removed_chars"}
    assert {f"http://planted.example/lambada/{i}" for i in (7, 300, 400, 50)} <= by_reason["split"]  # long prose either side
    assert "http://planted.example/bare" in by_reason["no_piece_left"]


def test_audit_on_spark_reads_an_s3_corpus_in_a_fresh_process(corpus, beam_audit, s3, tmp_path):  # noqa: F811
    beam_out, _ = beam_audit
    folders = []
    for folder in corpus["folders"]:  # every file, _SUCCESS included: the filter's corpus fingerprint is its digest
        folders.append(f"s3://{BUCKET}/audit-corpus/{folder.name}")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            storage.copy_file(str(path), storage.join(folders[-1], path.relative_to(folder).as_posix()))
    out = f"s3://{BUCKET}/spark-audit"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # the store settings come from the command line only
    env.update(PYTHONPATH=str(ROOT), AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "audit", *audit_args(corpus, folders), "--output", out,
                           "--engine", "spark", "--spark_master", "local[2]", *s3], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    storage.configure(s3)
    assert_same_output(str(beam_out), out)
    assert "lambada" in done.stdout and "FN 0" in done.stdout
