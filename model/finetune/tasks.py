"""GPT-1's task-specific input transformations, batches, metrics and the clean/dirty split.

Every task becomes one or more token sequences that start with ``start`` and end with
``extract``, whose final hidden state feeds the linear head (Radford et al. 2018, section
3.3 and Figure 1):

    classification    start text extract
    entailment        start premise delim hypothesis extract
    similarity        start a delim b extract  and  start b delim a extract
                      (both orders, their final states added before the head)
    multiple choice   start context delim answer_k extract, one sequence per candidate,
                      one score each, softmax over the candidates

A sequence longer than ``max_len`` is cut: a single text at its end, the longer of two
texts at its end (one token at a time), a multiple-choice context at its *start* (what
comes last, the question, is kept) and then the answer at its end.

Metrics (computed from predictions, so the same function serves all / clean / dirty):
accuracy, F1 of the positive class (binary tasks), Matthews correlation (binary and
multi-class, Gorodkin's R_K), Pearson and Spearman (regression; ties get average ranks).
The clean/dirty marking is the eval harness's (``model.eval.contamination.mark_benchmarks``):
each evaluation example's text (all its segments and choices) against the pre-training
corpus's 8-grams.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from dedup.benchmark_sets import BenchmarkSet, Example
from model.eval.contamination import mark_benchmarks
from model.finetune.task_files import TaskData, TaskExample

IGNORE = -1  # an LM target that is not scored (padding, the last position)


class TaskError(ValueError):
    """A task that cannot be run as given (labels, lengths, mismatched files): said before training starts."""


@dataclass(frozen=True)
class SpecialTokens:
    start: int
    delim: int
    extract: int


@dataclass
class EncodedExample:
    id: str
    sequences: list[list[int]]  # one per order (similarity) or candidate (multiple choice), else one
    target: float | int  # class index, candidate index, or a number (regression)
    truncated: bool = False


# ----------------------------------------------------------------------------- labels

def label_space(train: TaskData, evals: list[TaskData], labels: list[str] | None = None) -> tuple[str, ...] | None:
    """The class names in index order: ``labels`` when given, else the format's own, else the
    training file's sorted; an evaluation label outside them is an error."""
    if train.task == "multiple_choice" or train.regression:
        return None
    space = tuple(labels) if labels else train.labels or tuple(sorted({str(e.label) for e in train.examples}))
    if len(space) < 2:
        raise TaskError(f"{train.source}: a classification task needs at least two labels, found {list(space)}")
    for data in [train, *evals]:
        unknown = sorted({str(e.label) for e in data.examples} - set(space))
        if unknown:
            raise TaskError(f"{data.source}: unknown label(s) {unknown[:5]} (the task's labels: {list(space)})")
    return space


def target_of(example: TaskExample, space: tuple[str, ...] | None, regression: bool):
    if regression:
        return float(example.label)
    if space is None:  # multiple choice: the index of the right candidate
        return int(example.label)
    return space.index(str(example.label))


# ----------------------------------------------------------------------------- transformations

def _fit_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int], bool]:
    cut = False
    while len(a) + len(b) > budget:
        cut = True
        if len(a) >= len(b):
            a = a[:-1]
        else:
            b = b[:-1]
    return a, b, cut


