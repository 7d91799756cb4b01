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

import io
import pickle
import random

import apache_beam as beam
import zstandard
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from common import storage

STAGE_DIR = "stage"
# Pickled bytes a staging file takes before the next one starts: one file is one unit of
# work for LoadStaged, so this bounds how much one worker reads back at once.
STAGE_FILE_BYTES = 32 << 20
STAGE_ZSTD_LEVEL = 1
_LENGTH_BYTES = 4


class StagingError(RuntimeError):
    """A staging file is shorter than its records say (written by a killed attempt and reused)."""


def stage_folder(out_dir: str, label: str) -> str:
    return storage.staging_path(out_dir, STAGE_DIR, label)


def staged_file(folder: str, file_id: int) -> str:
    return storage.join(folder, f"{file_id:016x}.pkl.zst")


class StagedWriter:
    """Writes one staging file: length-prefixed pickles in a zstd stream, under a temporary
    name until ``commit``. ``write`` takes an element, ``write_pickled`` one already pickled."""

    def __init__(self, path: str):
        self.target = storage.AtomicFile(path)
        self.writer = zstandard.ZstdCompressor(level=STAGE_ZSTD_LEVEL).stream_writer(self.target.stream, closefd=False)
        self.count = self.bytes = 0

    def write(self, element) -> None:
        self.write_pickled(pickle.dumps(element, protocol=pickle.HIGHEST_PROTOCOL))

    def write_pickled(self, data: bytes) -> None:
        self.writer.write(len(data).to_bytes(_LENGTH_BYTES, "little"))
        self.writer.write(data)
        self.count += 1
        self.bytes += len(data)

    def commit(self) -> None:
        self.writer.close()
        self.target.commit()

    def discard(self) -> None:
        self.target.discard()


def write_staged(path: str, elements) -> None:
    """``elements`` written to the staging file ``path``: committed whole, or not at all when
    producing or writing one of them fails."""
    writer = StagedWriter(path)
    try:
        for element in elements:
            writer.write(element)
    except BaseException:
        writer.discard()
        raise
    writer.commit()


def new_file_id() -> int:
    """A random 63-bit staging file id (drawn per bundle attempt: a retry writes new files)."""
    return random.SystemRandom().getrandbits(63)


class _StageFn(beam.DoFn):
    def __init__(self, out_dir: str, label: str, light, file_bytes: int):
        self.out_dir, self.folder_label, self.light, self.file_bytes = out_dir, label, light, file_bytes

    def start_bundle(self):
        self.target, self.names = None, []

    def _open(self):
        self.file_id = new_file_id()
        self.target = StagedWriter(staged_file(stage_folder(self.out_dir, self.folder_label), self.file_id))

    def _close(self):
        self.target.commit()
        self.names.append(self.file_id)
        self.target = None

    def process(self, element):
        if self.target is None:
            self._open()
        ref = (self.file_id, self.target.count)
        self.target.write(element)
        yield ref, self.light(element)
        if self.target.bytes >= self.file_bytes:
            self._close()

    def finish_bundle(self):
        if self.target is not None:
            self._close()
        for name in self.names:
            yield beam.pvalue.TaggedOutput("files", WindowedValue(name, MIN_TIMESTAMP, [GlobalWindow()]))


class Stage(beam.PTransform):
    """Elements -> ``refs`` ((file id, index), light(element)) and ``files`` (every file id)."""

    def __init__(self, out_dir: str, label: str, light, *, file_bytes: int = STAGE_FILE_BYTES):
        super().__init__()
        self.out_dir, self.folder_label, self.light, self.file_bytes = out_dir, label, light, file_bytes

    def expand(self, elements):
        return elements | beam.ParDo(_StageFn(self.out_dir, self.folder_label, self.light, self.file_bytes)).with_outputs("files", main="refs")


def read_staged(path: str, buffer_size: int = 1 << 20):
    """(index, element) for every record of one staging file, in order, read ``buffer_size``
    decompressed bytes at a time (a merge that holds many files open asks for less)."""
    with storage.open_read(path) as raw, zstandard.ZstdDecompressor().stream_reader(raw) as stream:
        reader = io.BufferedReader(stream, buffer_size=buffer_size)
        index = 0
        while head := reader.read(_LENGTH_BYTES):
            size = int.from_bytes(head, "little")
            data = reader.read(size)
            if len(head) != _LENGTH_BYTES or len(data) != size:
                raise StagingError(f"{path}: record {index} is cut short ({len(data)} of {size} bytes)")
            yield index, pickle.loads(data)
            index += 1


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
        if not wanted and not self.every:
            return
        for index, element in read_staged(staged_file(self.folder, file_id)):
            if index in wanted:
                yield element, wanted[index]
            elif self.every:
                yield element, []


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
