"""``corpusforge eval`` end to end: a tiny random GPT-2 saved as a Hugging Face folder, a
tokenizer trained on a little text, real LAMBADA / WikiText-2 files, a training corpus with
planted passages; and the exit status 2 cases."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import numpy as np
import pytest
import torch

from corpus.records import Document
from corpus.shards import write_shards
from dedup.bloom import BloomFilter, ngram_meta
from dedup.ngrams import NgramConfig
from model.eval.harness import run_eval
from model.eval.metrics import ExampleScore, compute_metric
from model.gpt import GPT, GPTConfig
from model.hf import save_hf_dir
from model.tokenizer import BPETokenizer, train_tokenizer
from pipelines import cli

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]
PLANTED = [0, 5, 9]  # LAMBADA test passages written into the training shards
LIMIT = 30


@pytest.fixture(scope="module")
def lambada_file(real_data):
    return real_data / "lm_benchmarks/lambada/lambada_test.jsonl"


@pytest.fixture(scope="module")
def tiny_model(real_data, tmp_path_factory):
    """A random 2-layer GPT-2 (Hugging Face folder) with a 400-token BPE trained on WikiText-2."""
    text = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    tokenizer = train_tokenizer(text.splitlines()[:2000], vocab_size=400, show_progress=False)
    tok_dir = tmp_path_factory.mktemp("tok")
    tokenizer.save(tok_dir)
    torch.manual_seed(0)
    config = GPTConfig(n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=tokenizer.vocab_size)
    folder = tmp_path_factory.mktemp("model") / "tiny-gpt2"
    save_hf_dir(GPT(config), folder, tokenizer_files=[tok_dir / "vocab.json", tok_dir / "merges.txt"],
                eot_token_id=tokenizer.eot_id)
    return folder


@pytest.fixture(scope="module")
def training_shards(lambada_file, tmp_path_factory):
    rows = [json.loads(line) for line in lambada_file.read_text(encoding="utf-8").splitlines()[:20]]
    rng = np.random.default_rng(3)
    vocab = sorted({w for r in rows[12:] for w in r["text"].split()})
    docs = [Document(text=" ".join(rng.choice(vocab, 100)) + "\n\n" + rows[i]["text"] + "\n\n" + " ".join(rng.choice(vocab, 30)),
                     url=f"https://example.org/{i}", timestamp="2019-02-14T00:00:00Z") for i in PLANTED]
    folder = tmp_path_factory.mktemp("train-shards")
    write_shards(docs, folder, fmt="jsonl", num_shards=1)
    return folder


def _cli(*args, cwd=ROOT):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "eval", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def cli_run(tiny_model, lambada_file, training_shards, real_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval-out") / "report"
    ptb = real_data / "lm_benchmarks/ptb/ptb.test.txt"
    result = _cli("--model", tiny_model, "--benchmark", f"lambada:{lambada_file}", "--benchmark", f"ptb:{ptb}",
                  "--training", training_shards, "--limit", LIMIT, "--bootstrap", 200, "--seed", 4,
                  "--batch_size", 4, "--quiet", "--report", out)
    return result, out


@pytest.mark.pipeline
def test_cli_eval_writes_the_three_reports(cli_run):
    result, out = cli_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(out)) == ["report.html", "report.json", "report.md", "scores"]
    assert not [f for f in os.listdir(out) if f.startswith(".")]  # no temporaries left
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [b["name"] for b in doc["benchmarks"]] == ["lambada", "ptb"]
    assert doc["training"]["kind"] == "exact" and doc["training"]["n"] == 8
    lambada = doc["benchmarks"][0]
    assert lambada["contamination"]["dirty_ids"] == [f"lambada-{i}" for i in PLANTED]
    first = lambada["results"][0]
    assert first["metric"] == "lastword_ppl"
    assert (first["all"]["count"], first["clean"]["count"], first["dirty"]["count"]) == (LIMIT, LIMIT - 3, 3)
    assert "lambada" in result.stdout and "lastword_ppl" in result.stdout and "clean" in result.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.count('<table class="results">') == 2 and html.count('<img class="plot"') == 2
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## lambada" in md and "## ptb" in md


@pytest.mark.pipeline
def test_report_numbers_are_compute_metric_of_the_saved_scores(cli_run):
    _, out = cli_run
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    for entry in doc["benchmarks"]:
        saved = json.loads((out / "scores" / f"{entry['name']}.json").read_text(encoding="utf-8"))
        scores = [ExampleScore.from_dict(row) for row in saved["examples"]]
        assert len(scores) == entry["examples"]
        dirty = set((entry["contamination"] or {}).get("dirty_ids") or [])
        for result in entry["results"]:
            metric = result["metric"]
            assert result["all"]["value"] == pytest.approx(compute_metric(scores, metric), rel=1e-12)
            clean = [s for s in scores if s.id not in dirty]
            assert result["clean"]["value"] == pytest.approx(compute_metric(clean, metric), rel=1e-12)


def test_run_eval_without_training_reports_all_only(tiny_model, lambada_file):
    tokenizer = BPETokenizer.load(tiny_model)
    torch.manual_seed(1)
    net = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=32, vocab_size=tokenizer.vocab_size))
    doc = run_eval(net, [f"lambada:{lambada_file}"], tokenizer=tokenizer, limit=8, bootstrap=50, batch_size=4,
                   progress=False)
    result = doc["benchmarks"][0]["results"][0]
    assert result["clean"] is None and result["dirty"] is None and result["all"]["count"] == 8
    assert doc["training"] is None and any("No --training" in note for note in doc["notes"])
    assert doc["model"]["gpt2_size"] is None and doc["model"]["parameters"] > 0


@pytest.mark.parametrize("case, expected", [
    ("missing_model", "no such run folder"),
    ("unknown_kind", "unknown benchmark kind"),
    ("bad_training", "no such file or folder"),
    ("ngram_mismatch", "mismatched n-gram settings"),
])
def test_bad_inputs_exit_2_without_a_report(case, expected, tiny_model, lambada_file, tmp_path):
    out = tmp_path / "out"
    args = ["--model", str(tiny_model), "--benchmark", f"lambada:{lambada_file}", "--report", str(out), "-q"]
    if case == "missing_model":
        args[1] = str(tmp_path / "nowhere")
    elif case == "unknown_kind":
        args[3] = f"lambda:{lambada_file}"
    elif case == "bad_training":
        args += ["--training", str(tmp_path / "no-corpus")]
    else:
        bloom = BloomFilter(1000, 1e-8, meta=ngram_meta(NgramConfig(n=13)))
        bloom.save(tmp_path / "train13.bloom")
        args += ["--training", str(tmp_path / "train13.bloom")]

    err = io.StringIO()
    with redirect_stderr(err):
        assert cli.main(["eval", *args]) == 2
    assert expected in err.getvalue() and "corpusforge eval: error" in err.getvalue()
    assert not out.exists()