def transform(task: str, segments: list[list[int]], choices: list[list[int]], special: SpecialTokens,
              max_len: int) -> tuple[list[list[int]], bool]:
    """The token sequences of one example (see the module docstring) and whether any was cut."""
    s, d, e = special.start, special.delim, special.extract
    if task == "classification":
        budget = max_len - 2
        text = segments[0][:budget]
        return [[s, *text, e]], len(text) < len(segments[0])
    if task in ("entailment", "similarity"):
        a, b, cut = _fit_pair(segments[0], segments[1], max_len - 3)
        if task == "entailment":
            return [[s, *a, d, *b, e]], cut
        return [[s, *a, d, *b, e], [s, *b, d, *a, e]], cut
    if task == "multiple_choice":
        sequences, cut = [], False
        for answer in choices:
            budget = max_len - 3
            answer_part = answer[:max(1, budget // 2)] if len(answer) + 1 > budget else answer
            context = segments[0][max(0, len(segments[0]) - (budget - len(answer_part))):]
            cut = cut or len(context) < len(segments[0]) or len(answer_part) < len(answer)
            sequences.append([s, *context, d, *answer_part, e])
        return sequences, cut
    raise TaskError(f"unknown task type {task!r}")


def encode_task(data: TaskData, tokenizer, special: SpecialTokens, max_len: int,
                space: tuple[str, ...] | None) -> list[EncodedExample]:
    """Tokenize every example (one batched call per role) and apply the task's transformation."""
    if max_len < 7:
        raise TaskError(f"max_len {max_len} leaves no room for the start, delimiter and extract tokens and the text")
    examples = data.examples
    width = max(len(e.segments) for e in examples) if examples else 0
    seg_ids = [tokenizer.encode_batch([e.segments[i] for e in examples]) for i in range(width)]
    flat_choices = [c for e in examples for c in e.choices]
    choice_ids = tokenizer.encode_batch(flat_choices) if flat_choices else []
    out, offset = [], 0
    for n, example in enumerate(examples):
        k = len(example.choices)
        choices = choice_ids[offset:offset + k]
        offset += k
        sequences, cut = transform(data.task, [seg_ids[i][n] for i in range(len(example.segments))], choices, special,
                                   max_len)
        out.append(EncodedExample(example.id, sequences, target_of(example, space, data.regression), cut))
    return out


# ----------------------------------------------------------------------------- batches

@dataclass
class Batch:
    idx: torch.Tensor  # [B, K, T] token ids, padded with ``pad_id`` on the right
    extract: torch.Tensor  # [B, K] position of the extract token in each sequence
    lm_targets: torch.Tensor  # [B, K, T] next token, IGNORE past the extract token
    choice_mask: torch.Tensor  # [B, K] False for a missing candidate (fewer choices than the batch's most)
    targets: torch.Tensor  # [B] long (class / candidate) or float (regression)

    def to(self, device) -> Batch:
        return Batch(*(t.to(device) for t in (self.idx, self.extract, self.lm_targets, self.choice_mask, self.targets)))


def collate(examples: list[EncodedExample], pad_id: int, regression: bool = False) -> Batch:
    """One batch: every sequence padded to the longest; padding sits after the extract token,
    so under causal attention it changes no state the head or the LM loss reads."""
    k = max(len(e.sequences) for e in examples)
    t = max(len(s) for e in examples for s in e.sequences)
    idx = torch.full((len(examples), k, t), pad_id, dtype=torch.long)
    lm = torch.full((len(examples), k, t), IGNORE, dtype=torch.long)
    extract = torch.zeros((len(examples), k), dtype=torch.long)
    mask = torch.zeros((len(examples), k), dtype=torch.bool)
    for b, example in enumerate(examples):
        for j, seq in enumerate(example.sequences):
            row = torch.tensor(seq, dtype=torch.long)
            idx[b, j, :len(seq)] = row
            lm[b, j, :len(seq) - 1] = row[1:]
            extract[b, j] = len(seq) - 1
            mask[b, j] = True
    targets = torch.tensor([e.target for e in examples], dtype=torch.float32 if regression else torch.long)
    return Batch(idx, extract, lm, mask, targets)


# ----------------------------------------------------------------------------- metrics

def accuracy(pred, gold) -> float:
    pred, gold = np.asarray(pred), np.asarray(gold)
    return float((pred == gold).mean()) if len(gold) else math.nan


def f1_score(pred, gold, positive: int = 1) -> float:
    """F1 of the ``positive`` class (GLUE's MRPC/QQP F1); NaN when it is neither predicted nor present."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    tp = int(((pred == positive) & (gold == positive)).sum())
    fp = int(((pred == positive) & (gold != positive)).sum())
    fn = int(((pred != positive) & (gold == positive)).sum())
    if tp + fp + fn == 0:
        return math.nan
    return 2 * tp / (2 * tp + fp + fn)


def matthews(pred, gold) -> float:
    """Matthews correlation (Gorodkin 2004's R_K for K classes; the usual MCC for two); 0 when undefined."""
    pred, gold = np.asarray(pred), np.asarray(gold)
    if not len(gold):
        return math.nan
    classes = np.union1d(pred, gold)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (np.searchsorted(classes, gold), np.searchsorted(classes, pred)), 1)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    n, c = confusion.sum(), np.trace(confusion)
    denominator = math.sqrt((n * n - float(p @ p)) * (n * n - float(t @ t)))
    return float((c * n - float(t @ p)) / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return math.nan
    x, y = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float(x @ x) * float(y @ y))
    return float(x @ y) / denominator if denominator else math.nan


def average_ranks(x) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sorted_x = x[order]
    start = 0
    for end in range(1, len(x) + 1):
        if end == len(x) or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return ranks


def spearman(x, y) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def metric_names(task: str, regression: bool, classes: int) -> list[str]:
    """The metrics a task reports, its headline metric first (GPT-1 Tables 2-4)."""
    if regression:
        return ["pearson", "spearman"]
    if task == "multiple_choice":
        return ["accuracy"]
    if classes > 2:
        return ["accuracy", "matthews"]
    return ["accuracy", "f1", "matthews"]


def compute_metrics(names: list[str], predictions, targets) -> dict[str, float]:
    functions = {"accuracy": accuracy, "f1": f1_score, "matthews": matthews, "pearson": pearson, "spearman": spearman}
    return {name: functions[name](predictions, targets) for name in names}


def split_metrics(names: list[str], predictions, targets, dirty: list[bool] | None) -> dict[str, dict]:
    """``{"all": {metric: value, "n": count}, "clean": ..., "dirty": ...}`` (without marks, only all)."""
    predictions, targets = np.asarray(predictions), np.asarray(targets)
    subsets = {"all": np.ones(len(targets), dtype=bool)}
    if dirty is not None:
        flags = np.asarray(dirty, dtype=bool)
        subsets.update(clean=~flags, dirty=flags)
    out = {}
    for subset, keep in subsets.items():
        values = compute_metrics(names, predictions[keep], targets[keep]) if keep.any() else {n: math.nan for n in names}
        out[subset] = {**values, "n": int(keep.sum())}
    return out


# ----------------------------------------------------------------------------- contamination

def mark_task(data: TaskData, training, *, name: str = "task", n: int = 8, threshold: float = 0.0,
              progress: bool = False):
    """Each example of ``data`` marked clean or dirty against the pre-training corpus ``training``
    (a Bloom filter file or folder, an audit folder, or shards) by the eval harness's rule:
    ``(dirty flags in example order, the ContaminationMarks)``."""
    ids = [e.id for e in data.examples]
    if len(set(ids)) != len(ids):  # the marks are keyed by id: make them unique by position
        ids = [f"{i}:{e.id}" for i, e in enumerate(data.examples)]
    bench = BenchmarkSet(name, "eval", [Example(i, e.text()) for i, e in zip(ids, data.examples, strict=True)], data.source)
    marks = mark_benchmarks([bench], training, n=n, threshold=threshold, progress=progress)[name]
    by_id = marks.by_id()
    return [bool(by_id[i].dirty) for i in ids], marks
