"""``corpusforge finetune``: GPT-1's supervised fine-tuning (Radford et al. 2018, section 3.2-3.3).

    corpusforge finetune --model run/ --train SST-2/train.tsv --eval SST-2/dev.tsv --format sst2 \\
        --out ft-sst2/ [--training audit/]

From a pre-trained model (our run folder or checkpoint, or a Hugging Face GPT-2 / GPT-1
folder):

- three tokens are added to the vocabulary, ``start``, ``delim`` and ``extract`` (ids
  ``V``, ``V+1``, ``V+2`` after the model's ``V``), their embedding rows drawn from
  N(0, 0.02) like the other embeddings;
- every example becomes token sequences by the task's input transformation
  (``model.finetune.tasks.transform``); the final hidden state at each ``extract`` token, after
  dropout 0.1, feeds a linear layer W_y (no bias): class logits, a regression score,
  or one score per multiple-choice candidate with a softmax over the candidates;
  for similarity the two orders' states are added before W_y;
- the loss is ``L3 = L2 + lambda * L1``: the task loss plus ``--lm_coef`` (0.5; 0 turns it
  off) times the language-modelling loss of the same sequences;
- the paper's settings are the defaults: Adam(W) at lr 6.25e-5, batch 32, 3 epochs,
  linear warmup over 0.2% of the steps then linear decay to 0; weight decay 0.01 on
  matrices and gradient clipping at 1.0 as in OpenAI's fine-tuning code.

A run folder holds ``config.json``, ``ckpt.pt`` (model, head, optimizer, schedule, step,
RNG states; atomic, with a checksum), ``tokenizer/``, ``metrics.jsonl`` (one line per step,
one per evaluation), ``loss.png``, ``report.json`` / ``report.md`` (every metric on all /
clean / dirty evaluation examples when ``--training`` names the pre-training corpus),
``predictions.jsonl`` and ``hf/``: a ``GPT2ForSequenceClassification`` folder
(``OpenAIGPTForSequenceClassification`` for GPT-1) whose logits equal ours on a single
sequence; a similarity score is the sum of its logits on both orders and a
multiple-choice candidate's score its logit on that candidate's sequence (W_y has no
bias, so both follow). ``--resume`` continues exactly: the examples of a step are a
function of the seed and the step, and the RNG states are saved, so on CPU a stopped
and resumed run ends with the weights and metrics of one never stopped.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

from common.errors import InputError
from common.storage import write_atomically
from model.checkpoint import (
    CHECKPOINT_FILE,
    RUN_CONFIG_FILE,
    TOKENIZER_DIR,
    CheckpointError,
    check_optimizer_state,
    load_model,
    save_checkpoint,
    tokenizer_folder,
)
from model.device import resolve_device, rng_state, seed_everything, set_rng_state
from model.eval.contamination import ContaminationError
from model.finetune.task_files import FORMATS, TASK_TYPES, TaskData, TaskFormatError, parse_fields, read_task_file
from model.finetune.tasks import (
    IGNORE,
    SpecialTokens,
    TaskError,
    collate,
    encode_task,
    label_space,
    mark_task,
    metric_names,
    split_metrics,
)
from model.fused_loss import linear_cross_entropy
from model.gpt import GPT, INIT_STD, GPTConfig
from model.optim import LRSchedule, make_optimizer
from model.run_folder import (
    LOSS_PLOT,
    METRICS_FILE,
    export_hf,
    keep_metrics_until,
    plot_task_run,
    resume_state,
    resumed_config,
)
from model.shapes import meta_gpt
from model.tokenizer import BPETokenizer
from model.train import exit_status, run_in_run_folder  # noqa: F401 (exit_status: the command's exit code, read by pipelines.cli)
from model.validation import mean_loss

log = logging.getLogger("corpusforge.finetune")

REPORT_JSON, REPORT_MD, PREDICTIONS = "report.json", "report.md", "predictions.jsonl"
TASK_TOKENS = ("start", "delim", "extract")
ADAM_BETAS = (0.9, 0.999)  # OpenAI's GPT-1 code: b1 0.9, b2 0.999 (e 1e-8: model.optim.ADAM_EPS)
RESUME_ENTRIES = ("head", "special", "optimizer", "scheduler", "step", "rng", "finetune_config")
RESUME_OVERRIDABLE = {"stop_at", "quiet", "device", "hf_export", "resume", "out", "log_interval", "ckpt_interval"}


@dataclass
class FinetuneConfig:
    model: str = ""  # our run folder / checkpoint, or a Hugging Face GPT-2 / GPT-1 folder
    train: str = ""
    eval: str | None = None
    limit: int | None = None  # read only the first N examples of each file (a quick run on a real task file)
    format: str = "jsonl"
    task: str | None = None  # default: the format's own
    fields: str | None = None  # jsonl: role=field,...
    labels: str | None = None  # class names in index order, comma-separated (default: the format's or the train file's)
    regression: bool = False  # jsonl: the label is a number (STS-B is regression by its format)
    tokenizer: str | None = None
    out: str = "finetune-out"
    training: list[str] | None = None  # the pre-training corpus (Bloom filter, audit folder, shards): clean/dirty
    ngram: int = 8  # GPT-2 section 4: 8-grams
    threshold: float = 0.0
    lr: float = 6.25e-5  # GPT-1 section 4.1 (fine-tuning)
    batch_size: int = 32  # GPT-1 section 4.1
    micro_batch: int | None = None  # examples per forward pass (default batch_size)
    epochs: int = 3  # GPT-1 section 4.1
    max_steps: int | None = None  # default epochs x steps per epoch
    warmup_fraction: float = 0.002  # GPT-1 section 4.1: warmup over 0.2% of training
    lm_coef: float = 0.5  # GPT-1 section 3.2: lambda = 0.5; 0 disables the auxiliary LM loss
    clf_dropout: float = 0.1  # GPT-1 section 4.1: dropout 0.1 on the classifier
    dropout: float | None = None  # the transformer's dropout (default: the pre-trained model's)
    weight_decay: float = 0.01  # GPT-1 section 4.1: w = 0.01 on matrices
    grad_clip: float = 1.0
    max_len: int | None = None  # tokens per sequence (default: the model's context)
    seed: int = 1337
    eval_interval: int = 0  # 0: at the end of every epoch (and of the run)
    ckpt_interval: int = 200
    log_interval: int = 20
    device: str = "auto"
    resume: bool = False
    stop_at: int | None = None
    hf_export: bool = True
    quiet: bool = False


class FinetuneError(InputError):
    """A fine-tuning run that cannot start as given; said before any training."""


# ----------------------------------------------------------------------------- the model

def add_task_tokens(gpt: GPT, generator: torch.Generator, dropout: float | None = None) -> tuple[GPT, SpecialTokens]:
    """A copy of ``gpt`` with ``start``/``delim``/``extract`` appended to its vocabulary (ids V,
    V+1, V+2), their rows drawn from N(0, 0.02) as GPT-1 initialises embeddings."""
    old = gpt.config
    config = replace(old, vocab_size=old.vocab_size + len(TASK_TOKENS),
                     dropout=old.dropout if dropout is None else float(dropout))
    state = {k: v.detach().clone() for k, v in gpt.state_dict().items()}
    wte = state["transformer.wte.weight"]
    grown = torch.zeros(config.padded_vocab_size, old.n_embd, dtype=wte.dtype)
    grown[:old.vocab_size] = wte[:old.vocab_size]
    grown[old.vocab_size:config.vocab_size] = torch.randn(len(TASK_TOKENS), old.n_embd, generator=generator) * INIT_STD
    state["transformer.wte.weight"] = grown
    model = meta_gpt(config)
    model.load_state_dict(state, assign=True)
    v = old.vocab_size
    return model, SpecialTokens(v, v + 1, v + 2)


class TaskModel(nn.Module):
    """A GPT with GPT-1's linear task head W_y on the extract token's final state."""

    def __init__(self, gpt: GPT, task: str, outputs: int, clf_dropout: float = 0.1):
        super().__init__()
        if task not in TASK_TYPES:
            raise ValueError(f"task must be one of {TASK_TYPES}, got {task!r}")
        self.gpt, self.task, self.clf_dropout = gpt, task, float(clf_dropout)
        self.head = nn.Linear(gpt.config.n_embd, outputs, bias=False)  # GPT-1 eq. 3: softmax(h W_y), no bias
        nn.init.normal_(self.head.weight, mean=0.0, std=INIT_STD)

    def forward(self, idx: torch.Tensor, extract: torch.Tensor, choice_mask: torch.Tensor | None = None,
                lm_targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(logits, LM loss or None)`` for ``idx`` ``[B, K, T]`` with extract positions ``[B, K]``.

        Logits: ``[B, outputs]`` (classification, entailment, similarity) or ``[B, K]``
        (multiple choice; a masked-out candidate gets -inf)."""
        batch, k, t = idx.shape
        hidden = self.gpt.hidden_states(idx.reshape(batch * k, t))
        width = hidden.shape[-1]
        final = hidden[torch.arange(batch * k, device=idx.device), extract.reshape(-1)].view(batch, k, width)
        lm_loss = None
        if lm_targets is not None:  # GPT-1 eq. 1 on the task's own sequences (the auxiliary objective)
            lm_loss = linear_cross_entropy(hidden.reshape(-1, width), self.gpt.transformer.wte.weight,
                                           lm_targets.reshape(-1), ignore_index=IGNORE,
                                           vocab_size=self.gpt.config.vocab_size)
        drop = (lambda x: F.dropout(x, self.clf_dropout, training=self.training)) if self.clf_dropout > 0 else (lambda x: x)
        if self.task == "similarity":  # GPT-1 section 3.3: both orders' states added element-wise before W_y
            logits = self.head(drop(final.sum(dim=1)))
        elif self.task == "multiple_choice":
            logits = self.head(drop(final)).squeeze(-1)
            if choice_mask is not None:
                logits = logits.masked_fill(~choice_mask, float("-inf"))
        else:
            logits = self.head(drop(final[:, 0]))
        return logits, lm_loss


