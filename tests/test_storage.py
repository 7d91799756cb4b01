"""common.storage: one IO layer for disks and object stores, and the output contract
(_temporary/ while a job runs, _SUCCESS when its set is complete)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import memfs, storage
from corpus.records import Document
from corpus.shards import find_shards, read_documents, write_shards
from pipelines.jobs import STATS_FILE
from pipelines.steps import ERRORS_FILE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["local", "memory"])
def root(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "store")
        return
    memfs.clear()
    yield f"memory://bucket-{request.node.name.split('[')[0][-20:]}"
    memfs.clear()


def test_write_read_list_and_delete(root):
    storage.write_atomically(storage.join(root, "a", "x.txt"), "hello")
    storage.write_atomically(storage.join(root, "a", "y.bin"), b"\x00\x01")
    storage.write_atomically(storage.join(root, "a", "sub", "z.txt"), "deep")
    assert storage.read_text(storage.join(root, "a", "x.txt")) == "hello"
    assert storage.size(storage.join(root, "a", "y.bin")) == 2
    assert [storage.basename(p) for p in storage.list_files(storage.join(root, "a"))] == ["x.txt", "y.bin"]
    assert [storage.basename(p) for p in storage.glob(storage.join(root, "a", "*.txt"))] == ["x.txt"]
    assert storage.is_folder(storage.join(root, "a")) and not storage.is_folder(storage.join(root, "nothing"))
    storage.delete([storage.join(root, "a")])
    assert not storage.exists(storage.join(root, "a", "x.txt")) and not storage.exists(storage.join(root, "a", "sub", "z.txt"))


def test_a_failed_write_leaves_the_old_file_and_no_temporary(root):
    path = storage.join(root, "f.txt")
    storage.write_atomically(path, "old")
    with pytest.raises(RuntimeError):
        with storage.open_write(path) as f:
            f.write(b"half of the new")
            raise RuntimeError("disk full")
    assert storage.read_text(path) == "old"
    assert [storage.basename(p) for p in storage.list_files(root)] == ["f.txt"]


def test_atomic_path_uploads_what_a_library_wrote_to_a_local_name(root):
    path = storage.join(root, "plots", "p.bin")
    with storage.atomic_path(path) as local:
        with open(local, "wb") as f:
            f.write(b"written by name")
    assert storage.read_bytes(path) == b"written by name"


def docs(n: int) -> list[Document]:
    return [Document(text=f"document {i} " * 5, url=f"http://example.com/{i}", timestamp="2019-04-25T12:57:54Z") for i in range(n)]


def test_a_committed_set_reads_back_exactly_what_its_manifest_lists(root, caplog):
    out = storage.join(root, "out")
    storage.begin_output(out, "test")
    writer_paths = write_shards(docs(20), out, fmt="jsonl", name="t", num_shards=3)
    infos = [storage.file_info(p, storage.basename(p)) for p in writer_paths]
    storage.record_written(out, "t-train", infos)
    storage.write_atomically(storage.join(out, STATS_FILE), "{}\n")
    manifest = storage.commit_output(out, "test", extra_files=[STATS_FILE, ERRORS_FILE])
    assert [f["name"] for f in manifest["files"]] == sorted([storage.basename(p) for p in writer_paths] + [STATS_FILE])
    assert not storage.exists(storage.staging_path(out, storage.JOB_FILE))
    assert json.loads(storage.read_text(storage.join(out, "_SUCCESS")))["job"] == "test"
    # A stray shard from another run is ignored (and named in a warning), not mixed in.
    storage.write_atomically(storage.join(out, "t-train.00000-of-00009.jsonl"), json.dumps({"text": "stale", "url": "u", "timestamp": ""}) + "\n")
    with caplog.at_level(logging.WARNING):
        assert find_shards(out) == sorted(writer_paths)
    assert "t-train.00000-of-00009.jsonl" in caplog.text
    assert len(list(read_documents(out))) == 20


def test_an_unfinished_job_is_refused_by_readers(root):
    out = storage.join(root, "out")
    write_shards(docs(5), out, fmt="jsonl", name="t", num_shards=1)
    storage.begin_output(out, "c4", overwrite=True)  # a rerun starts and is killed before it commits
    with pytest.raises(storage.IncompleteOutputError, match="a c4 job started .* never finished"):
        find_shards(out)


def _commit(out, paths, job="read"):
    storage.record_written(out, "t", [storage.file_info(p, storage.basename(p)) for p in paths])
    storage.commit_output(out, job)


def test_a_non_empty_output_is_refused_unless_overwrite_and_old_shards_go_at_the_commit(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "read")
    _commit(out, write_shards(docs(6), out, fmt="jsonl", name="t", num_shards=2))
    assert storage.existing_output(out) == ["_SUCCESS", "t-train.00000-of-00002.jsonl", "t-train.00001-of-00002.jsonl"]
    with pytest.raises(storage.OutputExistsError, match=r"already holds 3 file\(s\) \(_SUCCESS, ...\): pass --overwrite"):
        storage.begin_output(out, "read")
    assert storage.read_success(out) is not None  # refused before anything changed
    storage.begin_output(out, "read", overwrite=True)
    _commit(out, write_shards(docs(6), out, fmt="jsonl", name="t", num_shards=1))
    assert storage.existing_output(out) == ["_SUCCESS", "t-train.00000-of-00001.jsonl"]  # never two sets side by side
    assert len(find_shards(out)) == 1
    fetch = storage.join(root, "fetched")
    storage.write_atomically(storage.join(fetch, "fetch", "shard-00000", "log.jsonl"), "{}\n")
    storage.begin_output(fetch, "webtext", keep=("fetch/",))  # what a resumed fetch left does not block it


def test_a_file_changed_after_the_commit_is_refused(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "test")
    (path,) = write_shards(docs(5), out, fmt="jsonl", name="t", num_shards=1)
    storage.record_written(out, "t", [storage.file_info(path, storage.basename(path))])
    storage.commit_output(out, "test")
    storage.write_atomically(path, storage.read_bytes(path)[:-10])
    with pytest.raises(storage.IncompleteOutputError, match="the file changed after the job finished"):
        find_shards(out)
    storage.delete([path])
    with pytest.raises(storage.IncompleteOutputError, match="listed in _SUCCESS but missing"):
        find_shards(out)


def test_a_folder_without_marker_is_read_with_a_warning(root, caplog):
    out = storage.join(root, "downloaded")
    paths = write_shards(docs(4), out, fmt="c4json", name="c4", num_shards=2)
    with caplog.at_level(logging.WARNING):
        assert find_shards(out) == sorted(paths)
    assert "has no _SUCCESS marker" in caplog.text


def test_a_job_rerun_replaces_the_old_marker_first(tmp_path):
    out = str(tmp_path / "out")
    storage.begin_output(out, "first")
    storage.commit_output(out, "first")
    assert storage.read_success(out)["job"] == "first"
    storage.begin_output(out, "second", overwrite=True)
    assert storage.read_success(out) is None
    assert json.loads(storage.read_text(storage.staging_path(out, storage.JOB_FILE)))["job"] == "second"


def test_empty_and_large_objects_round_trip_through_memory():
    memfs.clear()
    storage.write_atomically("memory://b/empty", b"")
    big = bytes(range(256)) * 40_000
    storage.write_atomically("memory://b/big", big)
    assert storage.read_bytes("memory://b/empty") == b"" and storage.read_bytes("memory://b/big") == big
    local = storage.localize("memory://b/big")
    with open(local, "rb") as f:
        assert f.read() == big
    memfs.clear()


def _foreign_claim(out: str, pid: int, host: str | None = None) -> None:
    claim = {"job": "c4", "id": "0" * 32, "host": host or socket.gethostname(), "pid": pid, "started": "2026-01-01T00:00:00+00:00"}
    storage.write_atomically(storage.staging_path(out, storage.JOB_FILE), json.dumps(claim) + "\n")


def test_a_folder_claimed_by_a_running_job_is_refused_before_anything_changes(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "read")
    _commit(out, write_shards(docs(3), out, fmt="jsonl", name="t", num_shards=1))
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as holder:
        try:
            _foreign_claim(out, holder.pid)
            with pytest.raises(storage.OutputClaimError, match=rf"being written by another c4 job \(id 0+, pid {holder.pid} on "):
                storage.begin_output(out, "read", overwrite=True)
            _foreign_claim(out, holder.pid, host="elsewhere.example")
            with pytest.raises(storage.OutputClaimError, match="on elsewhere.example"):
                storage.begin_output(out, "read", overwrite=True)
        finally:
            holder.kill()
    assert storage.read_success(out) is not None  # the complete set it held is untouched
    # The holder is gone now: its claim is taken over, and the new job commits.
    _foreign_claim(out, holder.pid)
    storage.write_atomically(storage.staging_path(out, "stage", "left-by-the-dead-job.pkl.zst"), b"x")
    storage.begin_output(out, "read", overwrite=True)
    assert not storage.exists(storage.staging_path(out, "stage", "left-by-the-dead-job.pkl.zst"))
    _commit(out, write_shards(docs(4), out, fmt="jsonl", name="t", num_shards=1))
    assert len(list(read_documents(out))) == 4


def test_a_job_whose_claim_was_taken_while_it_ran_does_not_commit(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "c4")
    paths = write_shards(docs(3), out, fmt="jsonl", name="t", num_shards=1)
    _foreign_claim(out, 1, host="elsewhere.example")  # another job's claim replaced ours
    with pytest.raises(storage.OutputClaimError, match=r"not committed: this job's claim .* was removed or taken by another c4 job"):
        _commit(out, paths)
    assert storage.read_success(out) is None
    storage.delete([storage.staging_path(out)])  # our staging removed by someone else
    with pytest.raises(storage.OutputClaimError, match="removed or taken by someone else"):
        _commit(out, paths)


def test_a_commit_that_finds_no_recorded_shard_is_refused_when_writers_ran(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "c4")
    with pytest.raises(storage.EmptyOutputError, match="no shard file was recorded"):
        storage.commit_output(out, "c4", expect_written=True)
    assert storage.read_success(out) is None


def test_a_file_that_vanishes_while_a_folder_is_listed_is_left_out(tmp_path, monkeypatch):
    # Another job's claim-in-progress (.job.json.tmp-*) can be renamed away between the
    # listing and the size lookup: the listing goes on without it instead of raising.
    out = tmp_path / "out"
    (out / storage.STAGING_DIR).mkdir(parents=True)
    (out / "kept.txt").write_text("abc")
    (out / storage.STAGING_DIR / ".job.json.tmp-1-x").write_text("{}")
    getsize = os.path.getsize

    def vanishing(path):
        if os.path.basename(path).startswith(".job.json.tmp-"):
            os.remove(path)
        return getsize(path)

    monkeypatch.setattr(os.path, "getsize", vanishing)
    assert storage.existing_output(str(out)) == ["kept.txt"]
    assert not (out / storage.STAGING_DIR / ".job.json.tmp-1-x").exists()  # it did vanish mid-listing


@pytest.mark.pipeline  # jobs in subprocesses, each holding its claim for seconds
def test_of_many_jobs_claiming_one_folder_at_once_exactly_one_wins(tmp_path):
    out = str(tmp_path / "out")
    # Each says what it got, then waits for its standard input to close: the winner lives on
    # (holding its claim) until every other one has answered.
    script = ("import sys; from common import storage\n"
              "try:\n    storage.begin_output(sys.argv[1], 'c4'); print('claimed', flush=True)\n"
              "except storage.OutputClaimError as e:\n    print('refused', e, flush=True)\n"
              "sys.stdin.read()\n")
    for _ in range(3):
        storage.delete([out])
        runs = [subprocess.Popen([sys.executable, "-c", script, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO))) for _ in range(6)]
        said = [run.stdout.readline() for run in runs]  # all six have tried while all six live
        for run in runs:
            run.stdin.close()
            assert run.wait(timeout=60) == 0
            run.stdout.close()
        assert sum(s.startswith("claimed") for s in said) == 1, said
        assert sum(s.startswith("refused") and "being written by another c4 job" in s for s in said) == 5, said


def test_a_marker_without_a_job_id_or_marked_failed_is_taken_over(root):
    out = storage.join(root, "out")
    storage.write_atomically(storage.staging_path(out, storage.JOB_FILE), json.dumps({"job": "c4", "started": "2020-01-01"}) + "\n")
    job_id = storage.begin_output(out, "read")  # an older version's marker: no id, no pid
    assert storage.read_claim(out)["id"] == job_id
    storage.abandon_output(out, "it read no record from any input file")
    assert storage.read_claim(out)["failed"].startswith("it read no record")
    with pytest.raises(storage.IncompleteOutputError, match="ended without a commit because it read no record"):
        storage.check_output(out)
    _foreign_claim(out, 1, host="elsewhere.example")
    claim = json.loads(storage.read_text(storage.staging_path(out, storage.JOB_FILE)))
    storage.write_atomically(storage.staging_path(out, storage.JOB_FILE), json.dumps(dict(claim, failed="disk full")) + "\n")
    assert storage.begin_output(out, "read") != job_id  # a failed job elsewhere holds nothing


def _killed(out: str) -> None:
    """What a job killed mid-run leaves: its claim, naming a process that is gone."""
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        pass
    claim = storage.read_claim(out)
    storage.write_atomically(storage.staging_path(out, storage.JOB_FILE), json.dumps(dict(claim, pid=gone.pid)) + "\n")


def test_a_failed_jobs_own_leftovers_never_block_its_rerun(root):
    out = storage.join(root, "out")
    storage.begin_output(out, "read")  # into an empty folder
    storage.write_atomically(storage.join(out, ERRORS_FILE), "")
    shards = write_shards(docs(6), out, fmt="jsonl", name="t", num_shards=2)
    storage.record_written(out, "t", [storage.file_info(p, storage.basename(p)) for p in shards])
    storage.write_atomically(storage.join(out, ".t-validation.00000-of-00001.jsonl.tmp-1-x"), "half a shard")
    storage.write_atomically(storage.join(out, "tokenizer", "vocab.json"), "{}")  # a file of the job's own that rewrites it
    _killed(out)
    assert storage.existing_output(out) == [".t-validation.00000-of-00001.jsonl.tmp-1-x", "_errors/errors.jsonl",
                                            "t-train.00000-of-00002.jsonl", "t-train.00001-of-00002.jsonl", "tokenizer/vocab.json"]
    storage.begin_output(out, "read")  # the same command again, no --overwrite
    assert storage.existing_output(out) == ["tokenizer/vocab.json"]  # the leftovers went; a file of no known kind stays
    _killed(out)  # the rerun fails too: its own leftovers do not block the next one either
    storage.write_atomically(storage.join(out, STATS_FILE), "{}")
    storage.begin_output(out, "read")
    assert storage.existing_output(out) == ["tokenizer/vocab.json"]
    _commit(out, write_shards(docs(6), out, fmt="jsonl", name="t", num_shards=1))
    assert storage.existing_output(out) == ["_SUCCESS", "t-train.00000-of-00001.jsonl", "tokenizer/vocab.json"]
    assert len(list(read_documents(out))) == 6


def test_a_committed_set_or_files_not_left_by_a_failed_job_still_need_overwrite(root):
    # A failed --overwrite rerun over a committed set: the old set's files are not its leftovers.
    out = storage.join(root, "out")
    storage.begin_output(out, "read")
    _commit(out, write_shards(docs(3), out, fmt="jsonl", name="t", num_shards=1))
    storage.begin_output(out, "read", overwrite=True)
    storage.write_atomically(storage.join(out, ERRORS_FILE), "")
    _killed(out)
    with pytest.raises(storage.OutputExistsError, match=r"already holds 2 file\(s\) \(_errors/errors.jsonl, ...\): pass --overwrite"):
        storage.begin_output(out, "read")
    assert storage.existing_output(out) == ["_errors/errors.jsonl", "t-train.00000-of-00001.jsonl"]  # refused: nothing changed
    storage.begin_output(out, "read", overwrite=True)  # the command it ran, run again
    _commit(out, write_shards(docs(4), out, fmt="jsonl", name="t", num_shards=1))
    assert len(list(read_documents(out))) == 4
    # Bookkeeping files with no claim (copied from elsewhere), or under an older version's claim
    # (which does not say it found the folder empty), or a live job's claim.
    for claim in (None, {"job": "c4", "id": "1" * 32, "host": socket.gethostname(), "pid": 1 << 30, "started": "2020-01-01"}):
        other = storage.join(root, f"other-{claim is None}")
        storage.write_atomically(storage.join(other, ERRORS_FILE), "")
        if claim:
            storage.write_atomically(storage.staging_path(other, storage.JOB_FILE), json.dumps(claim) + "\n")
        with pytest.raises(storage.OutputExistsError, match=r"already holds 1 file\(s\) \(_errors/errors.jsonl\): pass --overwrite"):
            storage.begin_output(other, "read")
    live = storage.join(root, "live")
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as holder:
        try:
            storage.begin_output(live, "c4")
            storage.write_atomically(storage.join(live, ERRORS_FILE), "")
            claim = storage.read_claim(live)
            storage.write_atomically(storage.staging_path(live, storage.JOB_FILE), json.dumps(dict(claim, pid=holder.pid)) + "\n")
            with pytest.raises(storage.OutputExistsError, match=r"live already holds 1 file\(s\) \(_errors/errors.jsonl\): pass --overwrite"):
                storage.begin_output(live, "c4")
        finally:
            holder.kill()
    assert storage.existing_output(live) == ["_errors/errors.jsonl"]  # the running job's files were left alone


def _manifest_files(out: Path) -> list[dict]:
    """The name, size and sha256 of every file a committed folder's _SUCCESS lists."""
    return json.loads((out / storage.SUCCESS_FILE).read_text())["files"]


