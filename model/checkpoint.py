"""Checkpoints: written atomically, read without unpickling arbitrary objects.

A checkpoint is one ``torch.save`` file holding only tensors and plain Python values
(dicts, lists, tuples, str, int, float, bool, None), so ``torch.load(weights_only=True)``
reads it and a crafted file cannot run code. It is written under a temporary name and
renamed (``common.storage``), so a crash mid-write leaves the previous checkpoint whole.

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

Beside each checkpoint, ``<file>.sha256`` (JSON: sha256, bytes, step) is written once the
checkpoint is complete; ``load_checkpoint`` checks the file against it before unpickling,
so a flipped bit is an error naming the file, never silently changed weights. With
``keep=N`` the last N checkpoints also stay as ``ckpt-<step>.pt`` (hard links where the
file system allows), and ``latest_good_checkpoint`` falls back to the newest of them that
passes its checksum.

``load_model`` accepts a training run folder (its ``ckpt.pt``), a checkpoint file, or a
Hugging Face GPT-2 folder (``config.json`` + ``model.safetensors`` / ``pytorch_model.bin``,
read by ``model.hf.load_hf_dir``).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import math
import os
import pickle
import re
import shutil

import torch

from common.errors import InputError
from common.storage import DiskFullError, atomic_path, disk_full_cause, local_copy, sync_mirror, write_atomically
from model.gpt import GPTConfig
from model.hf import load_hf_dir
from model.shapes import meta_gpt
from model.token_loader import cursor_problem

log = logging.getLogger(__name__)
CHECKSUM_SUFFIX = ".sha256"
KEPT_PATTERN = "ckpt-{step:08d}.pt"

FORMAT = "corpusforge-checkpoint"
VERSION = 1
CHECKPOINT_FILE = "ckpt.pt"  # a run folder's latest full training state
RUN_CONFIG_FILE = "config.json"
TOKENIZER_DIR = "tokenizer"
HF_DIR = "hf"  # a run folder's Hugging Face export
HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILE_SETS = (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))
WRAPPER_PREFIXES = ("_orig_mod.", "module.")  # torch.compile's and DDP's wrappers


# A checksum file is one short JSON line; anything longer is not one (read at most this).
MAX_CHECKSUM_BYTES = 4096
# The largest model a checkpoint may describe, checked before anything is allocated: far
# past GPT-3 (96 layers, 12,288 wide, 2,048 positions) and any tokenizer's vocabulary.
MAX_MODEL_CONFIG = {"n_layer": 1024, "n_head": 1024, "n_embd": 1 << 16, "block_size": 1 << 20,
                    "vocab_size": 1 << 22, "pad_vocab_multiple": 1 << 12}
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# No trained weight comes near this; a larger one (3e38, say) overflows float32 activations
# and turns sampling probabilities into NaN.
MAX_WEIGHT_ABS = 1e6


class CheckpointError(InputError):
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


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _write_checksum(path: str, step) -> None:
    record = {"sha256": file_sha256(path), "bytes": os.path.getsize(path), "step": step}
    write_atomically(path + CHECKSUM_SUFFIX, json.dumps(record) + "\n")


def verify_checksum(path: str) -> bool:
    """True when ``path`` matches its ``.sha256`` file; False when it has none (older
    checkpoints); ``CheckpointError`` when it does not match."""
    sidecar = path + CHECKSUM_SUFFIX
    if not os.path.isfile(sidecar):
        return False
    try:
        with open(sidecar, "rb") as f:
            data = f.read(MAX_CHECKSUM_BYTES + 1)
        if len(data) > MAX_CHECKSUM_BYTES:
            raise ValueError(f"over {MAX_CHECKSUM_BYTES} bytes")
        record = json.loads(data.decode("utf-8"))
        expected, size = str(record["sha256"]), int(record["bytes"])
        if len(expected) != 64 or size < 0:
            raise ValueError("not a sha256 and a size")
    except (ValueError, KeyError, TypeError, OSError, RecursionError) as exc:
        raise CheckpointError(f"{sidecar}: unreadable checksum file ({str(exc)[:120]})") from None
    actual_size = os.path.getsize(path)
    if actual_size != size:
        raise CheckpointError(f"{path}: {actual_size:,} bytes, but {size:,} were written (truncated or replaced?)")
    actual = file_sha256(path)
    if actual != expected:
        raise CheckpointError(f"{path}: sha256 {actual[:16]}... does not match the {expected[:16]}... it was written "
                              f"with: the file is corrupted")
    return True


def _state_bytes(state) -> int:
    """About the bytes ``torch.save`` writes for ``state``: its tensors' storage."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(_state_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_state_bytes(v) for v in state)
    return 0


