"""``corpusforge train``: train GPT-1/GPT-2 on token shards, on CPU, one GPU, or DDP under torchrun.

What one optimizer step does (defaults from nanoGPT / GPT-2, all exposed as flags):

- ``accumulation = batch_tokens / (micro_batch * block_size * world_size)`` micro-batches
  (an error when it does not divide), each a forward/backward under bf16 autocast where
  supported (CUDA with bf16; on CPU only with ``--dtype bf16``), the loss divided by the
  accumulation so the gradient is the mean over the whole batch;
- gradient clipping to a global norm of 1.0; a non-finite loss or gradient norm stops the
  run *before* the update, and ``ckpt.pt`` stays the last good checkpoint;
- AdamW (betas 0.9/0.95, eps 1e-8, torch's fused kernel on CPU and CUDA) with decoupled
  weight decay 0.1 on matrices only
  (weights and embeddings, ``dim >= 2``); biases and layer-norm gains are not decayed;
- learning rate: linear warmup ``lr * (step + 1) / warmup_steps``, then a cosine from
  ``lr`` to ``min_lr`` (``lr / 10``) at ``decay_steps`` (``max_steps``), then ``min_lr``.

Data come from ``model.token_loader``: windows sampled without replacement, a resumable cursor,
rank ``r`` of a DDP run taking every ``world_size``-th window.

This file is the loop, in three functions: ``setup_run`` (device, data, model, optimizer,
schedule; a resumed run's state put back), ``train_loop`` (the optimizer steps, metrics,
evaluations, checkpoints) and ``finish_run`` (status, Hugging Face export, summary). What it
shares with ``model/finetune/train.py`` lives in its own module: ``model/device.py`` (device, dtype,
MFU peak, RNG states), ``model/distributed.py`` (torchrun), ``model/optim.py`` (AdamW and the
schedule), ``model/validation.py`` (the evaluation loop), ``model/run_folder.py`` (metrics,
the loss plot, resume, the Hugging Face export) and ``model/checkpoint.py``.

A run folder holds ``config.json`` (train and model config), ``ckpt.pt`` (the full state:
model, optimizer, schedule, data cursor, every rank's RNG states, written atomically every
``ckpt_interval`` steps and at the end), ``tokenizer/`` (copied from the data folder),
``metrics.jsonl`` (one line per step, one per evaluation), ``loss.png`` and, at the end,
``hf/`` (a Hugging Face GPT-2 folder). ``--resume``
continues from ``ckpt.pt`` exactly: on CPU the losses of a stopped-and-resumed run equal
an uninterrupted run's bit for bit.

MFU (model FLOPs utilisation) is measured against the GPU's dense bf16 peak: ``model/device.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from common import storage
from common.errors import InputError
from common.storage import write_atomically
from model.checkpoint import (
    CHECKPOINT_FILE,
    RUN_CONFIG_FILE,
    TOKENIZER_DIR,
    check_optimizer_state,
    clean_state_dict,
    save_checkpoint,
)
from model.device import (
    DTYPES,
    allow_tf32,
    autocast_for,
    peak_flops,
    resolve_device,
    resolve_dtype,
    rng_state,
    seed_everything,
    set_rng_state,
)
from model.distributed import Dist, all_mean, barrier_and_close, gather_objects, init_distributed
from model.gpt import GPT, GPT2_VOCAB, LOSS_IMPLS, GPTConfig
from model.optim import LRSchedule, make_optimizer
from model.run_folder import (
    LOSS_PLOT,
    METRICS_FILE,
    export_hf,
    keep_metrics_until,
    plot_losses,
    resume_state,
    resumed_config,
)
from model.token_loader import (
    DataError,
    TokenLoader,
    TokenWindows,
    consumed_batches,
    eval_indices,
    read_meta,
    split_paths,
    tokenizer_dir,
)
from model.validation import mean_loss

log = logging.getLogger("corpusforge.train")

GPT2_BATCH_TOKENS = 512 * 1024  # GPT-2 section 2.3: batches of 512 sequences of 1024 tokens
# torch.compile(mode=) choices of the trainer. "reduce-overhead" replays CUDA graphs, whose output
# buffers the next replay overwrites: the loop then marks each micro-step's start
# (``torch.compiler.cudagraph_mark_step_begin``) and accumulates gradients into buffers of its own
# (``CUDAGRAPH_MODES``: gradients zeroed in place, never set to None, so no graph output becomes a ``.grad``).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs")
CUDAGRAPH_MODES = ("reduce-overhead",)
# What a resume needs besides the weights; a checkpoint without one of them is refused.
RESUME_ENTRIES = ("optimizer", "scheduler", "step", "data", "rng")
RESUME_OVERRIDABLE = {"max_steps", "stop_at", "eval_interval", "eval_windows", "ckpt_interval", "keep_checkpoints", "log_interval",
                      "compile", "compile_mode", "loss_impl", "quiet", "device", "dtype", "peak_tflops", "hf_export", "resume", "out"}


@dataclass
class TrainConfig:
    data: str = ""  # a `corpusforge tokenize` folder, a nanoGPT folder (train.bin/val.bin), or a glob of shards
    out: str = "out"
    val_data: str | None = None  # glob of validation shards (default: the data folder's val split)
    vocab_size: int | None = None  # default: meta.json's, else GPT-2's 50257
    model: str = "gpt2"  # a GPTConfig name (gpt1, gpt2, gpt2-medium, gpt2-large, gpt2-xl, 124M, ...)
    n_layer: int | None = None
    n_head: int | None = None
    n_embd: int | None = None
    block_size: int | None = None
    dropout: float | None = None
    batch_tokens: int = GPT2_BATCH_TOKENS
    micro_batch: int = 8
    max_steps: int = 1000
    lr: float = 6e-4  # nanoGPT (GPT-3 paper's 125M rate)
    min_lr: float | None = None  # default lr / 10 (nanoGPT, Chinchilla)
    warmup_steps: int | None = None  # default min(2000, max_steps // 10); nanoGPT uses 2000
    decay_steps: int | None = None  # default max_steps
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 disables clipping
    eval_interval: int = 250
    eval_windows: int = 256
    ckpt_interval: int = 500
    keep_checkpoints: int = 1  # previous checkpoints kept as ckpt-<step>.pt, for a resume when ckpt.pt is damaged
    log_interval: int = 10
    seed: int = 1337
    device: str = "auto"
    dtype: str = "auto"  # auto (bf16 on a bf16 GPU, else fp32), bf16, fp32
    compile: bool | None = None  # default: on for CUDA (the compiled step is about twice as fast), off elsewhere
    compile_mode: str = "default"  # torch.compile mode (COMPILE_MODES)
    loss_impl: str = "chunked"  # model.gpt.LOSS_IMPLS: the training loss path
    peak_tflops: float | None = None
    resume: bool = False
    stop_at: int | None = None  # stop (with a checkpoint) after this step, as if interrupted
    hf_export: bool = True
    quiet: bool = False

    def resolved_warmup(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else min(2000, self.max_steps // 10)

    def resolved_min_lr(self) -> float:
        return self.min_lr if self.min_lr is not None else self.lr / 10

    def resolved_decay_steps(self) -> int:
        return self.decay_steps if self.decay_steps is not None else self.max_steps


class TrainError(InputError):
    """A training configuration or state that cannot be run: said plainly, before any work is lost."""


def format_count(value: float) -> str:
    return f"{value:,.0f}"


# ---------------------------------------------------------------- building the run

def model_config_for(cfg: TrainConfig, vocab_size: int) -> GPTConfig:
    overrides = {k: getattr(cfg, k) for k in ("n_layer", "n_head", "n_embd", "block_size", "dropout")
                 if getattr(cfg, k) is not None}
    try:
        return GPTConfig.named(cfg.model, vocab_size=vocab_size, **overrides)
    except ValueError as exc:  # --model or an override the config refuses (GPTConfig's checks)
        raise TrainError(f"--model {cfg.model}: {exc}") from exc


def resolve_vocab(cfg: TrainConfig) -> int:
    if cfg.vocab_size is not None:
        return cfg.vocab_size
    meta = read_meta(cfg.data)
    if meta and "vocab_size" in meta:
        return int(meta["vocab_size"])
    log.info("no meta.json with vocab_size in %s: using GPT-2's %d (set --vocab_size)", cfg.data, GPT2_VOCAB)
    return GPT2_VOCAB


def validation_paths(cfg: TrainConfig) -> list[str]:
    if cfg.val_data:
        return split_paths(cfg.val_data, "val")
    if os.path.isdir(storage.local_copy(cfg.data)):
        try:
            return split_paths(cfg.data, "val")
        except DataError:
            return []
    return []


def accumulation_steps(cfg: TrainConfig, block_size: int, world_size: int) -> int:
    per_micro = cfg.micro_batch * block_size * world_size
    if cfg.batch_tokens % per_micro:
        raise TrainError(f"--batch_tokens {cfg.batch_tokens:,} is not a multiple of micro_batch x block_size x processes "
                         f"= {cfg.micro_batch} x {block_size} x {world_size} = {per_micro:,}: choose e.g. "
                         f"{max(1, round(cfg.batch_tokens / per_micro)) * per_micro:,}")
    return cfg.batch_tokens // per_micro


def check_config(cfg: TrainConfig) -> None:
    if not cfg.data:
        raise TrainError("--data is required: a `corpusforge tokenize` folder, a folder with train.bin/val.bin, or a glob")
    for name in ("batch_tokens", "micro_batch", "max_steps", "eval_interval", "ckpt_interval", "log_interval"):
        if getattr(cfg, name) < 1:
            raise TrainError(f"--{name} must be at least 1, got {getattr(cfg, name)}")
    if cfg.lr <= 0 or cfg.resolved_min_lr() < 0 or cfg.resolved_min_lr() > cfg.lr:
        raise TrainError(f"need 0 <= min_lr <= lr and lr > 0, got lr={cfg.lr} min_lr={cfg.resolved_min_lr()}")
    if cfg.resolved_warmup() < 0 or cfg.grad_clip < 0 or cfg.weight_decay < 0:
        raise TrainError("warmup_steps, grad_clip and weight_decay must not be negative")
    if cfg.stop_at is not None and cfg.stop_at < 1:
        raise TrainError(f"--stop_at must be at least 1, got {cfg.stop_at}")
    if cfg.keep_checkpoints < 0:
        raise TrainError(f"--keep_checkpoints must not be negative, got {cfg.keep_checkpoints}")
    if cfg.compile_mode not in COMPILE_MODES:
        raise TrainError(f"--compile_mode must be one of {', '.join(COMPILE_MODES)}, got {cfg.compile_mode!r}")
    if cfg.loss_impl not in LOSS_IMPLS:
        raise TrainError(f"--loss_impl must be one of {', '.join(LOSS_IMPLS)}, got {cfg.loss_impl!r}")


def evaluate(model, windows: TokenWindows, indices: np.ndarray, micro_batch: int, device, autocast,
             vocab_size: int, dist_info: Dist, cudagraphs: bool = False) -> float:
    """Mean loss over the fixed validation windows (all ranks' shares together)."""

    def loss_of(chunk: np.ndarray) -> tuple[torch.Tensor, int]:
        x, y = windows.batch(chunk, vocab_size)
        if cudagraphs:  # each batch a new replay; its loss is read before the next one
            torch.compiler.cudagraph_mark_step_begin()
        with autocast():
            _, loss = model(x.to(device), y.to(device), return_logits=False)
        return loss, len(chunk)

    chunks = (indices[start:start + micro_batch] for start in range(0, len(indices), micro_batch))
    return mean_loss(model, chunks, loss_of, device, dist_info)


@dataclass
class Run:
    """A training run between its steps: what ``setup_run`` builds and ``train_loop`` advances."""

    cfg: TrainConfig
    dist_info: Dist
    device: torch.device
    dtype: torch.dtype
    model_config: GPTConfig
    vocab_size: int
    accumulation: int
    train_windows: TokenWindows
    val_windows: TokenWindows | None
    val_idx: np.ndarray | None  # this rank's share of the fixed validation windows
    loader: TokenLoader
    raw_model: GPT
    model: torch.nn.Module  # raw_model, compiled with --compile: what evaluation calls
    train_model: torch.nn.Module  # model, wrapped in DDP when distributed
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    autocast: Callable
    flops_token: float
    peak: float | None
    peak_note: str
    cudagraphs: bool = False  # --compile_mode reduce-overhead: graph replays, gradients in buffers of their own
    step: int = 0
    last: dict = field(default_factory=dict)  # latest train/val loss and tokens: saved in each checkpoint
    saved_step: int | None = None  # the step of the checkpoint on disk (written or resumed from); None before any

    @property
    def out(self) -> str:
        return self.cfg.out

    @property
    def ckpt_file(self) -> str:
        return os.path.join(self.cfg.out, CHECKPOINT_FILE)

    @property
    def metrics_file(self) -> str:
        return os.path.join(self.cfg.out, METRICS_FILE)


# The last losses and tokens a checkpoint carries (``Run.last``): numbers, printed and saved again.
METRIC_KEYS = ("step", "train_loss", "val_loss", "tokens")


def check_resumed_state(state: dict, loader: TokenLoader, accumulation: int, device: torch.device) -> None:
    """Before anything is put back: what ``model.checkpoint.check_resume_entries`` cannot check
    alone, against this run. The data cursor is of this run's data, seed and micro-batch
    (``DataError`` otherwise), and is where ``step`` optimizer steps of ``accumulation``
    micro-batches leave it; the RNG states are a list, one per process, and (on CUDA) of this
    device's size; the metrics are numbers. ``TrainError`` naming the first that is not."""
    loader.load_state_dict(state["data"])
    step, data = state["step"], state["data"]
    if consumed_batches(data) != step * accumulation:
        raise TrainError(f"--resume: the checkpoint's data cursor (epoch {data['epoch']}, window {data['position']}) has read "
                         f"{consumed_batches(data):,} micro-batches, but {step} step(s) of {accumulation} read "
                         f"{step * accumulation:,}: the checkpoint was not written by this run")
    if not isinstance(state["rng"], (list, tuple)):
        raise TrainError(f"--resume: the checkpoint's 'rng' is a {type(state['rng']).__name__}, not a list of one RNG state per process")
    if device.type == "cuda":
        size = tuple(torch.cuda.get_rng_state(device).shape)
        for rank, rng in enumerate(state["rng"]):
            if rng.get("cuda") is not None and tuple(rng["cuda"].shape) != size:
                raise TrainError(f"--resume: the checkpoint's CUDA RNG state of process {rank} has shape "
                                 f"{tuple(rng['cuda'].shape)}, this device's {size}")
    metrics = state.get("metrics") or {}
    for key in METRIC_KEYS:
        value = metrics.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value)):
            raise TrainError(f"--resume: the checkpoint's metrics {key!r} is {value!r:.60}, not a number")