def task_loss(logits: torch.Tensor, targets: torch.Tensor, regression: bool) -> torch.Tensor:
    if regression:
        return F.mse_loss(logits[:, 0].float(), targets.float())
    return F.cross_entropy(logits.float(), targets)  # classes, or candidates (a softmax over them)


def predictions_of(logits: torch.Tensor, regression: bool) -> list:
    return logits[:, 0].tolist() if regression else logits.argmax(dim=1).tolist()


def lm_targets_of(example) -> int:
    """The tokens an example's sequences give the LM loss to predict (all but each first)."""
    return sum(len(seq) - 1 for seq in example.sequences)


def batch_indices(step: int, count: int, batch_size: int, seed: int) -> np.ndarray:
    """The training examples of update ``step``: a seeded permutation per epoch, cut in batches
    (the last batch of an epoch may be smaller). A function of (seed, step) only: resumes exactly."""
    per_epoch = math.ceil(count / batch_size)
    epoch, position = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(count)
    return order[position * batch_size:(position + 1) * batch_size]


# ----------------------------------------------------------------------------- input checks

def check_config(cfg: FinetuneConfig) -> None:
    if not cfg.model and not cfg.resume:
        raise FinetuneError("--model is required: a run folder, a checkpoint, or a Hugging Face GPT-2 / GPT-1 folder")
    if not cfg.train:
        raise FinetuneError("--train is required: the labelled training file")
    if cfg.format not in FORMATS:
        raise FinetuneError(f"unknown --format {cfg.format!r}; known: {', '.join(FORMATS)}")
    for name in ("batch_size", "epochs", "ckpt_interval", "log_interval"):
        if getattr(cfg, name) < 1:
            raise FinetuneError(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    for name in ("micro_batch", "max_steps", "stop_at", "max_len", "limit"):
        if getattr(cfg, name) is not None and getattr(cfg, name) < 1:
            raise FinetuneError(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    if cfg.micro_batch and cfg.micro_batch > cfg.batch_size:
        raise FinetuneError(f"--micro_batch {cfg.micro_batch} is larger than --batch_size {cfg.batch_size}")
    if cfg.lr <= 0 or cfg.lm_coef < 0 or cfg.weight_decay < 0 or cfg.grad_clip < 0 or cfg.eval_interval < 0:
        raise FinetuneError("--lr must be positive; --lm_coef, --weight_decay, --grad_clip, --eval_interval not negative")
    if not 0 <= cfg.warmup_fraction <= 1 or not 0 <= cfg.clf_dropout < 1:
        raise FinetuneError("--warmup_fraction must lie in [0, 1] and --clf_dropout in [0, 1)")
    if cfg.training and not cfg.eval:
        raise FinetuneError("--training marks the evaluation examples clean or dirty: it needs --eval")


def read_tasks(cfg: FinetuneConfig) -> tuple[TaskData, TaskData | None]:
    try:
        fields_map = parse_fields(cfg.fields)
        train = read_task_file(cfg.train, cfg.format, cfg.task, fields_map, cfg.regression)
        evaluation = read_task_file(cfg.eval, cfg.format, cfg.task, fields_map, cfg.regression) if cfg.eval else None
    except TaskFormatError as exc:
        raise FinetuneError(str(exc)) from None
    for data in filter(None, (train, evaluation)):
        if cfg.limit:
            data.examples = data.examples[:cfg.limit]
        if not data.examples:
            raise FinetuneError(f"{data.source}: no examples")
        for reason, count in data.skipped.items():
            log.warning("%s: %d row(s) skipped: %s", data.source, count, reason)
    return train, evaluation


def load_base(cfg: FinetuneConfig, tokenizer: BPETokenizer) -> GPT:
    try:
        gpt = load_model(cfg.model)
    except (ValueError, OSError) as exc:  # CheckpointError, HFCheckpointError
        raise FinetuneError(f"--model {cfg.model}: {exc}") from None
    if tokenizer.vocab_size > gpt.config.vocab_size:
        raise FinetuneError(f"--model {cfg.model}: its vocabulary of {gpt.config.vocab_size:,} lacks room for the "
                            f"tokenizer's {tokenizer.vocab_size:,} ids (another tokenizer? pass --tokenizer)")
    return gpt


# ----------------------------------------------------------------------------- evaluation and reports

def evaluate(model: TaskModel, encoded, batch_size: int, pad_id: int, regression: bool, device) -> tuple[list, float]:
    """Predictions for every example (in order) and the mean task loss."""
    predictions = []

    def loss_of(chunk) -> tuple[torch.Tensor, int]:
        batch = collate(chunk, pad_id, regression).to(device)
        logits, _ = model(batch.idx, batch.extract, batch.choice_mask)
        predictions.extend(predictions_of(logits, regression))
        return task_loss(logits, batch.targets, regression), len(chunk)

    chunks = (encoded[start:start + batch_size] for start in range(0, len(encoded), batch_size))
    return predictions, mean_loss(model, chunks, loss_of, device)


def _number(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4f}"


def metrics_table(metrics: dict) -> str:
    """A Markdown table: one row per metric, a column per subset (all / clean / dirty)."""
    subsets = list(metrics)
    names = [k for k in metrics["all"] if k != "n"]
    lines = ["| metric | " + " | ".join(f"{s} (n={metrics[s]['n']})" for s in subsets) + " |",
             "|---|" + "---|" * len(subsets)]
    lines += [f"| {name} | " + " | ".join(_number(metrics[s][name]) for s in subsets) + " |" for name in names]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- Hugging Face export

def export_task_model(model: TaskModel, out: str, *, labels, regression: bool, special: SpecialTokens,
                      pad_id: int) -> str | None:
    """``out/hf`` as a ``GPT2ForSequenceClassification`` (GPT-1: ``OpenAIGPTForSequenceClassification``)
    checkpoint: ``model/run_folder.py``'s export of the transformer with the task head W_y as
    ``score``. ``pad_token_id`` is end-of-text: the class pools the last token that is not
    padding, our extract token."""
    gpt = model.gpt
    arch = "GPT2ForSequenceClassification" if gpt.config.arch == "gpt2" else "OpenAIGPTForSequenceClassification"
    names = list(labels) if labels else (["score"] if regression or model.task == "multiple_choice" else [])

    def task_head(state: dict, config: dict) -> None:
        state["score.weight"] = model.head.weight.detach().to("cpu", copy=True).contiguous()
        config.update({"architectures": [arch], "pad_token_id": pad_id, "num_labels": model.head.out_features,
                       "id2label": {str(i): n for i, n in enumerate(names)}, "label2id": {n: i for i, n in enumerate(names)},
                       # one score per candidate is not a classifier's loss: no problem_type for multiple choice
                       "problem_type": ("regression" if regression else None if model.task == "multiple_choice"
                                        else "single_label_classification"),
                       "task_specific_params": {"corpusforge_finetune": {
                           "task": model.task, **{f"{name}_token_id": getattr(special, name) for name in TASK_TOKENS},
                           "combine": {"similarity": "sum the logits of both orders",
                                       "multiple_choice": "softmax over the candidates' logits"}.get(model.task, "none")}}})
    return export_hf(gpt, out, eot_token_id=pad_id, head=task_head)


# ----------------------------------------------------------------------------- the run

def finetune(cfg: FinetuneConfig) -> dict:
    """Fine-tune (or resume) as ``cfg`` says; returns a summary (status, steps, losses, metrics, paths)."""
    check_config(cfg)
    out = cfg.out
    ckpt_file = os.path.join(out, CHECKPOINT_FILE)
    metrics_file = os.path.join(out, METRICS_FILE)
    try:
        state = resume_state(out, cfg.resume, RESUME_ENTRIES, FinetuneError)
    except CheckpointError as exc:
        raise FinetuneError(f"--resume: {exc}") from None

    # every input is read and checked before the model is built
    train_data, eval_data = read_tasks(cfg)
    try:
        space = label_space(train_data, [eval_data] if eval_data else [],
                            [s.strip() for s in cfg.labels.split(",")] if cfg.labels else None)
    except TaskError as exc:
        raise FinetuneError(str(exc)) from None
    regression, task = train_data.regression, train_data.task
    tokenizer_source = os.path.join(out, TOKENIZER_DIR) if state is not None else (cfg.tokenizer or tokenizer_folder(cfg.model))
    if tokenizer_source is None:
        raise FinetuneError(f"--model {cfg.model}: no tokenizer files with it (vocab.json + merges.txt); pass --tokenizer")
    try:
        tokenizer = BPETokenizer.load(tokenizer_source)
    except (ValueError, OSError) as exc:
        raise FinetuneError(f"--tokenizer {tokenizer_source}: {exc}") from None

    seed_everything(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    if state is not None:
        gpt_config = GPTConfig.from_dict(dict(state["model_config"]))
        gpt = meta_gpt(gpt_config)
        gpt.load_state_dict(state["model"], assign=True)
        special = SpecialTokens(**state["special"])
    else:
        gpt, special = add_task_tokens(load_base(cfg, tokenizer), generator, cfg.dropout)
    max_len = cfg.max_len or gpt.config.block_size
    if max_len > gpt.config.block_size:
        raise FinetuneError(f"--max_len {max_len} is longer than the model's context ({gpt.config.block_size})")
    try:
        train_set = encode_task(train_data, tokenizer, special, max_len, space)
        eval_set = encode_task(eval_data, tokenizer, special, max_len, space) if eval_data else []
    except TaskError as exc:
        raise FinetuneError(str(exc)) from None
    dirty, marks_info = None, None
    if cfg.training:
        source = cfg.training[0] if len(cfg.training) == 1 else list(cfg.training)
        try:
            dirty, marks = mark_task(eval_data, source, name=os.path.basename(cfg.eval) or "eval", n=cfg.ngram,
                                     threshold=cfg.threshold, progress=not cfg.quiet)
        except ContaminationError as exc:
            raise FinetuneError(str(exc)) from None
        marks_info = {"source": marks.source, "kind": marks.source_kind, "n": marks.n, "threshold": cfg.threshold,
                      "dirty": marks.dirty_count, "examples": len(marks.examples), "notes": marks.notes}
        log.info("evaluation set: %d of %d examples dirty (%d-gram overlap with %s)", marks.dirty_count,
                 len(marks.examples), marks.n, marks.source)

    outputs = 1 if (regression or task == "multiple_choice") else len(space)
    model = TaskModel(gpt, task, outputs, cfg.clf_dropout)
    if state is not None:
        model.head.load_state_dict(state["head"])
    device = resolve_device(cfg.device, FinetuneError)
    model.to(device)
    optimizer = make_optimizer(model, device, cfg.lr, ADAM_BETAS, cfg.weight_decay)
    micro = cfg.micro_batch or cfg.batch_size
    per_epoch = math.ceil(len(train_set) / cfg.batch_size)
    total = cfg.max_steps or cfg.epochs * per_epoch
    warmup = math.ceil(cfg.warmup_fraction * total)
    eval_every = cfg.eval_interval or per_epoch
    schedule = LRSchedule(optimizer, cfg.lr, 0.0, warmup, total, decay="linear")  # GPT-1: linear decay to 0
    step = 0
    if state is not None:
        check_optimizer_state(state["optimizer"], optimizer)
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        set_rng_state(state["rng"], device)
    schedule.step_count = step
    pad_id = tokenizer.eot_id
    names = metric_names(task, regression, len(space) if space else 0)
    headline = names[0]

    os.makedirs(out, exist_ok=True)
    write_atomically(os.path.join(out, RUN_CONFIG_FILE), json.dumps({
        "finetune": asdict(cfg), "model": gpt.config.to_dict(), "task": task, "labels": list(space) if space else None,
        "regression": regression, "special_tokens": asdict(special), "steps": total, "steps_per_epoch": per_epoch,
        "warmup_steps": warmup, "max_len": max_len, "device": str(device)}, indent=2) + "\n")
    if state is None and not os.path.exists(os.path.join(out, TOKENIZER_DIR)):
        tokenizer.save(os.path.join(out, TOKENIZER_DIR))
    keep_metrics_until(metrics_file, step)
    truncated = sum(e.truncated for e in train_set) + sum(e.truncated for e in eval_set)
    log.info("%s (%s): %d training / %d evaluation examples, %d cut to %d tokens; %d steps (%d per epoch, warmup %d), "
             "batch %d, lr %.3g, LM coefficient %g, on %s", task, cfg.format, len(train_set), len(eval_set), truncated,
             max_len, total, per_epoch, warmup, cfg.batch_size, cfg.lr, cfg.lm_coef, device)

    last = dict(state.get("metrics") or {}) if state is not None else {}

    def save(metrics: dict) -> None:
        save_checkpoint(ckpt_file, state={
            "model": model.gpt.state_dict(), "model_config": model.gpt.config.to_dict(),
            "head": model.head.state_dict(), "special": asdict(special), "task": task,
            "labels": list(space) if space else None, "regression": regression, "finetune_config": asdict(cfg),
            "optimizer": optimizer.state_dict(), "scheduler": {"step": step, "warmup": warmup, "total": total},
            "step": step, "rng": rng_state(device), "metrics": metrics})
        plot_task_run(metrics_file, os.path.join(out, LOSS_PLOT), headline, f"{task} ({cfg.format}) from {cfg.model}")

    def run_eval() -> dict:
        predictions, loss = evaluate(model, eval_set, micro, pad_id, regression, device)
        targets = [e.target for e in eval_set]
        return {"predictions": predictions, "loss": loss, "metrics": split_metrics(names, predictions, targets, dirty)}

    end = total if cfg.stop_at is None else min(total, cfg.stop_at)
    status, message = "finished", ""
    bar = tqdm(total=total, initial=step, desc="finetune", unit="step", disable=cfg.quiet, dynamic_ncols=True)
    model.train()
    with open(metrics_file, "a", encoding="utf-8") as metrics_out:
        try:
            while step < end:
                started = time.perf_counter()
                lr = schedule.apply()
                indices = batch_indices(step, len(train_set), cfg.batch_size, cfg.seed)
                # the task loss is a mean over the batch's examples, the LM loss over its tokens, whatever
                # the micro-batches: each micro-batch's means are weighted by its share of both
                lm_tokens = sum(lm_targets_of(train_set[i]) for i in indices)
                task_sum, lm_sum = 0.0, 0.0
                for start in range(0, len(indices), micro):
                    chunk = [train_set[i] for i in indices[start:start + micro]]
                    batch = collate(chunk, pad_id, regression).to(device)
                    logits, lm_loss = model(batch.idx, batch.extract, batch.choice_mask,
                                            batch.lm_targets if cfg.lm_coef > 0 else None)
                    loss = task_loss(logits, batch.targets, regression) * (len(chunk) / len(indices))
                    task_sum += float(loss.detach())
                    if lm_loss is not None:  # GPT-1 eq. 5: L3 = L2 + lambda * L1
                        lm_part = lm_loss * (sum(lm_targets_of(e) for e in chunk) / lm_tokens)
                        lm_sum += float(lm_part.detach())
                        loss = loss + cfg.lm_coef * lm_part
                    loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or float("inf")))
                record = {"step": step + 1, "epoch": step // per_epoch + 1, "lr": lr, "grad_norm": grad_norm,
                          "loss": task_sum + cfg.lm_coef * lm_sum, "task_loss": task_sum, "lm_loss": lm_sum}
                if cfg.lm_coef == 0:
                    del record["lm_loss"]
                if not (math.isfinite(record["loss"]) and math.isfinite(grad_norm)):
                    status = "nonfinite"
                    kept = (f"{ckpt_file} holds the last good state" if os.path.isfile(ckpt_file)
                            else "no checkpoint was written before it")
                    message = (f"step {step + 1}: loss {record['loss']} / gradient norm {grad_norm} is not finite: "
                               f"stopped before the update; {kept}")
                    break
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                schedule.step()
                step += 1
                record["examples_per_s"] = len(indices) / (time.perf_counter() - started)
                last.update({"step": step, "train_loss": record["loss"]})
                metrics_out.write(json.dumps(record) + "\n")
                metrics_out.flush()
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.4f}", lr=f"{lr:.2e}", epoch=record["epoch"])
                if step % cfg.log_interval == 0 or step == end:
                    log.info("step %d/%d | epoch %d | loss %.4f (task %.4f) | lr %.3e | grad norm %.3f", step, total,
                             record["epoch"], record["loss"], record["task_loss"], lr, grad_norm)
                if eval_set and (step % eval_every == 0 or step == total):
                    result = run_eval()
                    last.update({"eval_loss": result["loss"], "eval": result["metrics"]})
                    metrics_out.write(json.dumps({"step": step, "val_loss": result["loss"],
                                                  "eval": result["metrics"]}) + "\n")
                    metrics_out.flush()
                    log.info("step %d | evaluation %s %s", step, headline, _number(result["metrics"]["all"][headline]))
                if step % cfg.ckpt_interval == 0 or step == end:
                    save(dict(last))
        finally:
            bar.close()
    if status == "finished" and step < total:
        status, message = "stopped", f"stopped after step {step} (--stop_at); continue with --resume"
    if status == "nonfinite":
        log.error("%s", message)

    report_paths, hf_dir, evaluation = {}, None, None
    if status == "finished":
        if eval_set:
            evaluation = run_eval()
            report_paths = write_report(out, cfg, task, space, regression, evaluation, eval_set, dirty, marks_info,
                                        train_data, eval_data)
        if cfg.hf_export:
            hf_dir = export_task_model(model, out, labels=space, regression=regression, special=special, pad_id=pad_id)
    return {"status": status, "message": message, "steps": step, "max_steps": total, "task": task,
            "format": cfg.format, "train_examples": len(train_set), "eval_examples": len(eval_set),
            "train_loss": last.get("train_loss"), "eval": evaluation["metrics"] if evaluation else None,
            "headline": headline, "contamination": marks_info, "out": out,
            "checkpoint": ckpt_file if os.path.isfile(ckpt_file) else None, "hf": hf_dir, "reports": report_paths}


