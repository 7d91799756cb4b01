"""The IO layer: every file corpusforge reads or writes, on a disk or an object store.

Paths are Beam ``FileSystems`` paths: a local path (or ``file://``), ``gs://``,
``s3://``, ``hdfs://``, or ``memory://`` (``common.memfs``, for tests). Local paths take
the plain ``os`` route (no Beam import, fsync before rename); every other scheme goes
through ``apache_beam.io.filesystems.FileSystems``, configured by the job's pipeline
options (``--s3_endpoint_url``, ``--project``, ...). This module is the one place in
``corpus/`` that talks to Beam, and only to its FileSystems.

**One file, atomically.** ``open_write``/``write_atomically``/``atomic_path`` write under a
hidden temporary name beside the final one (``.<name>.tmp-<random>``) and rename it when
the block succeeds; on an error the temporary is removed and whatever stood under the
final name is untouched. On an object store the rename is Beam's copy + delete, so a
reader never sees a half-written object under a final name.

**A set of files, atomically: the output contract.** A job's output folder is complete
when it holds ``_SUCCESS``, written last, a JSON manifest of every file of the set (name
relative to the folder, size in bytes, sha256). A job first calls ``begin_output``, which
removes an old ``_SUCCESS`` and writes ``_temporary/job.json``; writers stage their files
under ``_temporary/``; ``commit_output`` writes ``_SUCCESS`` and only then deletes
``_temporary/``. Whatever point a job is killed at, the folder either has a ``_SUCCESS``
that matches its files or no ``_SUCCESS`` and a ``_temporary/job.json`` that says an
unfinished job wrote it. ``check_output`` is what readers use to tell them apart.


The layer is four modules, gathered here so that a job imports one name (``storage.join``,
``storage.begin_output``): ``common.paths`` (paths), ``common.stores`` (stores and their
clients), ``common.files`` (reading, listing and atomic files) and ``common.output`` (the
output contract).
"""

from __future__ import annotations

from common.files import (
    COPY_CHUNK,
    DISK_FULL_ERRNOS,
    STAGING_DIR,
    AtomicFile,
    DiskFullError,
    HashingWriter,
    RunMirror,
    atomic_path,
    copy_file,
    delete,
    disk_full_cause,
    disk_full_message,
    exists,
    file_info,
    free_bytes,
    glob,
    has_magic,
    is_file,
    is_folder,
    list_files,
    local_copy,
    localize,
    makedirs,
    match_files,
    mirrored_folder,
    open_read,
    open_write,
    read_bytes,
    read_text,
    rename,
    size,
    sizes_under,
    sync_mirror,
    temporary_path,
    write_atomically,
)
from common.output import (
    CLAIM_SETTLE_SECONDS,
    JOB_FILE,
    MANIFEST_FORMAT,
    SUCCESS_FILE,
    EmptyOutputError,
    IncompleteOutputError,
    OutputClaimError,
    OutputExistsError,
    abandon_output,
    begin_output,
    check_claim,
    check_output,
    commit_output,
    existing_output,
    failed_job_claim,
    folder_files,
    read_claim,
    read_success,
    record_written,
    staging_path,
)
from common.paths import (
    basename,
    is_local,
    join,
    local_path,
    split,
)
from common.stores import (
    S3_SETTINGS,
    STORE_OPTION_PREFIXES,
    STORE_TIMEOUT_OPTION,
    STORE_TIMEOUT_S,
    StoreError,
    beam_filesystem,
    check_store,
    configure,
    filesystems,
    s3_client,
    split_store_args,
    store_timeout,
)

__all__ = [
    "AtomicFile",
    "CLAIM_SETTLE_SECONDS",
    "COPY_CHUNK",
    "DISK_FULL_ERRNOS",
    "DiskFullError",
    "EmptyOutputError",
    "HashingWriter",
    "IncompleteOutputError",
    "JOB_FILE",
    "MANIFEST_FORMAT",
    "OutputClaimError",
    "OutputExistsError",
    "RunMirror",
    "S3_SETTINGS",
    "STAGING_DIR",
    "STORE_OPTION_PREFIXES",
    "STORE_TIMEOUT_OPTION",
    "STORE_TIMEOUT_S",
    "SUCCESS_FILE",
    "StoreError",
    "abandon_output",
    "atomic_path",
    "basename",
    "beam_filesystem",
    "begin_output",
    "check_claim",
    "check_output",
    "check_store",
    "commit_output",
    "configure",
    "copy_file",
    "delete",
    "disk_full_cause",
    "disk_full_message",
    "existing_output",
    "exists",
    "failed_job_claim",
    "file_info",
    "filesystems",
    "folder_files",
    "free_bytes",
    "glob",
    "has_magic",
    "is_file",
    "is_folder",
    "is_local",
    "join",
    "list_files",
    "local_copy",
    "local_path",
    "localize",
    "makedirs",
    "match_files",
    "mirrored_folder",
    "open_read",
    "open_write",
    "read_bytes",
    "read_claim",
    "read_success",
    "read_text",
    "record_written",
    "rename",
    "s3_client",
    "size",
    "sizes_under",
    "split",
    "split_store_args",
    "staging_path",
    "store_timeout",
    "sync_mirror",
    "temporary_path",
    "write_atomically",
]
