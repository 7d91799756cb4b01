"""Beam wiring for writing document shards and the errors file. ``WriteShards`` writes
documents as a complete, sorted, numbered shard set, whatever the number of workers;
``WriteErrors`` the run's error rows. Files are read by ``pipelines.beam.plan.read_files``
(every job's reader, with a ``pipelines.plan.FileReader``).
"""

from __future__ import annotations

import itertools

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from common import storage
from common.decision import OTHER
from pipelines import progress
from pipelines.shard_io import (  # noqa: F401  (PART_ZSTD_LEVEL, RUN_BYTES: also the Beam steps' names)
    PART_ZSTD_LEVEL,
    RUN_BYTES,
    WRITE_NAMESPACE,
    WRITTEN_PARTS,
    WRITTEN_RUNS,
    encode_row,
    merged_runs,
    new_run_id,
    read_staged_lines,
    run_path,
    write_errors,
    write_run,
    write_shard,
    write_staged_lines,
)
from pipelines.steps import count

# Characters of encoded rows one part holds: a shard is cut into ceil(size / PART_BYTES)
# parts by ranges of md5(url), so no worker ever sorts more than about this much at once.
PART_BYTES = 64 << 20


SHARD_SORTS = ("auto", "runs", "shuffle")
# Runners whose shuffle spills to disk or a service; the others (the DirectRunner, and the
# FnApiRunner behind PortableRunner and pipelines.portable) hold a shuffle in memory.
SPILLING_RUNNERS = ("dataflow", "flink", "spark", "samza")


class ShardOptions(PipelineOptions):
    """``--shard_sort``: how WriteShards orders a shard (a Beam option every job takes)."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--shard_sort", choices=SHARD_SORTS, default="auto",
            help="runs: sort bounded runs where rows are produced and merge them per shard (no shuffle of text: "
                 "for runners that keep a shuffle in memory); shuffle: group rows into md5(url) parts through the "
                 "runner's shuffle (Dataflow, Flink, Spark); auto: shuffle on Dataflow/Flink/Spark/Samza runners, "
                 "else runs. Both give the same bytes.")


def shard_sort_of(options: PipelineOptions) -> str:
    sort = options.view_as(ShardOptions).shard_sort
    if sort != "auto":
        return sort
    runner = options.view_as(StandardOptions).runner
    name = (runner if isinstance(runner, str) else type(runner).__name__ if runner else "").lower()
    return "shuffle" if any(kind in name for kind in SPILLING_RUNNERS) else "runs"


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
        _write_lines(path, (line for _, line in sorted(rows)))  # (sort key, line): a total order
        count(WRITE_NAMESPACE, {WRITTEN_PARTS: 1}, OTHER)
        yield shard, (part, path)


class _WriteRunsFn(beam.DoFn):
    """``--shard_sort runs``: collects rows where they are produced, up to ``RUN_BYTES``;
    sorts them by (shard, sort key) and stages each shard's slice as one run file."""

    def __init__(self, out_dir: str, label: str, count: int, run_bytes: int):
        self.out_dir, self.label, self.count, self.run_bytes = out_dir, label, count, run_bytes

    def start_bundle(self):
        self.rows, self.bytes = [], 0

    def process(self, doc):
        shard, _, key, line = encode_row(doc, self.count)
        self.rows.append((shard, key, line))
        self.bytes += len(line)
        if self.bytes >= self.run_bytes:
            yield from self._spill()

    def finish_bundle(self):
        for shard_run in self._spill():
            yield WindowedValue(shard_run, MIN_TIMESTAMP, [GlobalWindow()])

    def _spill(self):
        rows, self.rows, self.bytes = self.rows, [], 0
        rows.sort()  # (shard, sort key, line): a total order
        run_id = new_run_id()
        for shard, group in itertools.groupby(rows, key=lambda r: r[0]):
            path = run_path(self.out_dir, self.label, shard, run_id)
            write_run(path, ((key, line) for _, key, line in group))
            count(WRITE_NAMESPACE, {WRITTEN_RUNS: 1}, OTHER)
            yield shard, (0, path)

_write_lines, _read_part, _merged_runs = write_staged_lines, read_staged_lines, merged_runs  # the Beam steps' names


class _MergeShardFn(beam.DoFn):
    """Streams a shard's parts (in md5(url) order) or merges its sorted runs into one file per format."""

    def __init__(self, out_dir: str, formats, name: str, split: str, count: int, sort: str):
        self.out_dir, self.formats, self.name, self.split, self.count, self.sort = out_dir, tuple(formats), name, split, count, sort

    def process(self, keyed):
        index, parts = keyed
        paths = [path for _, path in sorted(p for p in parts if p is not None)]
        lines = _merged_runs(paths) if self.sort == "runs" else itertools.chain.from_iterable(map(_read_part, paths))
        entries, written = write_shard(self.out_dir, self.formats, self.name, self.split, index, self.count, lines)
        progress.tally("written", written)
        yield from entries


class WriteShards(beam.PTransform):
    """Documents -> ``<name>-<split>.NNNNN-of-MMMMM.<ext>`` in every format (``shard_relpath``),
    every index that holds a document (each index is merged; ``write_shard`` skips an empty one).

    A document goes to shard ``md5(url) % N``; a shard is ordered by (md5(url), url,
    timestamp, md5(text)) one of two ways (``--shard_sort``, see ``shard_sort_of``), with
    the same bytes either way:

    ``runs`` (runners that hold a shuffle in memory): where documents are produced, up to
    ``RUN_BYTES`` of rows are sorted and each shard's slice staged as a run under
    ``_temporary/runs/``; one merge per shard streams its runs through a k-way merge into
    every format. No shuffle carries text: memory is bounded by RUN_BYTES per worker.

    ``shuffle`` (Dataflow, Flink, Spark): each shard
    is cut into parts by ranges of md5(url), sized from the shard's total (``PART_BYTES``);
    each part is sorted in memory by (md5(url), url, timestamp, md5(text)) and staged as a
    compressed file under ``_temporary/parts/``; one merge per shard then streams its parts
    in order into every format at once. Since parts are ranges of the sort key, a shard's
    order is the same whatever the number of parts or workers. The manifest entries of the
    files go to ``_temporary/written-<name>-<split>.json`` for the job's ``_SUCCESS``.
    """

    def __init__(self, out_dir: str, *, formats=("c4json",), name: str = "c4", split: str = "train", num_shards: int = 1,
                 run_bytes: int | None = None):
        super().__init__()
        self.out_dir, self.formats, self.name, self.split, self.num_shards = out_dir, tuple(formats), name, split, num_shards
        self.run_bytes = run_bytes

    def expand(self, docs):
        count, label, out_dir = self.num_shards, f"{self.name}-{self.split}", self.out_dir
        sort = shard_sort_of(docs.pipeline.options)
        if sort == "runs":
            parts = docs | "Sort and stage runs" >> beam.ParDo(_WriteRunsFn(out_dir, label, count, self.run_bytes or RUN_BYTES))
        else:
            encoded = docs | "Encode rows" >> beam.Map(encode_row, count)
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
            | "Merge parts into shards" >> beam.ParDo(_MergeShardFn(out_dir, self.formats, self.name, self.split, count, sort))
            | "Collect file entries" >> beam.combiners.ToList()
            | "Record written files" >> beam.Map(lambda infos: storage.record_written(out_dir, label, infos))
        )


class WriteErrors(beam.PTransform):
    """Error dicts -> ``ERRORS_FILE`` (``_errors/errors.jsonl``), sorted by file and offset (one small file)."""

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
