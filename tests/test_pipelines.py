"""The read job on Beam's DirectRunner: shards, errors output, counters, determinism."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from corpus.inputs import ManifestPathError, join_base, read_manifest
from corpus.shards import read_documents
from corpus.warc import ReadStats, read_archive
from pipelines.jobs import STATS_FILE
from pipelines.read.job import run
from pipelines.steps import ERRORS_FILE

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


def copy_inputs(real_data: Path, tmp_path: Path) -> Path:
    """Real WET files, good and damaged, in one input folder."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(real_data / "warc/ccscalatools/filter_test_1.wet.gz", folder / "a-good.wet.gz")
    shutil.copy(real_data / "warc/whirlwind/whirlwind.warc.wet.gz", folder / "b-whirlwind.wet.gz")
    for name in ("appended_zip_fragment_unexpected_eof.wet.gz", "corrupt_warcconversion_1.wet.gz", "fragment1_incomplete_last.wet.gz"):
        shutil.copy(real_data / "warc_malformed/ccscalatools" / name, folder / f"c-{name}")
    shutil.copy(real_data / "warc/resiliparse/warcfile.warc.gz", folder / "d-pages.warc.gz")
    return folder


@pytest.fixture(scope="module")
def inputs(real_data, tmp_path_factory):
    return copy_inputs(real_data, tmp_path_factory.mktemp("read-job"))


def expected_counts(folder: Path) -> ReadStats:
    stats = ReadStats()
    for path in sorted(folder.iterdir()):
        for _ in read_archive(str(path), stats=stats):
            pass
    return stats


def test_read_job_writes_every_document_and_every_error(inputs, tmp_path):
    out = tmp_path / "out"
    stats = run(["--input", str(inputs), "--output", str(out), "--num_shards", "3", "--format", "parquet"])
    expected = expected_counts(inputs)
    shards = sorted(p.name for p in out.glob("*.parquet"))
    assert shards == [f"docs-train.0000{i}-of-00003.parquet" for i in range(3)]
    docs = list(read_documents(str(out)))
    assert len(docs) == expected.counts["produced:conversion"] == 25 + 1 + 15 + 4 + 1
    assert {d.meta["source"].rsplit("/", 1)[1] for d in docs} == {p.name for p in inputs.iterdir() if ".wet" in p.name}
    errors = [json.loads(line) for line in (out / ERRORS_FILE).read_text().splitlines()]
    assert sorted(e["reason"] for e in errors) == ["clipped_record", "missing_target_uri", "truncated_gzip"]
    counters = stats["counters"]["read-archive"]
    assert counters == {k: v for k, v in sorted(expected.counts.items())}
    assert counters["produced:response"] == 16  # WARC pages are counted, not written
    on_disk = json.loads((out / STATS_FILE).read_text())
    assert on_disk["examples"]["truncated_gzip"][0]["offset"] == 49258
    assert on_disk["files"] == 6


def test_read_job_output_is_byte_identical_across_reruns_and_workers(inputs, tmp_path):
    def shard_bytes(out: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(out.glob("*.json.gz"))}

    common = ["--input", str(inputs), "--num_shards", "2", "--text_mode", "c4"]
    run(common + ["--output", str(tmp_path / "one")])
    run(common + ["--output", str(tmp_path / "again")])
    run(common + ["--output", str(tmp_path / "two"), "--direct_num_workers", "2", "--direct_running_mode", "multi_processing"])
    first = shard_bytes(tmp_path / "one")
    assert len(first) == 2 and first == shard_bytes(tmp_path / "again") == shard_bytes(tmp_path / "two")
    assert (tmp_path / "one" / ERRORS_FILE).read_bytes() == (tmp_path / "two" / ERRORS_FILE).read_bytes()
    lines = [json.loads(line) for data in first.values() for line in gzip.decompress(data).decode().splitlines()]
    assert all(list(row) == ["text", "timestamp", "url"] for row in lines)
    assert all("\n\n" not in row["text"] and not row["text"].startswith(" ") for row in lines)  # c4 text mode


def test_manifest_input_joins_relative_paths_to_a_base_folder(inputs, tmp_path):
    manifest = tmp_path / "wet.paths.gz"
    manifest.write_bytes(gzip.compress(b"a-good.wet.gz\nb-whirlwind.wet.gz\n"))
    out = tmp_path / "out"
    stats = run(["--input", str(manifest), "--base_url", str(inputs), "--output", str(out), "--format", "jsonl"])
    assert stats["files"] == 2
    assert len(list(read_documents(str(out)))) == 26


@pytest.mark.parametrize("entry", ["../in/a-good.wet.gz", "{inputs}/a-good.wet.gz", "file://{inputs}/a-good.wet.gz",
                                   "http://127.0.0.1:9/a-good.wet.gz", "sub/../../etc/passwd"])
def test_a_manifest_entry_outside_the_base_is_refused_before_anything_runs(inputs, tmp_path, entry):
    entry = entry.format(inputs=inputs)
    manifest = tmp_path / "wet.paths.gz"
    manifest.write_bytes(gzip.compress(f"a-good.wet.gz\n{entry}\n".encode()))
    out = tmp_path / "out"
    with pytest.raises(ManifestPathError, match=r"wet\.paths\.gz, line 2: .*must be relative and stay under the base"):
        run(["--input", str(manifest), "--base_url", str(inputs), "--output", str(out)])
    assert not out.exists()  # refused before the job began


