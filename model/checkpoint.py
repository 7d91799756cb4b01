"""Checkpoints: written atomically, read without unpickling arbitrary objects.

A checkpoint is one ``torch.save`` file holding only tensors and plain Python values
(dicts, lists, tuples, str, int, float, bool, None), so ``torch.load(weights_only=True)``
reads it and a crafted file cannot run code. It is written under a temporary name and
renamed (``corpus.storage``), so a crash mid-write leaves the previous checkpoint whole.

Contents of a training checkpoint (``format`` = ``corpusforge-checkpoint``, ``version`` 1)::

    model          state dict (no "_orig_mod." / "module." prefixes)
    model_config   GPTConfig.to_dict()
    train_config   TrainConfig as a dict
    optimizer      AdamW state dict
    scheduler      {"step": ...} of the learning-rate schedule
    step           optimizer steps done
    data           the sampler cursor {"epoch", "position", ...}
    rng            per-rank {"torch", "cuda", "numpy", "python"} states
    metrics        last train/val loss, tokens seen

``load_model`` accepts a training run folder (its ``ckpt.pt``), a checkpoint file, or a
Hugging Face GPT-2 folder (``config.json`` + ``model.safetensors`` / ``pytorch_model.bin``,
read by ``model.hf.load_hf_dir``).
"""

from __future__ import annotations

import os
import pickle

import torch

from corpus.storage import atomic_path

FORMAT = "corpusforge-checkpoint"
VERSION = 1
CHECKPOINT_FILE = "ckpt.pt"  # a run folder's latest full training state
RUN_CONFIG_FILE = "config.json"
TOKENIZER_DIR = "tokenizer"
HF_DIR = "hf"  # a run folder's Hugging Face export
HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILE_SETS = (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))
WRAPPER_PREFIXES = ("_orig_mod.", "module.")  # torch.compile's and DDP's wrappers


class CheckpointError(ValueError):
    """A file that cannot be used as a checkpoint: missing, truncated, corrupted, or of another kind."""


def clean_state_dict(state_dict: dict) -> dict:
    """The state dict with torch.compile's ``_orig_mod.`` and DDP's ``module.`` prefixes removed."""
    cleaned = {}
    for key, value in state_dict.items():
        changed = True
        while changed:
            changed = False
            for prefix in WRAPPER_PREFIXES:
                if key.startswith(prefix):
                    key, changed = key[len(prefix):], True
        cleaned[key] = value
    return cleaned


def save_checkpoint(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` (tensors and plain Python only) atomically; stamps ``format`` and ``version``."""
    if not isinstance(state, dict):
        raise TypeError(f"a checkpoint state must be a dict, got {type(state).__name__}")
    state = {"format": FORMAT, "version": VERSION, **state}
    if isinstance(state.get("model"), dict):
        state["model"] = clean_state_dict(state["model"])
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Read a checkpoint written by ``save_checkpoint``, refusing anything else with a clear message."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, CHECKPOINT_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    size = os.path.getsize(path)
    if size == 0:
        raise CheckpointError(f"{path}: the checkpoint is empty (0 bytes): an interrupted copy?")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        detail = text.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()[0] if text.strip() else ""
        if "Unsupported global" in text:
            raise CheckpointError(f"{path}: refused: it holds objects other than tensors and plain Python values "
                                  f"({detail}); checkpoints are only read with torch.load(weights_only=True)") from None
        raise CheckpointError(f"{path}: cannot read the checkpoint ({size:,} bytes): corrupted or not a torch "
                              f"checkpoint ({detail})") from None
    except Exception as exc:  # the reader raises RuntimeError, BadZipFile, EOFError, IndexError ... on bad bytes
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: cannot read the checkpoint ({size:,} bytes): truncated, corrupted or not a "
                              f"torch checkpoint ({first})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        what = f"a {type(state).__name__}" if not isinstance(state, dict) else "a dict without the checkpoint format mark"
        raise CheckpointError(f"{path}: not a corpusforge checkpoint ({what}); for Hugging Face weights pass the folder")
    if int(state.get("version", -1)) > VERSION:
        raise CheckpointError(f"{path}: checkpoint version {state['version']} is newer than this code reads ({VERSION})")
    for key in ("model", "model_config"):
        if key not in state:
            raise CheckpointError(f"{path}: the checkpoint has no {key!r} entry")
    return state


def is_hf_folder(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    return (os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))
            and any(os.path.isfile(os.path.join(path, name)) for name in HF_WEIGHT_FILES))


def checkpoint_path(path: str | os.PathLike) -> str | None:
    """The checkpoint file behind ``path`` (a run folder or a file), or None for a Hugging Face folder."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    if os.path.isdir(path):
        candidate = os.path.join(path, CHECKPOINT_FILE)
        if os.path.isfile(candidate):
            return candidate
        if is_hf_folder(path):
            return None
        if is_hf_folder(os.path.join(path, HF_DIR)):
            return None
        raise CheckpointError(f"{path}: neither a training run folder (no {CHECKPOINT_FILE}) nor a Hugging Face folder "
                              f"(config.json with {' or '.join(HF_WEIGHT_FILES)})")
    raise CheckpointError(f"{path}: no such file or folder")


def model_from_state(state: dict):
    """A ``GPT`` built from a checkpoint's ``model_config`` with its weights loaded."""
    from model.gpt import GPT, GPTConfig

    model = GPT(GPTConfig.from_dict(dict(state["model_config"])))
    missing, unexpected = model.load_state_dict(clean_state_dict(state["model"]), strict=False)
    if missing or unexpected:
        raise CheckpointError(f"the checkpoint's weights do not fit its model config: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    return model


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu"):
    """A ``GPT`` in eval mode from a run folder, a checkpoint file or a Hugging Face GPT-2 folder."""
    path = os.fspath(path)
    ckpt = checkpoint_path(path)
    if ckpt is None:
        from model.hf import load_hf_dir

        folder = path if is_hf_folder(path) else os.path.join(path, HF_DIR)
        model = load_hf_dir(folder)
    else:
        model = model_from_state(load_checkpoint(ckpt))
    return model.to(device).eval()


def tokenizer_folder(path: str | os.PathLike) -> str | None:
    """Where the tokenizer files for the model at ``path`` live, or None when none came with it."""
    path = os.fspath(path)
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    for candidate in (os.path.join(folder, TOKENIZER_DIR), folder, os.path.join(folder, HF_DIR)):
        if os.path.isdir(candidate) and any(all(os.path.isfile(os.path.join(candidate, f)) for f in files)
                                            for files in TOKENIZER_FILE_SETS):
            return candidate
    return None
