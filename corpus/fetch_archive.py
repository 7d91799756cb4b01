"""The fetcher's output: WARC files and the fetch log, written at checkpoints; resume.

Each ``ok`` page becomes three records, each its own gzip member, written with warcio's
``WARCWriter``: ``request`` (the bytes we sent), ``response`` (status line, headers and the
body as it came over the wire, transfer- and content-encoding included, so
``read_archive`` decodes it as it decodes Common Crawl) and ``metadata`` (JSON: the
requested URL, redirect chain, attempts). ``WARC-Target-URI`` is the final URL;
``WARC-Source-URI`` (on all three) is the URL as requested, the key back to the Reddit
link; ``WARC-Date`` is the fetch time; ``WARC-IP-Address`` the address connected to.
Non-ok results are only logged, never archived. Members are compressed at level 6
(warcio's own wrapper uses 9: about twice the time for 1% smaller files on HTML), in
a small thread pool (zlib and hashlib release the GIL), and appended in order.

The fetch log is JSON lines, one per link (``FetchResult.log_entry``): url, final_url,
outcome, status, attempts, fetched_at, content_type, redirects, detail, ip, and for ok
pages ``warc`` (file name in the folder) and ``offset`` (the response record's gzip
member, the same offset ``read_archive`` reports as ``HtmlPage.offset``).

Both are written by checkpoints (``ArchiveWriter``): every ``checkpoint_pages`` results,
every ``checkpoint_s`` seconds, or when the WARC file reaches ``warc_max_bytes``, the WARC
file is closed, fsynced and renamed into place, and only then is the log segment for
those results written (under a temporary name, renamed). A URL is therefore never in a
log unless its WARC records are in a finished file; an interrupted run loses at most
one checkpoint of work, and a rerun skips every URL found in any log of the folder
(``read_fetch_log``) except the failures worth another try (``is_transient``) and fetches
the rest. A crash between the WARC rename and the log rename leaves records that no log
points to; they are fetched again (the log is the index).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import itertools
import json
import logging
import os
import re
import threading
import time
import zlib
from collections import deque

from warcio.warcwriter import WARCWriter

from common.storage import atomic_path, temporary_path
from corpus.fetch_client import FetchResult
from corpus.fetch_policy import (
    CONNECTION_ERROR,
    DEADLINE,
    DNS_ERROR,
    HTTP_ERROR,
    INTERNAL_ERROR,
    OK,
    RETRY_STATUSES,
    ROBOTS_DISALLOWED,
    ROBOTS_UNREACHABLE,
    FetchConfig,
)

log = logging.getLogger("corpus.fetch")  # one logger for all the fetcher's parts

LOG_PREFIX = "fetch-log-"
LOG_SUFFIX = ".jsonl"
_run_counter = itertools.count()


def _open_for_writing(path: str):
    """The file a WARC is written to (a module function so tests can make a write fail)."""
    return open(path, "wb")


_local = threading.local()


def _record_member(record) -> bytes:
    """One WARC record serialized by warcio, gzipped as its own member."""
    buffer, writer = _local.buffer, _local.writer
    buffer.seek(0)
    buffer.truncate()
    writer.write_record(record)
    packer = zlib.compressobj(_local.level, zlib.DEFLATED, 31)
    return packer.compress(buffer.getvalue()) + packer.flush()


def _warc_writer(level: int) -> WARCWriter:
    if getattr(_local, "writer", None) is None:
        _local.buffer = io.BytesIO()
        _local.writer = WARCWriter(_local.buffer, gzip=False)  # members are gzipped by _record_member
    _local.level = level
    return _local.writer


def _page_members(result: FetchResult, level: int) -> tuple[bytes, bytes, bytes]:
    """The request, response and metadata records of an ok page (runs in any thread)."""
    writer = _warc_writer(level)
    common = {"WARC-Date": result.fetched_at, "WARC-Source-URI": result.url}
    payload = result.raw_head + result.raw_body
    response = writer.create_warc_record(
        result.final_url,
        "response",
        payload=io.BytesIO(payload),
        length=len(payload),
        warc_headers_dict={**common, "WARC-IP-Address": result.ip},
    )
    response_id = response.rec_headers.get_header("WARC-Record-ID")
    request = writer.create_warc_record(
        result.final_url,
        "request",
        payload=io.BytesIO(result.request),
        length=len(result.request),
        warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
    )
    about = json.dumps(
        {"source_url": result.url, "redirects": result.redirects, "attempts": result.attempts, "ip": result.ip},
        ensure_ascii=False,
    ).encode("utf-8")
    metadata = writer.create_warc_record(
        result.final_url,
        "metadata",
        payload=io.BytesIO(about),
        length=len(about),
        warc_content_type="application/json",
        warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
    )
    return _record_member(request), _record_member(response), _record_member(metadata)


class _WarcFile:
    """One WARC file being written under a temporary name; ``finish`` renames it into place."""

    def __init__(self, path: str, config: FetchConfig, level: int):
        self.path = path
        self.name = os.path.basename(path)
        self.temporary = temporary_path(path)
        self.file = _open_for_writing(self.temporary)
        self.size = 0
        self.broken = False
        info = {
            "software": "corpusforge corpus.fetch (warcio)",
            "format": "WARC File Format 1.0",
            "http-header-user-agent": config.user_agent,
            "robots": "obey" if config.respect_robots else "ignore",
        }
        _warc_writer(level)
        self._write(_record_member(_local.writer.create_warcinfo_record(self.name, info)))

    def _write(self, member: bytes) -> None:
        try:
            self.file.write(member)
        except BaseException:
            self.broken = True  # part of a member may be on disk: the file is not kept
            raise
        self.size += len(member)

    def append(self, members: tuple[bytes, bytes, bytes]) -> int:
        """Write one page's members; return the offset of its response record."""
        request, response, metadata = members
        self._write(request)
        offset = self.size
        self._write(response)
        self._write(metadata)
        return offset

    def finish(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.temporary, self.path)

    def discard(self) -> None:
        with contextlib.suppress(Exception):
            self.file.close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.temporary)


