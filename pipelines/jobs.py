"""A job's bookkeeping, the same for every recipe: claim the output folder before the
pipeline runs, read the finished pipeline's counters and error examples, write
``_stats.json`` and then the ``_SUCCESS`` manifest (``common.storage``'s output contract).

Every bookkeeping name starts with ``_`` (``_stats.json``, ``_errors/``, ``_SUCCESS``,
``_temporary/``), Hadoop's mark of a file that is not data, so Spark, ``pyarrow.dataset``,
polars, DuckDB and ``datasets`` read an output folder as the corpus alone (docs/formats.md).
"""

from __future__ import annotations

import json
import logging

from common import storage
from corpus import native
from pipelines.shard_io import ERRORS_FILE, read_nothing
from pipelines.tally import EXAMPLES_PER_REASON, slow_kernels

log = logging.getLogger("corpusforge")

STATS_FILE = "_stats.json"
# The bookkeeping names of folders written before the "_" layout: their shards still read
# (readers skip a bare .json and sub-folders), and a job that overwrites one removes them.
OLD_LAYOUT_FILES = ("stats.json", "errors/errors.jsonl", "removed.jsonl")


def begin_job(output: str, job: str, overwrite: bool = False, keep: tuple[str, ...] = ()) -> str:
    """Before a job writes into ``output``: refuse a non-empty folder unless ``overwrite``,
    drop the old ``_SUCCESS``, mark the job as started (``common.storage``'s output
    contract). Call after the pipeline object exists, so that FileSystems has the job's
    options (S3 endpoint, credentials), and before the pipeline runs."""
    native.take_used()  # this thread's earlier kernel uses are not this job's (_stats.json's ``kernels``)
    return storage.begin_output(output, job, overwrite=overwrite, keep=keep)


def finish_job(output: str, job: str, stats: dict, extra_files: tuple[str, ...] = (), *, expect_written: bool = False) -> dict | None:
    """After the pipeline finished: ``_stats.json``, then the ``_SUCCESS`` manifest, last.

    A job that read not one record commits nothing (None): its folder keeps the claim,
    marked with why, so readers refuse it. ``expect_written``: the job's shard writers
    always record their files, so a commit that finds none is refused."""
    if read_nothing(stats["counters"]):
        storage.abandon_output(output, "it read no record from any input file")
        return None
    for kernel, states in slow_kernels(stats.get("kernels", {})).items():  # the workers' own lines are in their logs
        log.warning("C kernel %s did not run everywhere (%s): those workers took the numpy/Python path, the same "
                    "results several times slower; give their image a C compiler (cc, or set CC)", kernel, "; ".join(states))
    write_json(storage.join(output, STATS_FILE), stats)
    return storage.commit_output(output, job, extra_files=(STATS_FILE, ERRORS_FILE) + tuple(extra_files),
                                 expect_written=expect_written, replaces=OLD_LAYOUT_FILES)


def counters_of(result) -> dict[str, dict[str, int]]:
    """All Beam counters of a finished pipeline, as {namespace: {name: value}}."""
    out: dict[str, dict[str, int]] = {}
    for counter in result.metrics().query()["counters"]:
        name = counter.key.metric
        value = counter.committed if counter.committed is not None else counter.attempted
        namespace = out.setdefault(name.namespace, {})
        namespace[name.name] = namespace.get(name.name, 0) + value
    return {ns: dict(sorted(values.items())) for ns, values in sorted(out.items())}


def error_examples(out_dir: str) -> dict[str, list[dict]]:
    path = storage.join(out_dir, ERRORS_FILE)
    examples: dict[str, list[dict]] = {}
    if storage.is_file(path):
        for line in storage.read_text(path).splitlines():
            if line:
                row = json.loads(line)
                bucket = examples.setdefault(row["reason"], [])
                if len(bucket) < EXAMPLES_PER_REASON:
                    bucket.append(row)
    return examples


def write_json(path: str, value) -> None:
    storage.write_atomically(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def read_status(stats: dict) -> int:
    """A reading job's exit code: 1 when not one record could be read from the inputs (e.g. a
    ``.wet.gz`` that is not gzip): the job ran, but what it was given is not what was meant."""
    if read_nothing(stats["counters"]):
        log.error("no WARC record could be read from any input file (the summary lists the errors by reason)")
        return 1
    return 0
