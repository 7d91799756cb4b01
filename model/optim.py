"""The optimizer and the learning-rate schedule that pre-training and fine-tuning share.

- AdamW with decoupled weight decay on matrices only (weights and embeddings,
  ``dim >= 2``); biases and layer-norm gains are not decayed (``decay_groups``); torch's
  fused one-kernel AdamW on CPU and CUDA (``make_optimizer``).
- One schedule, ``lr_at``: a linear warmup ``lr * (step + 1) / warmup_steps``, then a decay
  from ``lr`` to ``min_lr`` at ``decay_steps``, then ``min_lr``. The decay is a cosine for
  pre-training (nanoGPT, GPT-3 appendix B) and a straight line to 0 for fine-tuning
  (GPT-1 section 4.1: "a linear learning rate decay schedule with warmup over 0.2% of
  training"). ``LRSchedule`` sets an optimizer's rate from it each step.
"""

from __future__ import annotations

import math

import torch

ADAM_EPS = 1e-8  # torch / nanoGPT default; OpenAI's GPT-1 code: e 1e-8
FUSED_ADAMW_DEVICES = ("cuda", "cpu")  # torch's one-kernel AdamW; on CPU it replaces a Python loop over the tensors
DECAYS = ("cosine", "linear")  # lr_at's shapes after the warmup: pre-training's cosine, fine-tuning's line


def lr_at(step: int, lr: float, min_lr: float, warmup_steps: int, decay_steps: int, decay: str = "cosine") -> float:
    """The learning rate of update ``step`` (0-based): linear warmup, ``decay`` to ``min_lr``, then flat."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= decay_steps:
        return min_lr
    if decay == "linear":
        return min_lr + (lr - min_lr) * ((decay_steps - step) / max(1, decay_steps - warmup_steps))
    progress = (step - warmup_steps) / max(1, decay_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)


class LRSchedule:
    """Sets the optimizer's learning rate each step from ``lr_at``; its state is the step count."""

    def __init__(self, optimizer: torch.optim.Optimizer, lr: float, min_lr: float, warmup_steps: int, decay_steps: int,
                 decay: str = "cosine"):
        if decay not in DECAYS:
            raise ValueError(f"decay must be one of {DECAYS}, got {decay!r}")
        self.optimizer = optimizer
        self.lr, self.min_lr, self.warmup_steps, self.decay_steps, self.decay = lr, min_lr, warmup_steps, decay_steps, decay
        self.step_count = 0

    def apply(self) -> float:
        value = lr_at(self.step_count, self.lr, self.min_lr, self.warmup_steps, self.decay_steps, self.decay)
        for group in self.optimizer.param_groups:
            group["lr"] = value
        return value

    def step(self) -> None:
        self.step_count += 1

    def state_dict(self) -> dict:
        return {"step": self.step_count, "lr": self.lr, "min_lr": self.min_lr, "warmup_steps": self.warmup_steps,
                "decay_steps": self.decay_steps}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step"])


def decay_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW parameter groups: matrices (``dim >= 2``) decayed, vectors (biases, gains) not."""
    decay, no_decay, seen = [], [], set()
    for _, param in model.named_parameters():
        if not param.requires_grad or id(param) in seen:
            continue
        seen.add(id(param))
        (decay if param.dim() >= 2 else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: torch.nn.Module, device: torch.device, lr: float, betas: tuple[float, float],
                   weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``decay_groups(model, weight_decay)``, fused where torch has the kernel."""
    extra = {"fused": True} if device.type in FUSED_ADAMW_DEVICES else {}
    return torch.optim.AdamW(decay_groups(model, weight_decay), lr=lr, betas=betas, eps=ADAM_EPS, **extra)