class ArchiveWriter:
    """WARC files and log segments of one ``fetch_links`` run, written at checkpoints.

    Records are built and gzipped in a small thread pool (zlib and hashlib release the
    GIL), and appended to the file in the order pages were handed in.
    """

    def __init__(
        self,
        out_dir: str,
        config: FetchConfig,
        prefix: str,
        warc_max_bytes: int,
        checkpoint_pages: int,
        checkpoint_s: float,
        level: int,
        workers: int,
    ):
        self.out_dir = out_dir
        self.config = config
        self.prefix = prefix
        self.warc_max_bytes = warc_max_bytes
        self.checkpoint_pages = checkpoint_pages
        self.checkpoint_s = checkpoint_s
        self.level = level
        self.stamp = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{next(_run_counter)}"
        self.seq = 0
        self.warc: _WarcFile | None = None
        self.entries: list[dict] = []
        self.building: deque = deque()  # (log entry, future of the page's members), in order
        self.in_flight = 4 * workers
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="corpusforge-warc") if workers > 1 else None
        self.last_checkpoint = time.monotonic()

    def add(self, result: FetchResult) -> None:
        entry = result.log_entry()
        if result.outcome != OK:
            self.entries.append(entry)
        elif self.pool is None:
            self._store(entry, _page_members(result, self.level))
        else:
            self.building.append((entry, self.pool.submit(_page_members, result, self.level)))
            self._collect(self.in_flight)
        if (
            len(self.entries) + len(self.building) >= self.checkpoint_pages
            or (self.warc is not None and self.warc.size >= self.warc_max_bytes)
            or time.monotonic() - self.last_checkpoint >= self.checkpoint_s
        ):
            self.checkpoint()

    def _collect(self, keep: int) -> None:
        """Append built pages to the file, in order, until at most ``keep`` are pending."""
        while self.building and (len(self.building) > keep or self.building[0][1].done()):
            entry, future = self.building.popleft()
            self._store(entry, future.result())

    def _store(self, entry: dict, members: tuple[bytes, bytes, bytes]) -> None:
        if self.warc is None:
            name = f"{self.prefix}-{self.stamp}-{self.seq:05d}.warc.gz"
            self.warc = _WarcFile(os.path.join(self.out_dir, name), self.config, self.level)
        entry["offset"] = self.warc.append(members)
        entry["warc"] = self.warc.name
        self.entries.append(entry)

    def checkpoint(self) -> None:
        self._collect(0)
        if self.warc is not None:
            self.warc.finish()  # the WARC is in place before any log line points into it
            self.warc = None
        if self.entries:
            path = os.path.join(self.out_dir, f"{LOG_PREFIX}{self.stamp}-{self.seq:05d}{LOG_SUFFIX}")
            text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in self.entries)
            with atomic_path(path) as temporary:
                with open(temporary, "w", encoding="utf-8") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
            self.entries = []
        self.seq += 1
        self.last_checkpoint = time.monotonic()

    def abort(self) -> None:
        """After an error: keep what was completely written, drop what was not."""
        try:
            if self.warc is None or not self.warc.broken:
                self.checkpoint()  # finishes the pages being built, then renames and logs
                return
        except Exception:
            log.exception("could not save the last checkpoint in %s; keeping only its non-ok results", self.out_dir)
        for _, future in self.building:
            future.cancel()
        self.building.clear()
        if self.warc is not None:
            self.warc.discard()
            self.warc = None
        self.entries = [e for e in self.entries if e["outcome"] != OK]  # their records are gone
        try:
            self.checkpoint()
        except Exception:
            log.exception("could not write the fetch log in %s", self.out_dir)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