def test_allow_any_manifest_path_opens_an_absolute_entry(inputs, tmp_path):
    manifest = tmp_path / "wet.paths"
    manifest.write_text(f"{inputs}/a-good.wet.gz\n")
    stats = run(["--input", str(manifest), "--base_url", str(tmp_path), "--output", str(tmp_path / "out"),
                 "--allow_any_manifest_path", "--format", "jsonl"])
    assert stats["files"] == 1


def test_manifest_errors_quote_input_escaped_and_short():
    hostile = "/\x1b[31mred\x1b[0m" + "x" * 500
    with pytest.raises(ManifestPathError) as raised:
        join_base("https://data.commoncrawl.org/", hostile, allow_any=False)
    message = str(raised.value)
    assert "\x1b" not in message and "\\x1b[31mred" in message and len(message) < 300


def test_a_manifest_of_concatenated_gzip_members_lists_every_entry(inputs, tmp_path):
    manifest = tmp_path / "wet.paths.gz"
    manifest.write_bytes(gzip.compress(b"a-good.wet.gz\n") + gzip.compress(b"b-whirlwind.wet.gz\n"))
    assert read_manifest(str(manifest), str(inputs)) == [str(inputs / "a-good.wet.gz"), str(inputs / "b-whirlwind.wet.gz")]


@pytest.mark.parametrize("name, body", [
    ("entries", b"a\n" * (1 << 20)),  # a million one-character entries: over the line count
    ("newlines", b"\n" * (2 << 20)),  # nothing but line ends
    ("long-line", b"a-good.wet.gz\n" + b"x" * 10_000 + b"\n"),
    ("huge", b"y" * (65 << 20)),  # one line over the byte cap
])
def test_a_manifest_past_its_caps_is_refused_in_one_line_before_work(inputs, tmp_path, name, body):
    import subprocess
    import sys

    from corpus.inputs import InputError, read_manifest

    manifest = tmp_path / f"{name}.paths.gz"
    manifest.write_bytes(gzip.compress(body, compresslevel=9, mtime=0))
    assert manifest.stat().st_size < 200_000
    with pytest.raises(InputError, match="manifest"):
        read_manifest(str(manifest), str(inputs))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "read", "--input", str(manifest), "--base_url", str(inputs),
                           "--output", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "manifest" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()

def test_a_symlink_inside_the_base_folder_that_points_outside_is_refused(inputs, tmp_path):
    from corpus.inputs import ManifestPathError

    base = tmp_path / "base"
    base.mkdir()
    (base / "inside.wet.gz").symlink_to(inputs / "a-good.wet.gz")  # points outside the base
    (base / "sub").mkdir()
    shutil.copy(inputs / "b-whirlwind.wet.gz", base / "sub" / "real.wet.gz")
    (base / "alias.wet.gz").symlink_to(base / "sub" / "real.wet.gz")  # stays inside: fine
    manifest = tmp_path / "wet.paths"
    manifest.write_text("alias.wet.gz\ninside.wet.gz\n")
    out = tmp_path / "out"
    with pytest.raises(ManifestPathError, match=r"wet\.paths, line 2: inside\.wet\.gz: .*symbolic link .*resolves outside"):
        run(["--input", str(manifest), "--base_url", str(base), "--output", str(out)])
    assert not out.exists()
    manifest.write_text("alias.wet.gz\n")
    assert run(["--input", str(manifest), "--base_url", str(base), "--output", str(out), "--format", "jsonl"])["files"] == 1


@pytest.mark.parametrize("name, data", [("empty.warc.gz", b""), ("empty.wet.gz", gzip.compress(b"", mtime=0)), ("empty.warc", b""),
                                        ("blank.warc", b"\r\n\r\n")])
def test_an_empty_input_is_an_error_and_a_job_that_read_nothing_commits_nothing(tmp_path, name, data, capsys):
    from common import storage
    from pipelines import cli

    path = tmp_path / name
    path.write_bytes(data)
    errors = [e for e in read_archive(str(path)) if getattr(e, "reason", None)]
    assert [e.reason for e in errors] == ["empty_file"] or name == "blank.warc"
    out = tmp_path / "out"
    assert cli.main(["-q", "read", "--input", str(path), "--output", str(out)]) == 1
    assert not (out / "_SUCCESS").exists()
    with pytest.raises(storage.IncompleteOutputError, match="without a commit because it read no record"):
        read_documents(str(out)).__next__()
    # the next job into the folder takes over the claim this one left
    good = tmp_path / "good.wet.gz"
    good.write_bytes(gzip.compress(b"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://a.example/\r\n"
                                   b"Content-Length: 5\r\n\r\nhello\r\n\r\n"))
    assert cli.main(["-q", "read", "--input", str(good), "--output", str(out), "--overwrite", "--format", "jsonl"]) == 0
    assert [d.text for d in read_documents(str(out))] == ["hello"]


def test_a_full_disk_ends_the_read_job_with_one_line_and_commits_nothing(real_data, tmp_path):
    import sys

    from full_disk import error_lines, small_disk

    repo = Path(__file__).resolve().parents[1]
    with small_disk(tmp_path / "disk", 64 << 10) as disk:
        out = disk.folder / "out"
        done = disk.run([sys.executable, "-m", "pipelines.cli", "-q", "read", "--input", str(real_data / "warc/ccscalatools/filter_test_1.wet.gz"),
                         "--output", str(out), "--format", "jsonl"], cwd=repo)
        assert done.returncode == 1, done.stderr[-3000:]
        (line,) = error_lines(done.stderr)
        assert f"{out}: {disk.reason} (" in line and "bytes free there" in line and "Nothing partial was committed" in line
        assert "Traceback" not in done.stderr
        assert not (out / "_SUCCESS").exists()
        print(disk.kind, line)
