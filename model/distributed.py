"""Data-parallel training under torchrun: which process this is, and the two collectives
the trainer needs (a mean of a scalar, a gather of Python objects).

``torchrun --nproc_per_node N -m pipelines.cli train ...`` sets ``RANK``, ``WORLD_SIZE``
and ``LOCAL_RANK``; ``init_distributed`` starts one process group per run (NCCL on GPUs,
gloo on CPU). A single process is ``Dist()``: rank 0 of 1, every collective a no-op.

Tested through a real ``torchrun`` with gloo in ``tests/test_train.py``
(``test_torchrun_ranks_share_the_batch_like_one_process_with_accumulation``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int | None = None

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def master(self) -> bool:
        return self.rank == 0


def init_distributed(device_kind: str) -> Dist:
    """torchrun sets RANK/WORLD_SIZE/LOCAL_RANK: one process per GPU (nccl) or CPU process (gloo)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device_kind in ("auto", "cuda") and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Dist(rank, world, local)


def all_mean(value: torch.Tensor, dist_info: Dist) -> torch.Tensor:
    if dist_info.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= dist_info.world_size
    return value


def all_sum(value: torch.Tensor, dist_info: Dist | None) -> torch.Tensor:
    """``value`` summed over every process, in place (a single process: unchanged)."""
    if dist_info is not None and dist_info.enabled:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def gather_objects(obj, dist_info: Dist) -> list:
    if not dist_info.enabled:
        return [obj]
    out = [None] * dist_info.world_size
    dist.all_gather_object(out, obj)
    return out


def barrier_and_close(dist_info: Dist) -> None:
    """At the end of a run: wait for every process, then tear the process group down."""
    if dist_info.enabled:
        dist.barrier()
        dist.destroy_process_group()
