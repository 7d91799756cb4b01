"""Training data from token shards: fixed windows, sampled without replacement, resumable.

The train split is cut into windows of ``block_size + 1`` tokens that start every
``block_size`` tokens inside each shard (a window never crosses a shard boundary), so
within an epoch every token is a target exactly once, except the tail of each shard that
does not fill a window. Input ``x`` is a window's first ``block_size`` tokens and target
``y`` its last ``block_size`` (the next-token shift).

Each epoch visits a permutation of all windows, seeded by ``(seed, epoch)``; a cursor
``(epoch, position)`` says how far it went, so a run stopped and resumed reads exactly the
windows an uninterrupted run would have. A micro-batch takes the next
``micro_batch * world_size`` positions of the permutation, and rank ``r`` of a DDP run
takes positions ``r, r + world_size, ...`` of them: ranks never read the same window, and
together they read what one process with ``world_size`` times the accumulation would. The
last ``< micro_batch * world_size`` windows of an epoch are skipped (a different few each
epoch, since the permutation changes).

Validation reads a fixed, evenly spaced set of windows (the same every evaluation, so the
curve compares like with like), split across ranks the same way.

A data folder written by ``corpusforge tokenize`` holds ``meta.json`` (vocabulary size,
end-of-text id, split sizes), ``tokenizer/`` and ``<prefix>_<split>_<n>.bin`` shards;
nanoGPT's flat ``train.bin``/``val.bin`` and plain globs of shards work too.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass

import numpy as np
import torch

from common import storage
from common.errors import InputError
from model.token_shards import find_token_shards, read_tokens

META_FILE = "meta.json"  # written by `corpusforge tokenize` next to the shards
TOKENIZER_DIR = "tokenizer"  # the tokenizer files inside a data folder (and a run folder)


class DataError(InputError):
    """Training data that cannot be used as asked: missing, too small, ids out of range."""


def read_meta(folder: str | os.PathLike) -> dict | None:
    """A data folder's ``meta.json``, or None when there is none (or ``folder`` is a file or glob)."""
    path = os.path.join(storage.local_copy(os.fspath(folder)), META_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from exc


def split_paths(data: str | os.PathLike, split: str) -> list[str]:
    """Token files of one split: a tokenize folder's shards, nanoGPT's ``<split>.bin``, or a glob
    (on an object store too: downloaded once per process, ``common.storage.local_copy``)."""
    data = storage.local_copy(os.fspath(data))
    if os.path.isdir(data):
        flat = os.path.join(data, f"{split}.bin")
        try:
            return find_token_shards(data, split)
        except FileNotFoundError:
            if os.path.isfile(flat):
                return [flat]
            raise DataError(f"no {split} token shards in {data} (expected *{split}_*.bin files or {split}.bin)") from None
    paths = sorted(p for p in glob.glob(data) if os.path.isfile(p))
    if not paths:
        raise DataError(f"no token files match {data}")
    return paths


def tokenizer_dir(data: str | os.PathLike) -> str | None:
    """The tokenizer folder that came with a data folder, if any."""
    data = storage.local_copy(os.fspath(data))
    folder = data if os.path.isdir(data) else os.path.dirname(data)
    candidate = os.path.join(folder, TOKENIZER_DIR)
    return candidate if os.path.isdir(candidate) else None


class TokenWindows:
    """All ``block_size + 1``-token windows of a list of token files, addressed 0..len-1."""

    def __init__(self, paths: list[str], block_size: int):
        if block_size < 1:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.paths = list(paths)
        self.block_size = block_size
        self.arrays = [read_tokens(p) for p in self.paths]
        counts = [(len(a) - 1) // block_size if len(a) > block_size else 0 for a in self.arrays]
        self.starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self.tokens = int(sum(len(a) for a in self.arrays))

    def __len__(self) -> int:
        return int(self.starts[-1])

    def window(self, index: int) -> np.ndarray:
        if not 0 <= index < len(self):
            raise IndexError(f"window {index} out of range 0..{len(self) - 1}")
        shard = int(np.searchsorted(self.starts, index, side="right")) - 1
        offset = (index - int(self.starts[shard])) * self.block_size
        return self.arrays[shard][offset:offset + self.block_size + 1]

    def batch(self, indices, vocab_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` int64 tensors of shape ``(len(indices), block_size)``."""
        rows = np.stack([self.window(int(i)) for i in indices]).astype(np.int64)
        if vocab_size is not None and rows.size and int(rows.max()) >= vocab_size:
            bad = int(rows.max())
            raise DataError(f"token id {bad} in {self.paths[0] if len(self.paths) == 1 else 'the data'} is not below the "
                            f"model's vocab_size {vocab_size}: the data was tokenized with a larger vocabulary "
                            "(pass --vocab_size, or the data folder with its meta.json)")
        tensor = torch.from_numpy(rows)
        return tensor[:, :-1].contiguous(), tensor[:, 1:].contiguous()


@dataclass
class Cursor:
    """How far sampling went: ``position`` windows into the permutation of ``epoch``."""

    epoch: int = 0
    position: int = 0


CURSOR_FIELDS = ("epoch", "position", "seed", "windows", "step_size")  # WindowSampler.state_dict()


def cursor_problem(state) -> str | None:
    """What makes a saved data cursor (``WindowSampler.state_dict``) unusable in itself, or
    None: a missing field, one that is not a whole number, or a position that no run reaches
    (negative, past the epoch's last whole micro-batch, or not on a micro-batch boundary)."""
    if not isinstance(state, dict):
        return f"a {type(state).__name__}, not a dict"
    for key in CURSOR_FIELDS:
        if key not in state:
            return f"it has no {key!r}"
        value = state[key]
        if not isinstance(value, int) or isinstance(value, bool):
            text = repr(value)
            return f"{key!r} is {text if len(text) <= 40 else text[:37] + '...'}, not a whole number"
    epoch, position, windows, step_size = state["epoch"], state["position"], state["windows"], state["step_size"]
    if state["seed"] < 0:
        return f"'seed' is {state['seed']}, below 0"
    if windows < 1 or step_size < 1 or windows < step_size:
        return f"'windows' is {windows} and 'step_size' {step_size}: not one micro-batch of windows fits in an epoch"
    if epoch < 0 or not 0 <= position <= windows // step_size * step_size or position % step_size:
        return (f"epoch {epoch}, position {position} is not a place in the epochs of {windows} windows read "
                f"{step_size} at a time")
    return None


def consumed_batches(state: dict) -> int:
    """Micro-batches (of all ranks) a valid cursor (``cursor_problem`` None) has read since the start."""
    return state["epoch"] * (state["windows"] // state["step_size"]) + state["position"] // state["step_size"]


class WindowSampler:
    """Seeded permutations of window indices, without replacement, split across DDP ranks."""

    def __init__(self, n_windows: int, micro_batch: int, seed: int, rank: int = 0, world_size: int = 1):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.step_size = micro_batch * world_size  # positions consumed by one micro-batch of all ranks
        if n_windows < self.step_size:
            raise DataError(f"the training data holds {n_windows} windows, fewer than one micro-batch across all ranks "
                            f"({micro_batch} x {world_size}): use more data, a smaller --block_size or --micro_batch")
        self.n_windows, self.micro_batch, self.seed = n_windows, micro_batch, seed
        self.rank, self.world_size = rank, world_size
        self.cursor = Cursor()
        self._permutation: tuple[int, np.ndarray] | None = None

    def permutation(self, epoch: int) -> np.ndarray:
        if self._permutation is None or self._permutation[0] != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._permutation = (epoch, rng.permutation(self.n_windows))
        return self._permutation[1]

    def next_indices(self) -> np.ndarray:
        """This rank's window indices for the next micro-batch; advances the cursor."""
        if self.cursor.position + self.step_size > self.n_windows:
            self.cursor = Cursor(self.cursor.epoch + 1, 0)
        start = self.cursor.position
        chunk = self.permutation(self.cursor.epoch)[start:start + self.step_size]
        self.cursor.position += self.step_size
        return chunk[self.rank::self.world_size]

    def state_dict(self) -> dict:
        return {"epoch": self.cursor.epoch, "position": self.cursor.position, "seed": self.seed,
                "windows": self.n_windows, "step_size": self.step_size}

    def load_state_dict(self, state: dict) -> None:
        problem = cursor_problem(state)
        if problem:
            raise DataError(f"cannot resume the data cursor: {problem}")
        for key, mine in (("windows", self.n_windows), ("seed", self.seed), ("step_size", self.step_size)):
            if state[key] != mine:
                raise DataError(f"cannot resume the data cursor: the checkpoint's {key} is {state[key]} but this run's "
                                f"is {mine} (different data, seed, micro-batch or number of processes)")
        self.cursor = Cursor(state["epoch"], state["position"])


class TokenLoader:
    """Micro-batches ``(x, y)`` for one rank, on ``device``, from a window set and its sampler."""

    def __init__(self, windows: TokenWindows, micro_batch: int, seed: int, rank: int = 0, world_size: int = 1,
                 device: str | torch.device = "cpu", vocab_size: int | None = None):
        self.windows = windows
        self.sampler = WindowSampler(len(windows), micro_batch, seed, rank, world_size)
        self.device = torch.device(device)
        self.vocab_size = vocab_size

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.windows.batch(self.sampler.next_indices(), self.vocab_size)
        return self.to_device(x), self.to_device(y)

    def to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def state_dict(self) -> dict:
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.sampler.load_state_dict(state)


def eval_indices(n_windows: int, count: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
    """A fixed, evenly spaced set of ``min(count, n_windows)`` windows; rank ``r`` gets every ``world_size``-th."""
    if n_windows <= 0:
        return np.zeros(0, dtype=np.int64)
    chosen = np.unique(np.linspace(0, n_windows - 1, num=min(count, n_windows)).round().astype(np.int64))
    return chosen[rank::world_size]
