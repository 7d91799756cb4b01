"""model.finetune.train: GPT-1's fine-tuning on tiny real GPTs (CPU): the head and the input
transformations' arithmetic, the auxiliary loss, exact resume, the Hugging Face export
(loaded by ``transformers``), input errors, and learning real tasks built from the shared
data (wikitext-2 vs PTB sentences, WSC273) with a clean/dirty split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import model.finetune.train as finetune_module
from corpus.records import Document
from corpus.shards import write_shards
from dedup.benchmark_sets import load_wsc
from model.checkpoint import load_checkpoint, load_model, save_checkpoint
from model.finetune.task_files import read_task_file
from model.finetune.tasks import SpecialTokens, collate, encode_task
from model.finetune.train import (
    DEMO_SENTENCES,
    TaskModel,
    add_task_tokens,
    batch_indices,
    config_from_args,
    demo_finetune,
    finetune,
    format_summary,
    task_loss,
)
from model.gpt import GPT, GPTConfig
from model.hf import save_hf_dir
from model.optim import lr_at
from model.run_folder import read_metrics
from model.tokenizer import BPETokenizer, train_tokenizer
from pipelines import cli

torch.set_num_threads(1)
FIXTURES = Path(__file__).parent / "fixtures" / "finetune"


def make_base(folder: Path, texts: list[str], vocab: int = 300, arch: str = "gpt2", block: int = 64, seed: int = 0) -> Path:
    """A 'pre-trained' tiny GPT (random weights) with a byte-level BPE trained on ``texts``, as a run folder."""
    tokenizer = train_tokenizer(texts, vocab_size=vocab, show_progress=False)
    tokenizer.save(folder / "tokenizer")
    torch.manual_seed(seed)
    gpt = GPT(GPTConfig(arch=arch, n_layer=2, n_head=2, n_embd=32, block_size=block, vocab_size=tokenizer.vocab_size))
    save_checkpoint(folder / "ckpt.pt", {"model": gpt.state_dict(), "model_config": gpt.config.to_dict()})
    return folder


FIXTURE_TEXT = [line for f in FIXTURES.glob("*.*") for line in f.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    texts = FIXTURE_TEXT + [s for topic in DEMO_SENTENCES.values() for s in topic]
    return make_base(tmp_path_factory.mktemp("base"), texts * 3)


def tiny_args(base: Path, out: Path, fmt="sst2", train="sst2.tsv", *extra) -> list[str]:
    return ["--model", str(base), "--train", str(FIXTURES / train), "--eval", str(FIXTURES / train), "--format", fmt,
            "--out", str(out), "--batch_size", "2", "--lr", "1e-3", "--quiet", *extra]


def _gpt(vocab=50, block=32, dropout=0.0, arch="gpt2"):
    torch.manual_seed(0)
    return GPT(GPTConfig(arch=arch, n_layer=2, n_head=2, n_embd=16, block_size=block, vocab_size=vocab, dropout=dropout))


# ----------------------------------------------------------------------------- the model

def test_new_tokens_are_appended_with_embedding_style_init():
    gpt = _gpt(vocab=200)
    grown, special = add_task_tokens(gpt, torch.Generator().manual_seed(1))
    assert special == SpecialTokens(200, 201, 202) and grown.config.vocab_size == 203
    old, new = gpt.transformer.wte.weight, grown.transformer.wte.weight
    assert torch.equal(new[:200], old[:200])
    rows = new[200:203].detach()
    assert rows.abs().min() > 0 and 0.005 < float(rows.std()) < 0.06  # N(0, 0.02) over 48 numbers
    assert torch.equal(new[203:], torch.zeros_like(new[203:]))  # padding rows stay zero
    x = torch.randint(0, 200, (2, 10))
    gpt.eval(), grown.eval()
    assert torch.allclose(grown.hidden_states(x), gpt.hidden_states(x))  # an old sequence computes the same


def test_similarity_adds_the_two_orders_states_before_the_head():
    gpt = _gpt()
    model = TaskModel(gpt, "similarity", 2, clf_dropout=0.0).eval()
    s, d, e = 40, 41, 42
    ab, ba = [s, 1, 2, 3, d, 4, 5, e], [s, 4, 5, d, 1, 2, 3, e]
    idx = torch.tensor([[ab, ba]])
    logits, _ = model(idx, torch.tensor([[7, 7]]))
    hidden = gpt.hidden_states(torch.tensor([ab, ba]))[:, -1]
    assert torch.allclose(logits[0], model.head(hidden[0] + hidden[1]), atol=1e-6)
    assert torch.allclose(logits[0], model.head(hidden[0]) + model.head(hidden[1]), atol=1e-6)  # W_y is linear
    swapped, _ = model(torch.tensor([[ba, ab]]), torch.tensor([[7, 7]]))
    assert torch.allclose(swapped, logits, atol=1e-6)  # the order of the pair does not matter
    one_order, _ = TaskModel(gpt, "entailment", 2, 0.0).eval()(torch.tensor([[ab]]), torch.tensor([[7]]))
    assert not torch.allclose(one_order, logits)


def test_multiple_choice_scores_each_candidate_alone_and_softmaxes_over_them():
    gpt = _gpt()
    model = TaskModel(gpt, "multiple_choice", 1, clf_dropout=0.0).eval()
    cands = [[40, 1, 2, 41, 5, 42], [40, 1, 2, 41, 6, 42], [40, 1, 2, 41, 7, 8]]
    idx = torch.tensor([cands])
    extract = torch.tensor([[5, 5, 5]])
    logits, _ = model(idx, extract)
    assert logits.shape == (1, 3)
    for k, seq in enumerate(cands):  # each candidate's score comes from its own sequence only
        alone, _ = model(torch.tensor([[seq]]), torch.tensor([[5]]))
        assert torch.allclose(logits[0, k], alone[0, 0], atol=1e-6)
    permuted, _ = model(idx[:, [2, 0, 1]], extract)
    assert torch.allclose(permuted[0], logits[0, [2, 0, 1]], atol=1e-6)
    target = torch.tensor([1])
    expected = -torch.log_softmax(logits, dim=1)[0, 1]
    assert torch.allclose(task_loss(logits, target, False), expected)
    masked, _ = model(idx, extract, torch.tensor([[True, True, False]]))
    probs = torch.softmax(masked, dim=1)[0]
    assert probs[2] == 0 and torch.allclose(probs[:2], torch.softmax(logits[0, :2], dim=0))


def test_auxiliary_lm_loss_adds_lambda_times_its_gradient(base):
    data = read_task_file(FIXTURES / "rte.tsv", "rte")
    gpt, special = add_task_tokens(load_model(base), torch.Generator().manual_seed(0))

    tokenizer = BPETokenizer.load(base / "tokenizer")
    batch = collate(encode_task(data, tokenizer, special, 64, ("entailment", "not_entailment")), tokenizer.eot_id)
    model = TaskModel(gpt, "entailment", 2, clf_dropout=0.0)

    def gradient(coef: float) -> torch.Tensor:
        model.zero_grad()
        logits, lm = model(batch.idx, batch.extract, batch.choice_mask, batch.lm_targets if coef else None)
        loss = task_loss(logits, batch.targets, False)
        if lm is not None:
            loss = loss + coef * lm
        loss.backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None and p is not model.head.weight]
                         + [model.head.weight.grad.flatten()])

    g0, g_half, g1 = gradient(0.0), gradient(0.5), gradient(1.0)
    lm_part = g1 - g0
    assert lm_part.abs().max() > 1e-4  # the LM loss does move the body
    assert torch.allclose(g_half, g0 + 0.5 * lm_part, atol=1e-6)
    # the head gets no gradient from the LM loss (the last len(head) entries)
    assert torch.allclose(lm_part[-model.head.weight.numel():], torch.zeros(model.head.weight.numel()), atol=1e-7)


def test_schedule_and_data_order():
    assert [round(lr_at(s, 1.0, 0.0, 2, 6, decay="linear"), 4) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    first = [batch_indices(s, 10, 4, 3).tolist() for s in range(3)]  # one epoch: 4 + 4 + 2
    assert sorted(sum(first, [])) == list(range(10)) and [len(b) for b in first] == [4, 4, 2]
    assert batch_indices(3, 10, 4, 3).tolist() != first[0]  # the next epoch is another permutation
    assert batch_indices(1, 10, 4, 3).tolist() == first[1]


# ----------------------------------------------------------------------------- runs

def test_micro_batches_give_the_gradient_of_the_whole_batch(base, tmp_path):
    common = ["--max_steps", "2", "--dropout", "0", "--clf_dropout", "0", "--no_hf_export", "--batch_size", "3"]
    finetune(config_from_args(tiny_args(base, tmp_path / "whole", "snli", "snli.jsonl", *common)))
    finetune(config_from_args(tiny_args(base, tmp_path / "micro", "snli", "snli.jsonl", *common, "--micro_batch", "1")))
    a, b = (load_checkpoint(tmp_path / d / "ckpt.pt") for d in ("whole", "micro"))
    # fp32 sums in another order: Adam turns a bias's near-zero gradient's rounding into ~1e-6 of its
    # update (seen: 1.1e-6); a micro-batch that is lost or counted twice moves weights by ~lr = 1e-3
    assert all(torch.allclose(a["model"][k], b["model"][k], atol=1e-5) for k in a["model"])
    assert torch.allclose(a["head"]["weight"], b["head"]["weight"], atol=1e-6)
    losses = [[r["loss"] for r in _records(tmp_path / d) if "loss" in r] for d in ("whole", "micro")]
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_the_same_seed_fine_tunes_a_run_folder_and_its_hugging_face_export_alike(base, tmp_path):
    # Loading draws no random numbers, whichever form the base model takes: the task head's
    # initial weights and the dropout masks come from the seed alone (before, a run folder's
    # model was first built with random weights, which moved the RNG past the head's draws).
    tokenizer = [str(base / "tokenizer" / name) for name in ("vocab.json", "merges.txt")]
    save_hf_dir(load_model(base), tmp_path / "hf-base", tokenizer_files=tokenizer)
    common = ["--max_steps", "2", "--no_hf_export", "--dropout", "0.1"]
    finetune(config_from_args(tiny_args(base, tmp_path / "from-run", "sst2", "sst2.tsv", *common)))
    finetune(config_from_args(tiny_args(tmp_path / "hf-base", tmp_path / "from-hf", "sst2", "sst2.tsv", *common)))
    a, b = (load_checkpoint(tmp_path / d / "ckpt.pt") for d in ("from-run", "from-hf"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert torch.equal(a["head"]["weight"], b["head"]["weight"])
    assert _records(tmp_path / "from-run") == _records(tmp_path / "from-hf")


def _records(out: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "examples_per_s"} for r in read_metrics(str(out / "metrics.jsonl"))]


@pytest.mark.pipeline  # three fine-tuning runs (6 steps, stopped at 3, resumed)
def test_stopped_and_resumed_equals_uninterrupted(base, tmp_path):
    args = ["--model", str(base), "--train", str(FIXTURES / "snli.jsonl"), "--eval", str(FIXTURES / "snli.jsonl"),
            "--format", "snli", "--batch_size", "2", "--lr", "1e-3", "--dropout", "0.1", "--epochs", "3",
            "--eval_interval", "2", "--ckpt_interval", "2", "--quiet", "--no_hf_export"]
    whole = finetune(config_from_args(args + ["--out", str(tmp_path / "whole")]))
    first = finetune(config_from_args(args + ["--out", str(tmp_path / "split"), "--stop_at", "3"]))
    assert first["status"] == "stopped" and load_checkpoint(tmp_path / "split" / "ckpt.pt")["step"] == 3
    resumed = finetune(config_from_args(args + ["--out", str(tmp_path / "split"), "--resume"]))
    assert whole["status"] == resumed["status"] == "finished" and whole["steps"] == resumed["steps"] == 6
    assert _records(tmp_path / "split") == _records(tmp_path / "whole")  # losses and evaluations, bit for bit
    a, b = (load_checkpoint(tmp_path / d / "ckpt.pt") for d in ("whole", "split"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert torch.equal(a["head"]["weight"], b["head"]["weight"])
    assert whole["eval"] == resumed["eval"]
    other = finetune(config_from_args(args + ["--out", str(tmp_path / "other"), "--seed", "5"]))
    assert _records(tmp_path / "other") != _records(tmp_path / "whole")
    with pytest.raises(ValueError, match="cannot change: --lr"):
        config_from_args(args + ["--out", str(tmp_path / "split"), "--resume", "--lr", "1"])
    assert other["status"] == "finished"


def test_a_run_writes_its_folder_and_an_hf_classifier_with_equal_logits(base, tmp_path):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "run"
    assert cli.main(["finetune", *tiny_args(base, out, "sst2", "sst2.tsv", "--max_steps", "3")]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"ckpt.pt", "config.json", "metrics.jsonl", "loss.png", "report.json", "report.md", "predictions.jsonl",
            "tokenizer", "hf"} <= names
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text())
    assert report["task"] == "classification" and report["metrics"]["all"]["n"] == 3 and "clean" not in report["metrics"]
    hf = transformers.GPT2ForSequenceClassification.from_pretrained(out / "hf").eval()
    ours = _finetuned(out)
    batch = _batch(out, "sst2", "sst2.tsv")
    with torch.no_grad():
        expected, _ = ours(batch.idx, batch.extract)
        theirs = hf(input_ids=batch.idx[:, 0]).logits
    assert theirs.shape == (3, 2) and torch.allclose(theirs, expected, atol=1e-5)
    assert hf.config.id2label == {0: "0", 1: "1"}
    predictions = [json.loads(line)["prediction"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert predictions == expected.argmax(dim=1).tolist()


def _finetuned(out: Path) -> TaskModel:
    state = load_checkpoint(out / "ckpt.pt")
    gpt = load_model(out)
    outputs = state["head"]["weight"].shape[0]
    model = TaskModel(gpt, state["task"], outputs, 0.0)
    model.head.load_state_dict(state["head"])
    return model.eval()


def _batch(out: Path, fmt: str, name: str):
    state = load_checkpoint(out / "ckpt.pt")
    tokenizer = BPETokenizer.load(out / "tokenizer")
    data = read_task_file(FIXTURES / name, fmt)
    labels = tuple(state["labels"]) if state["labels"] else None
    return collate(encode_task(data, tokenizer, SpecialTokens(**state["special"]), 64, labels), tokenizer.eot_id,
                   data.regression)


def test_similarity_regression_exports_a_classifier_whose_two_orders_sum_to_ours(base, tmp_path):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "stsb"
    assert cli.main(["finetune", *tiny_args(base, out, "stsb", "stsb.tsv", "--max_steps", "2")]) == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["metrics"]["all"]) == {"pearson", "spearman", "n"}
    hf = transformers.GPT2ForSequenceClassification.from_pretrained(out / "hf").eval()
    assert hf.config.num_labels == 1 and hf.config.problem_type == "regression"
    batch = _batch(out, "stsb", "stsb.tsv")
    with torch.no_grad():
        expected, _ = _finetuned(out)(batch.idx, batch.extract)
        summed = hf(input_ids=batch.idx[:, 0]).logits + hf(input_ids=batch.idx[:, 1]).logits
    assert torch.allclose(summed, expected, atol=1e-5)


def test_a_gpt1_hugging_face_folder_fine_tunes_and_exports_as_openai_gpt(base, tmp_path):
    transformers = pytest.importorskip("transformers")

    tokenizer = BPETokenizer.load(base / "tokenizer")
    torch.manual_seed(3)
    gpt1 = GPT(GPTConfig(arch="gpt1", n_layer=2, n_head=2, n_embd=32, block_size=64, vocab_size=tokenizer.vocab_size))
    save_hf_dir(gpt1, tmp_path / "gpt1-hf", tokenizer_files=[base / "tokenizer" / "vocab.json",
                                                             base / "tokenizer" / "merges.txt"])
    out = tmp_path / "run"
    assert cli.main(["finetune", *tiny_args(tmp_path / "gpt1-hf", out, "rocstories", "rocstories.csv", "--max_steps", "2")]) == 0
    hf = transformers.OpenAIGPTForSequenceClassification.from_pretrained(out / "hf").eval()
    batch = _batch(out, "rocstories", "rocstories.csv")
    with torch.no_grad():
        expected, _ = _finetuned(out)(batch.idx, batch.extract)
        per_candidate = torch.stack([hf(input_ids=batch.idx[:, k]).logits[:, 0] for k in range(2)], dim=1)
    assert torch.allclose(per_candidate, expected, atol=1e-5)


def test_a_non_finite_loss_stops_before_the_update_and_keeps_the_last_checkpoint(base, tmp_path, monkeypatch):
    real, calls = finetune_module.task_loss, []

    def poisoned(logits, targets, regression):
        loss = real(logits, targets, regression)
        if torch.is_grad_enabled():
            calls.append(1)
            if len(calls) == 3:  # the third training step
                return loss * float("nan")
        return loss

    monkeypatch.setattr(finetune_module, "task_loss", poisoned)
    out = tmp_path / "run"
    assert cli.main(["finetune", *tiny_args(base, out, "snli", "snli.jsonl", "--max_steps", "5", "--ckpt_interval", "2")]) == 1
    assert load_checkpoint(out / "ckpt.pt")["step"] == 2
    assert [r["step"] for r in _records(out) if "loss" in r] == [1, 2]
    assert not (out / "hf").exists() and not (out / "report.json").exists()


def test_bad_input_is_refused_before_any_training(base, tmp_path, caplog):
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\ngood\t2\n")
    cases = [
        (["--eval", str(dev)], "unknown label(s) ['2']"),
        (["--task", "entailment"], "cannot be run as --task entailment"),
        (["--max_len", "999"], "longer than the model's context (64)"),
        (["--training", str(tmp_path / "nowhere")], "no such file or folder"),
    ]
    for extra, message in cases:
        out = tmp_path / "out"
        caplog.clear()
        assert cli.main(["finetune", *tiny_args(base, out, "sst2", "sst2.tsv", *extra)]) == 2
        assert message in caplog.text, caplog.text
        assert not (out / "ckpt.pt").exists() and not (out / "metrics.jsonl").exists()
    # a model whose vocabulary is smaller than its tokenizer's
    small = tmp_path / "small"
    (small / "tokenizer").mkdir(parents=True)
    for name in ("vocab.json", "merges.txt"):
        (small / "tokenizer" / name).write_bytes((base / "tokenizer" / name).read_bytes())
    gpt = _gpt(vocab=100)
    save_checkpoint(small / "ckpt.pt", {"model": gpt.state_dict(), "model_config": gpt.config.to_dict()})
    caplog.clear()
    assert cli.main(["finetune", *tiny_args(small, tmp_path / "o2")]) == 2
    assert "lacks room for the tokenizer's" in caplog.text
    assert cli.main(["finetune", *tiny_args(base, tmp_path / "o3", "sst2", "sst2.tsv", "--max_steps", "1", "--no_hf_export")]) == 0
    caplog.clear()
    assert cli.main(["finetune", *tiny_args(base, tmp_path / "o3", "sst2", "sst2.tsv", "--max_steps", "1")]) == 2
    assert "already exists: pass --resume" in caplog.text


def test_demo_finetune_runs_on_the_demo_model(base, tmp_path):
    docs = [Document(text="Notes. " + DEMO_SENTENCES["weather"][3] + " " + DEMO_SENTENCES["cooking"][7], url="u",
                     timestamp="t")]  # two of the evaluation sentences in the "pre-training corpus"
    write_shards(docs, tmp_path / "corpus", fmt="jsonl", num_shards=1)
    summary = demo_finetune(str(base), str(tmp_path / "demo"), steps=4, training=str(tmp_path / "corpus"))
    assert summary["status"] == "finished" and summary["steps"] == 4 and summary["eval"]["all"]["n"] == 20
    assert summary["eval"]["dirty"]["n"] == 2 and summary["eval"]["clean"]["n"] == 18
    assert (tmp_path / "demo" / "run" / "report.md").is_file() and (tmp_path / "demo" / "run" / "hf").is_dir()
    text = format_summary(summary)
    assert "| accuracy |" in text and "dirty (n=2)" in text


# ----------------------------------------------------------------------------- real tasks from the shared data

def _wiki_and_ptb(real_data: Path, count: int, words: int = 14) -> tuple[list[str], list[str]]:
    wiki = [line.strip() for line in (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(
        encoding="utf-8").splitlines() if len(line.split()) > 30 and not line.strip().startswith("=")]
    ptb = [line.strip() for line in (real_data / "lm_benchmarks/ptb/ptb.test.txt").read_text(
        encoding="utf-8").splitlines() if len(line.split()) >= words]
    return [" ".join(t.split()[:words]) for t in wiki[:count]], [" ".join(t.split()[:words]) for t in ptb[:count]]


@pytest.fixture(scope="module")
def real_base(real_data, tmp_path_factory) -> Path:
    wiki, ptb = _wiki_and_ptb(real_data, 600)
    return make_base(tmp_path_factory.mktemp("real-base"), wiki + ptb, vocab=512, block=48)


@pytest.mark.pipeline  # a fine-tuning run long enough to learn
def test_a_tiny_model_learns_wikitext_versus_ptb_above_chance(real_data, real_base, tmp_path):
    wiki, ptb = _wiki_and_ptb(real_data, 240)
    rng = np.random.default_rng(0)
    rows = [(s, 0) for s in wiki] + [(s, 1) for s in ptb]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    for name, part in (("train.tsv", rows[:400]), ("dev.tsv", rows[400:])):
        (tmp_path / name).write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in part), encoding="utf-8")
    summary = finetune(config_from_args([
        "--model", str(real_base), "--train", str(tmp_path / "train.tsv"), "--eval", str(tmp_path / "dev.tsv"),
        "--format", "sst2", "--out", str(tmp_path / "run"), "--batch_size", "16", "--epochs", "2", "--lr", "2e-3",
        "--quiet", "--no_hf_export", "--seed", "0"]))
    accuracy = summary["eval"]["all"]["accuracy"]
    assert summary["eval"]["all"]["n"] == 80 and accuracy >= 0.8, summary["eval"]
    first_eval = next(r for r in read_metrics(str(tmp_path / "run" / "metrics.jsonl")) if "eval" in r)
    assert first_eval["step"] == 25  # one evaluation per epoch


def test_wsc273_as_multiple_choice_with_a_clean_dirty_split(real_data, real_base, tmp_path):
    wsc = load_wsc(real_data / "lm_benchmarks/wsc/WSCollection.xml")
    assert len(wsc.examples) == 273
    rows = [{"id": e.id, "context": e.meta["txt1"], "choices": [f"{o} {e.meta['txt2']}" for o in e.meta["options"]],
             "label": e.meta["label"]} for e in wsc.examples]
    (tmp_path / "wsc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    planted = [5, 50, 120]  # WSC schemas written verbatim into a tiny "pre-training corpus"
    docs = [Document(text="Some words first.\n" + "\n".join([rows[i]["context"], *rows[i]["choices"]]) + "\nThe end.",
                     url=f"https://example.org/{i}", timestamp="2019-01-01T00:00:00Z") for i in planted]
    docs.append(Document(text="Nothing of the test set is here, only filler words about rivers.", url="u", timestamp="t"))
    write_shards(docs, tmp_path / "corpus", fmt="jsonl", num_shards=1)
    summary = finetune(config_from_args([
        "--model", str(real_base), "--train", str(tmp_path / "wsc.jsonl"), "--eval", str(tmp_path / "wsc.jsonl"),
        "--format", "jsonl", "--task", "multiple_choice", "--out", str(tmp_path / "run"), "--batch_size", "32",
        "--max_steps", "3", "--quiet", "--no_hf_export", "--training", str(tmp_path / "corpus")]))
    # a schema and its twin (indices 2k, 2k+1) share all but a word or two: the twin shares its 8-grams, dirty too
    expected = sorted({j for i in planted for j in (i, i ^ 1)})
    metrics = summary["eval"]
    assert metrics["dirty"]["n"] == 6 and metrics["clean"]["n"] == 267 and metrics["all"]["n"] == 273
    combined = (metrics["clean"]["accuracy"] * 267 + metrics["dirty"]["accuracy"] * 6) / 273
    assert abs(metrics["all"]["accuracy"] - combined) < 1e-9
    dirty_ids = [json.loads(line)["id"] for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
                 if json.loads(line)["dirty"]]
    assert dirty_ids == [f"wsc273-{i}" for i in expected]
    assert summary["contamination"]["dirty"] == 6 and summary["contamination"]["kind"] == "exact"
    md = (tmp_path / "run" / "report.md").read_text()
    assert "dirty (n=6)" in md and "clean (n=267)" in md
