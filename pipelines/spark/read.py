"""``read_crawl_files``: every Spark job's crawl reader, ``shard_io.CrawlRecordReader`` (the
reader ``ReadFiles`` runs in ``corpusforge read``'s declaration, ``pipelines.read.job``) through
the one Spark file loop, ``pipelines.spark.plan.read_files``."""

from __future__ import annotations

import functools

from corpus.warc import MAX_RECORD_BYTES
from pipelines.shard_io import CrawlRecordReader
from pipelines.spark.engine import SparkJob
from pipelines.spark.plan import read_files


def read_crawl_files(job: SparkJob, files: list[str], kind: type, text_mode: str,
                     max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
    """The records of class ``kind`` of ``files`` (``Document``: WET conversion records;
    ``HtmlPage``: WARC HTML responses), one partition per file; read errors to the job's errors."""
    return read_files(job, files, functools.partial(CrawlRecordReader, kind, text_mode, max_record_bytes, verify_digest))
