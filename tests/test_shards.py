"""Shard writers and reader: names, exact round trips, pandas/pyarrow loading, atomicity, determinism."""

import gzip
import json
import os

import apache_beam as beam
import pandas as pd
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from common.storage import atomic_path, write_atomically
from corpus import shards
from corpus.records import Document
from corpus.shards import (
    FORMATS,
    ShardWriter,
    find_shards,
    open_dataset,
    read_documents,
    shard_index,
    shard_name,
    write_shard,
    write_shards,
)
from pipelines import shard_io, sources

TIMESTAMP = "2019-04-25T12:57:54Z"

HARD_TEXTS = [
    "日本語のテキスト。中文文本。한국어 텍스트.",
    "emoji 😀 family 👩‍👩‍👧 flag 🇫🇷",
    "combining e\u0301 a\u0308 \u0915\u094d\u0937",
    "RTL שלום עולם مرحبا بالعالم \u200f\u202e",
    "NUL inside a\x00b and at the end\x00",
    "",
    "newlines\nCR\r\nCRLF\r\ttabs\t\vvertical\x0cfeed",
    "separators \u2028 \u2029 \x85 inside one line",
    'quotes " and backslashes \\ and \\n literal',
    "\ufeffBOM first, ESC \x1b, DEL \x7f",
    "long " + "日本😀a\n" * 400_000,
]


def hard_documents():
    return [
        Document(
            text=text,
            url=f"https://example.com/{i}/ünïcode?q=日本",
            timestamp=TIMESTAMP,
            meta={"source": "test", "ключ": f"значение {i} 😀"},
        )
        for i, text in enumerate(HARD_TEXTS)
    ]


def many_documents(count=200):
    return [Document(f"text {i}\nline two", f"http://site{i % 7}.org/page/{i}", TIMESTAMP) for i in range(count)]


def stored(doc, fmt):
    """What a shard of ``fmt`` gives back for ``doc``: c4json does not carry meta."""
    return Document(doc.text, doc.url, doc.timestamp, doc.meta if fmt != "c4json" else {})


def in_shard_order(docs, num_shards):
    """Shard by shard, each in input order: the order read_documents gives back."""
    return [d for i in range(num_shards) for d in docs if shard_index(d.url, num_shards) == i]


def test_shard_name_layout():
    assert shard_name("c4", "train", 3, 1024, "c4json") == "c4-train.00003-of-01024.json.gz"
    assert shard_name("c4", "validation", 0, 8, "parquet") == "c4-validation.00000-of-00008.parquet"
    assert shard_name("webtext", "train", 11, 12, "jsonl") == "webtext-train.00011-of-00012.jsonl"


