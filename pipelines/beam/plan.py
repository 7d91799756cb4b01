"""Apache Beam's interpretation of a job's declaration (``pipelines.plan``): ``build`` wires
a ``Plan`` into a pipeline, ``run`` runs it and returns _stats.json's ``counters``,
``examples`` and ``units``. Each step kind has one wiring here; its twin on Spark is
``pipelines.spark.plan``, and the byte-identity tests keep the two equal.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import progress
from pipelines.beam_package import stage_setup_file
from pipelines.dedupe import DedupeText
from pipelines.jobs import counters_of
from pipelines.plan import DedupeText as DedupeTextStep
from pipelines.plan import FileCounts, NewestPerKey, Plan, Rule, WriteShards, namespace_tuple
from pipelines.sources import WriteErrors
from pipelines.sources import WriteShards as WriteShardsTransform
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import Steps, collect_examples, count, flush_counts, kernels_of, units_of


class _ReadFilesFn(beam.DoFn):
    """``ReadFiles``: records out, error dicts to ``errors``, each file's counts flushed after it."""

    def __init__(self, make_reader):
        self.make_reader = make_reader
        self.reader = None

    def setup(self):
        self.reader = self.make_reader()

    def teardown(self):
        if self.reader is not None:
            self.reader.close()

    def process(self, item):
        index, path = item
        counted = FileCounts()
        try:
            for out in self.reader.read(index, path, counted):
                yield beam.pvalue.TaggedOutput("errors", out) if isinstance(out, dict) else out
        finally:  # a failing worker still reports what it counted
            for namespaces, tally in counted.items():
                count(namespaces, tally.counts, tally.units)
        for namespaces, tally in counted.items():
            yield from flush_examples(namespaces, tally)


def flush_examples(namespaces, tally):
    """A tally's sampled drops to the ``examples`` output (its counters are flushed already)."""
    return flush_counts(namespaces, {}, tally.examples, windowed=False)


class _Best(beam.CombineFn):
    """``NewestPerKey``'s combine over ``(*rank, ref)``: the best by ``better``, and how many."""

    def __init__(self, better):
        self.better = better

    def create_accumulator(self):
        return None, 0

    def add_input(self, acc, item):
        best, n = acc
        return (item if best is None else self.better(best, item)), n + 1

    def merge_accumulators(self, accs):
        best, total = None, 0
        for item, n in accs:
            total += n
            if item is not None:
                best = item if best is None else self.better(best, item)
        return best, total

    def extract_output(self, acc):
        return acc


def read_files(pipeline, files: list[str], label: str, make_reader, what: str = "Crawl files"):
    """Every job's file reader on Beam: ``(index, path)`` of ``files`` spread over the
    workers, read by ``make_reader()``'s reader (a ``pipelines.plan.FileReader``, one per
    worker); outputs ``records``, ``errors`` (dicts) and ``examples``."""
    return (
        pipeline
        | what >> beam.Create(list(enumerate(files)))
        | f"Spread {what.lower()} over workers" >> beam.Reshuffle()
        | label >> beam.ParDo(_ReadFilesFn(make_reader)).with_outputs("errors", "examples", main="records")
    )


def _newest_per_key(pipeline, records, step: NewestPerKey, out_dir: str, run_step: Steps):
    n = step.step
    staged = records | f"{n} Stage {step.what}" >> Stage(out_dir, step.stage, step.key)
    best = run_step.keyed(
        staged.refs
        | f"{n} Key by {step.group_name}" >> beam.MapTuple(lambda ref, key: (key[0], (*key[1:], ref)))
        | f"{n} Best per {step.group_name}" >> beam.CombinePerKey(_Best(step.better)),
        f"{n} Count duplicates", step.namespaces, step.rule)
    if step.join is not None:
        join = step.join
        listed = (
            pipeline
            | f"{join.label} Read {join.what}" >> beam.io.ReadFromText(join.path)
            | f"{join.label} Normalise {join.what}" >> beam.Map(lambda line, normalise=join.normalise: (normalise(line.strip()), None))
        )
        joined = (best, listed) | f"{join.label} Join on {step.group_name}" >> beam.CoGroupByKey()
        best = run_step.keyed(joined, f"{join.label} Keep listed", join.namespaces, join.rule)
    return (
        best
        | f"{n} Drop {step.group_name}" >> beam.Values()
        | f"{n} Staged reference" >> beam.Map(lambda kept: (kept[-1], None))
        | f"{n} Read {step.what} back" >> LoadStaged(out_dir, step.stage)
        | f"{n} {step.what}" >> beam.MapTuple(lambda record, _: record)
    )


def _write(records, write: WriteShards, out_dir: str, run_step: Steps) -> None:
    if write.split_of is None:
        (split, num_shards), = write.splits
        records | f"Write {split}" >> WriteShardsTransform(out_dir, formats=write.formats, name=write.name, split=split, num_shards=num_shards)
        return
    parts = records | f"{write.step} Split".strip() >> beam.Partition(lambda record, n, split_of=write.split_of: split_of(record), len(write.splits))
    for index, (split, num_shards) in enumerate(write.splits):
        docs = run_step(parts[index], write.split_label(split), split, write.to_document)
        docs | f"Write {split}" >> WriteShardsTransform(out_dir, formats=write.formats, name=write.name, split=split, num_shards=num_shards)


def build(pipeline: beam.Pipeline, plan: Plan, files: list[str], out_dir: str):
    """Wire ``plan`` over ``files`` into ``out_dir``; returns the examples' write."""
    run_step = Steps()
    read = read_files(pipeline, files, plan.read.label, plan.read.reader)
    run_step.add(read.examples)
    records = read.records
    for step in plan.steps:
        if isinstance(step, Rule):
            records = run_step(records, step.label, namespace_tuple(step.namespaces), step.rule)
        elif isinstance(step, NewestPerKey):
            records = _newest_per_key(pipeline, records, step, out_dir, run_step)
        elif isinstance(step, DedupeTextStep):
            deduped = records | step.label >> DedupeText(step.mode, step.min_num_sentences, out_dir=out_dir, punkt=step.punkt)
            run_step.add(deduped.examples)
            records = deduped.pages
        else:  # Plan refuses any other kind when it is declared
            raise TypeError(f"no Beam wiring for {step!r}")
    _write(records, plan.write, out_dir, run_step)
    read.errors | "Write errors" >> WriteErrors(out_dir)
    return run_step.write_examples(out_dir)


def run(plan: Plan, files: list[str], out_dir: str, beam_args, begin) -> dict:
    """Run ``plan`` on the runner ``beam_args`` name; ``begin()`` claims the output once the
    pipeline (and so the stores' options) exists. Returns ``counters``, ``examples``, ``units``."""
    pipeline = beam.Pipeline(options=PipelineOptions(stage_setup_file(beam_args)))
    begin()
    build(pipeline, plan, files, out_dir)
    result = progress.run_pipeline(pipeline, plan.job, files=len(files))
    return {"counters": counters_of(result), "examples": collect_examples(out_dir), "units": units_of(result), "kernels": kernels_of(result)}