def write_report(out, cfg, task, space, regression, evaluation, eval_set, dirty, marks_info, train_data, eval_data):
    metrics = evaluation["metrics"]
    document = {"task": task, "format": cfg.format, "model": cfg.model, "train": cfg.train, "eval": cfg.eval,
                "labels": list(space) if space else None, "regression": regression, "metrics": metrics,
                "eval_loss": evaluation["loss"], "contamination": marks_info,
                "skipped_rows": {"train": train_data.skipped, "eval": eval_data.skipped},
                "truncated_eval_examples": sum(e.truncated for e in eval_set)}
    paths = {"json": os.path.join(out, REPORT_JSON), "md": os.path.join(out, REPORT_MD),
             "predictions": os.path.join(out, PREDICTIONS)}
    write_atomically(paths["json"], json.dumps(document, indent=2) + "\n")
    note = ("Clean / dirty: " + f"{marks_info['dirty']} of {marks_info['examples']} evaluation examples share a "
            f"{marks_info['n']}-gram with the pre-training corpus ({marks_info['source']})." if marks_info else
            "No --training corpus: every metric is on all evaluation examples.")
    write_atomically(paths["md"], f"# Fine-tuning: {task} ({cfg.format})\n\n{metrics_table(metrics)}\n\n{note}\n")
    rows = []
    for n, (example, prediction) in enumerate(zip(eval_set, evaluation["predictions"], strict=True)):
        row = {"id": example.id, "target": example.target, "prediction": prediction}
        if space:
            row.update(target_label=space[example.target], predicted_label=space[prediction])
        if dirty is not None:
            row["dirty"] = dirty[n]
        rows.append(json.dumps(row) + "\n")
    write_atomically(paths["predictions"], "".join(rows))
    return paths


