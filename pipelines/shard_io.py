"""Reading one crawl file and writing one shard, for every engine: Beam's steps
(``pipelines.sources``) and Spark's (``pipelines.spark``) call the same functions, so both
write the same bytes.

- ``crawl_records``: the records of one WARC/WET file, with the live progress tally;
  ``CrawlRecordReader``, the records of one class as a ``pipelines.plan.FileReader``.
- ``encode_row``: a document as the line staged for its shard, with its shard and sort key
  (md5(url), url, timestamp, md5(text)); ``decode_row`` reads it back.
- ``write_shard``: one shard in every format from its staged lines, in shard order.
- ``write_errors``: the error rows of a run (``ERRORS_FILE``); ``read_nothing``: whether a run
  read not one record.

Beam-free: a Spark worker loads this, not Beam. Tests: ``tests/test_shards.py``.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import json
import random

import zstandard

from common import storage
from common.decision import OTHER
from corpus.records import Document, ReadError
from corpus.shards import ShardFile, document_row, json_line, shard_relpath
from corpus.warc import MAX_RECORD_BYTES, ReadStats, read_archive
from pipelines import progress

READ_NAMESPACE = "read-archive"  # the archive reader's counters (records, errors by reason)
# A job's input problems, one JSON line each (file, offset, reason); "_" so that readers of the
# output folder (Spark, pyarrow.dataset, ...) take it for bookkeeping, not data.
ERRORS_FILE = "_errors/errors.jsonl"

WRITE_NAMESPACE = "write-shards"
# The shard writer's tallies: sorted units of work staged (an engine's own bookkeeping, so
# they differ by engine and runner; no document count depends on them).
WRITTEN_PARTS = "parts"
WRITTEN_RUNS = "runs"


def crawl_records(path: str, text_mode: str, stats: ReadStats, max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
    """The records of one crawl file (``Document``, ``HtmlPage``, ``ReadError``), with the
    live progress; ``stats`` holds the reader's tallies. One file's reading for every engine."""
    items = 0
    try:
        for items, item in enumerate(read_archive(path, text_mode=text_mode, stats=stats, max_record_bytes=max_record_bytes,
                                                  verify_digest=verify_digest), start=1):
            progress.record_read(items)
            yield item
    finally:
        progress.file_read(items)


class CrawlRecordReader:
    """The records of class ``kind`` of each crawl file (``Document``: WET conversion records;
    ``HtmlPage``: WARC HTML responses) and its read errors as dicts, the reader's tallies
    counted in ``read-archive``: a ``pipelines.plan.FileReader`` (``ReadFiles``)."""

    def __init__(self, kind: type, text_mode: str, max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
        self.kind, self.text_mode, self.max_record_bytes, self.verify_digest = kind, text_mode, max_record_bytes, verify_digest

    def read(self, index: int, path: str, counted):
        stats = ReadStats()
        try:
            for item in crawl_records(path, self.text_mode, stats, self.max_record_bytes, self.verify_digest):
                if isinstance(item, self.kind):
                    yield item
                elif isinstance(item, ReadError):
                    yield item.to_dict()
        finally:  # a failing worker still reports what it counted
            counted.add(READ_NAMESPACE, stats.counts, OTHER)  # the reader's tallies (records, errors): no decisions

    def close(self) -> None:
        pass


def sort_key(row: dict) -> tuple:
    """A shard's order: (md5(url), url, timestamp, md5(text)). Rows equal on it (one record
    read twice, from two files) may differ in ``meta``: every sort breaks that tie by the
    staged line itself, so a shard's bytes never depend on which worker or run a row came from."""
    return (hashlib.md5(row["url"].encode("utf-8")).hexdigest(), row["url"], row["timestamp"],
            hashlib.md5(row["text"].encode("utf-8")).hexdigest())


# What WriteShards stages for a row: the row's c4json line (``json_line``), a tab, and the
# JSON of its ``meta`` (JSON escapes every control character, so the tab is the only one).
# The merge writes the first part into c4json shards as it is: the row is encoded once.
STAGED_FORMAT = "c4json"
STAGED_SEPARATOR = b"\t"


