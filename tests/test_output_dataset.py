"""An output folder is a dataset: the tools users read corpora with are pointed at the folder a
job wrote, as it is, and get exactly the corpus that corpusforge's own reader gets.

Bookkeeping names start with ``_`` (``_SUCCESS``, ``_stats.json``, ``_errors/``), which
Spark, ``pyarrow.dataset``, polars, DuckDB and ``datasets`` all take for "not data"; a job
that writes several formats puts each in its own folder (``c4json/``, ``parquet/``); a shard
index that holds no document has no file. docs/formats.md describes the layout.
"""

from __future__ import annotations

import datetime
import json
import os
import re

import datasets
import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.json as pa_json
import pytest

from common import storage
from corpus.records import Document
from corpus.shards import find_shards, format_folder, read_documents, shard_files, shard_index, shard_name, write_shards
from pipelines import cli
from pipelines.c4 import job as c4_pipeline
from pipelines.jobs import OLD_LAYOUT_FILES, STATS_FILE
from pipelines.read import job as read_pipeline
from pipelines.steps import ERRORS_FILE

pytestmark = pytest.mark.pipeline  # runs Beam jobs: not in `make test-fast`

VALIDATION_SHARDS = 8  # more than the sample crawl's validation pages fill: some indices hold no document
TWO_FORMATS = ("c4json", "parquet")
COLUMNS = ("url", "text", "timestamp")
STRINGS = pa.schema([(name, pa.string()) for name in ("text", "timestamp", "url")])  # C4's timestamps stay text
RELEASED_C4_NAME = re.compile(r"^c4-(train|validation)\.\d{5}-of-\d{5}\.json\.gz$")


def run_c4(crawl, out, formats) -> None:
    c4_pipeline.run(["--input", *crawl.wet_paths, "--output", str(out), "--badwords", crawl.badwords_path,
                     "--format", *formats, "--num_shards", "2", "--num_validation_shards", str(VALIDATION_SHARDS)])


@pytest.fixture(scope="module")
def c4_out(sample_crawl, tmp_path_factory):
    """The C4 job's output in two formats, as `corpusforge c4` writes it by default."""
    out = tmp_path_factory.mktemp("dataset") / "c4"
    run_c4(sample_crawl, out, TWO_FORMATS)
    return out


@pytest.fixture(scope="module")
def corpus(c4_out) -> list[tuple[str, str, str]]:
    """What corpusforge's own reader gets from the folder: (url, text, timestamp), sorted."""
    rows = sorted((d.url, d.text, d.timestamp) for d in read_documents(str(c4_out)))
    assert len(rows) > 100
    return rows


def as_rows(records) -> list[tuple[str, str, str]]:
    """(url, text, timestamp) of dict-like records, sorted."""
    return sorted(tuple(record[name] for name in COLUMNS) for record in records)


def manifest_names(folder) -> set[str]:
    return {entry["name"] for entry in storage.read_success(str(folder))["files"]}


def files_under(folder) -> set[str]:
    return {str(p.relative_to(folder)).replace(os.sep, "/") for p in folder.rglob("*") if p.is_file()}


def test_bookkeeping_is_underscored_and_each_format_has_its_folder(c4_out):
    assert {p.name for p in c4_out.iterdir()} == {"_SUCCESS", STATS_FILE, ERRORS_FILE.split("/")[0], *TWO_FORMATS}
    assert all(name.startswith("_") for name in (STATS_FILE, ERRORS_FILE))
    assert json.loads((c4_out / STATS_FILE).read_text())["counters"]["clean-page"]["passed"] > 0
    # _SUCCESS lists every file as written, under its path in the folder
    assert manifest_names(c4_out) == files_under(c4_out) - {"_SUCCESS"}
    assert {format_folder(fmt, TWO_FORMATS) for fmt in TWO_FORMATS} == set(TWO_FORMATS)
    json_shards = sorted(p.name for p in (c4_out / "c4json").iterdir())
    assert json_shards and all(RELEASED_C4_NAME.match(name) for name in json_shards)
    assert json_shards == sorted(p.name.replace(".parquet", ".json.gz") for p in (c4_out / "parquet").iterdir())