def restore_state(state: dict, optimizer: torch.optim.Optimizer, schedule: LRSchedule, loader: TokenLoader,
                  cfg: TrainConfig, dist_info: Dist, device: torch.device) -> int:
    """Put the optimizer, schedule, data cursor and this rank's RNG back where ``state`` left them; return its step."""
    check_optimizer_state(state["optimizer"], optimizer)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["scheduler"])
    loader.load_state_dict(state["data"])
    step = int(state["step"])
    ranks = state["rng"]
    if len(ranks) == dist_info.world_size:
        set_rng_state(ranks[dist_info.rank], device)
    else:
        log.warning("the checkpoint holds RNG states of %d process(es), this run has %d: dropout streams restart",
                    len(ranks), dist_info.world_size)
        torch.manual_seed(cfg.seed + step + dist_info.rank)
    return step


def setup_run(cfg: TrainConfig) -> Run:
    """Device, data, model, optimizer and schedule of a run (resumed from its checkpoint with
    ``--resume``); the master process writes ``config.json``, the tokenizer and the metrics kept so far."""
    check_config(cfg)
    dist_info = init_distributed(cfg.device)
    device = resolve_device(cfg.device, TrainError, dist_info.local_rank)
    dtype = resolve_dtype(cfg.dtype, device, TrainError)
    allow_tf32(device)
    state = resume_state(cfg.out, cfg.resume, RESUME_ENTRIES, TrainError)

    vocab_size = resolve_vocab(cfg)
    model_config = model_config_for(cfg, vocab_size)
    if state is not None and dict(state["model_config"]) != model_config.to_dict():
        raise TrainError(f"--resume: the checkpoint's model config {dict(state['model_config'])} differs from this "
                         f"run's {model_config.to_dict()}")
    block = model_config.block_size
    accumulation = accumulation_steps(cfg, block, dist_info.world_size)

    train_windows = TokenWindows(split_paths(cfg.data, "train"), block)
    val_paths = validation_paths(cfg)
    val_windows = TokenWindows(val_paths, block) if val_paths else None
    val_idx = (eval_indices(len(val_windows), cfg.eval_windows, dist_info.rank, dist_info.world_size)
               if val_windows is not None and len(val_windows) else None)
    loader = TokenLoader(train_windows, cfg.micro_batch, cfg.seed, dist_info.rank, dist_info.world_size, device,
                         vocab_size)
    if state is not None:
        check_resumed_state(state, loader, accumulation, device)

    seed_everything(cfg.seed)
    raw_model = GPT(model_config)
    if state is not None:
        raw_model.load_state_dict(clean_state_dict(state["model"]))
    raw_model.to(device)
    optimizer = make_optimizer(raw_model, device, cfg.lr, (cfg.beta1, cfg.beta2), cfg.weight_decay)
    schedule = LRSchedule(optimizer, cfg.lr, cfg.resolved_min_lr(), cfg.resolved_warmup(), cfg.resolved_decay_steps())
    step = 0
    if state is not None:
        step = restore_state(state, optimizer, schedule, loader, cfg, dist_info, device)
    elif dist_info.rank:
        torch.manual_seed(cfg.seed + dist_info.rank)  # each rank its own dropout stream; init is rank 0's (DDP broadcast)

    raw_model.loss_impl = cfg.loss_impl
    use_compile = cfg.compile if cfg.compile is not None else device.type == "cuda"
    if cfg.compile is None and use_compile and importlib.util.find_spec("triton") is None:
        use_compile = False  # the default falls back; an explicit --compile is left to fail loudly
        log.warning("torch.compile off: it is the default on CUDA but Triton is not installed; running eagerly")
    elif dist_info.master and cfg.compile is None and use_compile:
        log.info("torch.compile on (the default on CUDA; --no_compile runs eagerly), mode %s", cfg.compile_mode)
    cudagraphs = cfg.compile_mode in CUDAGRAPH_MODES
    if cudagraphs and dist_info.enabled:
        raise TrainError(f"--compile_mode {cfg.compile_mode} (CUDA graphs) runs in one process; "
                         "use --compile_mode default under torchrun")
    if cudagraphs:  # gradients accumulate into these, zeroed in place each step (see CUDAGRAPH_MODES)
        for p in raw_model.parameters():
            p.grad = torch.zeros_like(p)
    model = torch.compile(raw_model, mode=cfg.compile_mode) if use_compile else raw_model
    train_model = model
    if dist_info.enabled:
        train_model = DistributedDataParallel(model, device_ids=[dist_info.local_rank] if device.type == "cuda" else None)

    autocast = autocast_for(device, dtype)
    peak, peak_note = peak_flops(device, cfg.peak_tflops)
    run = Run(cfg, dist_info, device, dtype, model_config, vocab_size, accumulation, train_windows, val_windows, val_idx, loader,
              raw_model, model, train_model, optimizer, schedule, autocast, raw_model.flops_per_token(block), peak, peak_note,
              cudagraphs=cudagraphs,
              step=step, last=dict(state["metrics"]) if state is not None and state.get("metrics") else {},
              saved_step=step if state is not None else None)
    if dist_info.master:
        write_run_files(run)
        if state is not None:
            log.info("resuming %s at step %d (epoch %d, window %d)", run.ckpt_file, step, loader.sampler.cursor.epoch,
                     loader.sampler.cursor.position)
    return run


