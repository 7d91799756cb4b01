"""The output contract: a job's folder is complete when it holds ``_SUCCESS``, written last, a
manifest of every file of the set; ``_temporary/`` and ``job.json`` while a job runs, a claim
that keeps two jobs out of one folder, and ``check_output`` for readers (docs/storage.md).

Part of the IO layer that ``common.storage`` gathers (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable

from common.errors import InputError
from common.files import (
    STAGING_DIR,
    delete,
    exists,
    file_info,
    glob,
    is_file,
    list_files,
    makedirs,
    read_text,
    sizes_under,
    temporary_path,
    write_atomically,
)
from common.paths import basename, is_local, join, local_path, split

log = logging.getLogger(__name__)


SUCCESS_FILE = "_SUCCESS"


JOB_FILE = "job.json"


MANIFEST_FORMAT = "corpusforge-output-v1"


class IncompleteOutputError(InputError):
    """An output folder that a reader must not take as complete; the message says why."""


def staging_path(folder: str, *names: str) -> str:
    return join(folder, STAGING_DIR, *names)


class OutputExistsError(InputError):
    """The output folder already holds files and the job was not told to replace them."""


# Names of data files that a shard set is made of (``c4-train.00003-of-01024.json.gz``,
# ``links/links-00000-of-00001.parquet``, token shards ``c4_train_000001.bin``): the ones
# a commit removes when the new manifest does not list them.
_SHARD_NAME = re.compile(r"\d{5}-of-\d{5}|_\d{6}\.bin$")


def existing_output(folder: str, keep: tuple[str, ...] = ()) -> list[str]:
    """Files already under ``folder`` (relative names; ``_temporary/`` and ``keep`` prefixes aside)."""
    if is_local(folder):
        if not os.path.exists(local_path(folder)):
            return []
        if not os.path.isdir(local_path(folder)):
            raise OutputExistsError(f"{folder} is a file, not a folder: choose another --output")
    root = folder.rstrip("/") + "/" if not is_local(folder) else local_path(folder).rstrip(os.sep) + os.sep
    names = [path[len(root):].replace(os.sep, "/") for path in sizes_under(folder)]
    return sorted(n for n in names if not n.startswith((STAGING_DIR + "/", *keep)))


class OutputClaimError(OutputExistsError):
    """Another job holds the output folder (its ``_temporary/job.json`` claim), or took it over
    while this job ran: this job writes nothing more and commits nothing."""


# On an object store without a create-if-absent write, a claim is a lease taken in three
# steps: absent -> write -> read back after this many seconds; a job whose id is not the one
# read back lost the race. The claim is checked again before the commit.
CLAIM_SETTLE_SECONDS = 1.0


# Claims this process holds: output folder -> job id (what commit_output checks).
_CLAIMS: dict[str, str] = {}


def _claim_holder_gone(claim: dict) -> bool:
    """Whether a claim was left by a job that no longer runs: one that ended without a
    commit (``abandon_output``), one whose process is gone (on this host) or is this very
    process (an earlier job of it that failed), or a marker without a job id (written by
    an older version, or garbage): only such a claim is taken over."""
    if claim.get("failed") or not claim.get("id"):
        return True
    if claim.get("host") != socket.gethostname() or not isinstance(claim.get("pid"), int):
        return False
    pid = claim["pid"]
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, ValueError):
        return False
    return False


def read_claim(folder: str) -> dict | None:
    """The folder's ``_temporary/job.json`` (a dict, ``{}`` when unreadable), or None when absent."""
    path = staging_path(folder, JOB_FILE)
    if not is_file(path):
        return None
    try:
        text = read_text(path)
    except FileNotFoundError:
        return None
    try:
        claim = json.loads(text)
    except ValueError:
        return {}
    return claim if isinstance(claim, dict) else {}


def _describe_claim(folder: str, claim: dict) -> str:
    return (f"{folder} is being written by another {claim.get('job', 'corpusforge')} job (id {claim.get('id', '?')}, "
            f"pid {claim.get('pid', '?')} on {claim.get('host', '?')}, started {claim.get('started', '?')}): "
            f"wait for it to finish, choose another --output, or remove {staging_path(folder)} if that job is no longer running")


def _try_claim(folder: str, body: str) -> bool:
    """Create ``_temporary/job.json`` if absent (atomically); whether this call created it."""
    path = staging_path(folder, JOB_FILE)
    if is_local(path):
        local = local_path(path)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        temporary = temporary_path(local)
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, local)  # create-if-absent, with its content already complete
            return True
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
    if exists(path):
        return False
    write_atomically(path, body)
    if not path.startswith("memory://"):  # one process's store: nobody else writes between
        time.sleep(CLAIM_SETTLE_SECONDS)
    return read_text(path) == body if exists(path) else False