def save_checkpoint(path: str | os.PathLike, state: dict, keep: int = 0) -> None:
    """Write ``state`` (tensors and plain Python only) atomically, then its checksum file;
    stamps ``format`` and ``version``. ``keep`` > 0 also keeps this checkpoint as
    ``ckpt-<step>.pt`` beside it and deletes all but the newest ``keep`` of those."""
    if not isinstance(state, dict):
        raise TypeError(f"a checkpoint state must be a dict, got {type(state).__name__}")
    state = {"format": FORMAT, "version": VERSION, **state}
    if isinstance(state.get("model"), dict):
        state["model"] = clean_state_dict(state["model"])
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        with atomic_path(path) as temporary:
            with open(temporary, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
        _write_checksum(path, state.get("step"))
    except Exception as exc:  # torch reports a full disk as RuntimeError("... unexpected pos"), the OSError as its context
        full = disk_full_cause(exc)
        if full is None:
            raise
        raise DiskFullError(full.errno, path, needed=_state_bytes(state)) from exc
    if keep > 0 and isinstance(state.get("step"), int):
        _keep_copy(path, state["step"], keep)
    sync_mirror(path)  # a run folder on an object store gets the checkpoint now


def _keep_copy(path: str, step: int, keep: int) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    kept = os.path.join(folder, KEPT_PATTERN.format(step=step))
    for suffix in ("", CHECKSUM_SUFFIX):
        target = kept + suffix
        if os.path.exists(target):
            os.remove(target)
        try:
            os.link(path + suffix, target)  # the next save replaces ckpt.pt by rename, so the link keeps this one
        except OSError:
            shutil.copyfile(path + suffix, target)
    for old in kept_checkpoints(folder)[keep:]:
        for suffix in ("", CHECKSUM_SUFFIX):
            if os.path.exists(old + suffix):
                os.remove(old + suffix)


def kept_checkpoints(folder: str) -> list[str]:
    """The ``ckpt-<step>.pt`` files of a run folder, newest step first."""
    found = []
    for name in glob.glob(os.path.join(glob.escape(folder), "ckpt-*.pt")):
        match = re.fullmatch(r"ckpt-(\d+)\.pt", os.path.basename(name))
        if match:
            found.append((int(match.group(1)), name))
    return [name for _, name in sorted(found, reverse=True)]


def latest_good_checkpoint(folder: str, required: tuple[str, ...] = ()) -> tuple[dict, str]:
    """The state of ``folder``'s ckpt.pt, or, when it fails its checksum or cannot be read,
    of the newest kept ``ckpt-<step>.pt`` that can (with a warning naming what was skipped)."""
    problems = []
    for candidate in [os.path.join(folder, CHECKPOINT_FILE)] + kept_checkpoints(folder):
        if not os.path.isfile(candidate):
            continue
        try:
            state = load_checkpoint(candidate, required=required)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        for problem in problems:
            log.warning("skipped: %s", problem)
        if problems:
            log.warning("resuming from %s instead", candidate)
        return state, candidate
    if problems:
        raise CheckpointError("no usable checkpoint: " + "; ".join(problems))
    raise CheckpointError(f"{folder}: no checkpoint ({CHECKPOINT_FILE} or ckpt-<step>.pt)")


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu", required: tuple[str, ...] = ()) -> dict:
    """Read a checkpoint written by ``save_checkpoint``, refusing anything else with a clear
    message: a checksum mismatch, bytes torch cannot read, another kind of file, or a
    missing entry (``model``, ``model_config`` and any of ``required``)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, CHECKPOINT_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    size = os.path.getsize(path)
    if size == 0:
        raise CheckpointError(f"{path}: the checkpoint is empty (0 bytes): an interrupted copy?")
    if not verify_checksum(path):
        log.warning("%s has no %s checksum file (written by an older version): not verified", path, CHECKSUM_SUFFIX)
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
    if "version" in state and not (_is_int(state["version"]) and state["version"] >= 1):
        raise CheckpointError(f"{path}: the checkpoint's 'version' is {excerpt_value(state.get('version'))}, not a format version")
    if state.get("version", VERSION) > VERSION:
        raise CheckpointError(f"{path}: checkpoint version {state['version']} is newer than this code reads ({VERSION})")
    for key in ("model", "model_config", *required):
        if key not in state:
            raise CheckpointError(f"{path}: the checkpoint has no {key!r} entry")
    if not isinstance(state["model"], dict) or not all(isinstance(v, torch.Tensor) for v in state["model"].values()):
        raise CheckpointError(f"{path}: the checkpoint's 'model' entry is not a state dict of tensors")
    if not isinstance(state["model_config"], dict):
        raise CheckpointError(f"{path}: the checkpoint's 'model_config' entry is not a dict")
    check_weights(state["model"], model_config_of(state["model_config"], path), path)
    check_resume_entries(state, path)
    return state


def model_config_of(config: dict, path: str = "the checkpoint") -> GPTConfig:
    """The checkpoint's ``GPTConfig``, its sizes checked against ``MAX_MODEL_CONFIG`` first."""
    for name, limit in MAX_MODEL_CONFIG.items():
        value = config.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 < value <= limit:
            raise CheckpointError(f"{path}: model_config {name}={value!r} is outside 1..{limit:,}: refused before building the model")
    try:
        return GPTConfig.from_dict(dict(config))
    except (ValueError, TypeError) as exc:
        raise CheckpointError(f"{path}: bad model_config: {str(exc)[:200]}") from None


def _expected_shapes(config: GPTConfig) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every entry of the model's state dict: (shape, dtype), from a model on the meta device
    (shapes only: nothing is allocated, whatever the config says)."""
    model = meta_gpt(config)
    return {name: (tuple(t.shape), t.dtype) for name, t in model.state_dict().items()}


def check_weights(weights: dict, config: GPTConfig, path: str = "the checkpoint") -> None:
    """Every tensor the model needs is there, with its shape, a floating dtype, and only
    finite values; nothing else is there. ``CheckpointError`` naming the first that is not."""
    weights = clean_state_dict(weights)
    expected = _expected_shapes(config)
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{path}: the weights do not fit its model config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, (shape, dtype) in expected.items():
        tensor = weights[name]
        if tuple(tensor.shape) != shape:
            raise CheckpointError(f"{path}: the weights do not fit its model config: {name} has shape {tuple(tensor.shape)}, the config needs {shape}")
        if dtype.is_floating_point and tensor.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(f"{path}: {name} is {tensor.dtype}, not a floating-point weight")
        if tensor.dtype.is_floating_point and tensor.numel():
            low, high = (float(v) for v in torch.aminmax(tensor))  # no tensor-sized temporaries; NaN and inf show here
            if not math.isfinite(low) or not math.isfinite(high):
                bad = int((~torch.isfinite(tensor)).sum())
                raise CheckpointError(f"{path}: {name} holds {bad:,} NaN or infinite value(s)")
            largest = max(-low, high)
            if largest > MAX_WEIGHT_ABS:
                raise CheckpointError(f"{path}: {name} holds a value of magnitude {largest:.3g}, over {MAX_WEIGHT_ABS:.0g}: not trained weights")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rng_problem(rng) -> str | None:
    """What is wrong with one process's RNG states (as ``model.device.rng_state`` writes them), or None."""
    if not isinstance(rng, dict):
        return f"a {type(rng).__name__}, not a dict"
    reference = torch.get_rng_state()
    state = rng.get("torch")
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.shape != reference.shape:
        return f"'torch' is not a {tuple(reference.shape)} uint8 tensor"
    cuda = rng.get("cuda")
    if cuda is not None and (not isinstance(cuda, torch.Tensor) or cuda.dtype != torch.uint8 or cuda.dim() != 1):
        return "'cuda' is not a uint8 tensor"
    numpy_state = rng.get("numpy")
    keys = numpy_state.get("keys") if isinstance(numpy_state, dict) else None
    if (not isinstance(numpy_state, dict) or numpy_state.get("name") != "MT19937"
            or not isinstance(keys, torch.Tensor) or tuple(keys.shape) != (624,)
            or keys.dtype.is_floating_point or keys.dtype.is_complex or keys.dtype == torch.bool
            or int(keys.min()) < 0 or int(keys.max()) >= 1 << 32
            or not _is_int(numpy_state.get("pos")) or not 0 <= numpy_state["pos"] <= 624
            or numpy_state.get("has_gauss") not in (0, 1) or isinstance(numpy_state.get("has_gauss"), bool)
            or not _is_number(numpy_state.get("cached_gaussian"))):
        return "'numpy' is not an MT19937 state"
    python_state = rng.get("python")
    # random.getstate(): (3, 624 words and the index 0..624, the cached gauss): setstate refuses anything else
    if (not isinstance(python_state, (tuple, list)) or len(python_state) != 3 or python_state[0] != 3 or not _is_int(python_state[0])
            or not isinstance(python_state[1], (tuple, list)) or len(python_state[1]) != 625
            or not all(_is_int(v) and 0 <= v < 1 << 32 for v in python_state[1][:624])
            or not _is_int(python_state[1][624]) or not 0 <= python_state[1][624] <= 624
            or not (python_state[2] is None or (isinstance(python_state[2], float) and math.isfinite(python_state[2])))):
        return "'python' is not a random.getstate() state"
    return None


def _is_number(value) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_resume_entries(state: dict, path: str = "the checkpoint") -> None:
    """What a resume puts back (step, scheduler, RNG states, data cursor, metrics, optimizer),
    when present: each of its type and range, and consistent with the others (the schedule's
    step is the step; one RNG state per process of ``world_size``). What depends on the run
    that resumes (its data, its number of processes) is checked by that run
    (``model.train.check_resumed_state``)."""
    if "step" in state and not (_is_int(state["step"]) and state["step"] >= 0):
        raise CheckpointError(f"{path}: 'step' is {excerpt_value(state['step'])}, not a count")
    scheduler = state.get("scheduler")
    if "scheduler" in state and not (isinstance(scheduler, dict) and _is_int(scheduler.get("step")) and scheduler["step"] >= 0):
        raise CheckpointError(f"{path}: 'scheduler' is {excerpt_value(scheduler)}, not a schedule state with an integer step")
    if "scheduler" in state and "step" in state and scheduler["step"] != state["step"]:
        raise CheckpointError(f"{path}: the schedule is at step {scheduler['step']}, the checkpoint at step {state['step']}")
    if "data" in state:
        problem = cursor_problem(state["data"])
        if problem:
            raise CheckpointError(f"{path}: the data cursor ('data') is unusable: {problem}")
    for key in ("model_config", "train_config", "finetune_config"):
        if key in state and not isinstance(state[key], dict):
            raise CheckpointError(f"{path}: {key!r} is {excerpt_value(state[key])}, not a dict of settings")
    if "metrics" in state and not (state["metrics"] is None or isinstance(state["metrics"], dict)):
        raise CheckpointError(f"{path}: 'metrics' is {excerpt_value(state['metrics'])}, not a dict")
    if "world_size" in state and not (_is_int(state["world_size"]) and state["world_size"] >= 1):
        raise CheckpointError(f"{path}: 'world_size' is {excerpt_value(state['world_size'])}, not a number of processes")
    if "rng" in state:
        ranks = state["rng"] if isinstance(state["rng"], (list, tuple)) else [state["rng"]]
        if not ranks:
            raise CheckpointError(f"{path}: 'rng' holds no RNG state")
        if "world_size" in state and len(ranks) != state["world_size"]:
            raise CheckpointError(f"{path}: 'rng' holds {len(ranks)} RNG state(s) for a run of {state['world_size']} process(es)")
        for rank, rng in enumerate(ranks):
            problem = _rng_problem(rng)
            if problem:
                raise CheckpointError(f"{path}: the RNG state of process {rank} is unusable: {problem}")
    if "optimizer" in state:
        optimizer = state["optimizer"]
        if (not isinstance(optimizer, dict) or not isinstance(optimizer.get("state"), dict)
                or not isinstance(optimizer.get("param_groups"), list)
                or not all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in optimizer["param_groups"])):
            raise CheckpointError(f"{path}: 'optimizer' is not an optimizer state (state + param_groups)")