def _folder_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


@pytest.mark.pipeline  # the corpusforge command in subprocesses: a failed run, its rerun, a clean run
def test_a_job_that_ran_out_of_disk_space_reruns_as_its_message_advises(sample_crawl, tmp_path):
    from full_disk import error_lines, small_disk

    command = [sys.executable, "-m", "pipelines.cli", "-q", "read", "--input", *sample_crawl.wet_paths, "--num_shards", "2",
               "--format", "jsonl", "--output"]
    clean = tmp_path / "clean"
    assert subprocess.run(command + [str(clean)], capture_output=True, cwd=REPO, timeout=600).returncode == 0
    # 400 KiB: the staged runs, the errors file and the first shard (277 KB) fit, the second (511 KB) does not
    with small_disk(tmp_path / "disk", 400 << 10) as disk:
        out = disk.folder / "out"
        failed = disk.run(command + [str(out)], cwd=REPO)
        assert failed.returncode == 1, failed.stderr[-3000:]
        (line,) = error_lines(failed.stderr)
        assert "and run it again" in line and not (out / storage.SUCCESS_FILE).exists()
        assert "_errors/errors.jsonl" in storage.existing_output(str(out))  # what blocked the rerun: the failed job's own files
        disk.grow(16 << 20)  # space freed, as the line asks
        again = disk.run(command + [str(out)], cwd=REPO)
        assert again.returncode == 0, again.stderr[-3000:]
        assert not error_lines(again.stderr) and "Traceback" not in again.stderr
        assert _manifest_files(out) == _manifest_files(clean)
        assert _folder_files(out) == _folder_files(clean)
        print(disk.kind, line)


