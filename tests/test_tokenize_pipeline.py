"""``corpusforge tokenize`` on Beam's DirectRunner: shards that decode back to the input
documents, deterministic train/val and order, identical bytes whatever the workers and
digest ranges, bad input counted and kept out, and clear refusals."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.decision import Decision
from corpus.inputs import InputError
from corpus.shards import nonempty_text, read_error, read_texts, shard_files
from model.token_shards import find_token_shards, read_token_shard
from model.tokenizer import BPETokenizer
from pipelines.cli import main
from pipelines.jobs import STATS_FILE
from pipelines.steps import ERRORS_FILE
from pipelines.tokenize import job as tokenize
from pipelines.tokenize import shards as tokenize_shards

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
HIDE_ENV = "CORPUSFORGE_TEST_HIDE"  # the libraries tests/<blocker>/sitecustomize.py makes unimportable
# Read once, when the interpreter starts: a launcher that sets it afterwards still imports the
# libraries, the Spark workers it starts (which inherit its environment) do not.
BLOCKER = f"""import os, sys
for name in filter(None, os.environ.get({HIDE_ENV!r}, "").split(",")):
    sys.modules[name] = None  # `import name` raises ImportError
"""
PIP_LINE = "pip install tokenizers==0.23.3 tiktoken==0.14.0 there (requirements-model.txt's pins; or pip install 'corpusforge[model]')"

WORDS = ["the", "cat", "sat", "on", "a", "mat", "don't", "it's", "日本語", "café", "😀", "1998", "and", "\n", "  "]


def make_docs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"doc {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))) for i in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("docs")
    docs = make_docs(240)
    with open(folder / "part-a.jsonl", "w", encoding="utf-8") as f:
        for doc in docs[:100]:
            f.write(json.dumps({"text": doc, "url": "u"}) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"text": "  \n "}) + "\n")
        f.write(json.dumps({"url": "no text"}) + "\n")
    with gzip.open(folder / "part-b.json.gz", "wt", encoding="utf-8") as f:
        for doc in docs[100:]:
            f.write(json.dumps({"text": doc}) + "\n")
    return folder, docs


def run(corpus_folder, out, *extra):
    return tokenize.run(["--input", str(corpus_folder), "--output", str(out), "--vocab_size", "300",
                         "--shard_tokens", "1000", "--prefix", "toy", *extra])


def documents_of(tokens: np.ndarray, eot: int) -> list[np.ndarray]:
    assert tokens[0] == eot  # every document is preceded by end-of-text
    cuts = np.flatnonzero(tokens == eot)
    return [tokens[a + 1:b] for a, b in zip(cuts, list(cuts[1:]) + [len(tokens)], strict=True)]


@pytest.fixture(scope="module")
def first_run(corpus, tmp_path_factory):
    folder, _ = corpus
    out = tmp_path_factory.mktemp("tokens")
    (out / "toy_train_000999.bin").write_bytes(b"stale")  # from an earlier, larger run
    return out, run(folder, out, "--val_fraction", "0.1", "--overwrite")


def test_shards_decode_back_to_the_documents(corpus, first_run):
    _, docs = corpus
    out, result = first_run
    meta = json.loads((out / "meta.json").read_text())
    tokenizer = BPETokenizer.load(out / meta["tokenizer"])
    assert meta["vocab_size"] == tokenizer.vocab_size == 300 and meta["eot_id"] == 299 == tokenizer.eot_id
    seen = {}
    for split in ("train", "val"):
        paths = find_token_shards(out, split)
        assert [p.rsplit("/", 1)[1] for p in paths] == meta["splits"][split]["files"]
        assert meta["splits"][split]["shards"] == len(paths)
        shards = [read_token_shard(p) for p in paths]
        assert all(len(s) == 1000 for s in shards[:-1]) and 0 < len(shards[-1]) <= 1000
        stream = np.concatenate(shards)
        assert len(stream) == meta["splits"][split]["tokens"]
        texts = [tokenizer.decode(d) for d in documents_of(stream, tokenizer.eot_id)]
        assert len(texts) == meta["splits"][split]["documents"]
        digests = [tokenize_shards.document_digest(t) for t in texts]
        assert digests == sorted(digests)  # documents in digest order
        for text in texts:
            seen[text] = split
    assert sorted(seen) == sorted(docs)  # every document once; empty and broken rows left out
    assert all((seen[d] == "val") == tokenize_shards.in_val_fraction(tokenize_shards.document_digest(d), 0.1) for d in docs)
    assert 0 < meta["splits"]["val"]["documents"] < 60
    assert not (out / "toy_train_000999.bin").exists() and not (out / ".parts").exists()


def test_stats_count_what_was_dropped(first_run):
    out, result = first_run
    stats = json.loads((out / STATS_FILE).read_text())
    counters = stats["counters"]
    assert counters["documents_read"] == 241 and counters["empty_dropped"] == 1
    assert counters["error:bad_json"] == 1 and counters["error:no_text_field"] == 1
    assert counters["train_documents"] + counters["val_documents"] == 240
    assert stats["examples"] == {"empty_dropped": ["  \n "]}  # every drop sampled
    assert stats["units"]["empty_dropped"] == "documents" and stats["units"]["train_tokens"] == "other"
    errors = [json.loads(line) for line in (out / ERRORS_FILE).read_text().splitlines()]
    assert [(e["reason"], e["offset"]) for e in errors] == [("bad_json", 101), ("no_text_field", 103)]
    assert "errors: bad_json 1, no_text_field 1" in tokenize.format_summary(result)


def test_same_bytes_whatever_workers_and_ranges(corpus, first_run, tmp_path):
    folder, _ = corpus
    out, _ = first_run
    again = tmp_path / "again"
    run(folder, again, "--val_fraction", "0.1", "--tokenizer", str(out / "tokenizer"), "--buckets", "7",
        "--direct_num_workers", "2", "--direct_running_mode", "multi_threading")
    names = sorted(p.name for p in out.glob("*.bin"))
    assert names == sorted(p.name for p in again.glob("*.bin")) and len(names) > 3
    for name in names:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    assert json.loads((out / "meta.json").read_text()) == json.loads((again / "meta.json").read_text())


def test_val_docs_takes_the_smallest_digests(tmp_path):
    docs = make_docs(30, seed=5)
    pq.write_table(pa.table({"content": docs}), tmp_path / "docs.parquet")
    out = tmp_path / "out"
    result = tokenize.run(["--input", str(tmp_path / "docs.parquet"), "--output", str(out), "--vocab_size", "280",
                           "--val_docs", "4", "--field", "content", "--prefix", "pq"])
    assert result["meta"]["splits"]["val"]["documents"] == 4
    tokenizer = BPETokenizer.load(out / "tokenizer")
    val = [tokenizer.decode(d) for d in documents_of(read_token_shard(out / "pq_val_000000.bin"), tokenizer.eot_id)]
    assert val == sorted(docs, key=tokenize_shards.document_digest)[:4]


def test_refusals_are_clear(corpus, tmp_path):
    folder, _ = corpus
    with pytest.raises(InputError, match="uint16 ids, so at most 65536"):
        run(folder, tmp_path / "a", "--vocab_size", "70000")
    with pytest.raises(InputError, match="--tokenizer: .*no tokenizer files"):
        run(folder, tmp_path / "b", "--tokenizer", str(tmp_path))
    with pytest.raises(SystemExit):  # a usage error before any work: must be between 0 and 1
        run(folder, tmp_path / "c", "--val_fraction", "1.5")
    with pytest.raises(SystemExit):
        run(folder, tmp_path / "d", "--val_fraction", "0.1", "--val_docs", "3")


def test_cli_delegates_to_the_job(corpus, tmp_path, capsys):
    folder, _ = corpus
    assert main(["tokenize", "--input", str(folder / "part-b.json.gz"), "--output", str(tmp_path), "--vocab_size", "270",
                 "--val_docs", "0", "--prefix", "cli"]) == 0
    assert "140 documents" in capsys.readouterr().out
    assert not list(tmp_path.glob("cli_val_*.bin")) and len(read_token_shard(tmp_path / "cli_train_000000.bin")) > 140


def test_nonempty_text_counts_every_row_and_samples_the_empty_ones():
    kept = nonempty_text("a document")
    assert isinstance(kept, Decision) and kept.record == "a document" and kept.dropped == ()
    assert kept.counts == (("documents_read", 1), ("empty_dropped", 0))  # the counter exists even when nothing is empty
    empty = nonempty_text(" \n\t")
    assert empty.record is None and empty.counts == (("documents_read", 1), ("empty_dropped", 1))
    assert empty.dropped == (("empty_dropped", " \n\t"),) and dict(empty.units) == {"documents_read": "documents", "empty_dropped": "documents"}


def test_read_texts_reports_bad_rows_and_keeps_the_rest(corpus, tmp_path):
    folder, docs = corpus
    items = list(read_texts(str(folder / "part-a.jsonl")))
    assert [text for _, text in items[:100]] == docs[:100]
    assert items[100:] == [read_error(str(folder / "part-a.jsonl"), 101, "bad_json", items[100]["detail"]), (102, "  \n "),
                           read_error(str(folder / "part-a.jsonl"), 103, "no_text_field", "no string field 'text'")]
    broken = tmp_path / "broken.json.gz"
    rows = "".join(json.dumps({"text": f"kept {i}"}) + "\n" for i in range(5000)).encode()
    broken.write_bytes(gzip.compress(rows)[:-200])  # the gzip stream cut short
    *read, last = read_texts(str(broken))
    assert read and read == [(i + 1, f"kept {i}") for i in range(len(read))] and len(read) < 5000
    assert last["reason"] == "unreadable" and last["offset"] == len(read) + 1
    assert shard_files([str(folder)]) == [str(folder / "part-a.jsonl"), str(folder / "part-b.json.gz")]
    (tmp_path / "none").mkdir()
    with pytest.raises(InputError, match="no corpus shards found"):
        shard_files([str(tmp_path / "none")])


def hiding_env(tmp_path, hidden: str = "") -> dict:
    blocker = tmp_path / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(ROOT)]), **{HIDE_ENV: hidden})


@pytest.mark.parametrize("library, engine", [("tiktoken", "beam"), ("tokenizers", "beam"), ("tiktoken", "spark")])
def test_a_launcher_without_a_tokenizer_library_says_so_in_one_line_before_any_work(corpus, tmp_path, library, engine):
    folder, _ = corpus
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "tokenize", "--input", str(folder), "--output", str(out),
                           "--vocab_size", "300", "--engine", engine], env=hiding_env(tmp_path, library), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert f"tokenize job needs {library} on the launcher and on every worker, and the launcher (" in lines[0]
    assert lines[0].endswith(PIP_LINE)
    assert not out.exists()  # refused before anything was written (and, on Spark, before a JVM started)


def test_spark_workers_without_tiktoken_end_the_job_in_one_line_before_any_work(java, corpus, tmp_path):
    folder, _ = corpus
    out = tmp_path / "out"
    launcher = (f"import os, sys; os.environ[{HIDE_ENV!r}] = 'tiktoken'\n"  # for the workers only (BLOCKER)
                "from pipelines.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", launcher, "tokenize", "--input", str(folder), "--output", str(out),
                           "--vocab_size", "300", "--engine", "spark", "--spark_master", "local[1]"],
                          env=hiding_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    # Spark logs the failed task (the worker's traceback ends in the same line); the command says it once
    ours = [line for line in done.stderr.splitlines() if "ERROR corpusforge:" in line]
    assert len(ours) == 1, done.stderr[-3000:]
    assert "tokenize job needs tiktoken on the launcher and on every worker, and a worker (" in ours[0] and ours[0].endswith(PIP_LINE)
    assert not out.exists()  # the workers were asked before the output was claimed