# Outcomes that say nothing lasting about a page: a rerun fetches the page again.
TRANSIENT_OUTCOMES = frozenset({DNS_ERROR, ROBOTS_UNREACHABLE, DEADLINE, CONNECTION_ERROR, INTERNAL_ERROR})


def is_transient(entry: dict) -> bool:
    """Whether a fetch log entry records a failure worth trying again on a rerun: no answer
    (connection, DNS, deadline, robots.txt unreachable) or a 429/5xx after the retries."""
    outcome = entry.get("outcome")
    if outcome == HTTP_ERROR:
        return int(entry.get("status") or 0) in RETRY_STATUSES
    if outcome == ROBOTS_DISALLOWED:  # logs written before robots_unreachable existed
        return str(entry.get("detail", "")).startswith("robots.txt unreachable")
    return outcome in TRANSIENT_OUTCOMES


def read_fetch_log(out_dir: str | os.PathLike) -> dict[str, dict]:
    """Every link already fetched into ``out_dir``: url -> its latest log entry."""
    done: dict[str, dict] = {}
    try:
        names = sorted(n for n in os.listdir(out_dir) if n.startswith(LOG_PREFIX) and n.endswith(LOG_SUFFIX))
    except FileNotFoundError:
        return done
    for name in names:
        with open(os.path.join(out_dir, name), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                    url = entry["url"]
                except (ValueError, KeyError, TypeError):
                    log.warning("%s line %d: not a fetch log entry, ignored", name, number)
                    continue
                old = done.get(url)
                if old is None or str(entry.get("fetched_at", "")) >= str(old.get("fetched_at", "")):
                    done[url] = entry
    return done


_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)(-[0-9a-f]+)?$")


def remove_stale_temporaries(out_dir: str) -> list[str]:
    """Remove the hidden partial files (``.NAME.tmp-PID-...``) that a process which is no
    longer running left in ``out_dir`` (killed before it could clean up); return their names.
    ``out_dir`` is a folder of this machine (an object-store fetch runs in a local copy), so
    the process ids are this machine's."""
    removed = []
    for name in os.listdir(out_dir):
        found = _TEMPORARY.match(name)
        if not found or _process_alive(int(found.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out_dir, name))
            removed.append(name)
    if removed:
        log.info("%s: removed %d partial file(s) of an interrupted earlier run", out_dir, len(removed))
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True