def _take_over(folder: str, stale: dict) -> None:
    """Move a dead job's claim aside (only one job can), then its staged files."""
    path = staging_path(folder, JOB_FILE)
    if is_local(path):
        aside = temporary_path(local_path(path))
        try:
            os.rename(local_path(path), aside)
        except FileNotFoundError:
            return  # another job moved it first
        with contextlib.suppress(FileNotFoundError):
            os.remove(aside)
        return
    if read_claim(folder) == stale:
        delete([path])


def _is_leftover(name: str, recorded: set[str]) -> bool:
    """Whether ``name`` (relative to the output folder) is a file a corpusforge job writes
    there on its way to a commit: bookkeeping (``_stats.json``, ``_errors/...``: a ``_``
    name), a hidden temporary (``.<name>.tmp-<random>``), a shard of a set, or a file the
    job recorded under ``_temporary/written-*.json``."""
    parts = name.split("/")
    return (name in recorded or any(part.startswith("_") for part in parts)
            or (parts[-1].startswith(".") and ".tmp-" in parts[-1]) or bool(_SHARD_NAME.search(name)))


def failed_job_claim(folder: str) -> dict | None:
    """The claim of a job that ended without a commit into a folder that held nothing when
    it started (its ``job.json`` says ``fresh``): killed, out of disk space, or failed.
    Whatever such a folder holds, that job wrote (or something wrote after it), and no
    committed set is there (no ``_SUCCESS``): its rerun may reclaim the folder without
    ``--overwrite``. None for any other folder."""
    if is_file(join(folder, SUCCESS_FILE)):
        return None
    claim = read_claim(folder)
    if not claim or claim.get("fresh") is not True or not claim.get("id") or not _claim_holder_gone(claim):
        return None
    return claim


