"""model/run_folder.py: the files train and finetune both keep in a run folder: metrics, the
resume check, the Hugging Face export with and without a task head."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from safetensors.torch import load_file

from model.checkpoint import CheckpointError, save_checkpoint
from model.gpt import GPT, GPTConfig
from model.run_folder import METRICS_FILE, export_hf, keep_metrics_until, read_metrics, resume_state


class RunError(ValueError):
    pass


def test_metrics_stop_at_a_cut_line_and_are_cut_back_to_a_step(tmp_path):
    path = tmp_path / METRICS_FILE
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 6)) + '{"step": 6, "lo')
    assert [r["step"] for r in read_metrics(str(path))] == [1, 2, 3, 4, 5]  # the line a crash cut is dropped
    keep_metrics_until(str(path), 3)
    assert [r["step"] for r in read_metrics(str(path))] == [1, 2, 3]
    assert path.read_text().endswith("\n") and read_metrics(str(tmp_path / "none.jsonl")) == []


def test_resume_state_refuses_to_overwrite_a_run_and_to_resume_nothing(tmp_path):
    assert resume_state(str(tmp_path), False, ("step",), RunError) is None  # a new run
    with pytest.raises(RunError, match="--resume: there is no checkpoint at"):
        resume_state(str(tmp_path), True, ("step",), RunError)
    gpt = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    save_checkpoint(tmp_path / "ckpt.pt", {"step": 4, "model": gpt.state_dict(), "model_config": gpt.config.to_dict()})
    with pytest.raises(RunError, match="already exists: pass --resume"):
        resume_state(str(tmp_path), False, ("step",), RunError)
    assert resume_state(str(tmp_path), True, ("step",), RunError)["step"] == 4
    with pytest.raises(CheckpointError, match="no 'optimizer' entry"):  # a checkpoint a resume cannot use
        resume_state(str(tmp_path), True, ("step", "optimizer"), RunError)


def test_the_export_writes_the_lm_or_hands_its_parts_to_a_task_head(tmp_path, caplog):
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=40))
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "vocab.json").write_text("{}")
    folder = export_hf(gpt, str(tmp_path), eot_token_id=39)
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == ["config.json", "model.safetensors", "vocab.json"]
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert folder == str(tmp_path / "hf") and config["eos_token_id"] == 39 and config["architectures"] == ["GPT2LMHeadModel"]
    assert "lm_head.weight" not in load_file(tmp_path / "hf" / "model.safetensors")  # tied: left out

    def head(state, config):
        state["score.weight"] = torch.ones(2, 16)
        config["architectures"] = ["GPT2ForSequenceClassification"]

    export_hf(gpt, str(tmp_path), eot_token_id=39, head=head)
    weights = load_file(tmp_path / "hf" / "model.safetensors")
    assert torch.equal(weights["score.weight"], torch.ones(2, 16))
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == ["GPT2ForSequenceClassification"]
    with caplog.at_level(logging.WARNING, logger="corpusforge.run_folder"):
        assert export_hf(gpt, str(tmp_path / "other"), eot_token_id=40) is None  # outside the vocabulary
    assert "no Hugging Face export" in caplog.text and not (tmp_path / "other" / "hf").exists()
