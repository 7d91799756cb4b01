"""Page text stays out of shuffles: stage elements in files, shuffle only small references.

A dedup shuffle only needs a page's keys (its normalised URL and date, or its line keys
and URL digest), yet moving whole pages through it makes every runner hold or spill the
page text: the DirectRunner keeps each shuffle's complete input in memory, Dataflow pays
for it as shuffled bytes. ``Stage`` writes each element, as it passes, to a staging file
under the output (``<out>/_temporary/stage/<label>/<file id>.pkl.zst``: length-prefixed
pickles in a zstd stream, a new file every ``STAGE_FILE_BYTES``) and passes on
``(ref, light(element))`` where ``ref`` is ``(file id, index in file)``. After the
shuffle has decided, ``LoadStaged`` groups the surviving references by file and streams
each file once, yielding ``(element, payloads)``: every payload that referred to the
element (a page's owned line keys, say), for the referenced elements only, or for every
element (``[]`` when nobody referred to it) with ``every=True``.

A reference is two integers, ``(file id, index)``, so a shuffle of millions of line claims
carries a few bytes per claim besides its key. File ids are random 63-bit numbers, drawn
per bundle attempt: a retried bundle writes new files and the
runner drops the references of the failed attempt, so no reference ever points into a
partial file. Output never depends on the names (every later order is by content), and
the whole folder goes with ``_temporary/`` when the job commits.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from pipelines.staged_files import (  # noqa: F401  (re-exported: the Beam wiring's names)
    STAGE_DIR,
    STAGE_FILE_BYTES,
    STAGE_ZSTD_LEVEL,
    StagedWriter,
    Stager,
    StagingError,
    load_file,
    new_file_id,
    read_staged,
    stage_folder,
    staged_file,
    write_staged,
)


class _StageFn(beam.DoFn):
    def __init__(self, out_dir: str, label: str, light, file_bytes: int):
        self.out_dir, self.folder_label, self.light, self.file_bytes = out_dir, label, light, file_bytes

    def start_bundle(self):
        self.stager = Stager(stage_folder(self.out_dir, self.folder_label), self.light, self.file_bytes)

    def process(self, element):
        yield self.stager.stage(element)

    def finish_bundle(self):
        self.stager.close()
        for name in self.stager.file_ids:
            yield beam.pvalue.TaggedOutput("files", WindowedValue(name, MIN_TIMESTAMP, [GlobalWindow()]))


class Stage(beam.PTransform):
    """Elements -> ``refs`` ((file id, index), light(element)) and ``files`` (every file id)."""

    def __init__(self, out_dir: str, label: str, light, *, file_bytes: int = STAGE_FILE_BYTES):
        super().__init__()
        self.out_dir, self.folder_label, self.light, self.file_bytes = out_dir, label, light, file_bytes

    def expand(self, elements):
        return elements | beam.ParDo(_StageFn(self.out_dir, self.folder_label, self.light, self.file_bytes)).with_outputs("files", main="refs")


class _LoadFn(beam.DoFn):
    def __init__(self, folder: str, every: bool, batched: bool = False):
        self.folder, self.every, self.batched = folder, every, batched

    def process(self, keyed):
        file_id, items = keyed
        wanted: dict[int, list] = {}
        for item in items:
            if item is None:
                continue
            for index, payload in (item if self.batched else (item,)):
                wanted.setdefault(index, []).append(payload)
        yield from load_file(staged_file(self.folder, file_id), wanted, self.every)


class LoadStaged(beam.PTransform):
    """((file id, index), payload) [+ every staged file id] -> (element, [payloads]).

    Apply to a PCollection of references, or to a ``(references, files)`` pair with
    ``every=True`` so that elements nobody referred to come back too, with ``[]``. With
    ``batched=True`` the references come already grouped: ``(file id, [(index, payload),
    ...])``, any number of lists per file.
    """

    def __init__(self, out_dir: str, label: str, *, every: bool = False, batched: bool = False):
        super().__init__()
        self.folder, self.every, self.batched = stage_folder(out_dir, label), every, batched

    def expand(self, inputs):
        refs, files = inputs if isinstance(inputs, tuple) else (inputs, None)
        keyed = refs if self.batched else refs | "Key by staged file" >> beam.MapTuple(lambda ref, payload: (ref[0], (ref[1], payload)))
        if files is not None:
            markers = files | "Every staged file" >> beam.Map(lambda file_id: (file_id, None))
            keyed = (keyed, markers) | "With every file" >> beam.Flatten()
        return (
            keyed
            | "Group by staged file" >> beam.GroupByKey()
            | "Read staged files" >> beam.ParDo(_LoadFn(self.folder, self.every, self.batched))
        )