# ----------------------------------------------------------------------------- the demo

# The demo's task: sentences about the weather or about cooking, written for this demo from the
# phrases below (every subject with every time of day); the times are shared, so only the topic
# words tell the classes apart.
_DEMO_TIMES = ("all through the night", "early on Monday", "just before noon", "late in the evening",
               "for most of the day")
_DEMO_TOPICS = {
    "weather": (("The rain", "fell hard on the roofs"), ("A cold wind", "blew across the fields"),
                ("Thick fog", "rolled in from the coast"), ("Heavy snow", "covered every road"),
                ("The thunder", "shook the windows"), ("Bright sunshine", "warmed the stone walls"),
                ("A light drizzle", "soaked the washing"), ("Hail", "battered the young crops")),
    "cooking": (("She", "stirred the soup with a wooden spoon"), ("The cook", "baked two loaves of bread"),
                ("He", "fried the onions in butter"), ("My aunt", "whisked the eggs with sugar"),
                ("The chef", "roasted a chicken with garlic"), ("Grandmother", "kneaded the dough for the pie"),
                ("We", "simmered the beans with thyme"), ("The baker", "grated cheese over the pasta")),
}
DEMO_SENTENCES = {topic: [f"{who} {did} {when}." for who, did in pairs for when in _DEMO_TIMES]
                  for topic, pairs in _DEMO_TOPICS.items()}


