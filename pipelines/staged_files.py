"""Staging files, engine-free: what ``pipelines.staging`` (Beam) and ``pipelines.spark.staging``
(Spark) both write and read, so a page's text crosses a shuffle as a reference of two
integers (``pipelines.staging`` has the why). A Spark worker imports this without Beam.

A staging file is ``<out>/_temporary/stage/<label>/<file id>.pkl.zst``: length-prefixed
pickles in a zstd stream, under a temporary name until committed. ``Stager`` writes a
stream of elements into such files (a new one every ``STAGE_FILE_BYTES``) and hands back
``(ref, light(element))``, ``ref`` being ``(file id, index in file)``; ``load_file`` streams
one file back, yielding the elements that were referred to (or every element) with their
payloads.
"""

from __future__ import annotations

import io
import pickle
import random

import zstandard

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


class Stager:
    """Stages elements as they pass, one task (a Beam bundle, a Spark partition attempt) at a
    time: ``stage(element)`` writes it and returns ``(ref, light(element))``; ``close()``
    commits the open file. ``file_ids`` lists every file this stager committed; ``discard()``
    drops the open one (a failed task: nothing refers into it)."""

    def __init__(self, folder: str, light, file_bytes: int = None):
        self.folder, self.light = folder, light
        self.file_bytes = STAGE_FILE_BYTES if file_bytes is None else file_bytes
        self.target, self.file_id, self.file_ids = None, None, []

    def stage(self, element) -> tuple:
        if self.target is None:
            self.file_id = new_file_id()
            self.target = StagedWriter(staged_file(self.folder, self.file_id))
        ref = (self.file_id, self.target.count)
        self.target.write(element)
        light = self.light(element)
        if self.target.bytes >= self.file_bytes:
            self.close()
        return ref, light

    def close(self) -> None:
        if self.target is not None:
            self.target.commit()
            self.file_ids.append(self.file_id)
            self.target = None

    def discard(self) -> None:
        if self.target is not None:
            self.target.discard()
            self.target = None


def load_file(path: str, wanted: dict, every: bool):
    """``(element, payloads)`` from the staging file ``path``: the elements whose index is in
    ``wanted`` (index -> list of payloads), and with ``every`` all the others too, with ``[]``."""
    if not wanted and not every:
        return
    for index, element in read_staged(path):
        if index in wanted:
            yield element, wanted[index]
        elif every:
            yield element, []