def write_run_files(run: Run) -> None:
    """``config.json``, the tokenizer copy and ``metrics.jsonl`` cut back to the run's step (master only)."""
    cfg, dist_info, raw_model = run.cfg, run.dist_info, run.raw_model
    block = run.model_config.block_size
    os.makedirs(run.out, exist_ok=True)
    run_config = {"train": asdict(cfg), "model": run.model_config.to_dict(), "world_size": dist_info.world_size,
                  "accumulation": run.accumulation, "parameters": raw_model.num_parameters(),
                  "flops_per_token": run.flops_token, "device": str(run.device), "dtype": str(run.dtype).replace("torch.", "")}
    write_atomically(os.path.join(run.out, RUN_CONFIG_FILE), json.dumps(run_config, indent=2) + "\n")
    source = tokenizer_dir(cfg.data)
    if source and not os.path.exists(os.path.join(run.out, TOKENIZER_DIR)):
        shutil.copytree(source, os.path.join(run.out, TOKENIZER_DIR))
    keep_metrics_until(run.metrics_file, run.step)
    log.info("model %s (%s): %s parameters, %s FLOPs/token at T=%d; %s on %s x%d",
             cfg.model, run.model_config.arch, format_count(raw_model.num_parameters()), format_count(run.flops_token),
             block, str(run.dtype).replace("torch.", ""), run.device, dist_info.world_size)
    log.info("batch %s tokens = micro_batch %d x block %d x %d process(es) x %d accumulation step(s); "
             "%s train windows, %s validation windows; MFU peak: %s",
             format_count(cfg.batch_tokens), cfg.micro_batch, block, dist_info.world_size, run.accumulation,
             format_count(len(run.train_windows)), format_count(len(run.val_windows) if run.val_windows else 0), run.peak_note)


