"""The records every stage passes around: one document schema, one HTML page, one error.

A ``Document`` is what every shard holds (``text``, ``url``, ``timestamp``, plus a
``meta`` map of strings, a JSON string column in Parquet). ``HtmlPage`` is a WARC ``response`` before text extraction.
``ReadError`` is one piece of bad input: where it was and why it could not be read.
All three are plain, picklable values, so Beam can move them between workers.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

# C4's timestamp layout, e.g. 2019-04-25T12:57:54Z (the released c4/en JSON).
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# The single Arrow schema of a document; Parquet and JSON shards both load as this.
DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("text", pa.string(), nullable=False),
        pa.field("url", pa.string(), nullable=False),
        pa.field("timestamp", pa.string(), nullable=False),
        # A JSON object of strings, stored as a string: every Parquet reader loads it (Hugging Face
        # datasets has no map type); json.loads / DuckDB's json functions / polars' json_decode open it.
        pa.field("meta", pa.string(), nullable=False, metadata={"encoding": "json-object"}),
    ]
)


@dataclass(frozen=True)
class Document:
    """One page of text: the unit of every corpus, shard and dedup step."""

    text: str
    url: str
    timestamp: str
    meta: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"text": self.text, "url": self.url, "timestamp": self.timestamp, "meta": dict(self.meta)}

    @classmethod
    def from_dict(cls, row: Mapping) -> Document:
        meta = row.get("meta") or {}
        if isinstance(meta, str):  # Parquet's meta column: a JSON object
            meta = json.loads(meta)
        elif isinstance(meta, list):  # a map column (Parquet shards written before 0.2) comes back as pairs
            meta = dict(meta)
        return cls(
            text=row.get("text") or "",
            url=row.get("url") or "",
            timestamp=row.get("timestamp") or "",
            meta={str(k): str(v) for k, v in meta.items()},
        )


@dataclass(frozen=True)
class HtmlPage:
    """A WARC ``response`` record with an HTML body, decoded to text, before extraction."""

    url: str
    timestamp: str
    status: int
    headers: Mapping[str, str]
    html: str
    charset: str
    source: str
    offset: int
    record_id: str = ""


@dataclass(frozen=True)
class ReadError:
    """A piece of input that could not be read; it goes to the run's ``errors`` output."""

    source: str
    offset: int
    reason: str
    detail: str = ""

    def to_dict(self) -> dict:
        return {"source": self.source, "offset": self.offset, "reason": self.reason, "detail": self.detail}


def normalize_timestamp(value: str) -> str:
    """Turn a WARC-Date (``2019-04-18T12:41:33Z``, maybe with fractions or an offset) into C4's form.

    Returns ``""`` when the value cannot be parsed; callers count that as no timestamp.
    """
    value = (value or "").strip()
    if not value:
        return ""
    try:
        parsed = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(_dt.UTC).replace(tzinfo=None)
    return parsed.strftime(TIMESTAMP_FORMAT)


# Reasons a ReadError can carry, in the order a reader meets them.
TRUNCATED_GZIP = "truncated_gzip"
CORRUPT_GZIP = "corrupt_gzip"
READ_FAILED = "read_failed"
CLIPPED_RECORD = "clipped_record"
MISSING_TERMINATOR = "missing_terminator"
GARBAGE = "garbage_between_records"
BAD_HEADER = "bad_header"
UNKNOWN_VERSION = "unknown_warc_version"
MISSING_TARGET_URI = "missing_target_uri"
SPACE_IN_TARGET_URI = "space_in_target_uri"
EXTRA_WARCINFO = "extra_warcinfo"
BAD_HTTP_HEAD = "bad_http_head"
BAD_CHUNKING = "bad_chunked_body"
BAD_CONTENT_ENCODING = "bad_content_encoding"
RECORD_TOO_LARGE = "record_too_large"
WRONG_LENGTH = "wrong_content_length"
DECODED_TOO_LARGE = "decoded_too_large"
EMPTY_FILE = "empty_file"  # not one WARC record and no other error: an empty or blank file
