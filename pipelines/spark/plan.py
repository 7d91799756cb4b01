"""Native Spark's interpretation of a job's declaration (``pipelines.plan``), step kind by
step kind as ``pipelines.beam.plan`` wires them for Beam, with the same rules, namespaces
and readers: ``mapPartitions`` for every per-record rule; records staged under the output
(``pipelines.spark.staging``) so that ``combineByKey`` (``NewestPerKey``) and the text
dedup's claims (``pipelines.spark.dedupe``) shuffle references only; shards by
``SparkJob.write_shards``. ``read_files`` is every Spark job's file reader loop.
"""

from __future__ import annotations

from common import storage
from pipelines.plan import DedupeText, FileCounts, NewestPerKey, Plan, Rule, WriteShards
from pipelines.shard_io import write_errors
from pipelines.spark.dedupe import dedupe_text
from pipelines.spark.engine import SparkJob, merge_tallies, on_worker, tally_of
from pipelines.spark.staging import load, stage
from pipelines.tally import Tally


def _files_read(make_reader, tallies, errors, beam_args):
    def run(items):
        on_worker(beam_args)
        reader = make_reader()
        try:
            for index, path in items:
                counted, bad = FileCounts(), []
                try:
                    for out in reader.read(index, path, counted):
                        if isinstance(out, dict):
                            bad.append(out)
                        else:
                            yield out
                finally:  # a failing worker still reports what it counted
                    tallies.add(_document(counted))
                errors.add(bad)
        finally:
            reader.close()
    return run


def _document(counted: FileCounts) -> dict:
    """One file's counts as one accumulator update (every namespace of every tally)."""
    return merge_tallies(tally_of(namespaces, tally.counts, tally.units, tally.examples) for namespaces, tally in counted.items())


def read_files(job: SparkJob, files: list[str], make_reader):
    """The records of ``files`` (one partition per file) by ``make_reader()``'s reader (a
    ``pipelines.plan.FileReader``, one per task); error dicts to the job's errors."""
    return job.over_partitions(job.files(files), _files_read, make_reader)


def _best_of_one(item):
    return item, 1


def _best_with(better):
    def add(best, item):
        return better(best[0], item), best[1] + 1
    return add


def _best_of_both(better):
    def merge(a, b):
        return better(a[0], b[0]), a[1] + b[1]
    return merge


def _listed(pattern: str) -> list[str]:
    """Every line of every file ``pattern`` matches (as Beam's ``ReadFromText``)."""
    paths = storage.glob(pattern) if storage.has_magic(pattern) else [pattern]
    lines = []
    for path in paths:
        text = storage.read_text(path)
        lines.extend(line.rstrip("\r") for line in text.split("\n")[: -1 if text.endswith("\n") else None])
    return lines


def _newest_per_key(job: SparkJob, records, step: NewestPerKey, out_dir: str):
    input_partitions = records.getNumPartitions()
    staged = stage(job, records, out_dir, step.stage, step.key)  # (ref, (group, *rank))
    keyed = staged.map(lambda ref_key: (ref_key[1][0], (*ref_key[1][1:], ref_key[0])))
    better = step.better
    best = job.keyed(keyed.combineByKey(_best_of_one, _best_with(better), _best_of_both(better), job.partitions),
                     step.namespaces, step.rule)
    if step.join is not None:
        join = step.join
        normalise = join.normalise
        listed = job.sc.parallelize(_listed(join.path), job.partitions).map(lambda line: (normalise(line.strip()), None))
        best = job.keyed(best.cogroup(listed, job.partitions), join.namespaces, join.rule)
    refs = best.map(lambda group_kept: (group_kept[1][-1], None))
    return load(job, refs, out_dir, step.stage, max(job.partitions, input_partitions)).map(lambda record_payloads: record_payloads[0])


def _by_split(write: WriteShards, tallies, beam_args):
    """Each record -> ``(split position, document)``, counted in its split's namespace as
    Beam's ``<step> <split> documents`` steps count."""
    split_of, to_document, splits = write.split_of, write.to_document, write.splits

    def run(records):
        on_worker(beam_args)
        per_split = [Tally() for _ in splits]
        for record in records:
            position = split_of(record)
            decision = to_document(record)
            per_split[position].add(decision)
            if decision.record is not None:
                yield position, decision.record
        for (split, _), tally in zip(splits, per_split, strict=True):
            if tally.counts:
                tallies.add(tally_of((split,), tally.counts, tally.units, tally.examples))
    return run


def run(spark, plan: Plan, files: list[str], out_dir: str, beam_args=()) -> dict:
    """Run ``plan`` on ``spark`` into ``out_dir`` (claimed by the caller); returns
    _stats.json's ``counters``, ``examples`` and ``units``."""
    job = SparkJob(spark, beam_args)
    records = read_files(job, files, plan.read.reader)
    for step in plan.steps:
        if isinstance(step, Rule):
            records = job.step(records, step.namespaces, step.rule)
        elif isinstance(step, NewestPerKey):
            records = _newest_per_key(job, records, step, out_dir)
        elif isinstance(step, DedupeText):
            records = dedupe_text(job, records, step.mode, step.min_num_sentences, step.punkt, out_dir)
        else:  # Plan refuses any other kind when it is declared
            raise TypeError(f"no Spark wiring for {step!r}")
    write = plan.write
    if write.split_of is None:
        docs = records.map(lambda doc: (0, doc))
    else:
        docs = records.mapPartitions(_by_split(write, job.tallies, job.beam_args))
    job.write_shards(docs, out_dir, write.formats, write.name, list(write.splits))
    job.release()
    write_errors(job.error_rows(), out_dir)
    return {"counters": job.counters(), "examples": job.examples(), "units": job.units(), "kernels": job.kernels()}