def checkpoint_run(run: Run, metrics: dict) -> None:
    """Save the full state at ``run.step`` (every rank's RNG gathered to the master) and redraw the loss plot."""
    rngs = gather_objects(rng_state(run.device), run.dist_info)
    if not run.dist_info.master:
        return
    cfg = run.cfg
    save_checkpoint(run.ckpt_file, keep=cfg.keep_checkpoints, state={
        "model": run.raw_model.state_dict(), "model_config": run.model_config.to_dict(), "train_config": asdict(cfg),
        "optimizer": run.optimizer.state_dict(), "scheduler": run.schedule.state_dict(), "step": run.step,
        "data": run.loader.state_dict(), "rng": rngs, "metrics": metrics, "world_size": run.dist_info.world_size})
    run.saved_step = run.step
    plot_losses(run.metrics_file, os.path.join(run.out, LOSS_PLOT), title=f"{cfg.model} on {os.path.basename(cfg.data.rstrip('/'))}")


@dataclass
class LoopResult:
    """How ``train_loop`` ended, and the tokens and seconds of the steps that were timed."""

    status: str  # "finished" (the loop reached its end step) or "nonfinite"
    message: str
    timed_tokens: int
    timed_seconds: float


def train_loop(run: Run) -> LoopResult:
    """Optimizer steps from ``run.step`` to ``--max_steps`` (or ``--stop_at``): metrics, evaluations, checkpoints."""
    cfg, dist_info, device = run.cfg, run.dist_info, run.device
    accumulation, train_model, autocast = run.accumulation, run.train_model, run.autocast
    tokens_per_step = cfg.batch_tokens
    metrics_out = open(run.metrics_file, "a", encoding="utf-8") if dist_info.master else None
    status, message = "finished", ""
    timed_tokens, timed_seconds = 0, 0.0
    end = cfg.max_steps if cfg.stop_at is None else min(cfg.max_steps, cfg.stop_at)
    bar = tqdm(total=cfg.max_steps, initial=run.step, desc="train", unit="step",
               disable=cfg.quiet or not dist_info.master, dynamic_ncols=True)
    train_model.train()
    try:
        while run.step < end:
            t0 = time.perf_counter()
            lr = run.schedule.apply()
            loss_sum = torch.zeros((), device=device)
            for micro in range(accumulation):
                if run.cudagraphs:
                    torch.compiler.cudagraph_mark_step_begin()
                x, y = run.loader.next_batch()
                sync = nullcontext()
                if dist_info.enabled and micro < accumulation - 1:
                    sync = train_model.no_sync()
                with sync:
                    with autocast():
                        _, loss = train_model(x, y, return_logits=False)
                    (loss / accumulation).backward()
                loss_sum += loss.detach().float()
            loss_value = float(all_mean(loss_sum / accumulation, dist_info))
            grad_norm = float(torch.nn.utils.clip_grad_norm_(run.raw_model.parameters(), cfg.grad_clip if cfg.grad_clip > 0
                                                             else float("inf")))
            if not (math.isfinite(loss_value) and math.isfinite(grad_norm)):
                kept = (f"the last good checkpoint (step {run.saved_step}) is kept at {run.ckpt_file}"
                        if run.saved_step is not None else "no checkpoint was written before it")
                status = "nonfinite"
                message = (f"step {run.step + 1}: loss {loss_value} / gradient norm {grad_norm} is not finite: stopped "
                           f"before the update; {kept}")
                break
            run.optimizer.step()
            run.optimizer.zero_grad(set_to_none=not run.cudagraphs)
            run.schedule.step()
            run.step += 1
            step = run.step
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            dt = time.perf_counter() - t0
            tokens_per_s = tokens_per_step / dt
            if step > 1 or cfg.max_steps == 1:  # the first step pays for compilation and warm-up
                timed_tokens += tokens_per_step
                timed_seconds += dt
            mfu = run.flops_token * tokens_per_s / (run.peak * dist_info.world_size) if run.peak else None
            record = {"step": step, "loss": loss_value, "lr": lr, "grad_norm": grad_norm,
                      "tokens": step * tokens_per_step, "tokens_per_s": tokens_per_s, "mfu": mfu}
            run.last.update({"step": step, "train_loss": loss_value})
            if metrics_out:
                metrics_out.write(json.dumps(record) + "\n")
                metrics_out.flush()
            bar.update(1)
            bar.set_postfix(loss=f"{loss_value:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}",
                            mfu=f"{mfu:.1%}" if mfu is not None else "n/a")
            if dist_info.master and (step % cfg.log_interval == 0 or step == end):
                log.info("step %d/%d | loss %.4f | lr %.3e | grad norm %.3f | %s tok/s | MFU %s", step, cfg.max_steps,
                         loss_value, lr, grad_norm, format_count(tokens_per_s),
                         f"{mfu:.2%}" if mfu is not None else "n/a")
            if run.val_idx is not None and (step % cfg.eval_interval == 0 or step == cfg.max_steps):
                val_loss = evaluate(run.model, run.val_windows, run.val_idx, cfg.micro_batch, device, autocast,
                                    run.vocab_size, dist_info, run.cudagraphs)
                run.last["val_loss"] = val_loss
                if metrics_out:
                    metrics_out.write(json.dumps({"step": step, "val_loss": val_loss}) + "\n")
                    metrics_out.flush()
                if dist_info.master:
                    log.info("step %d | validation loss %.4f (perplexity %.2f)", step, val_loss,
                             math.exp(min(val_loss, 50)))
            if step % cfg.ckpt_interval == 0 or step == end:
                run.last["tokens"] = step * tokens_per_step
                checkpoint_run(run, dict(run.last))
    finally:
        bar.close()
        if metrics_out:
            metrics_out.close()
    return LoopResult(status, message, timed_tokens, timed_seconds)


