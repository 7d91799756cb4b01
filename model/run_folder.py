"""The files of a run folder that ``corpusforge train`` and ``corpusforge finetune`` both write.

    out/config.json      the run's settings (``RUN_CONFIG_FILE``); ``--resume`` reads them back
    out/ckpt.pt          the full state (``model/checkpoint.py`` writes and checks it)
    out/tokenizer/       the tokenizer files the run was trained with
    out/metrics.jsonl    one line per step, one per evaluation (``METRICS_FILE``)
    out/loss.png         the loss curve, redrawn at every checkpoint (``LOSS_PLOT``)
    out/hf/              the Hugging Face export of a finished run

Here: reading and cutting back ``metrics.jsonl``, drawing ``loss.png``, finding the
checkpoint a ``--resume`` continues from, merging a resumed run's saved settings with the
command line, and the Hugging Face export (the language model for ``train``; the same
weights with ``finetune``'s task head in place of the LM head).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import fields

from common.storage import atomic_path, write_atomically
from model.checkpoint import (
    CHECKPOINT_FILE,
    HF_DIR,
    RUN_CONFIG_FILE,
    TOKENIZER_DIR,
    kept_checkpoints,
    latest_good_checkpoint,
)
from model.gpt import GPT
from model.hf import hf_export_parts, write_hf_folder

log = logging.getLogger("corpusforge.run_folder")

METRICS_FILE = "metrics.jsonl"
LOSS_PLOT = "loss.png"


# ---------------------------------------------------------------- metrics and the loss plot

def read_metrics(path: str) -> list[dict]:
    if not os.path.isfile(path):
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut by a crash: everything before it is kept
    return records


def keep_metrics_until(path: str, step: int) -> None:
    """Rewrite ``metrics.jsonl`` with the records of steps up to ``step`` only: a resumed run
    appends from its checkpoint's step, so what a stopped run logged after it is dropped."""
    kept = [r for r in read_metrics(path) if r.get("step", 0) <= step]
    write_atomically(path, "".join(json.dumps(r) + "\n" for r in kept))


def _pyplot():
    import matplotlib  # about 0.3 s: only when a plot is drawn (a checkpoint), never at import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save_png(fig, plt, png_path: str) -> None:
    fig.tight_layout()
    with atomic_path(png_path) as temporary:
        fig.savefig(temporary, format="png", dpi=100)
    plt.close(fig)


def plot_losses(metrics_path: str, png_path: str, title: str = "") -> None:
    """Train and validation loss against step, written atomically as a PNG."""
    plt = _pyplot()
    records = read_metrics(metrics_path)
    train = [(r["step"], r["loss"]) for r in records if "loss" in r]
    val = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
    fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        ax.plot(*zip(*train, strict=True), label="train", linewidth=1)
    if val:
        ax.plot(*zip(*val, strict=True), "o-", label="validation", markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(title or "loss")
    ax.grid(alpha=0.3)
    if train or val:
        ax.legend()
    _save_png(fig, plt, png_path)


def plot_task_run(metrics_path: str, png_path: str, headline: str, title: str) -> None:
    """A fine-tuning run: training loss against step, and the headline evaluation metric (all examples) beside it."""
    plt = _pyplot()
    records = read_metrics(metrics_path)
    train = [(r["step"], r["loss"]) for r in records if "loss" in r]
    scores = [(r["step"], r["eval"]["all"][headline]) for r in records if "eval" in r]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    if train:
        left.plot(*zip(*train, strict=True), linewidth=1)
    left.set_xlabel("step")
    left.set_ylabel("loss (task + lambda x LM)")
    left.grid(alpha=0.3)
    if scores:
        right.plot(*zip(*scores, strict=True), "o-", markersize=3)
    right.set_xlabel("step")
    right.set_ylabel(f"evaluation {headline} (all)")
    right.grid(alpha=0.3)
    fig.suptitle(title)
    _save_png(fig, plt, png_path)


# ---------------------------------------------------------------- resuming

def resume_state(out: str, resume: bool, required: tuple[str, ...], error: type[Exception]) -> dict | None:
    """The checkpoint state ``--resume`` continues from (None for a new run): refuses a new
    run over an old one (``error``), and falls back to the newest kept checkpoint that passes
    its check (``model.checkpoint.latest_good_checkpoint``)."""
    ckpt_file = os.path.join(out, CHECKPOINT_FILE)
    if resume:
        if not os.path.isfile(ckpt_file) and not kept_checkpoints(out):
            raise error(f"--resume: there is no checkpoint at {ckpt_file}")
        state, ckpt_used = latest_good_checkpoint(out, required=required)
        if ckpt_used != ckpt_file:
            log.warning("--resume: %s failed its check; continuing from %s (step %s)", ckpt_file, ckpt_used, state.get("step"))
        return state
    if os.path.exists(ckpt_file):
        raise error(f"{ckpt_file} already exists: pass --resume to continue that run, or choose a new --out")
    return None


def resumed_config(cfg, argv: list[str], build_parser, section: str, overridable: set[str], error: type[Exception]):
    """With ``--resume`` and a saved run config in ``cfg.out``: the saved settings (its
    ``section``), with only the ``overridable`` options taken from ``argv``; any other option
    given with a different value is ``error``. ``--stop_at`` is for one invocation, never
    inherited. Without either, ``cfg`` as it is."""
    saved_path = os.path.join(cfg.out, RUN_CONFIG_FILE)
    if not cfg.resume or not os.path.isfile(saved_path):
        return cfg
    with open(saved_path, encoding="utf-8") as f:
        saved = json.load(f)[section]
    given = vars(build_parser(suppress_defaults=True).parse_args(argv))
    changed = sorted(k for k, v in given.items() if k not in overridable and saved.get(k) != v)
    if changed:
        raise error(f"--resume continues {cfg.out} with its saved settings; these cannot change: "
                    + ", ".join(f"--{k} (saved {saved.get(k)!r}, given {given[k]!r})" for k in changed))
    names = {f.name for f in fields(type(cfg))}
    merged = {k: v for k, v in saved.items() if k in names}
    merged.update({k: v for k, v in given.items() if k in overridable})
    merged.update(resume=True, stop_at=given.get("stop_at"))
    return type(cfg)(**merged)


# ---------------------------------------------------------------- the Hugging Face export

def export_hf(model: GPT, out: str, eot_token_id: int | None = None,
              head: Callable[[dict, dict], None] | None = None) -> str | None:
    """Write ``out/hf``: ``model`` as a Hugging Face GPT-2 (GPT-1) folder with the run's
    tokenizer files. ``head(state, config)`` may change the weights and ``config.json``
    before they are written (fine-tuning puts its classifier there). None, with a warning,
    when the model's shape cannot be exported."""
    folder = os.path.join(out, HF_DIR)
    tokenizer = os.path.join(out, TOKENIZER_DIR)
    files = sorted(os.path.join(tokenizer, f) for f in os.listdir(tokenizer)) if os.path.isdir(tokenizer) else []
    try:
        state, config = hf_export_parts(model, eot_token_id)
    except (ValueError, NotImplementedError) as exc:  # a shape the Hugging Face classes cannot hold
        log.warning("no Hugging Face export: %s", exc)
        return None
    if head is not None:
        head(state, config)
    return write_hf_folder(folder, state, config, files)