def test_corpusforge_reads_a_format_folder_against_the_jobs_manifest(c4_out, corpus, caplog):
    for fmt in TWO_FORMATS:
        with caplog.at_level("WARNING"):
            assert sorted((d.url, d.text, d.timestamp) for d in read_documents(str(c4_out / fmt))) == corpus
        assert find_shards(str(c4_out / fmt)) == sorted(str(p) for p in (c4_out / fmt).iterdir())
    assert not caplog.records  # the manifest one level up vouches for the folder: no "no _SUCCESS" warning


def test_a_shard_index_without_documents_has_no_file(c4_out):
    validation = list(read_documents(sorted(str(p) for p in (c4_out / "parquet").glob("c4-validation.*"))))
    indices = {shard_index(doc.url, VALIDATION_SHARDS) for doc in validation}
    assert validation and len(indices) < VALIDATION_SHARDS  # the case under test: some indices are empty
    for fmt in TWO_FORMATS:
        listed = {name for name in manifest_names(c4_out) if name.startswith(f"{fmt}/c4-validation.")}
        assert listed == {f"{fmt}/{shard_name('c4', 'validation', i, VALIDATION_SHARDS, fmt)}" for i in indices}
    for path in (c4_out / "c4json").iterdir():
        assert list(read_documents(str(path)))  # every JSON shard holds a document: no bare gzip stream


def test_pyarrow_dataset_reads_each_format_folder(c4_out, corpus):
    parquet = ds.dataset(str(c4_out / "parquet"))
    assert as_rows(parquet.to_table(columns=list(COLUMNS)).to_pylist()) == corpus
    json_format = ds.JsonFileFormat(parse_options=pa_json.ParseOptions(explicit_schema=STRINGS))
    lines = ds.dataset(str(c4_out / "c4json"), format=json_format, schema=STRINGS)
    assert as_rows(lines.to_table().to_pylist()) == corpus


def test_polars_reads_each_format_folder(c4_out, corpus):
    assert as_rows(pl.read_parquet(str(c4_out / "parquet")).iter_rows(named=True)) == corpus
    assert as_rows(pl.read_ndjson(str(c4_out / "c4json"), schema=dict.fromkeys(STRINGS.names, pl.String)).iter_rows(named=True)) == corpus


def test_duckdb_reads_each_format_folder(c4_out, corpus):
    select = "SELECT url, text, timestamp FROM "
    assert sorted(duckdb.sql(select + f"read_parquet('{c4_out}/parquet/*')").fetchall()) == corpus
    strings = "{" + ", ".join(f"'{name}': 'VARCHAR'" for name in STRINGS.names) + "}"
    assert sorted(duckdb.sql(select + f"read_json('{c4_out}/c4json/*', format = 'newline_delimited', columns = {strings})").fetchall()) == corpus


