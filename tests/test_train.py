"""model.train, model.checkpoint and model.sample: real tiny GPTs trained on real token shards.

Every run here is a few steps of a 1-2 layer model on CPU; the CLI is exercised through
``python -m pipelines.cli`` in a subprocess, DDP through a real ``torchrun`` with gloo.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers  # its generation classes load on first use, only in the test that compares with them

from model.checkpoint import (
    CheckpointError,
    clean_state_dict,
    load_checkpoint,
    load_model,
    model_from_state,
    save_checkpoint,
    tokenizer_folder,
)
from model.device import FALLBACK_PEAK, peak_for_name
from model.gpt import GPT, GPTConfig
from model.optim import decay_groups, lr_at, make_optimizer
from model.run_folder import read_metrics
from model.sample import generate, top_k_mask, top_p_mask
from model.token_shards import shard_name, write_token_shard
from model.tokenizer import train_tokenizer
from model.train import TrainConfig, TrainError, train
from pipelines import cli

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]
TINY = dict(model="gpt2", n_layer=2, n_head=2, n_embd=32, block_size=32)
TINY_FLAGS = ["--model", "gpt2", "--n_layer", "2", "--n_head", "2", "--n_embd", "32", "--block_size", "32"]


def subprocess_env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PYTHONPATH": str(REPO)}


def corpusforge(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, timeout=300,
                            cwd=REPO, env=subprocess_env())
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def pattern_data(tmp_path_factory) -> Path:
    """A 64-token vocabulary; train and val are a fixed random 50-token phrase repeated (learnable)."""
    folder = tmp_path_factory.mktemp("pattern")
    phrase = np.random.default_rng(0).integers(0, 64, size=50)
    write_token_shard(folder / shard_name("p", "train", 0), np.tile(phrase, 40))
    write_token_shard(folder / shard_name("p", "train", 1), np.tile(np.roll(phrase, 7), 30))
    write_token_shard(folder / shard_name("p", "val", 0), np.tile(phrase, 6))
    (folder / "meta.json").write_text(json.dumps({"vocab_size": 64, "eot_id": 63, "tokenizer": "tokenizer",
                                                  "splits": {"train": {"shards": 2}, "val": {"shards": 1}}}))
    return folder


SUBJECTS = ["the miller", "a sailor", "the old king", "my sister", "the baker", "a small dog", "the teacher"]
VERBS = ["found", "painted", "carried", "sold", "watched", "forgot", "built"]
OBJECTS = ["a red boat", "the bright lamp", "seven apples", "the long road", "a wooden chair", "the map"]
PLACES = ["near the river", "in the market", "before dawn", "under the bridge", "at the harbour"]


@pytest.fixture(scope="module")
def text_data(tmp_path_factory) -> Path:
    """A `corpusforge tokenize`-style folder: a byte-level BPE trained on generated sentences, shards, meta.json."""
    rng = np.random.default_rng(1)
    docs = [" ".join(f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
                     f"{rng.choice(PLACES)}." for _ in range(int(rng.integers(2, 6)))) for _ in range(400)]
    tokenizer = train_tokenizer(docs, vocab_size=320, show_progress=False)
    folder = tmp_path_factory.mktemp("tokenized")
    tokenizer.save(folder / "tokenizer")
    ids = {"train": [], "val": []}
    for n, doc in enumerate(docs):
        ids["val" if n % 10 == 0 else "train"] += [tokenizer.eot_id] + tokenizer.encode(doc)
    for split, tokens in ids.items():
        write_token_shard(folder / shard_name("toy", split, 0), tokens)
    (folder / "meta.json").write_text(json.dumps({
        "vocab_size": tokenizer.vocab_size, "eot_id": tokenizer.eot_id, "tokenizer": "tokenizer",
        "splits": {s: {"shards": 1, "tokens": len(t), "documents": None} for s, t in ids.items()}}))
    return folder


def tiny_config(data: Path, out: Path, **overrides) -> TrainConfig:
    base = dict(data=str(data), out=str(out), batch_tokens=2 * 4 * 32, micro_batch=4, max_steps=8, lr=3e-3,
                warmup_steps=2, eval_interval=4, eval_windows=8, ckpt_interval=4, log_interval=100, quiet=True,
                hf_export=False, **TINY)
    base.update(overrides)
    return TrainConfig(**base)


def train_losses(out: Path) -> list[float]:
    return [r["loss"] for r in read_metrics(str(out / "metrics.jsonl")) if "loss" in r]


# ---------------------------------------------------------------- schedule, parameter groups, MFU table

def test_learning_rate_warms_up_linearly_then_follows_a_cosine_to_min_lr():
    lr, min_lr, warmup, decay = 6e-4, 6e-5, 10, 110
    assert lr_at(0, lr, min_lr, warmup, decay) == pytest.approx(lr / 10)
    assert lr_at(4, lr, min_lr, warmup, decay) == pytest.approx(lr * 5 / 10)
    assert lr_at(9, lr, min_lr, warmup, decay) == pytest.approx(lr)
    assert lr_at(10, lr, min_lr, warmup, decay) == pytest.approx(lr)  # the cosine starts at its top
    assert lr_at(60, lr, min_lr, warmup, decay) == pytest.approx((lr + min_lr) / 2)  # halfway: cos(pi/2) = 0
    assert lr_at(35, lr, min_lr, warmup, decay) == pytest.approx(min_lr + (lr - min_lr) * (1 + math.cos(math.pi / 4)) / 2)
    assert lr_at(110, lr, min_lr, warmup, decay) == pytest.approx(min_lr)
    assert lr_at(5000, lr, min_lr, warmup, decay) == pytest.approx(min_lr)
    values = [lr_at(s, lr, min_lr, warmup, decay) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_weight_decay_applies_to_matrices_only():
    model = GPT(GPTConfig.named("gpt2", n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=50))
    decayed, plain = decay_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed_names = sorted(names[id(p)] for p in decayed["params"])
    plain_names = sorted(names[id(p)] for p in plain["params"])
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(model.get_parameter(n).dim() == 2 for n in decayed_names)
    assert "transformer.wte.weight" in decayed_names and "transformer.h.0.attn.c_attn.weight" in decayed_names
    assert all(n.endswith("bias") or ".ln_" in n for n in plain_names)
    assert "transformer.ln_f.weight" in plain_names and "transformer.h.1.mlp.c_fc.bias" in plain_names
    every = {id(p) for p in model.parameters()}
    assert {id(p) for p in decayed["params"] + plain["params"]} == every  # each parameter once (tied included)


def test_cpu_optimizer_is_the_fused_adamw_and_updates_like_the_reference_loop():
    torch.manual_seed(0)
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=50))
    reference = GPT(model.config)
    reference.load_state_dict(model.state_dict())
    cfg = TrainConfig(data="unused", out="unused", **TINY)
    fused = make_optimizer(model, torch.device("cpu"), cfg.lr, (cfg.beta1, cfg.beta2), cfg.weight_decay)
    loop = torch.optim.AdamW(decay_groups(reference, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                             eps=1e-8, foreach=False)
    assert fused.defaults["fused"] is True
    x = torch.randint(0, 50, (2, 8))
    for _ in range(3):
        for m, opt in ((model, fused), (reference, loop)):
            m(x, x, return_logits=False)[1].backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=1e-5, msg=name)
    assert not torch.equal(model.transformer.wte.weight, GPT(model.config).transformer.wte.weight)


def test_peak_flops_table():
    assert peak_for_name("NVIDIA H200")[0] == 989e12
    assert peak_for_name("NVIDIA H100 80GB HBM3")[0] == 989e12
    assert peak_for_name("NVIDIA H100 PCIe")[0] == 756e12
    assert peak_for_name("NVIDIA A100-SXM4-80GB")[0] == 312e12
    value, note = peak_for_name("NVIDIA GeForce GTX 1080")
    assert value == FALLBACK_PEAK and "assuming" in note


# ---------------------------------------------------------------- training runs

@pytest.mark.pipeline  # a training run of 60 steps
def test_a_tiny_model_overfits_a_tiny_shard(pattern_data, tmp_path):
    summary = train(tiny_config(pattern_data, tmp_path / "run", max_steps=60, lr=1e-2, warmup_steps=5,
                                eval_interval=30, ckpt_interval=60))
    losses = train_losses(tmp_path / "run")
    assert summary["status"] == "finished" and summary["steps"] == 60 and len(losses) == 60
    assert losses[0] > 3.5  # about ln(64) = 4.16 at initialisation
    assert max(losses[-5:]) < 0.5 and summary["val_loss"] < 0.5
    assert summary["accumulation"] == 2 and summary["tokens"] == 60 * 256
    assert summary["tokens_per_s"] > 0 and summary["mfu"] is None  # CPU: MFU n/a
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"config.json", "ckpt.pt", "metrics.jsonl", "loss.png"} <= files
    assert (tmp_path / "run" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["model"]["vocab_size"] == 64 and config["accumulation"] == 2  # vocab from meta.json


@pytest.mark.pipeline  # three training runs (10 steps, stopped at 5, resumed)
def test_stopped_and_resumed_equals_uninterrupted(pattern_data, tmp_path):
    # dropout on, so the restored RNG matters; accumulation 2; evaluation and checkpoint in between
    cfg = tiny_config(pattern_data, tmp_path / "whole", dropout=0.1, max_steps=10, ckpt_interval=3, eval_interval=2)
    whole = train(cfg)
    first = train(replace(cfg, out=str(tmp_path / "split"), stop_at=5))
    assert first["status"] == "stopped" and first["steps"] == 5
    assert load_checkpoint(tmp_path / "split" / "ckpt.pt")["step"] == 5
    resumed = train(replace(cfg, out=str(tmp_path / "split"), resume=True))
    assert resumed["steps"] == 10
    assert train_losses(tmp_path / "split") == train_losses(tmp_path / "whole")  # bit for bit on CPU
    assert len(train_losses(tmp_path / "whole")) == 10
    val = [[r["val_loss"] for r in read_metrics(str(tmp_path / d / "metrics.jsonl")) if "val_loss" in r]
           for d in ("whole", "split")]
    assert val[0] == val[1] and len(val[0]) == 5
    a, b = (load_checkpoint(tmp_path / d / "ckpt.pt") for d in ("whole", "split"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["data"] == b["data"] and whole["val_loss"] == resumed["val_loss"]
    # a different seed gives different losses (the equality above is not vacuous)
    other = train(replace(cfg, out=str(tmp_path / "other"), seed=5, max_steps=3))
    assert train_losses(tmp_path / "other") != train_losses(tmp_path / "whole")[:3] and other["steps"] == 3


def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(pattern_data, tmp_path, monkeypatch):
    forward = GPT.forward
    calls = {"n": 0}

    def failing_forward(self, idx, targets=None, **kwargs):
        logits, loss = forward(self, idx, targets, **kwargs)
        if self.training:
            calls["n"] += 1
            if calls["n"] > 2 * 5:  # the 6th step (2 micro-batches each) produces NaN
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(GPT, "forward", failing_forward)
    summary = train(tiny_config(pattern_data, tmp_path / "run", max_steps=10, ckpt_interval=4))
    assert summary["status"] == "nonfinite" and summary["steps"] == 5
    assert "step 6" in summary["message"] and "last good checkpoint (step 4)" in summary["message"]
    state = load_checkpoint(tmp_path / "run" / "ckpt.pt")
    assert state["step"] == 4
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    assert len(train_losses(tmp_path / "run")) == 5 and all(math.isfinite(x) for x in train_losses(tmp_path / "run"))


def test_an_existing_run_is_not_overwritten_without_resume(pattern_data, tmp_path):
    train(tiny_config(pattern_data, tmp_path / "run", max_steps=2))
    before = (tmp_path / "run" / "ckpt.pt").read_bytes()
    with pytest.raises(TrainError, match="already exists: pass --resume"):
        train(tiny_config(pattern_data, tmp_path / "run", max_steps=2))
    assert (tmp_path / "run" / "ckpt.pt").read_bytes() == before
    with pytest.raises(TrainError, match="not a multiple of micro_batch x block_size"):
        train(tiny_config(pattern_data, tmp_path / "other", batch_tokens=100))


def test_full_logits_loss_path_trains_like_the_chunked_one_and_unknown_modes_are_refused(pattern_data, tmp_path):
    from model.train import TrainError

    train(tiny_config(pattern_data, tmp_path / "chunked", max_steps=3))
    train(tiny_config(pattern_data, tmp_path / "full", max_steps=3, loss_impl="full"))
    chunked, full = train_losses(tmp_path / "chunked"), train_losses(tmp_path / "full")
    assert len(chunked) == len(full) == 3 and chunked[-1] < chunked[0]
    assert full == pytest.approx(chunked, rel=1e-4)
    with pytest.raises(TrainError, match="--compile_mode must be one of default, reduce-overhead, max-autotune"):
        train(tiny_config(pattern_data, tmp_path / "bad", compile_mode="cudagraphs"))
    with pytest.raises(TrainError, match="--loss_impl must be one of chunked, full"):
        train(tiny_config(pattern_data, tmp_path / "bad", loss_impl="fused"))
    assert not (tmp_path / "bad").exists()


def test_cuda_graph_mode_accumulates_into_its_own_gradient_buffers_with_the_same_result(pattern_data, tmp_path):
    # --compile_mode reduce-overhead keeps gradients in buffers zeroed in place (never a graph replay's
    # output); eagerly (CPU, no compile) the same loop must give the same weights bit for bit, with
    # gradient accumulation over 2 micro-batches and an evaluation between steps.
    train(tiny_config(pattern_data, tmp_path / "plain", max_steps=4))
    train(tiny_config(pattern_data, tmp_path / "graphs", max_steps=4, compile_mode="reduce-overhead"))
    assert train_losses(tmp_path / "graphs") == train_losses(tmp_path / "plain")
    plain = torch.load(tmp_path / "plain" / "ckpt.pt", weights_only=True)["model"]
    graphs = torch.load(tmp_path / "graphs" / "ckpt.pt", weights_only=True)["model"]
    assert plain.keys() == graphs.keys()
    assert all(torch.equal(plain[k], graphs[k]) for k in plain)


# ---------------------------------------------------------------- checkpoints

class NotAllowed:
    def __init__(self):
        self.value = 1


def test_corrupted_truncated_and_foreign_checkpoints_are_refused_clearly(tmp_path):
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    good = tmp_path / "ckpt.pt"
    save_checkpoint(good, {"model": model.state_dict(), "model_config": model.config.to_dict(), "step": 3})
    assert load_checkpoint(good)["step"] == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind
    data = good.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated, corrupted"):
        load_checkpoint(tmp_path / "cut.pt")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty"):
        load_checkpoint(tmp_path / "empty.pt")
    (tmp_path / "noise.pt").write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match="cannot read the checkpoint"):
        load_checkpoint(tmp_path / "noise.pt")
    torch.save({"format": "corpusforge-checkpoint", "evil": NotAllowed()}, tmp_path / "pickle.pt")
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_checkpoint(tmp_path / "pickle.pt")
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump({"a": 1}, f)
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "plain.pkl")
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="not a corpusforge checkpoint"):
        load_checkpoint(tmp_path / "weights.pt")
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_every_seeded_bit_flip_in_a_checkpoint_is_refused_by_its_checksum(tmp_path):
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    good = tmp_path / "ckpt.pt"
    save_checkpoint(good, {"model": model.state_dict(), "model_config": model.config.to_dict(), "step": 3})
    data = good.read_bytes()
    rng = np.random.default_rng(0)
    for bit in rng.integers(0, len(data) * 8, size=60):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        good.write_bytes(bytes(flipped))
        with pytest.raises(CheckpointError, match="ckpt.pt: sha256 .* does not match .*corrupted"):
            load_checkpoint(good)
    good.write_bytes(data + b"\0")
    with pytest.raises(CheckpointError, match="bytes, but .* were written"):
        load_checkpoint(good)
    good.write_bytes(data)
    assert load_checkpoint(good)["step"] == 3


def test_missing_entries_and_wrong_shapes_are_errors_naming_the_file(tmp_path):
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"model": model.state_dict(), "model_config": model.config.to_dict(), "step": 3})
    with pytest.raises(CheckpointError, match=r"ckpt.pt: the checkpoint has no 'optimizer' entry"):
        load_checkpoint(path, required=("optimizer",))
    wrong = dict(model.config.to_dict(), n_embd=32)
    save_checkpoint(path, {"model": model.state_dict(), "model_config": wrong, "step": 3})
    with pytest.raises(CheckpointError, match="do not fit its model config"):
        model_from_state(load_checkpoint(path))
    save_checkpoint(path, {"model": {"w": [1, 2]}, "model_config": model.config.to_dict()})
    with pytest.raises(CheckpointError, match="not a state dict of tensors"):
        load_checkpoint(path)


def test_resume_falls_back_to_the_newest_kept_checkpoint_that_passes_its_checksum(pattern_data, tmp_path, caplog):
    cfg = tiny_config(pattern_data, tmp_path / "run", max_steps=10, ckpt_interval=2, keep_checkpoints=2)
    train(replace(cfg, stop_at=6))
    kept = sorted(p.name for p in (tmp_path / "run").glob("ckpt-*.pt"))
    assert kept == ["ckpt-00000004.pt", "ckpt-00000006.pt"]  # the last two kept, older ones deleted
    latest = tmp_path / "run" / "ckpt.pt"
    damaged = bytearray(latest.read_bytes())
    damaged[len(damaged) // 2] ^= 0x10
    latest.write_bytes(bytes(damaged))  # written in place: ckpt-00000006.pt, a hard link of it, is damaged too
    with caplog.at_level("WARNING"):
        resumed = train(replace(cfg, resume=True))
    assert resumed["steps"] == 10
    assert any("ckpt-00000004.pt" in r.getMessage() and "continuing from" in r.getMessage() for r in caplog.records)
    assert load_checkpoint(latest)["step"] == 10


def test_compile_and_ddp_prefixes_never_reach_the_file(tmp_path):
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    compiled = torch.compile(model)  # not run: only its state-dict keys matter here
    keys = list(compiled.state_dict())
    assert keys[0].startswith("_orig_mod.")
    assert list(clean_state_dict({"module._orig_mod.a.b": 1})) == ["a.b"]
    save_checkpoint(tmp_path / "c.pt", {"model": compiled.state_dict(), "model_config": model.config.to_dict()})
    loaded = load_checkpoint(tmp_path / "c.pt")["model"]
    assert set(loaded) == set(model.state_dict())
    restored = load_model(tmp_path / "c.pt")
    idx = torch.tensor([[1, 2, 3]])
    assert torch.equal(restored(idx)[0], model.eval()(idx)[0])


def test_a_loaded_model_holds_the_checkpoints_weights_and_draws_no_random_ones(tmp_path):
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    path = tmp_path / "c.pt"
    half = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}  # a checkpoint kept in bf16
    save_checkpoint(path, {"model": half, "model_config": model.config.to_dict()})
    before = torch.get_rng_state()
    restored = load_model(path)
    assert torch.equal(torch.get_rng_state(), before)  # built on the meta device: no initial draws to overwrite
    loaded = restored.state_dict()
    assert set(loaded) == set(half)
    assert all(t.dtype == torch.float32 and torch.equal(t, half[k].float()) for k, t in loaded.items())
    # the weight checks see both ends of a tensor: a value far below zero, and -inf
    for value, what in ((-3e38, "magnitude 3e\\+38"), (float("-inf"), "1 NaN or infinite")):
        weights = {k: v.clone() for k, v in model.state_dict().items()}
        weights["transformer.h.0.attn.c_proj.weight"][1, 2] = value
        save_checkpoint(path, {"model": weights, "model_config": model.config.to_dict()})
        with pytest.raises(CheckpointError, match=f"c_proj.weight holds .*{what}"):
            load_model(path)


# ---------------------------------------------------------------- the command line, export, sampling

@pytest.mark.pipeline
def test_cli_trains_resumes_samples_and_exports(text_data, tmp_path, caplog, capsys):
    run = tmp_path / "run"
    result = corpusforge("train", "--data", str(text_data), "--out", str(run), *TINY_FLAGS, "--batch_tokens", "256",
                         "--micro_batch", "8", "--lr", "3e-3", "--warmup_steps", "2", "--eval_interval", "3",
                         "--ckpt_interval", "3", "-q", "--max_steps", "6", "--stop_at", "3")
    assert "status       stopped" in result.stdout and "steps        3/6" in result.stdout
    assert "1 accumulation step(s)" in result.stderr and "MFU n/a" in result.stderr
    assert cli.main(["train", "--out", str(run), "--resume", "--n_layer", "3"]) == 2
    assert "--n_layer (saved 2, given 3)" in caplog.text
    capsys.readouterr()
    assert cli.main(["train", "--out", str(run), "--resume", "-q"]) == 0  # the saved settings, continued
    out = capsys.readouterr().out
    assert "status       finished" in out and "steps        6/6" in out
    assert [r["step"] for r in read_metrics(str(run / "metrics.jsonl")) if "loss" in r] == [1, 2, 3, 4, 5, 6]
    assert tokenizer_folder(run) == str(run / "tokenizer")
    assert (run / "hf" / "model.safetensors").is_file() and tokenizer_folder(run / "hf") == str(run / "hf")

    from_run, from_hf = load_model(run), load_model(run / "hf")
    idx = torch.tensor([[5, 17, 42, 99]])
    assert torch.allclose(from_run(idx)[0], from_hf(idx)[0], atol=1e-5)

    args = ["--model", str(run), "--prompt", "The miller", "--max_new_tokens", "12", "--num_samples", "2",
            "--top_k", "20", "--top_p", "0.9", "--seed", "3"]
    sampled = corpusforge("sample", *args)
    assert sampled.stdout.count("--- sample") == 2
    assert all(line.startswith("The miller") for line in sampled.stdout.splitlines() if not line.startswith("---"))
    assert cli.main(["sample", *args]) == 0
    assert capsys.readouterr().out == sampled.stdout  # seeded: the same text in and out of process
    assert cli.main(["sample", "--model", str(tmp_path / "nowhere"), "--prompt", "x"]) == 2
    assert "no such file or folder" in caplog.text
    (run / "ckpt.pt").write_bytes((run / "ckpt.pt").read_bytes()[:1000])
    assert cli.main(["train", "--out", str(run), "--resume", "--max_steps", "8", "-q"]) == 2
    assert "no usable checkpoint" in caplog.text and "1,000 bytes, but" in caplog.text and "truncated or replaced" in caplog.text


@pytest.mark.pipeline
def test_torchrun_ranks_share_the_batch_like_one_process_with_accumulation(pattern_data, tmp_path):
    """Two gloo processes, one micro-batch each, read exactly one process's two micro-batches."""
    single = train(tiny_config(pattern_data, tmp_path / "one", max_steps=4, warmup_steps=1, ckpt_interval=4))
    assert single["accumulation"] == 2
    flags = ["--data", str(pattern_data), *TINY_FLAGS, "--micro_batch", "4", "--batch_tokens", "256", "--max_steps", "4",
             "--lr", "3e-3", "--warmup_steps", "1", "--eval_interval", "4", "--eval_windows", "8",
             "--ckpt_interval", "4", "-q", "--no_hf_export"]
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "pipelines.cli", "train", "--out", str(tmp_path / "two"), *flags],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=subprocess_env())
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert ddp.stdout.count("status       finished") == 1  # rank 0 alone reports
    assert "accumulation 1, 2 process(es)" in ddp.stdout
    one, two = train_losses(tmp_path / "one"), train_losses(tmp_path / "two")
    assert len(one) == len(two) == 4
    np.testing.assert_allclose(two, one, rtol=0, atol=2e-5)  # same windows; only the summation order differs
    val = [[r["val_loss"] for r in read_metrics(str(tmp_path / d / "metrics.jsonl")) if "val_loss" in r]
           for d in ("one", "two")]
    np.testing.assert_allclose(val[1], val[0], rtol=0, atol=2e-5)  # validation split across ranks, summed back
    state = load_checkpoint(tmp_path / "two" / "ckpt.pt")
    assert state["world_size"] == 2 and len(state["rng"]) == 2
    assert not any(k.startswith("module.") for k in state["model"])