def write_demo_task(folder: str) -> tuple[str, str]:
    """An SST-2-style task (``sentence<TAB>label``, 0 weather, 1 cooking): of the 40 sentences per
    topic every fourth is kept for evaluation (10), the rest trained on (30)."""
    os.makedirs(folder, exist_ok=True)
    train, dev = ["sentence\tlabel"], ["sentence\tlabel"]
    for label, topic in enumerate(DEMO_SENTENCES):
        for n, sentence in enumerate(DEMO_SENTENCES[topic]):
            (dev if n % 4 == 3 else train).append(f"{sentence}\t{label}")
    paths = os.path.join(folder, "train.tsv"), os.path.join(folder, "dev.tsv")
    for path, lines in zip(paths, (train, dev), strict=True):
        write_atomically(path, "\n".join(lines) + "\n")
    return paths


def demo_finetune(checkpoint_dir: str, work_dir: str, steps: int = 40, training: str | None = None,
                  seed: int = 0) -> dict:
    """Fine-tune the demo's tiny model ``steps`` steps on a two-topic sentence task (written into
    ``work_dir/task``), run folder ``work_dir/run`` (made afresh); with ``training`` (the
    pre-training corpus: shards, an audit folder or a Bloom filter) the report is split clean /
    dirty. A tiny model learns little at GPT-1's rate in a few steps: the demo uses lr 1e-3.
    Returns ``run``'s summary (``format_summary`` prints it)."""
    train_path, dev_path = write_demo_task(os.path.join(work_dir, "task"))
    run_dir = os.path.join(work_dir, "run")
    if os.path.exists(os.path.join(run_dir, CHECKPOINT_FILE)):
        shutil.rmtree(run_dir)  # a rerun of the demo fine-tunes afresh
    argv = ["--model", checkpoint_dir, "--train", train_path, "--eval", dev_path, "--format", "sst2", "--out", run_dir,
            "--batch_size", "8", "--max_steps", str(steps), "--lr", "1e-3", "--eval_interval", str(max(1, steps // 2)),
            "--device", "cpu", "--seed", str(seed), "--quiet"]
    if training:
        argv += ["--training", training]
    return finetune(config_from_args(argv))


# ----------------------------------------------------------------------------- command line

DESCRIPTION = "Fine-tune a pre-trained GPT on a labelled task with GPT-1's input transformations; exact resume."
EXTRA_OPTIONS = "store"  # pipelines.cli: models and run folders on an object store take the store options (common.storage)


def build_parser(suppress_defaults: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="corpusforge finetune", description=DESCRIPTION)
    add_arguments(p, suppress_defaults)
    return p


def add_arguments(p: argparse.ArgumentParser, suppress_defaults: bool = False) -> None:
    """``corpusforge finetune``'s options; ``suppress_defaults``: only those given are set (``resumed_config``)."""
    d = FinetuneConfig()

    def default(value):
        return argparse.SUPPRESS if suppress_defaults else value

    g = p.add_argument_group("task")
    g.add_argument("--model", default=default(d.model), help="run folder, checkpoint, or Hugging Face GPT-2 / GPT-1 folder")
    g.add_argument("--tokenizer", default=default(None), help="tokenizer folder (default: the model's)")
    g.add_argument("--train", default=default(d.train), help="labelled training file (RACE: a file, folder or glob)")
    g.add_argument("--eval", default=default(None), help="labelled evaluation file (a dev set)")
    g.add_argument("--limit", type=int, default=default(None), help="read only the first N examples of each file")
    g.add_argument("--format", default=default(d.format), choices=FORMATS, help=f"file format (default {d.format})")
    g.add_argument("--task", default=default(None), choices=TASK_TYPES, help="task type (default: the format's)")
    g.add_argument("--fields", default=default(None), help="jsonl: role=field,... (e.g. premise=s1,hypothesis=s2,label=y)")
    g.add_argument("--labels", default=default(None), help="class names in index order, comma-separated")
    g.add_argument("--regression", action="store_true", default=default(False), help="jsonl: the label is a number")
    g.add_argument("--out", default=default(d.out), help=f"run folder (default {d.out})")
    g = p.add_argument_group("contamination (all / clean / dirty)")
    g.add_argument("--training", nargs="+", default=default(None), metavar="PATH",
                   help="the pre-training corpus: a Bloom filter file or folder, an audit folder, or shards")
    g.add_argument("--ngram", type=int, default=default(d.ngram), help=f"words per n-gram (default {d.ngram})")
    g.add_argument("--threshold", type=float, default=default(d.threshold), help="dirty at this overlap share (0: any)")
    g = p.add_argument_group("optimization (GPT-1 defaults)")
    g.add_argument("--lr", type=float, default=default(d.lr), help=f"peak learning rate (default {d.lr:g})")
    g.add_argument("--batch_size", type=int, default=default(d.batch_size), help=f"examples per step (default {d.batch_size})")
    g.add_argument("--micro_batch", type=int, default=default(None), help="examples per forward pass (default batch_size)")
    g.add_argument("--epochs", type=int, default=default(d.epochs), help=f"(default {d.epochs})")
    g.add_argument("--max_steps", type=int, default=default(None), help="steps (default epochs x steps per epoch)")
    g.add_argument("--warmup_fraction", type=float, default=default(d.warmup_fraction), help=f"(default {d.warmup_fraction:g})")
    g.add_argument("--lm_coef", type=float, default=default(d.lm_coef), help=f"auxiliary LM loss weight, 0 = off (default {d.lm_coef:g})")
    g.add_argument("--clf_dropout", type=float, default=default(d.clf_dropout), help=f"(default {d.clf_dropout:g})")
    g.add_argument("--dropout", type=float, default=default(None), help="transformer dropout (default: the model's)")
    g.add_argument("--weight_decay", type=float, default=default(d.weight_decay), help=f"on matrices (default {d.weight_decay:g})")
    g.add_argument("--grad_clip", type=float, default=default(d.grad_clip), help=f"0 = off (default {d.grad_clip:g})")
    g.add_argument("--max_len", type=int, default=default(None), help="tokens per sequence (default: the model's context)")
    g.add_argument("--seed", type=int, default=default(d.seed), help=f"(default {d.seed})")
    g = p.add_argument_group("run")
    g.add_argument("--eval_interval", type=int, default=default(d.eval_interval), help="evaluate every N steps (0: each epoch)")
    g.add_argument("--ckpt_interval", type=int, default=default(d.ckpt_interval), help=f"(default {d.ckpt_interval})")
    g.add_argument("--log_interval", type=int, default=default(d.log_interval), help=f"(default {d.log_interval})")
    g.add_argument("--device", default=default(d.device), help="auto, cpu, cuda, cuda:1 ... (default auto)")
    g.add_argument("--resume", action="store_true", default=default(False), help="continue the run in --out")
    g.add_argument("--stop_at", type=int, default=default(None), help="stop after this step with a checkpoint")
    g.add_argument("--no_hf_export", dest="hf_export", action="store_false", default=default(True), help="no out/hf")
    g.add_argument("-q", "--quiet", action="store_true", default=default(False), help="no progress bar")


def config_from_args(argv: list[str]) -> FinetuneConfig:
    cfg = FinetuneConfig(**vars(build_parser().parse_args(argv)))
    return resumed_config(cfg, argv, build_parser, "finetune", RESUME_OVERRIDABLE, FinetuneError)


def format_summary(summary: dict) -> str:
    lines = [f"status       {summary['status']}" + (f": {summary['message']}" if summary["message"] else ""),
             f"task         {summary['task']} ({summary['format']}): {summary['train_examples']} training, "
             f"{summary['eval_examples']} evaluation examples",
             f"steps        {summary['steps']}/{summary['max_steps']}",
             f"train loss   {_number(summary['train_loss'])}"]
    if summary["eval"]:
        lines.append(metrics_table(summary["eval"]))
    lines.append(f"run folder   {summary['out']}" + (f" (Hugging Face export: {summary['hf']})" if summary["hf"] else ""))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict:
    """``corpusforge finetune`` (``pipelines.cli``): the run's summary; ``exit_status`` as train's."""
    return run_in_run_folder(args.command_argv, config_from_args, finetune)


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["finetune", *sys.argv[1:]]))
