"""Where a run computes, and in what precision: the device, the autocast dtype, the GPU's
peak for MFU, and the random-number states a checkpoint saves.

Used by ``model/train.py`` and ``model/finetune/train.py`` alike: one device resolver
(``--device auto|cpu|cuda|cuda:N|mps``), one dtype rule (``--dtype auto``: bf16 on a bf16
GPU, fp32 elsewhere), one set of RNG helpers (torch, CUDA, NumPy and Python states, so a
resumed run draws what an uninterrupted one would).

MFU = FLOPs per token (``GPT.flops_per_token``: ``6 N + 12 L C T``, nanoGPT's convention)
x tokens/s / (peak x processes), against the dense bf16 peak of the GPU (``PEAK_FLOPS``);
on CPU it is n/a.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from contextlib import nullcontext

import numpy as np
import torch

# Dense (no sparsity) bf16 tensor-core peak FLOP/s, from NVIDIA's data sheets. First match
# of the device name wins, so the PCIe H100 comes before the SXM one.
PEAK_FLOPS = (
    ("H100 PCIe", 756e12),  # H100 PCIe: 756 TFLOP/s bf16 dense
    ("H200", 989e12),  # H200 SXM: 989 TFLOP/s bf16 dense (the H100 SXM's tensor cores)
    ("H100", 989e12),  # H100 SXM: 989 TFLOP/s bf16 dense
    ("A100", 312e12),  # A100: 312 TFLOP/s bf16 dense
    ("V100", 125e12),  # V100: 125 TFLOP/s fp16 tensor cores (no bf16)
)
FALLBACK_PEAK = 312e12  # other GPUs: A100's peak, as nanoGPT's estimate_mfu assumes; override with --peak_tflops
DTYPES = ("auto", "bf16", "fp32")


# ---------------------------------------------------------------- devices and precision

def resolve_device(name: str, error: type[Exception], local_rank: int | None = None) -> torch.device:
    """The ``torch.device`` of ``--device name`` (``auto``: CUDA when visible, else CPU); under
    torchrun (``local_rank``) the process's own GPU. A device this torch cannot use is ``error``."""
    if local_rank is not None and name in ("auto", "cuda") and torch.cuda.is_available():
        return torch.device("cuda", local_rank)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise error(f"--device {name!r} is not a device torch knows (auto, cpu, cuda, cuda:1, mps ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU is visible"
        raise error(f"--device {name}: this torch ({torch.__version__}) is {build}; use --device cpu or auto")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise error(f"--device {name}: only {torch.cuda.device_count()} GPU(s) are visible")
    return device


def resolve_dtype(name: str, device: torch.device, error: type[Exception]) -> torch.dtype:
    """The autocast dtype of ``--dtype name`` (one of ``DTYPES``) on ``device``."""
    if name == "fp32":
        return torch.float32
    if name == "bf16":
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise error(f"{torch.cuda.get_device_name(device)} does not support bf16: use --dtype fp32")
        return torch.bfloat16
    if name != "auto":
        raise error(f"--dtype must be auto, bf16 or fp32, got {name!r}")
    return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32


def autocast_for(device: torch.device, dtype: torch.dtype) -> Callable:
    """A context factory: bf16 autocast on ``device`` for bf16, a no-op for fp32."""
    return (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if dtype == torch.bfloat16 else nullcontext


def allow_tf32(device: torch.device) -> None:
    """On CUDA, fp32 matmuls and convolutions may use TF32 tensor cores (as nanoGPT sets)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


# ---------------------------------------------------------------- MFU

def peak_flops(device: torch.device, override_tflops: float | None = None) -> tuple[float | None, str]:
    """``(peak FLOP/s of one device, how it was chosen)``; None on CPU."""
    if override_tflops:
        return override_tflops * 1e12, f"--peak_tflops {override_tflops:g}"
    if device.type != "cuda":
        return None, "CPU: MFU n/a"
    return peak_for_name(torch.cuda.get_device_name(device))


def peak_for_name(name: str) -> tuple[float, str]:
    """The ``PEAK_FLOPS`` entry of a GPU name (``torch.cuda.get_device_name``), else the stated fallback."""
    for key, value in PEAK_FLOPS:
        if key.lower() in name.lower():
            return value, f"{name}: {value / 1e12:g} TFLOP/s bf16 dense"
    return FALLBACK_PEAK, f"{name}: not in the table, assuming A100's {FALLBACK_PEAK / 1e12:g} TFLOP/s (set --peak_tflops)"


# ---------------------------------------------------------------- RNG states

def rng_state(device: torch.device) -> dict:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
            "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "python": random.getstate()}


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"], device)
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"]))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
