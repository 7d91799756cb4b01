"""benchmarks/demo_identity.py: two demo-shaped output folders compared file by file, the
dataset layout's moves and renames followed, volatile fields told from real differences."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def demo_identity():
    return load_benchmark("demo_identity")


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _gzip(text: str, mtime: int) -> bytes:
    return gzip.compress(text.encode(), mtime=mtime)


def _manifest(names: list[str], finished: str) -> str:
    return json.dumps({"job": "c4", "finished": finished,
                       "files": [{"name": n, "bytes": 3, "sha256": "5e4d"} for n in names]}, indent=1)


def _parquet(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": pa.array(rows, pa.string())}), path)


@pytest.fixture
def folders(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    shard = '{"text": "a page", "url": "u"}\n'
    # The old layout: shards side by side, stats.json, errors/, an empty validation shard.
    _write(before / "c4" / "c4-train.00000-of-00001.json.gz", _gzip(shard, 0))
    _write(before / "c4" / "c4-validation.00000-of-00002.json.gz", _gzip("", 0))
    _write(before / "c4" / "c4-validation.00001-of-00002.json.gz", _gzip(shard, 0))
    _parquet(before / "c4" / "c4-validation.00000-of-00002.parquet", [])
    _write(before / "c4" / "stats.json", json.dumps({"counters": {"passed": 3}, "seconds": 1.5}))
    _write(before / "c4" / "errors" / "errors.jsonl", '{"file": "x", "reason": "bad"}\n')
    _write(before / "c4" / "_SUCCESS", _manifest(["c4-train.00000-of-00001.json.gz", "stats.json",
                                                  "c4-validation.00000-of-00002.json.gz",
                                                  "c4-validation.00001-of-00002.json.gz"],
                                                 "2026-01-01T00:00:00+00:00"))
    # The new layout: a format folder, _stats.json, _errors/, no empty shard.
    _write(after / "c4" / "c4json" / "c4-train.00000-of-00001.json.gz", _gzip(shard, 0))
    _write(after / "c4" / "c4json" / "c4-validation.00001-of-00002.json.gz", _gzip(shard, 7))
    _write(after / "c4" / "_stats.json", json.dumps({"counters": {"passed": 3}, "seconds": 9.25}))
    _write(after / "c4" / "_errors" / "errors.jsonl", '{"file": "x", "reason": "bad"}\n')
    _write(after / "c4" / "_SUCCESS", _manifest(["c4json/c4-train.00000-of-00001.json.gz", "_stats.json",
                                                 "c4json/c4-validation.00001-of-00002.json.gz"],
                                                "2026-02-02T10:00:00+00:00"))
    # Absolute paths of the output folder in a report, a real difference in a metric.
    _write(before / "eval" / "report.md", f"model {before}/model\nloss 2.5\n")
    _write(after / "eval" / "report.md", f"model {after}/model\nloss 2.5\n")
    _write(before / "model" / "summary.json", json.dumps({"loss": 2.5, "elapsed_s": 3.0, "acc": math.nan}))
    _write(after / "model" / "summary.json", json.dumps({"loss": 2.75, "elapsed_s": 3.0, "acc": math.nan}))
    _write(before / "model" / "only-old.txt", "x")
    return before, after


def test_each_file_gets_its_status(demo_identity, folders):
    rows = {path: (status, detail) for status, path, detail in demo_identity.compare(*folders)}
    assert rows["c4/c4json/c4-train.00000-of-00001.json.gz"] == ("identical", "was c4/c4-train.00000-of-00001.json.gz")
    assert rows["c4/_errors/errors.jsonl"] == ("identical", "was c4/errors/errors.jsonl")
    assert rows["c4/c4json/c4-validation.00001-of-00002.json.gz"][0] == "same but volatile"
    assert "gzip header" in rows["c4/c4json/c4-validation.00001-of-00002.json.gz"][1]
    assert rows["c4/_stats.json"] == ("same but volatile", "was c4/stats.json; $.seconds")
    assert rows["c4/_SUCCESS"] == ("same but volatile",
                                   "$.finished, sizes and digests of files that differ only in volatile fields")
    assert rows["c4/c4-validation.00000-of-00002.json.gz"] == ("no longer written", "an empty shard")
    assert rows["c4/c4-validation.00000-of-00002.parquet"] == ("no longer written", "an empty shard")
    assert rows["eval/report.md"] == ("same but volatile", "the output folder's path")
    assert rows["model/summary.json"] == ("differs", "$.loss: '2.5' before, '2.75' after")
    assert rows["model/only-old.txt"] == ("only before", "")
    assert len(rows) == 10


def test_the_command_prints_a_line_per_file_and_fails_on_a_difference(demo_identity, folders, capsys):
    assert demo_identity.main([str(f) for f in folders]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "10 files: 1 differs, 2 identical, 2 no longer written, 1 only before, 4 same but volatile"
    assert sum(1 for line in out if line.startswith(("identical", "same but", "no longer", "only", "differs"))) == 10


def test_the_same_folder_twice_is_all_identical(demo_identity, folders, capsys):
    before, _ = folders
    assert demo_identity.main([str(before), str(before)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "10 files: 10 identical"


def test_a_missing_folder_is_one_line_and_exit_2(demo_identity, tmp_path, capsys):
    assert demo_identity.main([str(tmp_path / "nope"), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"demo_identity: {tmp_path / 'nope'}: not a folder"


def test_a_moved_run_reads_its_paths_as_the_other_side_and_checkpoints_by_their_tensors(demo_identity, tmp_path):
    before, after, written = tmp_path / "before", tmp_path / "after", tmp_path / "demo-out"
    for root, seed in ((before, written), (after, after)):
        state = {"w": torch.arange(4.0), "train_config": {"data": f"{seed}/tokens"}}
        (root / "model").mkdir(parents=True)
        torch.save(state, root / "model" / "ckpt.pt")
        digest = (root / "model" / "ckpt.pt").read_bytes()
        _write(root / "model" / "ckpt.pt.sha256", json.dumps({"sha256": str(hash(digest)), "bytes": len(digest)}))
        _write(root / "model" / "config.json", json.dumps({"data": f"{seed}/tokens"}))
    rows = {path: status for status, path, _ in demo_identity.compare(before, after, before_as=written)}
    assert rows == {"model/ckpt.pt": "same but volatile", "model/ckpt.pt.sha256": "same but volatile",
                    "model/config.json": "same but volatile"}
    rows = {path: status for status, path, _ in demo_identity.compare(before, after)}
    assert rows["model/config.json"] == rows["model/ckpt.pt"] == rows["model/ckpt.pt.sha256"] == "differs"