def test_hugging_face_datasets_loads_the_bare_folder_and_each_format_folder(c4_out, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    loaded = {
        "bare folder": datasets.load_dataset(str(c4_out), cache_dir=str(tmp_path / "bare")),  # it picks the Parquet files
        "parquet": datasets.load_dataset(str(c4_out / "parquet"), cache_dir=str(tmp_path / "parquet")),
    }
    for where, splits in loaded.items():
        assert set(splits) == {"train", "validation"}, where
        assert as_rows(row for split in splits.values() for row in split) == corpus, where
    # JSON lines: datasets types C4's ISO timestamps as timestamps (to the second, UTC); the same instants
    splits = datasets.load_dataset(str(c4_out / "c4json"), cache_dir=str(tmp_path / "json"))
    assert set(splits) == {"train", "validation"}
    instants = [(url, text, datetime.datetime.fromisoformat(ts).replace(tzinfo=None)) for url, text, ts in corpus]
    assert as_rows(row for split in splits.values() for row in split) == instants


def test_spark_reads_each_format_folder(spark, c4_out, corpus):
    assert as_rows(row.asDict() for row in spark.read.parquet(str(c4_out / "parquet")).collect()) == corpus
    assert as_rows(row.asDict() for row in spark.read.json(str(c4_out / "c4json")).collect()) == corpus


def test_spark_reads_a_format_folder_with_its_split_as_a_column_as_docs_spark_md_shows(spark, c4_out):
    from pyspark.sql import functions as F  # the spark extra: only Spark tests load it

    schema = "text STRING, url STRING, timestamp STRING"
    docs = (spark.read.schema(schema).json(str(c4_out / "c4json"))
            .withColumn("split", F.regexp_extract(F.input_file_name(), r"c4-(train|validation)\.", 1)))
    got = sorted((row["split"], row["url"], row["text"], row["timestamp"]) for row in docs.collect())
    expected = sorted((split, d.url, d.text, d.timestamp) for split in ("train", "validation")
                      for d in read_documents(str(c4_out / "c4json" / f"c4-{split}.*.json.gz")))
    assert got == expected and {row[0] for row in got} == {"train", "validation"}
    train = spark.read.schema(schema).json(str(c4_out / "c4json" / "c4-train.*.json.gz"))
    assert sorted(row["url"] for row in train.collect()) == sorted(url for split, url, _, _ in got if split == "train")


def test_one_format_goes_at_the_top_and_the_bare_folder_reads(spark, small_crawl, tmp_path):
    out = tmp_path / "c4"
    run_c4(small_crawl, out, ["c4json"])  # the layout of one format: the small crawl's train shards show it
    assert format_folder("c4json", ["c4json"]) == ""
    assert {p.name for p in out.iterdir() if p.is_dir()} == {ERRORS_FILE.split("/")[0]}
    shards = sorted(p.name for p in out.iterdir() if p.is_file() and not p.name.startswith("_"))
    assert shards and all(RELEASED_C4_NAME.match(name) for name in shards)
    corpus = sorted((d.url, d.text, d.timestamp) for d in read_documents(str(out)))
    assert as_rows(row.asDict() for row in spark.read.json(str(out)).collect()) == corpus
    # polars takes every file of a folder it is given, _SUCCESS included: a glob names the shards
    assert as_rows(pl.read_ndjson(str(out / "*.json.gz"), schema=dict.fromkeys(STRINGS.names, pl.String)).iter_rows(named=True)) == corpus
    assert as_rows(ds.dataset(str(out), format=ds.JsonFileFormat(parse_options=pa_json.ParseOptions(explicit_schema=STRINGS)),
                              schema=STRINGS).to_table().to_pylist()) == corpus


def old_layout_folder(folder, docs) -> list[str]:
    """A committed folder as jobs wrote it before the "_" names: stats.json and errors/ beside the shards."""
    storage.begin_output(str(folder), "read")
    paths = write_shards(docs, folder, fmt="c4json", name="docs", num_shards=2)
    old_stats, old_errors = OLD_LAYOUT_FILES[:2]
    (folder / old_stats).write_text(json.dumps({"counters": {}}) + "\n")
    (folder / old_errors).parent.mkdir()
    (folder / old_errors).write_text("")
    storage.record_written(str(folder), "docs-train", [storage.file_info(p, storage.basename(p)) for p in paths])
    storage.commit_output(str(folder), "read", extra_files=(old_stats, old_errors))
    return paths


def test_a_folder_of_the_old_layout_still_reads_and_an_overwrite_removes_its_bookkeeping(small_crawl, tmp_path, capsys):
    docs = [Document(f"page {i}: some text", f"http://site{i}.example/", "2019-04-18T00:00:00Z") for i in range(20)]
    folder = tmp_path / "old"
    paths = old_layout_folder(folder, docs)
    assert find_shards(str(folder)) == shard_files(str(folder)) == sorted(paths)  # what stats, audit, tokenize read
    assert sorted(read_documents(str(folder)), key=lambda d: d.url) == sorted(docs, key=lambda d: d.url)
    assert cli.main(["stats", str(folder), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == len(docs)

    read_pipeline.run(["--input", *small_crawl.wet_paths, "--output", str(folder), "--name", "docs", "--overwrite"])
    names = files_under(folder)
    assert not names & set(OLD_LAYOUT_FILES) and {STATS_FILE, "_SUCCESS"} <= names
    assert names - {"_SUCCESS"} == manifest_names(folder)
