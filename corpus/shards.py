"""Shard formats: one writer per format, one reader for all of them.

Formats (``fmt``), each a complete set of ``<name>-<split>.NNNNN-of-MMMMM<ext>`` files:

- ``c4json`` (``.json.gz``): the released c4/en layout. One compact JSON object per line
  with exactly ``text``, ``timestamp``, ``url`` in that order, raw UTF-8
  (``ensure_ascii=False``), gzip. ``meta`` is not written.
- ``parquet`` (``.parquet``): ``DOCUMENT_SCHEMA``, zstd, one row group per flushed batch;
  ``meta`` is a string column holding a JSON object, so Hugging Face ``datasets``, DuckDB
  and polars load the files as they are (none of them needs a map type).
- ``jsonl`` (``.jsonl``): plain JSON lines with ``text``, ``url``, ``timestamp``, ``meta``.

A document goes to shard ``int(md5(url).hexdigest(), 16) % num_shards``, so the layout
does not depend on how many workers produced the documents; inside a shard, input order
is kept. Every file is written under a hidden temporary name (``.<final>.tmp-<pid>``) and
renamed only once the whole set is written; on an error every temporary is removed.
``ShardWriter`` writes empty shards too (an empty gzip stream, an empty file, a Parquet
file with the schema and no rows), so its NNNNN-of-MMMMM set is complete. The jobs' writer
(``pipelines.shard_io.write_shard``) writes no shard that holds no document, since polars
and ``pyarrow.dataset`` refuse an empty JSON stream; their ``_SUCCESS`` lists the shards
there are. A job that writes several formats puts each in its own folder
(``format_folder``: ``c4json/``, ``parquet/``), so each folder is one dataset.

Strings that UTF-8 cannot carry: a Python ``str`` may hold surrogate code points
(U+D800-U+DFFF), which neither JSON-in-UTF-8 nor Parquet can store. Before writing, a
surrogate pair is joined into the character it encodes and every lone surrogate becomes
U+FFFD, in every format, so all three formats read back the same document.

``write_shard`` writes one such file from documents already grouped by shard (the Beam
path); ``write_shards``/``ShardWriter`` route documents to shards themselves.

Reading: ``read_documents`` streams documents from files, globs and directories (format by
extension). ``open_dataset`` opens shards with ``pyarrow.dataset``. Arrow's JSON reader
decompresses ``.gz`` files by their extension on its own, but it rejects an empty stream
(even with a schema) and cannot build a ``map<string, string>`` from a JSON object, so for
JSON shards ``open_dataset`` leaves out empty files and exposes ``text``, ``url`` and
``timestamp`` only; use Parquet or ``read_documents`` for ``meta``. Its default 1 MiB block
is also too small for long lines, so ``open_dataset`` reads 32 MiB blocks.

Parquet files are byte-identical for the same documents with the same pyarrow version: the
only environment-dependent bytes are the ``created_by`` string (``parquet-cpp-arrow version
X``). Gzip headers carry no file name and a zero mtime for the same reason.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from common import storage
from common.decision import DOCUMENTS, Decision
from corpus.inputs import InputError
from corpus.records import DOCUMENT_SCHEMA, Document

if TYPE_CHECKING:
    import pyarrow.dataset as ds

log = logging.getLogger(__name__)

FORMATS = ("c4json", "parquet", "jsonl")
SHARD_EXTENSIONS = {"c4json": ".json.gz", "parquet": ".parquet", "jsonl": ".jsonl"}
# Field order of one line in each JSON format; c4json is the released c4/en order.
JSON_FIELDS = {"c4json": ("text", "timestamp", "url"), "jsonl": ("text", "url", "timestamp", "meta")}
# The document columns that Arrow's JSON reader can load (it has no JSON object -> map).
JSON_DATASET_SCHEMA = pa.schema([DOCUMENT_SCHEMA.field(name) for name in ("text", "url", "timestamp")])

# Extensions the reader knows; JSON ones hold JSON lines, ``.gz`` ones are gzip.
_READ_EXTENSIONS = (".jsonl.gz", ".json.gz", ".parquet", ".jsonl", ".json")
# gzip's own default level: level 9 (Python's) is ~1.5x slower for <1% smaller English text.
GZIP_LEVEL = 6
# Parquet buffering: a shard's buffer becomes a row group at ROW_GROUP_BYTES, and when all
# shards together buffer more than BUFFER_BYTES the largest one is flushed early, so memory
# stays bounded whatever num_shards is. Sizes count characters, a close-enough proxy.
ROW_GROUP_BYTES = 64 << 20
BUFFER_BYTES = 256 << 20
# Rows per batch when streaming Parquet back.
READ_BATCH_ROWS = 1024
# Arrow's JSON reader fails on a line longer than its block (default 1 MiB, which one
# 1.9e5-character C4 page can exceed once escaped), so open_dataset reads bigger blocks.
JSON_BLOCK_BYTES = 32 << 20

_SURROGATE = re.compile("[\ud800-\udfff]")


def shard_name(name: str, split: str, index: int, count: int, fmt: str) -> str:
    """File name of shard ``index`` of ``count``, e.g. ``c4-train.00003-of-01024.json.gz``."""
    _check_format(fmt)
    if not 0 <= index < count <= 99999:
        raise ValueError(f"shard {index} of {count}: need 0 <= index < count <= 99999")
    return f"{name}-{split}.{index:05d}-of-{count:05d}{SHARD_EXTENSIONS[fmt]}"


def format_folder(fmt: str, formats: Iterable[str]) -> str:
    """The sub-folder of a job's output that format ``fmt`` goes to: none (``""``) when the job
    writes one format, the format's own name when it writes several (``c4json/``,
    ``parquet/``), so that every folder of data files holds one format."""
    _check_format(fmt)
    return fmt if len(set(formats)) > 1 else ""


def shard_relpath(name: str, split: str, index: int, count: int, fmt: str, formats: Iterable[str]) -> str:
    """Where shard ``index`` of ``count`` in format ``fmt`` goes inside a job's output folder
    (its name in the ``_SUCCESS`` manifest): ``c4-train.00003-of-01024.json.gz``, or
    ``c4json/c4-train.00003-of-01024.json.gz`` when the job writes several ``formats``."""
    folder, file_name = format_folder(fmt, formats), shard_name(name, split, index, count, fmt)
    return f"{folder}/{file_name}" if folder else file_name


_SHARD_NAME = re.compile(r"^(?P<name>.+)-(?P<split>[^-./]+)\.\d{5}-of-\d{5}\.")


def shard_split(path: str) -> str | None:
    """The split in a shard's file name (``c4-validation.00000-of-00008.json.gz`` ->
    ``validation``), or None when the name does not follow ``shard_name``."""
    found = _SHARD_NAME.match(os.path.basename(os.fspath(path)))
    return found["split"] if found else None


def shard_index(url: str, num_shards: int) -> int:
    """The shard a document belongs to: ``int(md5(url).hexdigest(), 16) % num_shards``."""
    digest = hashlib.md5(utf8_safe(url).encode("utf-8")).hexdigest()
    return int(digest, 16) % num_shards


def utf8_safe(value: str) -> str:
    """``value`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if _SURROGATE.search(value) is None:
        return value
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def document_row(doc: Document) -> dict:
    """The row a shard stores for ``doc``: every string made storable as UTF-8."""
    return {
        "text": utf8_safe(doc.text),
        "url": utf8_safe(doc.url),
        "timestamp": utf8_safe(doc.timestamp),
        "meta": {utf8_safe(k): utf8_safe(v) for k, v in doc.meta.items()},
    }


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown shard format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _row_size(row: Mapping) -> int:
    return len(row["text"]) + len(row["url"]) + len(row["timestamp"]) + sum(
        len(k) + len(v) for k, v in row["meta"].items()
    )


def json_line(row: Mapping, fmt: str) -> bytes:
    """The line (without its newline) that the JSON format ``fmt`` writes for ``row``: compact
    JSON of the format's fields (``JSON_FIELDS``) in order, raw UTF-8."""
    return json.dumps({f: row[f] for f in JSON_FIELDS[fmt]}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _JsonLinesSink:
    """One JSON-lines shard, optionally gzip-compressed, written line by line to a stream."""

    buffered_bytes = 0  # lines go straight to the (compressed) stream

    def __init__(self, stream: BinaryIO | storage.HashingWriter, fmt: str, compress: bool):
        self._fmt = fmt
        self._file = stream
        # No file name and mtime 0 in the gzip header: same documents, same bytes.
        self._stream = (
            gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0, compresslevel=GZIP_LEVEL)
            if compress
            else stream
        )

    def write(self, row: Mapping) -> None:
        self._stream.write(json_line(row, self._fmt) + b"\n")

    def write_line(self, line: bytes) -> None:
        self._stream.write(line + b"\n")

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._stream is not self._file:
            self._stream.close()  # writes the gzip trailer; the owner closes the stream


class _ParquetSink:
    """One Parquet shard written to a stream; rows are buffered and written a row group at a time."""

    def __init__(self, stream: BinaryIO | storage.HashingWriter, row_group_bytes: int):
        self._row_group_bytes = row_group_bytes
        self._writer = pq.ParquetWriter(stream, DOCUMENT_SCHEMA, compression="zstd")
        self._rows: list[dict] = []
        self.buffered_bytes = 0

    def write(self, row: Mapping) -> None:
        self._rows.append({**row, "meta": json.dumps(row["meta"], ensure_ascii=False, separators=(",", ":"))})
        self.buffered_bytes += _row_size(row)
        if self.buffered_bytes >= self._row_group_bytes:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            batch = pa.RecordBatch.from_pylist(self._rows, schema=DOCUMENT_SCHEMA)
            self._writer.write_batch(batch, row_group_size=batch.num_rows)
            self._rows = []
            self.buffered_bytes = 0

    def close(self) -> None:
        self.flush()
        self._writer.close()


def open_sink(fmt: str, stream: BinaryIO | storage.HashingWriter, row_group_bytes: int = ROW_GROUP_BYTES):
    """A writer of document rows (``document_row``) in format ``fmt`` onto ``stream``:
    ``write(row)``, ``flush()``, ``close()`` (which finishes the format, not the stream)."""
    _check_format(fmt)
    if fmt == "parquet":
        return _ParquetSink(stream, row_group_bytes)
    return _JsonLinesSink(stream, fmt, compress=fmt == "c4json")


class ShardFile:
    """One shard file being written atomically (``common.storage.AtomicFile``), with its
    size and sha256 counted on the way for the output manifest."""

    def __init__(self, path: str, fmt: str, row_group_bytes: int = ROW_GROUP_BYTES, manifest_name: str | None = None):
        if not path.endswith(SHARD_EXTENSIONS[fmt]):
            raise ValueError(f"{path}: a {fmt} shard must end with {SHARD_EXTENSIONS[fmt]}")
        self.path, self.fmt = path, fmt
        self.manifest_name = manifest_name or storage.basename(path)  # its name relative to the output folder
        self._file = storage.AtomicFile(path)
        self._hashing = storage.HashingWriter(self._file.stream)
        try:
            self.sink = open_sink(fmt, self._hashing, row_group_bytes)
        except BaseException:
            self._file.discard()
            raise

    @property
    def buffered_bytes(self) -> int:
        return self.sink.buffered_bytes

    def write(self, row: Mapping) -> None:
        self.sink.write(row)

    def write_line(self, line: bytes) -> None:
        """Write a row already encoded as this JSON format writes it (``json_line(row, fmt)``)."""
        self.sink.write_line(line)

    def flush(self) -> None:
        self.sink.flush()

    def commit(self) -> dict:
        """Finish the file and publish it under its name; returns its manifest entry."""
        try:
            self.sink.close()
        except BaseException:
            self._file.discard()
            raise
        self._file.commit()
        return self._hashing.info(self.manifest_name)

    def abort(self) -> None:
        """Throw the file away: nothing appears under its name, the temporary is removed."""
        try:
            self.sink.close()  # finish the format's writer on the doomed stream, so nothing writes later
        except Exception:
            pass
        self._file.discard()


class ShardWriter:
    """Writes documents into a complete, atomically published set of shards.

    Use it as a context manager: the shard files appear under their final names only when
    the ``with`` block ends without an exception; otherwise every temporary is removed.
    ``infos`` then holds each file's manifest entry (name, bytes, sha256).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike,
        *,
        fmt: str = "c4json",
        name: str = "c4",
        split: str = "train",
        num_shards: int = 1,
        row_group_bytes: int = ROW_GROUP_BYTES,
        buffer_bytes: int = BUFFER_BYTES,
    ):
        _check_format(fmt)
        self.out_dir = os.fspath(out_dir)
        self.fmt = fmt
        self.num_shards = num_shards
        self.paths = [storage.join(self.out_dir, shard_name(name, split, i, num_shards, fmt)) for i in range(num_shards)]
        self.infos: list[dict] = []
        self._row_group_bytes = row_group_bytes
        self._buffer_bytes = buffer_bytes
        self._buffered = 0
        self._files: list[ShardFile] = []

    def __enter__(self) -> ShardWriter:
        storage.makedirs(self.out_dir)
        try:
            for path in self.paths:
                self._files.append(ShardFile(path, self.fmt, self._row_group_bytes))
        except BaseException:
            self._abort()
            raise
        return self

    def write(self, doc: Document) -> None:
        row = document_row(doc)
        shard = self._files[shard_index(row["url"], self.num_shards)]
        before = shard.buffered_bytes
        shard.write(row)
        self._buffered += shard.buffered_bytes - before
        if self._buffered > self._buffer_bytes:
            largest = max(self._files, key=lambda s: s.buffered_bytes)
            self._buffered -= largest.buffered_bytes
            largest.flush()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._commit()
        else:
            self._abort()

    def _commit(self) -> None:
        published: list[str] = []
        try:
            for shard in self._files:
                self.infos.append(shard.commit())
                published.append(shard.path)
        except BaseException:
            storage.delete(published)  # a partial set must not look complete
            self._abort()
            raise

    def _abort(self) -> None:
        for shard in self._files:
            shard.abort()


def write_shard(docs: Iterable[Document], path: str | os.PathLike, fmt: str) -> str:
    """Write ``docs``, in the given order, as the one shard file ``path``, atomically."""
    _check_format(fmt)
    path = os.fspath(path)
    shard = ShardFile(path, fmt)
    try:
        for doc in docs:
            shard.write(document_row(doc))
    except BaseException:
        shard.abort()
        raise
    shard.commit()
    return path


def write_shards(
    docs: Iterable[Document],
    out_dir: str | os.PathLike,
    *,
    fmt: str = "c4json",
    name: str = "c4",
    split: str = "train",
    num_shards: int = 1,
) -> list[str]:
    """Write ``docs`` as ``num_shards`` shards of format ``fmt``; return the final paths, sorted."""
    with ShardWriter(out_dir, fmt=fmt, name=name, split=split, num_shards=num_shards) as writer:
        for doc in docs:
            writer.write(doc)
    return sorted(writer.paths)


def _read_extension(path: str) -> str | None:
    return next((ext for ext in _READ_EXTENSIONS if path.endswith(ext)), None)


def _is_listed_shard(file_name: str) -> bool:
    # Hidden and "_" names are temporaries and bookkeeping, as Spark and pyarrow.dataset also
    # skip; a bare ``.json`` next to shards is the stats.json of a folder written before the
    # "_" layout (docs/formats.md), so it is read only when named.
    extension = _read_extension(file_name)
    return not file_name.startswith((".", "_")) and extension not in (None, ".json")


def _folder_shards(folder: str) -> list[str]:
    """The shard files of a folder, its format folders' included; a format folder of a job's
    output (``out/c4json``) is checked against the job's ``_SUCCESS``, one level up."""
    parent, name = storage.split(folder.rstrip("/").rstrip(os.sep) or folder)
    if name in FORMATS and parent and storage.is_file(storage.join(parent, storage.SUCCESS_FILE)):
        return [p for p in storage.folder_files(parent, _is_listed_shard, subfolders=(name,))
                if storage.basename(storage.split(p)[0]) == name]
    return storage.folder_files(folder, _is_listed_shard, subfolders=FORMATS)


def find_shards(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """Expand files, globs and folders (local or any ``common.storage`` path) into shard files.

    A folder a corpusforge job wrote gives exactly the shards its ``_SUCCESS`` manifest
    lists, each checked to exist with its recorded size; a folder an unfinished job left
    raises ``storage.IncompleteOutputError``; a folder without a marker gives its own
    shard files, sorted, with a warning. Shards in a format's sub-folder (``c4json/``,
    ``parquet/``: a job that wrote several formats) count as the folder's own, each shard
    taken once (``one_format_per_shard``); other sub-folders and a bare ``.json`` file are
    skipped. A format folder itself gives its shards, checked against the job's manifest. A glob gives its matches, sorted. A file is taken as named.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[str] = []
    for path in (os.fspath(p) for p in paths):  # (map() cannot type-check os.fspath's overloads)
        if storage.is_folder(path):
            found += one_format_per_shard(_folder_shards(path))
        elif storage.has_magic(path):
            matches = [p for p in storage.glob(path) if not storage.basename(p).startswith((".", "_"))]
            if not matches:
                raise FileNotFoundError(f"no file matches {path!r}")
            found += matches
        elif storage.is_file(path):
            found.append(path)
        else:
            raise FileNotFoundError(f"no such shard file or directory: {path!r}")
    for path in found:
        if _read_extension(path) is None:
            raise ValueError(f"{path}: unknown shard format; expected one of {', '.join(_READ_EXTENSIONS)}")
    return found


# When a folder holds one shard set in several formats (``--format c4json parquet``), the
# readers take one of them: Parquet first (typed, with ``meta``), then JSON lines.
_FORMAT_PREFERENCE = (".parquet", ".jsonl.gz", ".jsonl", ".json.gz", ".json")


def _shard_stem(path: str, ext: str | None) -> tuple[str, str]:
    """(the output folder, the file name less its extension): the same for one shard in
    every format, whether its formats sit side by side or in ``format_folder`` s."""
    folder, file_name = storage.split(path)
    if storage.basename(folder) in FORMATS:
        folder = storage.split(folder)[0]
    return folder, file_name[: -len(ext)] if ext else file_name


def one_format_per_shard(paths: list[str]) -> list[str]:
    """``paths`` with each shard (the same name but for its extension and format folder)
    kept once, in the preferred format, so a folder written in two formats is not read twice."""
    best: dict[tuple[str, str], tuple[int, str]] = {}
    for path in paths:
        ext = _read_extension(path)
        stem = _shard_stem(path, ext)
        rank = _FORMAT_PREFERENCE.index(ext) if ext in _FORMAT_PREFERENCE else len(_FORMAT_PREFERENCE)
        if stem not in best or rank < best[stem][0]:
            best[stem] = (rank, path)
    kept = sorted(path for _, path in best.values())
    if len(kept) < len(paths):
        log.info("%d shard file(s) are the same shards in another format; reading %s", len(paths) - len(kept),
                 ", ".join(sorted({_read_extension(p) or "?" for p in kept})))
    return kept


@contextlib.contextmanager
def _open_lines(path: str):
    """The shard's lines as bytes, gunzipped for ``.gz``; split on b"\\n" only, so U+2028 or a
    raw CR inside a line is part of the text."""
    with storage.open_read(path) as raw, (gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw) as lines:
        yield lines


def _read_json_lines(path: str) -> Iterator[Document]:
    with _open_lines(path) as lines:
        for line_number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{path}:{line_number}: not a JSON document ({err})") from err
            yield Document.from_dict(row)


def _read_parquet(path: str) -> Iterator[Document]:
    with storage.open_read(path) as raw, pq.ParquetFile(raw) as shard:
        for batch in shard.iter_batches(batch_size=READ_BATCH_ROWS):
            for row in batch.to_pylist():
                yield Document.from_dict(row)


def read_documents(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> Iterator[Document]:
    """Stream the documents of shard files, globs and directories, in file order."""
    for path in find_shards(paths):
        if path.endswith(".parquet"):
            yield from _read_parquet(path)
        else:
            yield from _read_json_lines(path)


def _is_empty_json(path: str) -> bool:
    with storage.open_read(path) as raw, (gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw) as shard:
        return not shard.read(1)


def open_dataset(
    paths: str | os.PathLike | Iterable[str | os.PathLike], *, json_block_bytes: int = JSON_BLOCK_BYTES
) -> ds.Dataset:
    """Open Parquet shards, or JSON shards, as one ``pyarrow.dataset.Dataset``.

    JSON shards load as ``JSON_DATASET_SCHEMA`` (text, url, timestamp) and empty JSON
    shards are left out, since Arrow's JSON reader rejects an empty stream. A JSON line
    longer than ``json_block_bytes`` needs a larger value.
    """
    import pyarrow.dataset as ds  # it loads pandas (about 0.4 s of CPU): only a caller that opens a dataset pays

    files = find_shards(paths)
    if not files:
        raise FileNotFoundError(f"no shard files in {paths!r}")
    parquet = [f.endswith(".parquet") for f in files]
    if any(parquet) and not all(parquet):
        raise ValueError("open_dataset needs shards of one format: got Parquet and JSON together")
    if all(parquet):
        return ds.dataset(files, format="parquet")
    json_format = ds.JsonFileFormat(
        parse_options=pa_json.ParseOptions(
            explicit_schema=JSON_DATASET_SCHEMA, unexpected_field_behavior="ignore"
        ),
        read_options=pa_json.ReadOptions(block_size=json_block_bytes),
    )
    non_empty = [f for f in files if not _is_empty_json(f)]
    return ds.dataset(non_empty, format=json_format, schema=JSON_DATASET_SCHEMA)


# --- the readers of jobs: the shard files of an input, one text field per row ------------
def shard_files(specs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """The shard files a job reads, each shard once (``find_shards``, then
    ``one_format_per_shard``); ``InputError`` when there is none."""
    files = one_format_per_shard(find_shards(specs))
    if not files:
        raise InputError(f"no corpus shards found for {specs}")
    return files


def read_error(path: str, offset: int, reason: str, detail: str) -> dict:
    """An ``_errors/errors.jsonl`` row: which file, which row (from 1; 0 = the file), why."""
    return {"source": path, "offset": offset, "reason": reason, "detail": detail[:500]}


def read_texts(path: str, field: str = "text") -> Iterator[tuple[int, str] | dict]:
    """``(row number, text)`` for each row of a shard (JSON lines, gzipped or not, or
    Parquet), or a ``read_error`` row for a row or file that cannot be read
    (``bad_json``, ``no_text_field``, ``unreadable``); rows before a damaged spot are kept.
    Unlike ``read_documents``, bad input never raises: the job counts it and goes on."""
    if path.endswith(".parquet"):
        yield from _parquet_texts(path, field)
        return
    number = 0
    try:
        with _open_lines(path) as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    yield read_error(path, number, "bad_json", str(exc))
                    continue
                if not isinstance(row, dict) or not isinstance(row.get(field), str):
                    yield read_error(path, number, "no_text_field", f"no string field {field!r}")
                    continue
                yield number, row[field]
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        yield read_error(path, number + 1, "unreadable", f"{type(exc).__name__}: {exc}")


def _parquet_texts(path: str, field: str) -> Iterator[tuple[int, str] | dict]:
    number = 0
    try:
        with storage.open_read(path) as raw, pq.ParquetFile(raw) as shard:
            if field not in shard.schema_arrow.names:
                yield read_error(path, 0, "no_text_field", f"no column {field!r} (columns: {shard.schema_arrow.names})")
                return
            for batch in shard.iter_batches(batch_size=READ_BATCH_ROWS, columns=[field]):
                for text in batch.column(0).to_pylist():
                    number += 1
                    if not isinstance(text, str):
                        yield read_error(path, number, "no_text_field", f"{field!r} is {type(text).__name__}")
                        continue
                    yield number, text
    except (OSError, ValueError) as exc:
        yield read_error(path, number + 1, "unreadable", f"{type(exc).__name__}: {exc}")


def first_texts(files: Iterable[str], count: int, field: str = "text") -> Iterator[str]:
    """The first ``count`` non-empty texts of ``files`` in file order (unreadable rows skipped)."""
    taken = 0
    for path in files:
        for item in read_texts(path, field):
            if isinstance(item, dict):
                continue
            if item[1].strip():
                yield item[1]
                taken += 1
                if taken >= count:
                    return


EMPTY_TEXT = "empty_dropped"  # a row whose text is empty or only whitespace: no document
READ_TEXTS = "documents_read"  # every row with a text


def nonempty_text(text: str) -> Decision:
    """A row's text goes on unless it is empty or only whitespace; every row is counted."""
    if text.strip():
        return Decision(text, ((READ_TEXTS, 1), (EMPTY_TEXT, 0)), (), ((READ_TEXTS, DOCUMENTS), (EMPTY_TEXT, DOCUMENTS)))
    return Decision(None, ((READ_TEXTS, 1), (EMPTY_TEXT, 1)), ((EMPTY_TEXT, text),),
                    ((READ_TEXTS, DOCUMENTS), (EMPTY_TEXT, DOCUMENTS)))