def _recorded_names(folder: str) -> set[str]:
    """The file names a job recorded under ``_temporary/written-*.json`` (unreadable records aside)."""
    names: set[str] = set()
    for path in glob(staging_path(folder, "written-*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            names.update(str(info["name"]) for info in json.loads(read_text(path)))
    return names


def begin_output(folder: str, job: str, *, overwrite: bool = False, keep: tuple[str, ...] = ()) -> str:
    """Claim ``folder`` for ``job`` and mark it as being written: returns the job id.

    The claim is ``_temporary/job.json``, created only if absent (a hard link on a disk; on
    an object store a write read back after ``CLAIM_SETTLE_SECONDS``), so of two jobs started
    at once on one folder exactly one goes on; the other gets ``OutputClaimError`` before it
    changes anything. A claim whose process is gone (same host) is taken over, with a
    warning. Then the old ``_SUCCESS`` goes, so a reader never takes a half-replaced set as
    the old complete one, and so do the files a dead job staged.

    A folder that already holds files (other than ``_temporary/`` and ``keep``, e.g. the
    fetch logs a WebText rerun resumes from) is refused with ``OutputExistsError`` unless
    ``overwrite``: then the old files stay until ``commit_output``, which removes the
    shard files the new manifest does not list, so old and new sets never mix. The one
    exception is the rerun of a failed job (``failed_job_claim``: no ``_SUCCESS``, and the
    claim of a job that is gone and found the folder empty): it goes on without
    ``overwrite``, and removes that job's leftovers (``_is_leftover``) once it holds the
    claim, so what it commits equals a run into an empty folder.
    """
    found = existing_output(folder, keep)
    failed = failed_job_claim(folder) if found else None
    if found and not overwrite and failed is None:
        raise OutputExistsError(f"{folder} already holds {len(found)} file(s) ({found[0]}{', ...' if len(found) > 1 else ''}): "
                                f"pass --overwrite to replace them with this {job} job's output, or choose another --output")
    recorded = _recorded_names(folder) if failed else set()
    leftovers = [name for name in found if _is_leftover(name, recorded)] if failed else []
    makedirs(folder)
    job_id = uuid.uuid4().hex
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    # "fresh": nothing here but a failed job's leftovers, so this job's own failure leaves a folder its rerun reclaims
    body = json.dumps({"job": job, "id": job_id, "host": socket.gethostname(), "pid": os.getpid(), "started": started,
                       "fresh": not found or failed is not None}) + "\n"
    taken = None
    for attempt in range(2):
        if _try_claim(folder, body):
            break
        claim = read_claim(folder)
        if claim is None and attempt == 0:
            continue  # the holder committed or moved it in between: try once more
        if claim is None or not _claim_holder_gone(claim) or attempt:
            raise OutputClaimError(_describe_claim(folder, claim or {}))
        log.warning("%s: taking over the claim of a %s job that is no longer running (pid %s, started %s)",
                    folder, claim.get("job", "corpusforge"), claim.get("pid"), claim.get("started"))
        _take_over(folder, claim)
        taken = claim
    if failed is not None and (taken or {}).get("id") != failed["id"]:
        # The failed job's claim went between the look and the claim (another job took the folder
        # over, and may have committed into it): what was judged its leftovers may not be.
        if read_claim(folder) == json.loads(body):
            delete([staging_path(folder, JOB_FILE)])
        raise OutputClaimError(f"{folder}: another job claimed the folder while this {job} job took over the failed "
                               f"{failed.get('job', 'corpusforge')} job's claim: nothing was changed; run it again")
    _CLAIMS[folder] = job_id
    if leftovers:
        assert failed is not None  # leftovers are found only for a failed job
        log.info("%s: removing %d file(s) that a %s job left when it failed (started %s, pid %s): %s%s", folder,
                    len(leftovers), failed.get("job", "corpusforge"), failed.get("started"), failed.get("pid"),
                    leftovers[0], ", ..." if len(leftovers) > 1 else "")
    # What a dead job staged goes; claims other jobs are writing now (``.job.json.tmp-*``) stay.
    staged = [p for p in sizes_under(staging_path(folder)) if not basename(p).startswith((JOB_FILE, "." + JOB_FILE))]
    delete([join(folder, SUCCESS_FILE)] + [join(folder, *name.split("/")) for name in leftovers] + staged)
    return job_id


def check_claim(folder: str) -> None:
    """Raise ``OutputClaimError`` unless this process's claim on ``folder`` still stands."""
    job_id = _CLAIMS.get(folder)
    if job_id is None:
        return  # not claimed by this process (a caller that manages the folder itself)
    claim = read_claim(folder)
    if not claim or claim.get("id") != job_id:
        raise OutputClaimError(
            f"{folder}: not committed: this job's claim ({staging_path(folder, JOB_FILE)}, id {job_id}) was removed or taken "
            f"by {('another ' + str(claim.get('job')) + ' job (id ' + str(claim.get('id')) + ')') if claim else 'someone else'} "
            "while it ran; its staged files cannot be trusted. Rerun it alone")


def record_written(folder: str, label: str, infos: list[dict]) -> str:
    """Called by the writer of a file set (a pipeline step): its manifest entries, staged."""
    path = staging_path(folder, f"written-{label}.json")
    write_atomically(path, json.dumps(sorted(infos, key=lambda i: i["name"]), ensure_ascii=False) + "\n")
    return path


def abandon_output(folder: str, reason: str) -> None:
    """End this process's job on ``folder`` without a commit: its claim stays, marked with
    ``reason``, so readers refuse the folder and say why; the next job takes it over."""
    claim = read_claim(folder) or {}
    if claim.get("id") == _CLAIMS.pop(folder, None):
        claim["failed"] = reason
        write_atomically(staging_path(folder, JOB_FILE), json.dumps(claim) + "\n")


class EmptyOutputError(IncompleteOutputError):
    """A job that wrote documents found no shard recorded at its commit: nothing is committed."""


def commit_output(folder: str, job: str, extra_files: Iterable[str] = (), *, expect_written: bool = False,
                  replaces: Iterable[str] = ()) -> dict:
    """Write ``_SUCCESS`` (the manifest of every file written) and remove ``_temporary/``.

    The manifest holds the entries the writers recorded with ``record_written`` and the
    ``extra_files`` (names relative to ``folder``, e.g. ``_stats.json``) that exist, read
    back for their size and sha256. The job's claim is checked first (``check_claim``);
    with ``expect_written`` (the job's writers ran), a commit that finds no recorded
    file is refused (``EmptyOutputError``) rather than taken as an empty set. Shard files
    of an earlier set that the manifest does not list are removed, and so are the names
    in ``replaces`` (an older layout's bookkeeping files) that it does not list.
    """
    check_claim(folder)
    entries: dict[str, dict] = {}
    recorded = glob(staging_path(folder, "written-*.json"))
    if expect_written and not recorded:
        raise EmptyOutputError(f"{folder}: not committed: no shard file was recorded under {staging_path(folder)} "
                               "although the job's writers ran (its staging was removed while it ran?)")
    for path in recorded:
        for info in json.loads(read_text(path)):
            entries[info["name"]] = info
    for name in extra_files:
        path = join(folder, name)
        if is_file(path):
            entries[name] = file_info(path, name)
    manifest = {
        "format": MANIFEST_FORMAT,
        "job": job,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "files": [entries[name] for name in sorted(entries)],
    }
    check_claim(folder)
    write_atomically(join(folder, SUCCESS_FILE), json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    delete([staging_path(folder)])
    _CLAIMS.pop(folder, None)
    listed = set(entries)
    replaced = set(replaces)
    stale = [name for name in existing_output(folder) if name not in listed and (_SHARD_NAME.search(name) or name in replaced)]
    if stale:
        log.info("%s: removing %d file(s) of an earlier set that this one replaces (%s%s)",
                 folder, len(stale), stale[0], ", ..." if len(stale) > 1 else "")
        delete([join(folder, *name.split("/")) for name in stale])
    return manifest


def read_success(folder: str) -> dict | None:
    """The folder's manifest, or None when it has no ``_SUCCESS``."""
    path = join(folder, SUCCESS_FILE)
    if not is_file(path):
        return None
    try:
        manifest = json.loads(read_text(path))
    except ValueError as exc:
        raise IncompleteOutputError(f"{path}: not a corpusforge manifest ({exc})") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        raise IncompleteOutputError(f"{path}: not a corpusforge manifest (no file list)")
    return manifest


_WARNED: set[str] = set()


def check_output(folder: str) -> list[str] | None:
    """The files (paths) a complete output folder's ``_SUCCESS`` lists, after checking that
    each exists with its recorded size. Raises ``IncompleteOutputError`` for a folder that
    an unfinished or failed job left, or whose files no longer match the manifest. Returns
    None, with a warning, for a folder without any corpusforge marker (files from
    elsewhere, e.g. a C4 download): completeness cannot be told there.
    """
    manifest = read_success(folder)
    if manifest is None:
        job_file = staging_path(folder, JOB_FILE)
        if is_file(job_file):
            try:
                job = json.loads(read_text(job_file))
            except ValueError:
                job = {}
            ended = f"ended without a commit because {job['failed']}" if job.get("failed") else "never finished"
            raise IncompleteOutputError(
                f"{folder}: incomplete output: a {job.get('job', 'corpusforge')} job started "
                f"{job.get('started', '')} into it and {ended} (no {SUCCESS_FILE}; "
                f"{STAGING_DIR}/{JOB_FILE} is still there). Rerun the job."
            )
        if folder not in _WARNED:
            _WARNED.add(folder)
            log.warning("%s has no %s marker: reading every shard in it; corpusforge cannot tell whether "
                        "the set is complete", folder, SUCCESS_FILE)
        return None
    present = sizes_under(folder)
    paths = []
    for entry in manifest["files"]:
        path = join(folder, entry["name"])
        if path not in present:
            raise IncompleteOutputError(f"{folder}: {entry['name']} is listed in {SUCCESS_FILE} but missing")
        if present[path] != entry["bytes"]:
            raise IncompleteOutputError(
                f"{folder}: {entry['name']} has {present[path]:,} bytes, {SUCCESS_FILE} says {entry['bytes']:,}: "
                "the file changed after the job finished")
        paths.append(path)
    return paths


def folder_files(folder: str, wanted, subfolders: Iterable[str] = ()) -> list[str]:
    """The files a reader takes directly in ``folder`` and in its ``subfolders`` (names, e.g.
    one per shard format), sorted: those its ``_SUCCESS`` lists (checked by
    ``check_output``; a wanted file it does not list is named in a warning and skipped),
    or, without a marker, every file there. ``wanted(name)`` filters by file name."""
    listed = check_output(folder)
    folders = [folder] + [join(folder, name) for name in subfolders]
    parents = {split(join(where, "-"))[0].rstrip("/").rstrip(os.sep) for where in folders}  # as listings spell them

    def taken(path: str) -> bool:  # directly in one of the folders (a store's "*" may match across "/")
        return split(path)[0].rstrip("/").rstrip(os.sep) in parents and wanted(basename(path))

    present = sorted({p for where in folders if not is_local(where) or os.path.isdir(local_path(where))
                      for p in list_files(where) if taken(p)})
    if listed is None:
        return present
    own = sorted(p for p in listed if taken(p))
    unlisted = sorted(set(present) - set(own))
    if unlisted:
        log.warning("%s: ignoring %d file(s) that its %s does not list (another run's?): %s",
                    folder, len(unlisted), SUCCESS_FILE, ", ".join(map(basename, unlisted[:5])))
    return own
