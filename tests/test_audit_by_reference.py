"""The audit and decontamination ship the benchmark indexes by reference (``pipelines.audit.job``:
``stage_indexes``, ``WithIndexes``): the job's graph holds a staged file's path, not the
indexes; the job reads that file, once per worker process, and the commit removes it."""

from __future__ import annotations

import json
import pickle

import apache_beam as beam
import pytest
from apache_beam.utils.shared import Shared

from common import storage
from corpus.records import Document
from corpus.shards import read_documents, write_shard
from dedup.audit import build_indexes, load_benchmarks, merge_counters, scan_documents
from dedup.benchmark_sets import BenchmarkSet, Example
from dedup.ngrams import NgramConfig
from pipelines import staging
from pipelines.audit import job as audit

pytestmark = pytest.mark.pipeline  # runs Beam jobs on the DirectRunner: not in `make test-fast`

PLANTED = ("the quick brown fox jumps over the lazy dog while the farmer sleeps in the barn all afternoon long",
           "seven silver ships sailed past the harbour lights before the storm reached the northern coast that night")


def tiny_indexes(*texts: str) -> dict:
    return build_indexes([BenchmarkSet("bench", "test", [Example(f"e{i}", t) for i, t in enumerate(texts)], "-")], NgramConfig())


@pytest.fixture()
def shards(tmp_path):
    """Two shard files: one quotes both planted passages, one quotes neither."""
    docs = [Document(text=f"A post. {PLANTED[0]}. And then {PLANTED[1]}.", url="http://a.example/1", timestamp=""),
            Document(text="Nothing of the benchmark here, just a few ordinary words about the weather today.", url="http://b.example/2", timestamp="")]
    paths = [tmp_path / "corpus" / "c4-train.00000-of-00002.jsonl", tmp_path / "corpus" / "c4-train.00001-of-00002.jsonl"]
    write_shard(docs[:1], paths[0], "jsonl")
    write_shard(docs[1:], paths[1], "jsonl")
    return [str(p) for p in paths]


def staged_index_files(out) -> list[str]:
    return storage.glob(storage.join(staging.stage_folder(str(out), audit.INDEX_STAGE), "*"))


def graph_bytes(files, indexes, out) -> int:
    p = beam.Pipeline()
    audit.exact_scan_steps(p, files, indexes, str(out))
    return len(p.to_runner_api().SerializeToString())


def expected_counters(indexes, files) -> dict:
    parts = [scan_documents(indexes, audit.shard_texts(path)) for path in files]
    return {name: merge_counters(index, [part[name].to_dict() for part in parts]).to_dict() for name, index in indexes.items()}


def test_the_graph_does_not_grow_with_the_benchmark_index(real_data, shards, tmp_path):
    lambada = build_indexes(load_benchmarks([f"lambada:{real_data / 'lm_benchmarks' / 'lambada' / 'lambada_test.jsonl'}"]), NgramConfig())
    index_bytes = len(pickle.dumps(lambada, protocol=pickle.HIGHEST_PROTOCOL))
    small, large = graph_bytes(shards, tiny_indexes(PLANTED[0]), tmp_path / "out"), graph_bytes(shards, lambada, tmp_path / "out")
    assert index_bytes > 1_000_000  # LAMBADA's index: megabytes that a graph holding it would carry
    assert abs(large - small) < 1_000, (small, large, index_bytes)
    assert large < index_bytes / 50
    assert len(staged_index_files(tmp_path / "out")) == 2  # each graph's indexes went to a staged file instead


def test_the_job_reads_the_staged_index_and_the_commit_removes_it(shards, tmp_path):
    out = str(tmp_path / "out")
    storage.begin_output(out, "audit")
    built, staged = tiny_indexes(PLANTED[0]), tiny_indexes(PLANTED[0], PLANTED[1])
    p = beam.Pipeline()
    result_path = audit.exact_scan_steps(p, shards, built, out)
    [index_path] = staged_index_files(out)
    assert audit.read_staged_indexes(index_path)["bench"].fingerprint == built["bench"].fingerprint
    # The file, not the graph, is what the workers read: replaced before the run, its indexes are the ones scanned.
    storage.delete([index_path])
    assert audit.stage_indexes(out, staged) != index_path
    storage.rename(staged_index_files(out)[0], index_path)
    p.run().wait_until_finish()
    counters = json.loads(storage.read_text(result_path))
    assert counters == expected_counters(staged, shards) != expected_counters(built, shards)
    assert counters["bench"]["docs_scanned"] == 2
    storage.commit_output(out, "audit")
    assert not storage.exists(storage.staging_path(out))


def test_the_dofns_of_one_process_share_one_load(shards, tmp_path):
    indexes = tiny_indexes(*PLANTED)
    path, shared = audit.stage_indexes(str(tmp_path / "out"), indexes), Shared()
    scan = audit.WithIndexes(audit._scan_shard, path, shared)
    merge = audit.WithIndexes(audit._merge_counters, path, shared)
    scan.setup()
    storage.delete([path])  # loaded once: the second DoFn's setup does not read the file again
    merge.setup()
    assert merge.indexes is scan.indexes
    assert scan.indexes["bench"].fingerprint == indexes["bench"].fingerprint
    scanned = dict(scan.process(shards[0]))
    assert scanned["bench"]["docs_scanned"] == 1 and scanned["bench"]["found"]
    [(name, merged)] = merge.process(("bench", [scanned["bench"]]))
    assert (name, merged) == ("bench", merge_counters(indexes["bench"], [scanned["bench"]]).to_dict())


def test_decontaminate_stages_its_index_and_commits_without_it(shards, tmp_path):
    bench = tmp_path / "bench.txt"
    bench.write_text(PLANTED[1] + "\n", encoding="utf-8")
    out = tmp_path / "clean"
    stats = audit.run_decontaminate(["--corpus", *shards, "--benchmark", f"text:{bench}", "--output", str(out), "--mode", "drop",
                                     "--format", "jsonl"])
    assert stats["counters"]
    assert not (out / storage.STAGING_DIR).exists()
    kept = [doc.url for path in sorted(out.glob("decontaminated-train.*.jsonl")) for doc in read_documents(str(path))]
    assert kept == ["http://b.example/2"]
    removed = (out / audit.REMOVED_FILE).read_text(encoding="utf-8")
    assert "http://a.example/1" in removed and "http://b.example/2" not in removed
