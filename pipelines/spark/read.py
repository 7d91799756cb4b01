"""``corpusforge read`` on Spark: crawl files -> document shards, as ``pipelines.read``
wires it for Beam: one partition per file read by ``sources.crawl_records``, the reader's
tallies counted in ``read-archive``, bad input to the errors file, shards by
``SparkJob.write_shards``."""

from __future__ import annotations

from common.decision import OTHER
from corpus.records import Document, ReadError
from corpus.warc import ReadStats
from pipelines.sources import READ_NAMESPACE, crawl_records, write_errors
from pipelines.spark.engine import SparkJob, on_worker, tally_of


def _read_documents(text_mode, max_record_bytes, verify_digest, tallies, errors, beam_args):
    def run(items):
        on_worker(beam_args)
        for _, path in items:
            stats, bad = ReadStats(), []
            try:
                for item in crawl_records(path, text_mode, stats, max_record_bytes, verify_digest):
                    if isinstance(item, Document):
                        yield 0, item
                    elif isinstance(item, ReadError):
                        bad.append(item.to_dict())
            finally:  # a failing worker still reports what it counted
                tallies.add(tally_of((READ_NAMESPACE,), stats.counts, OTHER))
            errors.add(bad)
    return run


def run(spark, files: list[str], args, beam_args=()) -> dict:
    """Read ``files`` into ``args.output`` (claimed by the caller's ``begin_job``); returns the counters."""
    job = SparkJob(spark, beam_args)
    docs = job.over_partitions(job.files(files), _read_documents, args.text_mode, args.max_record_bytes, args.verify_digest)
    job.write_shards(docs, args.output, args.format, args.name, [(args.split, args.num_shards)])
    write_errors(job.error_rows(), args.output)
    return job.counters()