def finish_run(run: Run, ended: LoopResult) -> dict:
    """After the loop: the status, the Hugging Face export of a finished run, the summary; DDP torn down."""
    cfg, dist_info, step = run.cfg, run.dist_info, run.step
    status, message = ended.status, ended.message
    tokens_per_step = cfg.batch_tokens
    if status == "finished" and step < cfg.max_steps:
        status = "stopped"
        message = f"stopped after step {step} (--stop_at); continue with --resume"
    if status == "nonfinite" and dist_info.master:
        log.error("%s", message)
        if os.path.isfile(run.metrics_file):
            plot_losses(run.metrics_file, os.path.join(run.out, LOSS_PLOT))
    hf_dir = None
    if status == "finished" and cfg.hf_export and dist_info.master:
        meta = read_meta(cfg.data)
        hf_dir = export_hf(run.raw_model, run.out, eot_token_id=(meta or {}).get("eot_id"))
    timed_tokens, timed_seconds, peak = ended.timed_tokens, ended.timed_seconds, run.peak
    summary = {"status": status, "message": message, "steps": step, "max_steps": cfg.max_steps,
               "train_loss": run.last.get("train_loss"), "val_loss": run.last.get("val_loss"),
               "tokens": step * tokens_per_step, "tokens_per_s": timed_tokens / timed_seconds if timed_seconds else None,
               "mfu": (run.flops_token * timed_tokens / timed_seconds / (peak * dist_info.world_size)
                       if peak and timed_seconds else None),
               "accumulation": run.accumulation, "world_size": dist_info.world_size, "device": str(run.device),
               "out": run.out, "checkpoint": run.ckpt_file if os.path.isfile(run.ckpt_file) else None, "hf": hf_dir}
    barrier_and_close(dist_info)
    return summary