@pytest.mark.pipeline  # the corpusforge command in subprocesses: a killed run, its rerun, a clean run
def test_a_job_killed_mid_run_reruns_with_the_same_command_and_commits_a_clean_runs_output(sample_crawl, needs_punkt, tmp_path):
    command = [sys.executable, "-m", "pipelines.cli", "-q", "c4", "--input", *sample_crawl.wet_paths, "--badwords",
               sample_crawl.badwords_path, "--num_shards", "2", "--format", "c4json", "--output"]
    out, clean = tmp_path / "out", tmp_path / "clean"
    job = subprocess.Popen(command + [str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        # Killed once it has written into the folder: the errors file is there seconds before the shards.
        while job.poll() is None and not (out / ERRORS_FILE).exists():
            time.sleep(0.01)
        assert job.poll() is None, "the job ended before it wrote into its output"
        os.kill(job.pid, signal.SIGKILL)
        assert job.wait(timeout=60) == -signal.SIGKILL
    finally:
        if job.poll() is None:
            os.kill(job.pid, signal.SIGKILL)
            job.wait(timeout=60)
    assert not (out / storage.SUCCESS_FILE).exists() and (out / ERRORS_FILE).exists()
    again = subprocess.run(command + [str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already holds" not in again.stderr and "Traceback" not in again.stderr
    assert subprocess.run(command + [str(clean)], capture_output=True, cwd=REPO, timeout=600).returncode == 0
    assert _manifest_files(out) == _manifest_files(clean)
    assert _folder_files(out) == _folder_files(clean)
