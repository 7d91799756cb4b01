"""The shards as users load them with other tools: Hugging Face ``datasets`` (whole, streamed,
a column subset), DuckDB and polars, on a folder the C4 job wrote (JSON and Parquet, train
and validation). The issue this answers: ``meta`` as ``map<string,string>`` has no
``datasets`` type, so the Parquet shards did not load."""

from __future__ import annotations

import json

import datasets
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus.records import Document
from corpus.shards import read_documents, shard_index
from pipelines.read import job as read_pipeline

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


@pytest.fixture(scope="module")
def c4_folder(sample_c4):
    """The C4 job's folder of the sample crawl (conftest's, shared): C4 JSON and Parquet, both splits."""
    return sample_c4[0]


@pytest.fixture(scope="module")
def documents_folder(sample_crawl, tmp_path_factory):
    """The read job's Parquet shards: documents with a provenance ``meta`` (source, offsets, record id)."""
    out = tmp_path_factory.mktemp("loaders") / "documents"
    read_pipeline.run(["--input", *sample_crawl.wet_paths, "--output", str(out), "--format", "jsonl", "parquet", "--num_shards", "2"])
    return out


def with_meta(folder):
    return sorted(((d.url, d.text, d.meta) for d in read_documents(sorted(folder.glob("jsonl/*.jsonl")))), key=str)


def expected(folder, split):
    return sorted(((d.url, d.text, d.meta) for d in read_documents(sorted(folder.glob(f"c4json/c4-{split}.*.json.gz")))), key=str)


def test_hugging_face_datasets_loads_the_folder_with_its_splits(c4_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")

    loaded = datasets.load_dataset("parquet", data_files={"train": str(c4_folder / "parquet" / "c4-train.*.parquet"),
                                                          "validation": str(c4_folder / "parquet" / "c4-validation.*.parquet")},
                                   cache_dir=str(tmp_path / "hf"))
    assert set(loaded) == {"train", "validation"}
    assert loaded["train"].features["meta"] == datasets.Value("string")
    for split in ("train", "validation"):
        rows = sorted(((r["url"], r["text"], json.loads(r["meta"])) for r in loaded[split]), key=str)
        assert rows == [(u, t, m) for u, t, m in expected(c4_folder, split)] and rows
    # The format's folder itself: datasets picks the splits from the file names.
    by_folder = datasets.load_dataset(str(c4_folder / "parquet"), cache_dir=str(tmp_path / "hf2"))
    assert {split: by_folder[split].num_rows for split in by_folder} == {s: loaded[s].num_rows for s in loaded}


def test_hugging_face_streaming_and_a_column_subset(c4_folder, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")

    streamed = datasets.load_dataset("parquet", data_files={"train": str(c4_folder / "parquet" / "c4-train.*.parquet")}, split="train",
                                     streaming=True, columns=["text", "url"])
    rows = list(streamed)
    assert rows and set(rows[0]) == {"text", "url"}
    assert sorted((r["url"], r["text"]) for r in rows) == sorted((u, t) for u, t, _ in expected(c4_folder, "train"))


def test_duckdb_reads_the_shards_and_their_meta(documents_folder):
    rows = duckdb.sql(f"SELECT url, text, json_extract_string(meta, '$.record_id') AS record_id "
                      f"FROM read_parquet('{documents_folder}/parquet/*.parquet')").fetchall()
    want = with_meta(documents_folder)
    assert len(want) > 50 and all(m["record_id"] for _, _, m in want)
    assert sorted(rows) == sorted((u, t, m["record_id"]) for u, t, m in want)


def test_polars_reads_the_shards_and_decodes_meta(documents_folder):
    frame = pl.read_parquet(str(documents_folder / "parquet" / "*.parquet"))
    assert frame.columns == ["text", "url", "timestamp", "meta"]
    rows = [(u, t, json.loads(m)) for u, t, m in zip(frame["url"].to_list(), frame["text"].to_list(), frame["meta"].to_list(), strict=True)]
    assert sorted(rows, key=str) == with_meta(documents_folder)
    ids = frame.with_columns(pl.col("meta").str.json_path_match("$.record_id").alias("record_id"))["record_id"].to_list()
    assert sorted(ids) == sorted(m["record_id"] for _, _, m in with_meta(documents_folder))


def test_parquet_from_before_the_json_meta_column_still_reads(tmp_path):
    # Shards written with the old map<string,string> meta column stay readable by corpusforge.

    schema = pa.schema([("text", pa.string()), ("url", pa.string()), ("timestamp", pa.string()),
                        ("meta", pa.map_(pa.string(), pa.string()))])
    table = pa.Table.from_pylist([{"text": "t", "url": "http://a.example/", "timestamp": "", "meta": {"lang": "en"}}], schema=schema)
    pq.write_table(table, tmp_path / "old-train.00000-of-00001.parquet")
    assert list(read_documents(str(tmp_path / "old-train.00000-of-00001.parquet"))) == [
        Document("t", "http://a.example/", "", {"lang": "en"})]
    assert shard_index("http://a.example/", 1) == 0