def train(cfg: TrainConfig) -> dict:
    """Run (or resume) training; returns a summary: status, steps, losses, tokens/s, MFU, out dir."""
    run = setup_run(cfg)
    return finish_run(run, train_loop(run))


# ---------------------------------------------------------------- command line

DESCRIPTION = "Train GPT-1/GPT-2 on token shards (CPU, GPU, or DDP under torchrun); checkpoints resume exactly."
EXTRA_OPTIONS = "store"  # pipelines.cli: a run folder on an object store takes the store options (common.storage)


def build_parser(suppress_defaults: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="corpusforge train", description=DESCRIPTION)
    add_arguments(p, suppress_defaults)
    return p


def add_arguments(p: argparse.ArgumentParser, suppress_defaults: bool = False) -> None:
    """``corpusforge train``'s options; ``suppress_defaults``: only those given are set (``resumed_config``)."""
    d = TrainConfig()

    def default(value):
        return argparse.SUPPRESS if suppress_defaults else value

    g = p.add_argument_group("data")
    g.add_argument("--data", default=default(d.data),
                   help="a `corpusforge tokenize` folder (meta.json + shards), a folder with train.bin/val.bin, or a glob of shards")
    g.add_argument("--val_data", default=default(None), help="glob of validation shards (default: the folder's val split)")
    g.add_argument("--out", default=default(d.out), help="run folder (default out)")
    g.add_argument("--vocab_size", type=int, default=default(None), help="default: meta.json's, else 50257")
    g = p.add_argument_group("model")
    g.add_argument("--model", default=default(d.model), help="gpt1, gpt2 (124M), gpt2-medium, gpt2-large, gpt2-xl (default gpt2)")
    for name in ("n_layer", "n_head", "n_embd", "block_size"):
        g.add_argument(f"--{name}", type=int, default=default(None), help=f"override the named model's {name}")
    g.add_argument("--dropout", type=float, default=default(None), help="override the named model's dropout")
    g = p.add_argument_group("optimization")
    g.add_argument("--batch_tokens", type=int, default=default(d.batch_tokens), help=f"tokens per optimizer step (default {d.batch_tokens:,}, GPT-2's 512 x 1024)")
    g.add_argument("--micro_batch", type=int, default=default(d.micro_batch), help=f"sequences per forward pass per process (default {d.micro_batch})")
    g.add_argument("--max_steps", type=int, default=default(d.max_steps), help=f"optimizer steps (default {d.max_steps})")
    g.add_argument("--lr", type=float, default=default(d.lr), help=f"peak learning rate (default {d.lr:g})")
    g.add_argument("--min_lr", type=float, default=default(None), help="final learning rate (default lr / 10)")
    g.add_argument("--warmup_steps", type=int, default=default(None), help="linear warmup steps (default min(2000, max_steps // 10))")
    g.add_argument("--decay_steps", type=int, default=default(None), help="step where the cosine reaches min_lr (default max_steps)")
    g.add_argument("--weight_decay", type=float, default=default(d.weight_decay), help=f"AdamW decoupled weight decay on matrices (default {d.weight_decay:g})")
    g.add_argument("--beta1", type=float, default=default(d.beta1), help=f"(default {d.beta1:g})")
    g.add_argument("--beta2", type=float, default=default(d.beta2), help=f"(default {d.beta2:g})")
    g.add_argument("--grad_clip", type=float, default=default(d.grad_clip), help=f"global gradient-norm clip, 0 = off (default {d.grad_clip:g})")
    g.add_argument("--seed", type=int, default=default(d.seed), help=f"(default {d.seed})")
    g = p.add_argument_group("run")
    g.add_argument("--eval_interval", type=int, default=default(d.eval_interval), help=f"validation every N steps and at the end (default {d.eval_interval})")
    g.add_argument("--eval_windows", type=int, default=default(d.eval_windows), help=f"validation windows per evaluation (default {d.eval_windows})")
    g.add_argument("--ckpt_interval", type=int, default=default(d.ckpt_interval), help=f"checkpoint every N steps and at the end (default {d.ckpt_interval})")
    g.add_argument("--keep_checkpoints", type=int, default=default(d.keep_checkpoints),
                   help=f"also keep the last N checkpoints as ckpt-<step>.pt; --resume falls back to the newest that passes "
                        f"its checksum when ckpt.pt does not (default {d.keep_checkpoints}; 0 keeps none)")
    g.add_argument("--log_interval", type=int, default=default(d.log_interval), help=f"log line every N steps (default {d.log_interval})")
    g.add_argument("--device", default=default(d.device), help="auto, cpu, cuda, cuda:1 ... (default auto)")
    g.add_argument("--dtype", default=default(d.dtype), choices=DTYPES, help="autocast dtype (default auto: bf16 on a bf16 GPU, fp32 on CPU)")
    g.add_argument("--compile", action="store_true", default=default(None),
                   help="torch.compile the model (default: on for CUDA devices, off on CPU)")
    g.add_argument("--no_compile", dest="compile", action="store_false", default=default(None),
                   help="run eagerly, also on CUDA")
    g.add_argument("--compile_mode", default=default(d.compile_mode), choices=COMPILE_MODES,
                   help=f"torch.compile mode (default {d.compile_mode})")
    g.add_argument("--loss_impl", default=default(d.loss_impl), choices=LOSS_IMPLS,
                   help="training loss path: 'chunked' fused projection + cross-entropy, or 'full' padded logits + "
                        f"F.cross_entropy (default {d.loss_impl})")
    g.add_argument("--peak_tflops", type=float, default=default(None), help="peak bf16 TFLOP/s of one device for MFU (default: from the GPU's name)")
    g.add_argument("--resume", action="store_true", default=default(False), help="continue the run in --out from its ckpt.pt")
    g.add_argument("--stop_at", type=int, default=default(None), help="stop after this step with a checkpoint (resume later)")
    g.add_argument("--no_hf_export", dest="hf_export", action="store_false", default=default(True), help="do not write out/hf at the end")
    g.add_argument("-q", "--quiet", action="store_true", default=default(False), help="no progress bar")