def encode_row(doc: Document, count: int):
    """(shard, md5(url) as an int, sort key, staged line of the row) for one document."""
    row = document_row(doc)
    key = sort_key(row)
    line = json_line(row, STAGED_FORMAT) + STAGED_SEPARATOR + json.dumps(row["meta"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return int(key[0], 16) % count, int(key[0][:16], 16), key, line


def decode_row(staged: bytes) -> dict:
    """The row of a staged line (``encode_row``)."""
    line, _, meta = staged.partition(STAGED_SEPARATOR)
    row = json.loads(line)
    row["meta"] = json.loads(meta)
    return row


# Staged shard lines (parts and sorted runs) are zstd-compressed JSON lines (level 1: read back
# once, by the merge).
PART_ZSTD_LEVEL = 1
# Rows one sorted run holds: what one worker sorts in memory at once (Beam's ``--shard_sort
# runs``; Spark's shard writer).
RUN_BYTES = 64 << 20


def new_run_id() -> int:
    """A run file's id, drawn per attempt: a retried task writes new files, and nothing refers
    to a failed attempt's."""
    return random.SystemRandom().getrandbits(63)


def run_path(out_dir: str, label: str, shard: int, run_id: int) -> str:
    """Where shard ``shard`` of ``label`` (``<name>-<split>``) keeps a sorted run until the commit."""
    return storage.staging_path(out_dir, "runs", label, f"{shard:05d}-{run_id:016x}.jsonl.zst")


def write_staged_lines(path: str, lines) -> None:
    compressor = zstandard.ZstdCompressor(level=PART_ZSTD_LEVEL)
    with storage.open_write(path) as raw, compressor.stream_writer(raw, closefd=False) as out:
        for line in lines:
            out.write(line + b"\n")


def read_staged_lines(path: str):
    """The staged lines of a part or run, in order, without their newlines."""
    with storage.open_read(path) as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        for line in io.BufferedReader(stream, buffer_size=1 << 20):
            yield line[:-1]


# A sorted run's line carries its row's sort key ahead of the staged line, as JSON (ASCII: any
# URL round-trips) and a tab, so the merge orders rows by (sort key, line) without decoding
# and hashing each row again.
RUN_KEY_SEPARATOR = b"\t"


def write_run(path: str, rows) -> None:
    """A sorted run: ``(sort key, staged line)`` pairs, already in (sort key, line) order."""
    write_staged_lines(path, (json.dumps(key, separators=(",", ":")).encode("ascii") + RUN_KEY_SEPARATOR + line for key, line in rows))


def read_run(path: str):
    """``(sort key as a list, staged line)`` of each row of a run (``write_run``), in order."""
    for raw in read_staged_lines(path):
        key, _, line = raw.partition(RUN_KEY_SEPARATOR)
        yield json.loads(key), line


def merged_runs(paths):
    """Staged lines of sorted runs (``write_run``), merged into one stream in (sort key, line)
    order, a total order (one open run per path)."""
    if len(paths) == 1:
        return (line for _, line in read_run(paths[0]))
    return (line for _, line in heapq.merge(*(read_run(path) for path in paths)))


def write_shard(out_dir: str, formats, name: str, split: str, index: int, count: int, lines) -> tuple[list[dict], int]:
    """Shard ``index`` of ``count`` in every format from its staged lines (``encode_row``),
    already in shard order: (the files' manifest entries, rows written). Every engine's
    last step, so a shard has the same bytes whoever ordered its rows. Each format goes to
    its ``shard_relpath`` (a folder per format when there are several). A shard that no
    document falls in is not written (no entry): an empty gzip stream is a file that
    polars and ``pyarrow.dataset`` refuse, and the manifest lists the shards there are."""
    formats = tuple(formats)
    relpaths = [shard_relpath(name, split, index, count, fmt, formats) for fmt in formats]
    files = [ShardFile(storage.join(out_dir, *relpath.split("/")), fmt, manifest_name=relpath) for fmt, relpath in zip(formats, relpaths, strict=True)]
    staged = [shard for shard in files if shard.fmt == STAGED_FORMAT]  # take the staged line as it is
    decoded = [shard for shard in files if shard.fmt != STAGED_FORMAT]
    written = 0
    try:
        for line in lines:
            written += 1
            for shard in staged:
                shard.write_line(line[: line.index(STAGED_SEPARATOR)])
            if decoded:
                row = decode_row(line)
                for shard in decoded:
                    shard.write(row)
    except BaseException:
        for shard in files:
            shard.abort()
        raise
    if not written:
        for shard in files:
            shard.abort()
        return [], 0
    return [shard.commit() for shard in files], written


def write_errors(rows: list[dict], out_dir: str) -> str:
    """Write the error rows as JSON lines, atomically; returns the path."""
    path = storage.join(out_dir, ERRORS_FILE)
    ordered = sorted(rows, key=lambda r: (r["source"], r["offset"], r["reason"]))
    storage.write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ordered))
    return path


def read_nothing(counters: dict) -> bool:
    """Whether the run found input problems and not a single WARC record."""
    read = counters.get(READ_NAMESPACE, {})
    records = sum(v for k, v in read.items() if k.startswith("records:"))
    return records == 0 and any(k.startswith("error:") for k in read)
