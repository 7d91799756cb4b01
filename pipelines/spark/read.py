"""``corpusforge read`` on Spark: crawl files -> document shards, as ``pipelines.read``
wires it for Beam: one partition per file read by ``shard_io.crawl_records``, the reader's
tallies counted in ``read-archive``, bad input to the errors file, shards by
``SparkJob.write_shards``. ``read_crawl_files`` is every Spark job's crawl reader (the
twin of ``sources.ReadCrawlFiles``)."""

from __future__ import annotations

from common.decision import OTHER
from corpus.records import Document, ReadError
from corpus.warc import MAX_RECORD_BYTES, ReadStats
from pipelines.shard_io import READ_NAMESPACE, crawl_records, write_errors
from pipelines.spark.engine import SparkJob, on_worker, tally_of


def _read_records(kind, text_mode, max_record_bytes, verify_digest, tallies, errors, beam_args):
    def run(items):
        on_worker(beam_args)
        for _, path in items:
            stats, bad = ReadStats(), []
            try:
                for item in crawl_records(path, text_mode, stats, max_record_bytes, verify_digest):
                    if isinstance(item, kind):
                        yield item
                    elif isinstance(item, ReadError):
                        bad.append(item.to_dict())
            finally:  # a failing worker still reports what it counted
                tallies.add(tally_of((READ_NAMESPACE,), stats.counts, OTHER))
            errors.add(bad)
    return run


def read_crawl_files(job: SparkJob, files: list[str], kind: type, text_mode: str,
                     max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
    """The records of class ``kind`` of ``files`` (``Document``: WET conversion records;
    ``HtmlPage``: WARC HTML responses), one partition per file; read errors to the job's errors."""
    return job.over_partitions(job.files(files), _read_records, kind, text_mode, max_record_bytes, verify_digest)


def run(spark, files: list[str], args, beam_args=()) -> dict:
    """Read ``files`` into ``args.output`` (claimed by the caller's ``begin_job``); returns the counters."""
    job = SparkJob(spark, beam_args)
    docs = read_crawl_files(job, files, Document, args.text_mode, args.max_record_bytes, args.verify_digest).map(lambda doc: (0, doc))
    job.write_shards(docs, args.output, args.format, args.name, [(args.split, args.num_shards)])
    write_errors(job.error_rows(), args.output)
    return job.counters()