@pytest.mark.parametrize("index, count, fmt", [(4, 4, "c4json"), (-1, 4, "c4json"), (0, 100000, "c4json"), (0, 1, "csv")])
def test_shard_name_rejects_bad_arguments(index, count, fmt):
    with pytest.raises(ValueError):
        shard_name("c4", "train", index, count, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_shards_returns_the_complete_sorted_set(tmp_path, fmt):
    paths = write_shards(many_documents(), tmp_path, fmt=fmt, name="c4", split="validation", num_shards=4)
    names = [shard_name("c4", "validation", i, 4, fmt) for i in range(4)]
    assert paths == [str(tmp_path / n) for n in names]
    assert sorted(os.listdir(tmp_path)) == names  # no temporaries left behind


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trip_is_exact_for_hard_strings(tmp_path, fmt):
    docs = hard_documents()
    write_shards(docs, tmp_path, fmt=fmt, num_shards=3)
    assert list(read_documents(tmp_path)) == [stored(d, fmt) for d in in_shard_order(docs, 3)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_surrogates_are_joined_or_replaced_in_every_format(tmp_path, fmt):
    doc = Document("lone \ud800 high, lone \udfff low, pair \ud83d\ude00", "http://a.org/\udc80", TIMESTAMP, {"k\ud800": "v"})
    write_shards([doc], tmp_path, fmt=fmt)
    (back,) = read_documents(tmp_path)
    assert back.text == "lone \ufffd high, lone \ufffd low, pair 😀"
    assert back.url == "http://a.org/\ufffd"
    assert back.meta == ({} if fmt == "c4json" else {"k\ufffd": "v"})


def test_c4json_line_is_the_released_layout(tmp_path):
    doc = Document("Beginners BBQ Class 日本", "https://klyq.com/bbq/", TIMESTAMP, {"dropped": "yes"})
    (path,) = write_shards([doc], tmp_path)
    with gzip.open(path, "rb") as f:
        line = f.read()
    assert line == (
        '{"text":"Beginners BBQ Class 日本","timestamp":"2019-04-25T12:57:54Z","url":"https://klyq.com/bbq/"}\n'
    ).encode()
    assert list(json.loads(line)) == ["text", "timestamp", "url"]


def test_jsonl_line_carries_meta(tmp_path):
    doc = Document("t", "http://a.org/", TIMESTAMP, {"lang": "en"})
    (path,) = write_shards([doc], tmp_path, fmt="jsonl")
    with open(path, "rb") as f:
        assert f.read() == b'{"text":"t","url":"http://a.org/","timestamp":"2019-04-25T12:57:54Z","meta":{"lang":"en"}}\n'


@pytest.mark.parametrize("fmt", FORMATS)
def test_pandas_reads_each_shard_with_equal_values(tmp_path, fmt):
    docs = hard_documents()
    paths = write_shards(docs, tmp_path, fmt=fmt, num_shards=2)
    frames = [pd.read_parquet(p) if fmt == "parquet" else pd.read_json(p, lines=True) for p in paths]
    frame = pd.concat(frames, ignore_index=True)
    expected = in_shard_order(docs, 2)
    assert frame["text"].tolist() == [d.text for d in expected]
    assert frame["url"].tolist() == [d.url for d in expected]
    if fmt == "parquet":
        assert frame["timestamp"].tolist() == [TIMESTAMP] * len(docs)
        assert [json.loads(m) for m in frame["meta"]] == [d.meta for d in expected]
    else:  # read_json turns a column named "timestamp" into datetimes by default
        assert frame["timestamp"].tolist() == [pd.Timestamp(TIMESTAMP)] * len(docs)


@pytest.mark.parametrize("fmt", FORMATS)
def test_pyarrow_dataset_reads_the_shards_with_equal_values(tmp_path, fmt):
    docs = hard_documents()
    write_shards(docs, tmp_path, fmt=fmt, num_shards=2)
    rows = open_dataset(tmp_path).to_table().to_pylist()
    expected = in_shard_order(docs, 2)
    assert [(r["text"], r["url"], r["timestamp"]) for r in rows] == [(d.text, d.url, d.timestamp) for d in expected]
    if fmt == "parquet":
        assert [json.loads(r["meta"]) for r in rows] == [d.meta for d in expected]


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_shards_exist_and_load_everywhere(tmp_path, fmt):
    docs = many_documents(2)
    paths = write_shards(docs, tmp_path, fmt=fmt, num_shards=8)
    assert len(paths) == 8 and all(os.path.isfile(p) for p in paths)
    empty = [p for i, p in enumerate(paths) if all(shard_index(d.url, 8) != i for d in docs)]
    assert len(empty) >= 6
    for path in empty:
        assert list(read_documents(path)) == []
        assert len(pd.read_parquet(path) if fmt == "parquet" else pd.read_json(path, lines=True)) == 0
    assert open_dataset(paths).count_rows() == 2
    assert open_dataset(empty).count_rows() == 0


def test_write_shards_of_nothing_gives_valid_empty_files(tmp_path):
    (path,) = write_shards([], tmp_path, fmt="parquet")
    assert pq.read_table(path).num_rows == 0
    (path,) = write_shards([], tmp_path, fmt="c4json")
    with gzip.open(path, "rb") as f:
        assert f.read() == b""


def failing_documents(count):
    yield from many_documents(count)
    raise RuntimeError("reader broke midway")


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_error_midway_leaves_no_shard_and_no_temporary(tmp_path, fmt):
    (tmp_path / "keep.txt").write_text("unrelated")
    with pytest.raises(RuntimeError, match="midway"):
        write_shards(failing_documents(50), tmp_path, fmt=fmt, num_shards=4)
    assert os.listdir(tmp_path) == ["keep.txt"]


def test_a_failed_rename_unpublishes_the_renamed_shards(tmp_path, monkeypatch):
    real_replace = os.replace
    calls = []

    def replace_then_fail(src, dst):
        calls.append(dst)
        if len(calls) == 3:
            raise OSError("disk went away")
        real_replace(src, dst)

    monkeypatch.setattr(shards.os, "replace", replace_then_fail)
    with pytest.raises(OSError, match="disk went away"):
        write_shards(many_documents(), tmp_path, num_shards=4)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_documents_give_byte_identical_files(tmp_path, fmt):
    docs = hard_documents() + many_documents()
    first = write_shards(docs, tmp_path / "a", fmt=fmt, num_shards=3)
    second = write_shards(docs, tmp_path / "b", fmt=fmt, num_shards=3)
    for a, b in zip(first, second, strict=True):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read()


def test_shard_assignment_does_not_depend_on_chunking(tmp_path):
    docs = many_documents(300)
    whole = write_shards(docs, tmp_path / "whole", fmt="jsonl", num_shards=5)
    chunk_dirs = []
    for c, start in enumerate(range(0, len(docs), 70)):  # like 5 workers of 70 documents
        chunk_dirs.append(tmp_path / f"chunk{c}")
        write_shards(docs[start : start + 70], chunk_dirs[-1], fmt="jsonl", num_shards=5)
    for i, path in enumerate(whole):
        name = os.path.basename(path)
        from_chunks = [d for chunk in chunk_dirs for d in read_documents(str(chunk / name))]
        assert list(read_documents(path)) == from_chunks  # same documents, same order
        assert all(shard_index(d.url, 5) == i for d in from_chunks)


def test_small_row_groups_and_buffer_keep_order_and_bytes(tmp_path):
    docs = many_documents(500)

    def write(out_dir):
        with ShardWriter(out_dir, fmt="parquet", num_shards=3, row_group_bytes=400, buffer_bytes=1000) as writer:
            for doc in docs:
                writer.write(doc)
        return writer.paths

    first, second = write(tmp_path / "a"), write(tmp_path / "b")
    assert all(pq.ParquetFile(p).num_row_groups > 5 for p in first)
    assert list(read_documents(first)) == in_shard_order(docs, 3)
    for a, b in zip(first, second, strict=True):
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read()


def test_reader_accepts_files_globs_directories_and_lists(tmp_path):
    docs = many_documents(20)
    paths = write_shards(docs, tmp_path, fmt="c4json", num_shards=2)
    (tmp_path / "stats.json").write_text('{"documents": 20}')
    (tmp_path / ".c4-train.00000-of-00002.json.gz.tmp-1").write_bytes(b"half")
    expected = [stored(d, "c4json") for d in in_shard_order(docs, 2)]
    assert list(read_documents(tmp_path)) == expected
    assert list(read_documents(str(tmp_path / "c4-train.*.json.gz"))) == expected
    assert list(read_documents(paths)) == expected
    assert find_shards(tmp_path) == paths


def test_reader_detects_jsonl_gz_and_plain_json(tmp_path):
    line = json.dumps({"text": "é", "url": "http://a.org/", "timestamp": TIMESTAMP, "meta": {"k": "v"}}) + "\n"
    with gzip.open(tmp_path / "x.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(line)
    (tmp_path / "y.json").write_text(line + "\n", encoding="utf-8")
    expected = Document("é", "http://a.org/", TIMESTAMP, {"k": "v"})
    assert list(read_documents([tmp_path / "x.jsonl.gz", tmp_path / "y.json"])) == [expected, expected]


def test_reader_names_the_bad_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"text": "ok", "url": "u", "timestamp": "t"}\n{not json\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        list(read_documents(tmp_path / "bad.jsonl"))


def test_reader_rejects_missing_paths_and_unknown_formats(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(read_documents(tmp_path / "nope.parquet"))
    with pytest.raises(FileNotFoundError):
        list(read_documents(str(tmp_path / "*.parquet")))
    (tmp_path / "data.csv").write_text("text\n")
    with pytest.raises(ValueError, match="unknown shard format"):
        list(read_documents(tmp_path / "data.csv"))


def test_open_dataset_refuses_mixed_formats(tmp_path):
    docs = many_documents(5)
    write_shards(docs, tmp_path, fmt="parquet", name="a")
    write_shards(docs, tmp_path, fmt="c4json", name="b")  # other shards, not the same ones in another format
    with pytest.raises(ValueError, match="one format"):
        open_dataset(tmp_path)
    same = tmp_path / "same"
    write_shards(docs, same, fmt="parquet")
    write_shards(docs, same, fmt="c4json")
    assert open_dataset(same).count_rows() == 5  # one set in two formats: read once, as Parquet


@pytest.mark.parametrize("fmt", FORMATS)
def test_write_shard_writes_one_file_in_the_given_order(tmp_path, fmt):
    docs = hard_documents()
    path = str(tmp_path / "sub" / shard_name("c4", "train", 0, 1, fmt))
    assert write_shard(docs, path, fmt) == path
    assert os.listdir(tmp_path / "sub") == [os.path.basename(path)]
    assert list(read_documents(path)) == [stored(d, fmt) for d in docs]


def test_write_shard_leaves_nothing_on_error(tmp_path):
    with pytest.raises(RuntimeError, match="midway"):
        write_shard(failing_documents(10), tmp_path / "c4-train.00000-of-00001.parquet", "parquet")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="must end with"):
        write_shard([], tmp_path / "c4-train.00000-of-00001.parquet", "c4json")


def test_atomic_path_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "report.json"
    write_atomically(target, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as temporary:
            open(temporary, "w").write("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_folder_written_in_two_formats_is_read_once(tmp_path):
    docs = [Document(text=f"text {i}", url=f"https://a.example/{i}", timestamp="2019-04-20T10:00:00Z") for i in range(7)]
    for fmt in ("c4json", "parquet", "jsonl"):
        write_shards(docs, str(tmp_path), fmt=fmt, name="c4", num_shards=2)
    found = find_shards(str(tmp_path))
    assert [os.path.basename(p) for p in found] == ["c4-train.00000-of-00002.parquet", "c4-train.00001-of-00002.parquet"]
    assert sorted(d.url for d in read_documents(found)) == sorted(d.url for d in docs)
    named = find_shards(str(tmp_path / "c4-train.00000-of-00002.json.gz"))  # a file is taken as named
    assert named == [str(tmp_path / "c4-train.00000-of-00002.json.gz")]


# --- the Beam writer: rows staged as their c4json line, written into c4json shards as they are


def staged_documents():
    """Hard strings, tabs and newlines everywhere, meta that looks like a staged line, and
    rows that tie on url and timestamp (ordered by md5(text))."""
    docs = hard_documents()[:-1]  # the 3 MB text once is enough below
    docs += [
        Document("tab\there\tand there", "https://example.com/tab\tin/url", TIMESTAMP, {"meta": "x\ty", "k\t": "{\"meta\":{}}"}),
        Document("lone \ud800 surrogate and a \ud83d\ude00 pair", "https://example.com/\udfff", TIMESTAMP, {"s": "\ud800"}),
        Document("same url, same time, text A", "https://example.com/tie", TIMESTAMP),
        Document("same url, same time, text B", "https://example.com/tie", TIMESTAMP),
        Document("same url, earlier", "https://example.com/tie", "2019-04-25T12:57:53Z"),
    ]
    return docs + many_documents(120)


@pytest.mark.parametrize("sort, run_bytes, part_bytes", [
    ("runs", None, None),  # one sorted run a shard: its staged lines go straight into the c4json shard
    ("runs", 2_000, None),  # many runs a shard, merged by the sort key each run line carries
    ("shuffle", None, 3_000),  # md5(url) parts through the shuffle
])
@pytest.mark.pipeline
def test_beam_shards_are_the_bytes_of_the_plain_writer(tmp_path, monkeypatch, sort, run_bytes, part_bytes):
    if part_bytes:
        monkeypatch.setattr(sources, "PART_BYTES", part_bytes)
    docs, num_shards = staged_documents(), 3
    out = tmp_path / "beam"
    pipeline = beam.Pipeline(options=PipelineOptions(["--shard_sort", sort]))
    pipeline | beam.Create(docs) | sources.WriteShards(str(out), formats=FORMATS, num_shards=num_shards, run_bytes=run_bytes)
    result = pipeline.run()
    result.wait_until_finish()
    staged = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"] if c.key.metric.namespace == sources.WRITE_NAMESPACE}
    assert staged[{"runs": "runs", "shuffle": "parts"}[sort]] >= (num_shards if run_bytes is None and part_bytes is None else 2 * num_shards)
    ordered = sorted(docs, key=lambda d: shard_io.sort_key(shards.document_row(d)))
    for fmt in FORMATS:
        for index in range(num_shards):
            name = shard_name("c4", "train", index, num_shards, fmt)
            expected = write_shard([d for d in ordered if shard_index(d.url, num_shards) == index], tmp_path / "plain" / name, fmt)
            assert (out / fmt / name).read_bytes() == open(expected, "rb").read(), (sort, name)
    assert sum(1 for _ in read_documents(sorted(out.glob("c4json/*.json.gz")))) == len(docs)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("_")) == sorted(FORMATS)  # a folder per format


def test_a_staged_line_is_the_c4json_line_and_gives_the_row_back():
    for doc in staged_documents()[:-100]:
        row = shards.document_row(doc)
        _, _, _, staged = shard_io.encode_row(doc, 1)
        assert staged.count(shard_io.STAGED_SEPARATOR) == 1 and b"\n" not in staged
        assert staged.split(shard_io.STAGED_SEPARATOR)[0] == shards.json_line(row, "c4json")
        assert shard_io.decode_row(staged) == row


def test_runs_merge_by_their_stored_key_then_the_line_without_decoding_a_row(tmp_path):
    # write_run keeps each row's sort key ahead of its line; the merge orders by (key, line), a
    # total order, so a tie on the key (one record read from two files) is broken the same way
    # whichever run each copy is in.
    rows = [(["a" * 32, "https://example.com/\udfff\tx", None, "0"], b'{"text":"2"}\tmeta'),
            (["a" * 32, "https://example.com/\udfff\tx", None, "0"], b'{"text":"1"}\tmeta'),
            (["b" * 32, "https://example.com/", "2019-04-25T12:57:53Z", "1"], b'{"text":"3"}\t{}'),
            (["0" * 32, "https://example.com/\u00e9", "2019-04-25T12:57:53Z", "f"], b'{"text":"0"}\t{}')]
    paths = []
    for number, run in enumerate((rows[:2], rows[2:])):
        path = str(tmp_path / f"run-{number}.jsonl.zst")
        shard_io.write_run(path, sorted(run))
        paths.append(path)
    assert list(shard_io.read_run(paths[0])) == sorted(rows[:2])
    assert list(shard_io.merged_runs(paths)) == [line for _, line in sorted(rows)]
    assert list(shard_io.merged_runs(paths[1:])) == [line for _, line in sorted(rows[2:])]