def config_from_args(argv: list[str]) -> TrainConfig:
    cfg = TrainConfig(**vars(build_parser().parse_args(argv)))
    return resumed_config(cfg, argv, build_parser, "train", RESUME_OVERRIDABLE, TrainError)


def format_summary(summary: dict) -> str:
    def num(value, spec):
        return "n/a" if value is None else format(value, spec)

    lines = [f"status       {summary['status']}" + (f": {summary['message']}" if summary["message"] else ""),
             f"steps        {summary['steps']}/{summary['max_steps']} ({summary['tokens']:,} tokens, "
             f"accumulation {summary['accumulation']}, {summary['world_size']} process(es) on {summary['device']})",
             f"train loss   {num(summary['train_loss'], '.4f')}",
             f"val loss     {num(summary['val_loss'], '.4f')}",
             f"tokens/s     {num(summary['tokens_per_s'], ',.0f')}",
             f"MFU          {num(summary['mfu'], '.2%')}",
             f"run folder   {summary['out']}" + (f" (Hugging Face export: {summary['hf']})" if summary["hf"] else "")]
    return "\n".join(lines)


def run_in_run_folder(argv: list[str], parse, run) -> dict:
    """A model command's run: ``run(parse(argv))`` with progress bars beside the log. A run
    folder (``--out``) on an object store is run in a local mirror, synced at each
    checkpoint; the summary names the folder the user gave."""
    cfg = parse(argv)
    remote = cfg.out
    with storage.mirrored_folder(remote, download=True) as out, logging_redirect_tqdm():
        if out != remote:  # a run folder on an object store: the run writes a local mirror, synced at each checkpoint
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                raise TrainError(f"--out {remote}: a run folder on an object store takes one process; "
                                 "with torchrun, write to a shared disk and copy it")
            cfg = parse(argv + ["--out", out])
        summary = run(cfg)
    if out != remote:  # the summary names the run folder the user gave
        summary = {k: remote if v == out else storage.join(remote, os.path.relpath(v, out))
                   if isinstance(v, str) and v.startswith(out + os.sep) else v for k, v in summary.items()}
    return summary


def run(args: argparse.Namespace) -> dict:
    """``corpusforge train`` (``pipelines.cli``): the run's summary."""
    return run_in_run_folder(args.command_argv, config_from_args, train)


def exit_status(summary: dict) -> int:
    """0 when the run finished or stopped as asked (``--stop_at``), 1 otherwise."""
    return 0 if summary["status"] in ("finished", "stopped") else 1


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
