"""Beam wiring for reading crawl files and writing document shards.

``ReadCrawlFiles`` reads many WARC/WET files in parallel (one file per work item, spread
by a Reshuffle) and splits what it reads into three PCollections: ``documents`` (WET
conversion records), ``pages`` (WARC HTML responses) and ``errors`` (bad input, as
dicts with file, offset, reason). Every count goes to a Beam counter in the
``read-archive`` namespace. ``WriteShards`` writes documents as a complete, sorted,
numbered shard set, whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import io
import json

import apache_beam as beam
import zstandard
from apache_beam.metrics import Metrics

from corpus import storage
from corpus.records import Document, HtmlPage, ReadError
from corpus.shards import ShardFile, document_row, shard_name
from corpus.warc import ReadStats, read_archive

READ_NAMESPACE = "read-archive"
WRITE_NAMESPACE = "write-shards"


class _ReadFileFn(beam.DoFn):
    def __init__(self, text_mode: str):
        self.text_mode = text_mode

    def process(self, path: str):
        stats = ReadStats()
        try:
            for item in read_archive(path, text_mode=self.text_mode, stats=stats):
                if isinstance(item, Document):
                    yield item
                elif isinstance(item, HtmlPage):
                    yield beam.pvalue.TaggedOutput("pages", item)
                elif isinstance(item, ReadError):
                    yield beam.pvalue.TaggedOutput("errors", item.to_dict())
        finally:  # a failing worker still reports what it counted
            for key, value in stats.counts.items():
                Metrics.counter(READ_NAMESPACE, key).inc(value)


class ReadCrawlFiles(beam.PTransform):
    """PCollection of file paths/URLs -> tagged ``documents``, ``pages``, ``errors``."""

    def __init__(self, text_mode: str = "faithful"):
        super().__init__()
        self.text_mode = text_mode

    def expand(self, paths):
        return (
            paths
            | "Spread files over workers" >> beam.Reshuffle()
            | "Read records" >> beam.ParDo(_ReadFileFn(self.text_mode)).with_outputs("pages", "errors", main="documents")
        )


# Characters of encoded rows one part holds: a shard is cut into ceil(size / PART_BYTES)
# parts by ranges of md5(url), so no worker ever sorts more than about this much at once.
PART_BYTES = 64 << 20
# Parts are zstd-compressed JSON lines (level 1: parts are read back once, by the merge).
PART_ZSTD_LEVEL = 1


def _encode_row(doc: Document, count: int):
    """(shard, md5(url) as an int, sort key, JSON line of the row) for one document."""
    row = document_row(doc)
    digest = hashlib.md5(row["url"].encode("utf-8")).hexdigest()
    line = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    key = (digest, row["url"], row["timestamp"], hashlib.md5(row["text"].encode("utf-8")).hexdigest())
    return int(digest, 16) % count, int(digest[:16], 16), key, line


def _to_part(encoded, sizes):
    """((shard, part), (sort key, line)): the part is the shard's md5(url) range of the row."""
    shard, high, key, line = encoded
    parts = max(1, -(-sizes.get(shard, 0) // PART_BYTES))
    return (shard, (high * parts) >> 64), (key, line)


class _WritePartFn(beam.DoFn):
    """Sorts one part (bounded by PART_BYTES) and writes it to the staging folder."""

    def __init__(self, out_dir: str, label: str):
        self.out_dir, self.label = out_dir, label

    def process(self, keyed):
        (shard, part), rows = keyed
        path = storage.staging_path(self.out_dir, "parts", self.label, f"{shard:05d}-{part:05d}.jsonl.zst")
        compressor = zstandard.ZstdCompressor(level=PART_ZSTD_LEVEL)
        with storage.open_write(path) as raw, compressor.stream_writer(raw, closefd=False) as out:
            for _, line in sorted(rows, key=lambda r: r[0]):
                out.write(line + b"\n")
        Metrics.counter(WRITE_NAMESPACE, "parts").inc()
        yield shard, (part, path)


def _read_part(path: str):
    with storage.open_read(path) as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        for line in io.BufferedReader(stream, buffer_size=1 << 20):
            yield json.loads(line)


class _MergeShardFn(beam.DoFn):
    """Streams a shard's parts, in md5(url) order, into one file per format."""

    def __init__(self, out_dir: str, formats, name: str, split: str, count: int):
        self.out_dir, self.formats, self.name, self.split, self.count = out_dir, tuple(formats), name, split, count

    def process(self, keyed):
        index, parts = keyed
        paths = [path for _, path in sorted(p for p in parts if p is not None)]
        files = [ShardFile(storage.join(self.out_dir, shard_name(self.name, self.split, index, self.count, fmt)), fmt)
                 for fmt in self.formats]
        try:
            for path in paths:
                for row in _read_part(path):
                    for shard in files:
                        shard.write(row)
        except BaseException:
            for shard in files:
                shard.abort()
            raise
        for shard in files:
            yield shard.commit()


class WriteShards(beam.PTransform):
    """Documents -> ``<name>-<split>.NNNNN-of-MMMMM.<ext>`` in every format, every index present.

    Streaming, with bounded memory: a document goes to shard ``md5(url) % N``; each shard
    is cut into parts by ranges of md5(url), sized from the shard's total (``PART_BYTES``);
    each part is sorted in memory by (md5(url), url, timestamp, md5(text)) and staged as a
    compressed file under ``_temporary/parts/``; one merge per shard then streams its parts
    in order into every format at once. Since parts are ranges of the sort key, a shard's
    order is the same whatever the number of parts or workers. The manifest entries of the
    files go to ``_temporary/written-<name>-<split>.json`` for the job's ``_SUCCESS``.
    """

    def __init__(self, out_dir: str, *, formats=("c4json",), name: str = "c4", split: str = "train", num_shards: int = 1):
        super().__init__()
        self.out_dir, self.formats, self.name, self.split, self.num_shards = out_dir, tuple(formats), name, split, num_shards

    def expand(self, docs):
        count, label, out_dir = self.num_shards, f"{self.name}-{self.split}", self.out_dir
        encoded = docs | "Encode rows" >> beam.Map(_encode_row, count)
        sizes = (encoded
                 | "Row sizes" >> beam.Map(lambda e: (e[0], len(e[3])))
                 | "Shard sizes" >> beam.CombinePerKey(sum))
        parts = (encoded
                 | "Key by shard part" >> beam.Map(_to_part, beam.pvalue.AsDict(sizes))
                 | "Group by shard part" >> beam.GroupByKey()
                 | "Sort and stage parts" >> beam.ParDo(_WritePartFn(out_dir, label)))
        every_index = docs.pipeline | "Every shard index" >> beam.Create([(i, None) for i in range(count)])
        return (
            (parts, every_index)
            | "Merge shard indices" >> beam.Flatten()
            | "Group parts by shard" >> beam.GroupByKey()
            | "Merge parts into shards" >> beam.ParDo(_MergeShardFn(out_dir, self.formats, self.name, self.split, count))
            | "Collect file entries" >> beam.combiners.ToList()
            | "Record written files" >> beam.Map(lambda infos: storage.record_written(out_dir, label, infos))
        )


class WriteErrors(beam.PTransform):
    """Error dicts -> ``errors/errors.jsonl``, sorted by file and offset (one small file)."""

    def __init__(self, out_dir: str):
        super().__init__()
        self.out_dir = out_dir

    def expand(self, errors):
        out_dir = self.out_dir
        return (
            errors
            | "Collect errors" >> beam.combiners.ToList()
            | "Write errors" >> beam.Map(lambda rows: write_errors(rows, out_dir))
        )


ERRORS_FILE = "errors/errors.jsonl"


def write_errors(rows: list[dict], out_dir: str) -> str:
    """Write the error rows as JSON lines, atomically; returns the path."""
    path = storage.join(out_dir, ERRORS_FILE)
    ordered = sorted(rows, key=lambda r: (r["source"], r["offset"], r["reason"]))
    storage.write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ordered))
    return path
