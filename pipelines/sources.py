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
import json
import os

import apache_beam as beam
from apache_beam.metrics import Metrics

from corpus.atomic import write_atomically
from corpus.records import Document, HtmlPage, ReadError
from corpus.shards import shard_index, shard_name, write_shard
from corpus.warc import ReadStats, read_archive

READ_NAMESPACE = "read-archive"


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


def document_sort_key(doc: Document) -> tuple:
    """Order inside a shard: by URL, then timestamp, then text hash — stable on any runner."""
    return (doc.url, doc.timestamp, hashlib.md5(doc.text.encode("utf-8", "surrogatepass")).hexdigest())


class _WriteShardFn(beam.DoFn):
    def __init__(self, out_dir: str, fmt: str, name: str, split: str, count: int):
        self.out_dir, self.fmt, self.name, self.split, self.count = out_dir, fmt, name, split, count

    def process(self, keyed):
        index, docs = keyed
        path = os.path.join(self.out_dir, shard_name(self.name, self.split, index, self.count, self.fmt))
        write_shard(sorted(docs, key=document_sort_key), path, self.fmt)
        yield path


class WriteShards(beam.PTransform):
    """Documents -> ``<name>-<split>.NNNNN-of-MMMMM.<ext>``, every index present, each sorted."""

    def __init__(self, out_dir: str, *, fmt: str = "c4json", name: str = "c4", split: str = "train", num_shards: int = 1):
        super().__init__()
        self.out_dir, self.fmt, self.name, self.split, self.num_shards = out_dir, fmt, name, split, num_shards

    def expand(self, docs):
        count = self.num_shards
        keyed = docs | "Key by shard" >> beam.Map(lambda d: (shard_index(d.url, count), d))
        every_index = docs.pipeline | "Every shard index" >> beam.Create([(i, None) for i in range(count)])
        return (
            (keyed, every_index)
            | "Merge shard indices" >> beam.Flatten()
            | "Group by shard" >> beam.GroupByKey()
            | "Drop placeholders" >> beam.MapTuple(lambda i, docs: (i, [d for d in docs if d is not None]))
            | "Write shard" >> beam.ParDo(_WriteShardFn(self.out_dir, self.fmt, self.name, self.split, count))
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


def write_errors(rows: list[dict], out_dir: str) -> str:
    """Write the error rows as JSON lines, atomically; returns the path."""
    folder = os.path.join(out_dir, "errors")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "errors.jsonl")
    ordered = sorted(rows, key=lambda r: (r["source"], r["offset"], r["reason"]))
    write_atomically(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in ordered))
    return path