def excerpt_value(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_optimizer_state(saved: dict, optimizer: torch.optim.Optimizer, path: str = "the checkpoint") -> None:
    """Before ``optimizer.load_state_dict(saved)``: the same groups, each of the same size,
    and every saved per-parameter tensor (AdamW's moments) of its parameter's shape, dtype
    class and finite. torch copies moments of another shape without checking, and the
    next step writes past them (heap corruption), so this runs first."""
    groups = saved["param_groups"]
    if len(groups) != len(optimizer.param_groups):
        raise CheckpointError(f"{path}: the optimizer state has {len(groups)} parameter group(s), the model {len(optimizer.param_groups)}")
    by_id = {}
    for index, (group, live) in enumerate(zip(groups, optimizer.param_groups, strict=True)):
        if len(group["params"]) != len(live["params"]):
            raise CheckpointError(f"{path}: optimizer group {index} holds {len(group['params'])} parameter(s), the model {len(live['params'])}")
        for key, param in zip(group["params"], live["params"], strict=True):
            by_id[key] = param
        for name, mine in live.items():
            if name != "params" and name in group:
                problem = _setting_problem(name, group[name], mine)
                if problem:
                    raise CheckpointError(f"{path}: optimizer group {index}: {name!r} is {excerpt_value(group[name])}, {problem}")
    for key, entry in saved["state"].items():
        if key not in by_id or not isinstance(entry, dict):
            raise CheckpointError(f"{path}: the optimizer state names parameter {excerpt_value(key)}, which the model has not")
        param = by_id[key]
        for name, value in entry.items():
            if name == "step":
                if (not isinstance(value, (torch.Tensor, int, float)) or isinstance(value, bool)
                        or (isinstance(value, torch.Tensor) and (value.numel() != 1 or value.dtype == torch.bool))):
                    raise CheckpointError(f"{path}: optimizer parameter {key}: 'step' is not a number")
                count = float(value)
                if not math.isfinite(count) or count < 0 or count != int(count):
                    raise CheckpointError(f"{path}: optimizer parameter {key}: 'step' is {count}, not a count of steps")
                continue
            if not isinstance(value, torch.Tensor):
                raise CheckpointError(f"{path}: optimizer parameter {key}: {name!r} is not a tensor")
            if tuple(value.shape) != tuple(param.shape) or not value.dtype.is_floating_point:
                raise CheckpointError(f"{path}: optimizer parameter {key}: {name!r} is {value.dtype} {tuple(value.shape)}, "
                                      f"the model's parameter is {tuple(param.shape)}")
            if not bool(torch.isfinite(value).all()):
                raise CheckpointError(f"{path}: optimizer parameter {key}: {name!r} holds NaN or infinite values")


def _setting_problem(name: str, saved, mine) -> str | None:
    """What makes a saved optimizer-group setting unusable where the live group holds ``mine``
    (``load_state_dict`` takes the saved one): another kind of value, or one out of range."""
    if isinstance(mine, bool) or mine is None:
        return None if saved is None or isinstance(saved, bool) else "not a flag"
    if isinstance(mine, (int, float)):
        if not _is_number(saved):
            return "not a finite number"
        if name in ("lr", "eps", "weight_decay") and saved < 0:
            return "below 0"
        return None
    if isinstance(mine, (tuple, list)):
        if not isinstance(saved, (tuple, list)) or len(saved) != len(mine) or not all(_is_number(v) for v in saved):
            return f"not {len(mine)} finite numbers"
        if name == "betas" and not all(0 <= v < 1 for v in saved):
            return "not in [0, 1)"
        return None
    return None if isinstance(saved, type(mine)) else f"not a {type(mine).__name__}"


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
    """A ``GPT`` built from a checkpoint's ``model_config`` that holds the checkpoint's own
    tensors (cast to the model's dtypes where they differ): built on the meta device and
    loaded with ``assign=True``, so no random initial weights are drawn and no second copy
    of the weights is made (``docs/model.md``, "Loading a checkpoint")."""
    try:
        model = meta_gpt(GPTConfig.from_dict(dict(state["model_config"])))
        own = {name: t.dtype for name, t in model.state_dict().items()}
        weights = {name: t.to(own[name]) if name in own and t.is_floating_point() else t
                   for name, t in clean_state_dict(state["model"]).items()}
        missing, unexpected = model.load_state_dict(weights, strict=False, assign=True)
    except (RuntimeError, TypeError, ValueError) as exc:  # a tensor of another shape, a bad config value
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"the checkpoint's weights do not fit its model config: {first[:300]}") from None
    if missing or unexpected:
        raise CheckpointError(f"the checkpoint's weights do not fit its model config: missing {missing[:5]}, "
                              f"unexpected {unexpected[:5]}")
    return model


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu"):
    """A ``GPT`` in eval mode from a run folder, a checkpoint file or a Hugging Face GPT-2 folder
    (on an object store too: downloaded once per process)."""
    path = local_copy(os.fspath(path))
    ckpt = checkpoint_path(path)
    if ckpt is None:
        folder = path if is_hf_folder(path) else os.path.join(path, HF_DIR)
        model = load_hf_dir(folder)
    else:
        model = model_from_state(load_checkpoint(ckpt))
    return model.to(device).eval()


def tokenizer_folder(path: str | os.PathLike) -> str | None:
    """Where the tokenizer files for the model at ``path`` live, or None when none came with it."""
    path = local_copy(os.fspath(path))
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    for candidate in (os.path.join(folder, TOKENIZER_DIR), folder, os.path.join(folder, HF_DIR)):
        if os.path.isdir(candidate) and any(all(os.path.isfile(os.path.join(candidate, f)) for f in files)
                                            for files in TOKENIZER_FILE_SETS):
            return candidate
    return None