def test_top_k_and_top_p_masks_match_transformers():
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    for k in (1, 5, 49):
        ours = top_k_mask(logits, k)
        assert torch.equal(torch.isfinite(ours).sum(-1), torch.full((4,), k))
        assert torch.equal(torch.isinf(ours), torch.isinf(transformers.TopKLogitsWarper(k)(None, logits.clone())))
    for p in (0.1, 0.5, 0.9):
        ours = top_p_mask(logits, p)
        theirs = transformers.TopPLogitsWarper(p, min_tokens_to_keep=1)(None, logits.clone())
        assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    probs = torch.log(torch.tensor([[0.05, 0.5, 0.15, 0.3]]))
    assert torch.isfinite(top_p_mask(probs, 0.7)).tolist() == [[False, True, False, True]]
    assert torch.isfinite(top_p_mask(probs, 0.5)).tolist() == [[False, True, False, False]]
    assert torch.isfinite(top_p_mask(probs, 0.81)).tolist() == [[False, True, True, True]]
    with pytest.raises(ValueError, match="top_p"):
        top_p_mask(probs, 0.0)


def test_generate_greedy_seeded_and_past_the_context():
    torch.manual_seed(0)
    model = GPT(GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=30)).eval()
    start = torch.tensor([[1, 2, 3]])
    greedy = generate(model, start, 10, temperature=0)
    expected = start
    for _ in range(10):  # argmax one token at a time, the context cropped to block_size
        logits, _ = model(expected[:, -8:])
        expected = torch.cat([expected, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(greedy, expected) and greedy.shape == (1, 13)
    assert torch.equal(generate(model, start, 10, top_k=1), greedy)  # top-1 sampling is greedy
    a = generate(model, start.repeat(3, 1), 6, generator=torch.Generator().manual_seed(1))
    b = generate(model, start.repeat(3, 1), 6, generator=torch.Generator().manual_seed(1))
    c = generate(model, start.repeat(3, 1), 6, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    stopped = generate(model, start, 10, temperature=0, stop_token=int(greedy[0, 3]))
    assert stopped.shape == (1, 4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cuda_on_a_machine_without_a_gpu_is_a_one_line_error(pattern_data, tmp_path):
    with pytest.raises(TrainError, match="--device cuda: this torch .* use --device cpu or auto"):
        train(tiny_config(pattern_data, tmp_path / "run", device="cuda"))
    with pytest.raises(TrainError, match="not a device torch knows"):
        train(tiny_config(pattern_data, tmp_path / "run", device="gpu0"))
    assert not (tmp_path / "run" / "ckpt.pt").exists()


def test_crafted_checkpoints_with_a_matching_checksum_are_refused_before_use(tmp_path):
    config = GPTConfig.named("gpt2", n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40)
    model = GPT(config)
    path = tmp_path / "ckpt.pt"

    def state(**changes):
        base = {"model": {k: v.clone() for k, v in model.state_dict().items()}, "model_config": config.to_dict(), "step": 3}
        base.update(changes)
        return base

    save_checkpoint(path, state())
    Path(str(path) + ".sha256").write_text("[" * 200_000)
    with pytest.raises(CheckpointError, match=r"ckpt.pt.sha256: unreadable checksum file \(over 4096 bytes\)"):
        load_checkpoint(path)
    for value, what in ((float("nan"), "NaN or infinite"), (float("inf"), "NaN or infinite"), (3e38, "magnitude 3e\\+38")):
        weights = state()["model"]
        weights["transformer.h.0.mlp.c_fc.weight"][0, 0] = value
        save_checkpoint(path, state(model=weights))
        with pytest.raises(CheckpointError, match=f"transformer.h.0.mlp.c_fc.weight holds .*{what}"):
            load_model(path)
    weights = state()["model"]
    weights["transformer.wpe.weight"] = torch.zeros(9, 16)
    save_checkpoint(path, state(model=weights))
    with pytest.raises(CheckpointError, match=r"transformer.wpe.weight has shape \(9, 16\), the config needs \(8, 16\)"):
        load_checkpoint(path)
    weights = state()["model"]
    del weights["transformer.ln_f.weight"]
    save_checkpoint(path, state(model=weights))
    with pytest.raises(CheckpointError, match=r"missing \['transformer.ln_f.weight'\]"):
        load_checkpoint(path)
    weights = state()["model"]
    weights["transformer.ln_f.weight"] = weights["transformer.ln_f.weight"].to(torch.int64)
    save_checkpoint(path, state(model=weights))
    with pytest.raises(CheckpointError, match="torch.int64, not a floating-point weight"):
        load_checkpoint(path)
    # Sizes far past any model are refused from the config alone, before anything is built.
    for name, value in (("block_size", 10_000_000), ("n_layer", 10_000), ("n_embd", 0)):
        save_checkpoint(path, state(model_config=dict(config.to_dict(), **{name: value})))
        with pytest.raises(CheckpointError, match=rf"model_config {name}={value} is outside 1\.\."):
            load_checkpoint(path)
    # What a resume puts back: RNG states, the schedule, the step.
    for changes, message in (({"scheduler": {"step": None}}, "'scheduler' is .*not a schedule state"),
                             ({"step": -1}, "'step' is -1, not a count"),
                             ({"rng": [{"torch": torch.zeros(7, dtype=torch.uint8)}]}, "RNG state of process 0 is unusable: 'torch'"),
                             ({"rng": ["seven b"]}, "RNG state of process 0 is unusable: a str"),
                             ({"optimizer": {"state": []}}, "'optimizer' is not an optimizer state")):
        save_checkpoint(path, state(**changes))
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(path)


@pytest.mark.pipeline  # the corpusforge command in a subprocess
def test_an_optimizer_state_of_another_shape_is_refused_before_load_state_dict(pattern_data, tmp_path):
    run = tmp_path / "run"
    train(tiny_config(pattern_data, run, max_steps=4, ckpt_interval=2))
    state = load_checkpoint(run / "ckpt.pt")
    moments = state["optimizer"]["state"][0]
    moments["exp_avg"] = torch.zeros(moments["exp_avg"].shape[0] + 1, *moments["exp_avg"].shape[1:])
    save_checkpoint(run / "ckpt.pt", state)
    # In a fresh process: before this check, torch's step wrote past the short tensor (SIGABRT).
    result = corpusforge("train", "--out", str(run), "--resume", "--max_steps", "6", "-q", check=False)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "optimizer parameter 0: 'exp_avg' is torch.float32" in errors[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    state["optimizer"]["param_groups"][0]["params"].append(999)
    save_checkpoint(run / "ckpt.pt", state)
    assert cli.main(["train", "--out", str(run), "--resume", "--max_steps", "6", "-q"]) == 2


def _crafted(state: dict, **changes) -> dict:
    """``state`` with entries replaced; ``"a.b"`` names an entry of an entry, ``"a.0.b"`` one of a list."""
    state = {**state, "data": dict(state["data"]), "scheduler": dict(state["scheduler"]), "metrics": dict(state["metrics"]),
             "rng": [dict(r) for r in state["rng"]],
             "optimizer": {**state["optimizer"], "param_groups": [dict(g) for g in state["optimizer"]["param_groups"]]}}
    for name, value in changes.items():
        *parents, last = name.split(".")
        where = state
        for key in parents:
            where = where[int(key)] if isinstance(where, list) else where[key]
        where[int(last) if isinstance(where, list) else last] = value
    return state


@pytest.mark.pipeline  # the corpusforge command in a subprocess, then resumes in process
def test_a_crafted_checkpoint_with_a_matching_checksum_is_refused_in_one_line_on_resume(pattern_data, tmp_path, caplog):
    run = tmp_path / "run"
    train(tiny_config(pattern_data, run, max_steps=4, ckpt_interval=2, keep_checkpoints=0))
    good = load_checkpoint(run / "ckpt.pt")
    assert good["step"] == 4 and good["data"]["position"] == 4 * 2 * 4  # 4 steps of 2 micro-batches of 4 windows
    # The data cursor holds strings; save_checkpoint writes the matching .sha256, so only the check stands in the way.
    save_checkpoint(run / "ckpt.pt", _crafted(good, **{"data.epoch": "zero", "data.position": "32"}))
    result = corpusforge("train", "--out", str(run), "--resume", "--max_steps", "6", "-q", check=False)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "the data cursor ('data') is unusable: 'epoch' is 'zero', not a whole number" in errors[0], errors
    assert "Traceback" not in result.stderr and not (run / "ckpt-00000006.pt").exists()
    python = list(good["rng"][0]["python"])
    for changes, message in (
            ({"data.position": -8}, "epoch 0, position -8 is not a place in the epochs of"),
            ({"data.position": 28}, "has read 7 micro-batches, but 4 step(s) of 2 read 8: the checkpoint was not written by this run"),
            ({"data.seed": 7}, "the checkpoint's seed is 7 but this run's is 1337"),
            ({"scheduler.step": 3}, "the schedule is at step 3, the checkpoint at step 4"),
            ({"step": "4"}, "'step' is '4', not a count"),
            ({"metrics.train_loss": "low"}, "the checkpoint's metrics 'train_loss' is 'low', not a number"),
            ({"world_size": 2}, "'rng' holds 1 RNG state(s) for a run of 2 process(es)"),
            ({"rng.0.python": (7, *python[1:])}, "the RNG state of process 0 is unusable: 'python' is not a random.getstate() state"),
            ({"optimizer.param_groups.0.betas": ("a", "b")}, "optimizer group 0: 'betas' is ('a', 'b'), not 2 finite numbers"),
            ({"version": "1"}, "the checkpoint's 'version' is '1', not a format version")):
        save_checkpoint(run / "ckpt.pt", _crafted(good, **changes))
        caplog.clear()
        assert cli.main(["train", "--out", str(run), "--resume", "--max_steps", "6", "-q"]) == 2, changes
        refused = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(refused) == 1 and message in refused[0], (changes, refused)
    # The checkpoint as it was written resumes; a crafted one beside a kept good one falls back to that one.
    save_checkpoint(run / "ckpt.pt", good, keep=1)
    save_checkpoint(run / "ckpt.pt", _crafted(good, **{"data.position": "32"}))
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert cli.main(["train", "--out", str(run), "--resume", "--max_steps", "6", "-q"]) == 0
    assert "'position' is '32', not a whole number" in caplog.text and "continuing from" in caplog.text
    assert load_checkpoint(run / "ckpt.pt")["step"] == 6 and load_checkpoint(run / "ckpt.pt")["data"]["position"] == 6 * 2 * 4


@pytest.mark.pipeline  # the corpusforge command in a subprocess
def test_a_checkpoint_save_on_a_full_disk_is_one_line_exit_1_and_keeps_nothing_partial(pattern_data, tmp_path):
    from full_disk import error_lines, small_disk

    with small_disk(tmp_path / "disk", 96 << 10) as disk:
        run = disk.folder / "run"
        done = disk.run([sys.executable, "-m", "pipelines.cli", "train", "--data", str(pattern_data), "--out", str(run), *TINY_FLAGS,
                         "--batch_tokens", "256", "--micro_batch", "8", "--max_steps", "2", "--ckpt_interval", "1", "--no_hf_export", "-q"],
                        cwd=REPO, env=subprocess_env())
        assert done.returncode == 1, done.stderr[-3000:]
        (line,) = error_lines(done.stderr)
        assert f"{run / 'ckpt.pt'}: {disk.reason} (" in line and "Traceback" not in done.stderr
        if disk.kind == "tmpfs":
            assert "this write needs" in line
        assert not [p.name for p in run.iterdir() if p.name.startswith((".ckpt", "ckpt"))]  # no partial checkpoint, no temporary
