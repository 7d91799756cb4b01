"""Zero-shot scoring of a GPT on the GPT-2 paper's benchmarks, one score per benchmark example.

``ScoringModel`` wraps a model and its tokenizer and turns token ids into per-token NLLs
(nats). ``evaluate_benchmark`` dispatches a ``dedup.benchmark_sets.BenchmarkSet`` to its
protocol and returns ``BenchmarkScores``: one ``model.eval.metrics.ExampleScore`` per example,
so that any metric can be computed on all / clean / dirty examples with
``model.eval.metrics.compute_metric``.

Protocols (GPT-2 paper section 3, Radford et al. 2019):

- language modelling (WikiText-2/-103, PTB, 1BW, enwik8, text8, any text or jsonl file):
  the whole detokenized text is scored once, preceded by the end-of-text token, with
  overlapping windows: the first window scores its ``context`` tokens, each later window
  moves ``stride`` tokens and scores only its last ``stride`` (new) tokens, so every
  token is scored exactly once, with at least ``context - stride + 1`` tokens of context
  after the first window (``stride == context``: disjoint windows, lm-evaluation-harness's
  ``loglikelihood_rolling``). Each token's NLL goes to the example its first character
  falls in (tokens before the first example go to the first), so sums over all examples
  are the whole-text numbers; words / bytes / characters are counted on the ORIGINAL
  text of each example's slice of the file (word perplexity as the paper: total NLL over
  the original word count).
- LAMBADA: the last word (with its leading space) is scored given the passage.
  ``acc:last_token`` -- the model's top token for the final BPE token is right (the
  protocol OpenAI reported); ``acc:whole_word`` -- every token of the word is the greedy
  choice given the tokens before it (lm-evaluation-harness ``lambada_openai``);
  ``acc:stopword`` -- as whole_word, with the first token chosen among tokens that are
  not a stop word and hold a letter or digit (the paper's stop-word filter, section 3.3);
  ``lastword_ppl`` -- exp of the mean per-example NLL of the last word.
- CBT: each of the 10 candidates fills the blank of the query; the candidate with the
  highest log-probability of itself plus the rest of the query, given the 20 context
  sentences and the query up to the blank, is the answer (section 3.2).
- WSC: partial scoring (Trinh & Le 2018; section 3.4): each candidate replaces the
  pronoun; the candidate under which the text after the pronoun is most likely is the answer.

Continuations (LAMBADA, CBT, WSC) follow their context directly, with no end-of-text token
in front unless the context is empty (lm-evaluation-harness's ``loglikelihood``); a context
longer than the model's is cut from the left.

Models: ``model.gpt.GPT`` (scored from ``hidden_states`` + ``output_weight``, so the output
projection runs on the scored positions only), Hugging Face ``GPT2LMHeadModel``
(``transformer`` + ``lm_head``), or any module whose ``forward(idx)`` returns logits or
``(logits, ...)``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from dedup.benchmark_sets import CBT_BLANK, GENERATIVE_KINDS, BenchmarkSet, Example
from model.checkpoint import load_model, tokenizer_folder
from model.eval import detokenize as detok
from model.eval.generative import most_confident, score_generative
from model.eval.metrics import ExampleScore, compute_metric
from model.gpt import GPT
from model.tokenizer import BPETokenizer

LOGIT_CHUNK = 1024  # scored positions per output-projection + log-softmax chunk (bounds fp32 logits memory)

# GPT-2 paper, Table 3 (Radford et al. 2019): zero-shot results of the four released sizes.
# Accuracies in percent; LAMBADA accuracy is the stop-word-filtered number (section 3.3).
TABLE3: dict[str, dict[str, float]] = {
    "117M": {"lambada_ppl": 35.13, "lambada_acc": 45.99, "cbt-cn": 87.65, "cbt-ne": 83.4, "wikitext2": 29.41,
             "ptb": 65.85, "enwik8": 1.16, "text8": 1.17, "wikitext103": 37.50, "1bw": 75.20},
    "345M": {"lambada_ppl": 15.60, "lambada_acc": 55.48, "cbt-cn": 92.35, "cbt-ne": 87.1, "wikitext2": 22.76,
             "ptb": 47.33, "enwik8": 1.01, "text8": 1.06, "wikitext103": 26.37, "1bw": 55.72},
    "762M": {"lambada_ppl": 10.87, "lambada_acc": 60.12, "cbt-cn": 93.45, "cbt-ne": 88.0, "wikitext2": 19.93,
             "ptb": 40.31, "enwik8": 0.97, "text8": 1.02, "wikitext103": 22.05, "1bw": 44.575},
    "1542M": {"lambada_ppl": 8.63, "lambada_acc": 63.24, "cbt-cn": 93.30, "cbt-ne": 89.05, "wikitext2": 18.34,
              "ptb": 35.76, "enwik8": 0.93, "text8": 0.98, "wikitext103": 17.48, "1bw": 42.16},
}
# Table 3 column -> (benchmark name, our metric, factor from our value to the table's unit)
TABLE3_COLUMNS: dict[str, tuple[str, str, float]] = {
    "lambada_ppl": ("lambada", "lastword_ppl", 1.0),
    "lambada_acc": ("lambada", "acc:stopword", 100.0),
    "cbt-cn": ("cbt-cn", "acc:candidates", 100.0),
    "cbt-ne": ("cbt-ne", "acc:candidates", 100.0),
    "wikitext2": ("wikitext2", "word_ppl", 1.0),
    "ptb": ("ptb", "word_ppl", 1.0),
    "enwik8": ("enwik8", "bpb", 1.0),
    "text8": ("text8", "bpc", 1.0),
    "wikitext103": ("wikitext103", "word_ppl", 1.0),
    "1bw": ("1bw", "word_ppl", 1.0),
}

# NLTK's English stop-word list (nltk_data corpora/stopwords/english, 179 words): the GPT-2
# paper names no list for its LAMBADA stop-word filter; this is the common one.
STOPWORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his
himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this
that that'll these those am is are was were be been being have has had having do does did doing a an the and but
if or because as until while of at by for with about against between into through during before after above
below to from up down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will just don don't
should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn
wasn't weren weren't won won't wouldn wouldn't
""".split())

# lm-evaluation-harness wsc273: possessive pronouns take the candidate plus "'s"
WSC_POSSESSIVE = frozenset({"my", "his", "her", "our", "their", "its"})
# ... and a capitalised determiner/pronoun opening a candidate is lower-cased mid-sentence
WSC_UPPER_WORDS = frozenset({"A", "An", "The", "She", "He", "It", "They", "My", "His", "Her", "Their"})

LM_METRICS = ["word_ppl", "token_ppl", "bpb", "bpc"]
LAMBADA_METRICS = ["lastword_ppl", "acc:last_token", "acc:whole_word", "acc:stopword"]


# ----------------------------------------------------------------------------- scoring core

@dataclass
class _Request:
    """Score ``targets`` at input positions ``first..len(inputs)-1``: ``targets[k]`` follows ``inputs[first + k]``."""
    inputs: Sequence[int]  # a list or a numpy view
    first: int
    targets: Sequence[int]


@dataclass
class _Result:
    nll: np.ndarray  # per scored position, nats
    argmax: np.ndarray | None = None  # the model's top token at each scored position
    filtered_argmax: np.ndarray | None = None  # top token among the allowed ones (stop-word filter)


class ScoringModel:
    """A model and its tokenizer, ready to score token sequences (eval mode, no gradients).

    ``context_length`` defaults to the model's (``config.block_size`` or HF ``n_positions``)
    and may not exceed it. ``batch_size`` windows / sequences go through the model at once.
    ``dtype`` (e.g. ``torch.bfloat16``) runs the model under autocast; log-softmax is fp32.
    """

    def __init__(self, model: torch.nn.Module, tokenizer, *, device="cpu", context_length: int | None = None,
                 batch_size: int = 8, dtype: torch.dtype | None = None):
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.eot_id = int(tokenizer.eot_id)
        limit = _model_context(model)
        if context_length is None:
            if limit is None:
                raise ValueError("the model states no context length (config.block_size / n_positions): "
                                 "pass context_length")
            context_length = limit
        if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length < 1:
            raise ValueError(f"context_length must be a positive integer, got {context_length!r}")
        if limit is not None and context_length > limit:
            raise ValueError(f"context_length {context_length} exceeds the model's context of {limit} tokens")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.context_length = context_length
        self.batch_size = batch_size
        self.dtype = dtype
        self._stopword_mask: torch.Tensor | None = None
        if hasattr(model, "hidden_states") and hasattr(model, "output_weight"):
            self._mode = "gpt"
        elif hasattr(model, "transformer") and hasattr(model, "lm_head"):
            self._mode = "hf"
        else:
            self._mode = "logits"

    # -- construction from a path

    @classmethod
    def load(cls, path: str, *, device="cpu", **kwargs) -> ScoringModel:
        """Our run folder / checkpoint file, or a Hugging Face GPT-2 folder, with its tokenizer."""

        folder = tokenizer_folder(path)
        if folder is None:
            raise FileNotFoundError(f"no tokenizer files (vocab.json + merges.txt, or encoder.json + vocab.bpe) "
                                    f"found with the model at {path}")
        model = load_model(path, device)
        return cls(model, BPETokenizer.load(folder), device=device, **kwargs)

    # -- the forward pass

    def _output_projection(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self._mode == "gpt":
            return self.model.output_weight, None
        head = self.model.lm_head
        return head.weight, getattr(head, "bias", None)

    def _scored_logits(self, idx: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor):
        """Yield fp32 logits ``[n, vocab]`` for the positions ``(rows, cols)`` of ``idx``, in chunks."""
        if self._mode == "logits":
            out = self.model(idx)
            logits = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
            picked = logits[rows, cols]
            for start in range(0, len(rows), LOGIT_CHUNK):
                yield picked[start:start + LOGIT_CHUNK].float()
            return
        if self._mode == "gpt":
            hidden = self.model.hidden_states(idx)
        else:
            hidden = self.model.transformer(input_ids=idx).last_hidden_state
        weight, bias = self._output_projection()
        selected = hidden[rows, cols]
        for start in range(0, len(rows), LOGIT_CHUNK):
            logits = torch.nn.functional.linear(selected[start:start + LOGIT_CHUNK], weight, bias)
            yield logits.float()

    def _run(self, requests: Sequence[_Request], *, argmax: bool = False, filtered: bool = False,
             progress: bool = False, desc: str = "scoring") -> list[_Result]:
        """NLLs (and greedy choices) of every request's targets; batches sorted by length."""
        results: list[_Result | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].inputs))
        mask = self.stopword_mask() if filtered else None
        batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        autocast = (torch.autocast(self.device.type, dtype=self.dtype)
                    if self.dtype is not None and self.dtype != torch.float32 else None)
        with torch.inference_mode():
            for batch in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                width = max(len(requests[i].inputs) for i in batch)
                if width > self.context_length:
                    raise ValueError(f"a scoring window of {width} tokens exceeds the context of "
                                     f"{self.context_length}")
                idx = torch.zeros((len(batch), width), dtype=torch.long)  # right padding: causal, never seen
                rows, cols, tgts = [], [], []
                for r, i in enumerate(batch):
                    req = requests[i]
                    idx[r, :len(req.inputs)] = torch.from_numpy(np.asarray(req.inputs, dtype=np.int64))
                    count = len(req.targets)
                    rows.append(np.full(count, r))
                    cols.append(np.arange(req.first, req.first + count))
                    tgts.append(np.asarray(req.targets, dtype=np.int64))
                idx = idx.to(self.device)
                rows_t = torch.from_numpy(np.concatenate(rows)).to(self.device)
                cols_t = torch.from_numpy(np.concatenate(cols)).to(self.device)
                targets = torch.from_numpy(np.concatenate(tgts)).to(self.device)
                nlls, tops, ftops = [], [], []
                if autocast is not None:
                    autocast.__enter__()
                try:
                    start = 0
                    for logits in self._scored_logits(idx, rows_t, cols_t):
                        chunk_targets = targets[start:start + len(logits)]
                        start += len(logits)
                        lse = torch.logsumexp(logits, dim=-1)
                        nlls.append(lse - logits.gather(1, chunk_targets.unsqueeze(1)).squeeze(1))
                        if argmax:
                            tops.append(logits.argmax(dim=-1))
                        if mask is not None:
                            tops_f = logits.masked_fill(~mask[:logits.shape[-1]], float("-inf")).argmax(dim=-1)
                            ftops.append(tops_f)
                finally:
                    if autocast is not None:
                        autocast.__exit__(None, None, None)
                nll = torch.cat(nlls).double().cpu().numpy()
                top = torch.cat(tops).cpu().numpy() if argmax else None
                ftop = torch.cat(ftops).cpu().numpy() if mask is not None else None
                offset = 0
                for i in batch:
                    count = len(requests[i].targets)
                    sl = slice(offset, offset + count)
                    results[i] = _Result(nll[sl], None if top is None else top[sl], None if ftop is None else ftop[sl])
                    offset += count
        return results  # type: ignore[return-value]

    # -- rolling windows over long sequences

    def windows(self, n_tokens: int, stride: int | None = None) -> list[tuple[int, int, int]]:
        """``(start, end, first)`` windows over ``[EOT] + ids`` (``n_tokens`` ids): the input is
        ``seq[start:end]``, it predicts ``ids[start:end]``, and scores ``ids[first:end]``."""
        C = self.context_length
        S = self.default_stride() if stride is None else stride
        if isinstance(S, bool) or not isinstance(S, int) or not 1 <= S <= C:
            raise ValueError(f"stride must be an integer in 1..{C} (the context length), got {stride!r}")
        if n_tokens <= 0:
            return []
        end = min(C, n_tokens)
        out = [(0, end, 0)]
        while end < n_tokens:
            done, end = end, min(end + S, n_tokens)
            out.append((max(0, end - C), end, done))
        return out

    def default_stride(self) -> int:
        """Half the context: every token after the first window sees at least ``C/2 + 1`` tokens."""
        return max(1, self.context_length // 2)

    def token_nlls_many(self, sequences: Sequence[Sequence[int]], *, stride: int | None = None,
                        progress: bool = False, desc: str = "scoring") -> list[np.ndarray]:
        """``token_nlls`` of several sequences, their windows batched together."""
        requests, owners = [], []
        for number, ids in enumerate(sequences):
            seq = np.concatenate(([self.eot_id], np.asarray(ids, dtype=np.int64)))  # windows are views of it
            for start, end, first in self.windows(len(seq) - 1, stride):
                requests.append(_Request(seq[start:end], first - start, seq[first + 1:end + 1]))
                owners.append(number)
        results = self._run(requests, progress=progress, desc=desc)
        parts: list[list[np.ndarray]] = [[] for _ in sequences]
        for owner, result in zip(owners, results, strict=True):
            parts[owner].append(result.nll)
        return [np.concatenate(p) if p else np.zeros(0, dtype=np.float64) for p in parts]

    def token_nlls(self, ids: list[int], *, stride: int | None = None, progress: bool = False,
                   desc: str = "scoring") -> np.ndarray:
        """NLL in nats of every token of ``ids`` given the ones before it (the first given the
        end-of-text token), scored with overlapping windows of ``context_length`` tokens moved
        by ``stride`` (default half the context; ``stride == context_length``: disjoint)."""
        return self.token_nlls_many([ids], stride=stride, progress=progress, desc=desc)[0]

    # -- continuations (LAMBADA, CBT, WSC)

    def continuation_request(self, context_ids: Sequence[int], continuation_ids: Sequence[int]) -> _Request:
        """Score ``continuation_ids`` after ``context_ids`` (EOT first when the context is empty);
        the context is cut from the left to fit the model's context length."""
        cont = list(map(int, continuation_ids))
        if not cont:
            raise ValueError("empty continuation: nothing to score")
        if len(cont) > self.context_length:
            raise ValueError(f"continuation of {len(cont)} tokens is longer than the context "
                             f"({self.context_length} tokens)")
        ctx = list(map(int, context_ids)) or [self.eot_id]
        inputs = (ctx + cont)[:-1][-self.context_length:]
        return _Request(inputs, len(inputs) - len(cont), cont)

    def stopword_mask(self) -> torch.Tensor:
        """``[vocab]`` bool: tokens allowed as the first token of LAMBADA's filtered guess
        (some letter or digit, and not a stop word once stripped and lower-cased)."""
        if self._stopword_mask is None:
            vocab = _vocab_size(self.model, self.tokenizer)
            allowed = np.zeros(vocab, dtype=bool)
            for token in range(vocab):
                try:
                    piece = self.tokenizer.decode([token]).strip()
                except Exception:  # ids the tokenizer does not know (padding rows): never allowed
                    continue
                allowed[token] = any(c.isalnum() for c in piece) and piece.lower() not in STOPWORDS
            self._stopword_mask = torch.from_numpy(allowed).to(self.device)
        return self._stopword_mask


def _model_context(model) -> int | None:
    config = getattr(model, "config", None)
    for name in ("block_size", "n_positions", "max_position_embeddings"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _vocab_size(model, tokenizer) -> int:
    value = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(value, int) and value > 0:
        return value
    return int(tokenizer.vocab_size)


# ----------------------------------------------------------------------------- results

@dataclass
class BenchmarkScores:
    name: str
    kind: str  # "lm", "lambada", "cbt", "wsc"
    split: str
    metrics: list[str]  # what to report, primary first
    examples: list[ExampleScore]  # one per benchmark example, same ids as the BenchmarkSet
    meta: dict = field(default_factory=dict)  # context, stride, detokenizer, tokens scored, seconds

    def metric(self, name: str) -> float:
        return compute_metric(self.examples, name)

    def summary(self) -> dict[str, float]:
        return {m: self.metric(m) for m in self.metrics}


def benchmark_kind(bench: BenchmarkSet) -> str:
    """Which protocol scores ``bench``: ``lambada``, ``cbt``, ``wsc``, ``lm``, or a generative
    task (``coqa``, ``cnn_dm``, ``wmt14``, ``nq``: ``model.eval.generative``)."""
    if bench.meta.get("task") in GENERATIVE_KINDS:
        return bench.meta["task"]
    name = bench.name.lower()
    first = bench.examples[0].meta if bench.examples else {}
    if name.startswith("lambada") or ("context" in first and "target" in first):
        return "lambada"
    if name.startswith("cbt") or bench.meta.get("unit") == "cbt-example":
        return "cbt"
    if name.startswith("wsc") or bench.meta.get("unit") == "schema":
        return "wsc"
    return "lm"


def lm_metrics(name: str) -> list[str]:
    name = name.lower()
    if name.startswith("enwik8"):
        return ["bpb", "bpc", "token_ppl"]
    if name.startswith("text8"):
        return ["bpc", "bpb", "token_ppl"]
    return list(LM_METRICS)


def evaluate_benchmark(scoring_model: ScoringModel, bench: BenchmarkSet, *, stride: int | None = None,
                       detokenize: bool | Callable[[str], str] = True, limit: int | None = None,
                       progress: bool = True, documents: bool = False, seed: int = 0,
                       example_pairs: Sequence[tuple[str, str]] | None = None,
                       new_tokens: dict | None = None) -> BenchmarkScores:
    """Score ``bench`` with the protocol its name / meta call for (see the module docstring).

    ``detokenize``: ``True`` undoes the benchmark's tokenization before scoring with
    ``model.eval.detokenize`` (the kind ``detokenizer_for(bench.name)``); ``False`` scores the text
    as written; a function ``str -> str`` is used instead (it must keep the line count when
    a whole file is scored). Words are always counted on the original text, with the
    benchmark's own convention (``count_words(text, detokenizer_for(bench.name))``).
    ``limit``: only the first ``limit`` examples. ``documents`` (language-modelling sets):
    score each example on its own from the end-of-text token, as lm-evaluation-harness does
    with WikiText documents, instead of the whole text; sets without ``full_text`` are
    always scored this way. Generative tasks (``model.eval.generative``) need our ``GPT``; ``seed``
    seeds their sampling and example-pair draws, ``example_pairs`` replaces the drawn pairs.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    if not bench.examples:
        raise ValueError(f"benchmark {bench.name} ({bench.source}) has no examples")
    if stride is not None:
        scoring_model.windows(1, stride)  # validates the stride before any work
    kind = benchmark_kind(bench)
    detok = _Detokenizer.resolve(bench.name, detokenize)
    examples = bench.examples[:limit] if limit else bench.examples
    started = time.perf_counter()
    meta = {"context": scoring_model.context_length, "detokenizer": detok.name, "examples": len(examples),
            "model_batch_size": scoring_model.batch_size}
    if kind in GENERATIVE_KINDS:
        if not isinstance(scoring_model.model, GPT):
            raise ValueError(f"{bench.name}: generation needs a corpusforge GPT (a run folder, checkpoint or Hugging Face "
                             f"GPT-2 folder loaded by corpusforge), not {type(scoring_model.model).__name__}")
        bar = tqdm(total=len(examples), desc=bench.name, disable=not progress, leave=False)
        scores, metrics, extra = score_generative(scoring_model.model, scoring_model.tokenizer, bench, examples,
                                                  batch_size=scoring_model.batch_size, seed=seed, pairs=example_pairs,
                                                  progress=bar.update, new_tokens=new_tokens)
        bar.close()
        if kind == "nq":
            extra["most_confident"] = most_confident(scores, examples)
    elif kind == "lm":
        scores, extra = _score_lm(scoring_model, bench, examples, stride, detok, progress, documents)
        metrics = lm_metrics(bench.name)
    elif kind == "lambada":
        scores, extra = _score_lambada(scoring_model, bench, examples, detok, progress)
        metrics = list(LAMBADA_METRICS)
    elif kind == "cbt":
        scores, extra = _score_cbt(scoring_model, bench, examples, detok, progress)
        metrics = ["acc:candidates"]
    else:
        scores, extra = _score_wsc(scoring_model, bench, examples, progress)
        metrics = ["acc:partial"]
    meta.update(extra)
    meta["seconds"] = round(time.perf_counter() - started, 3)
    return BenchmarkScores(bench.name, kind, bench.split, metrics, scores, meta)


@dataclass
class _Detokenizer:
    """How a benchmark's text is turned into what the model scores, and how its words are counted."""
    name: str  # the detokenizer kind, or the function's name
    text: Callable[[str], str]  # whole text (line-preserving)
    line: Callable[[str], str]  # one line
    count_kind: str  # the benchmark's word-count convention (count_words kind)

    @classmethod
    def resolve(cls, bench_name: str, detokenize) -> _Detokenizer:
        count_kind = detok.detokenizer_for(bench_name)
        if callable(detokenize):
            return cls(getattr(detokenize, "__name__", "custom"), detokenize, detokenize, count_kind)
        if not detokenize or count_kind == "none":
            return cls("none", _identity, _identity, count_kind)
        # The model reads "\n" line ends, as in its training text, whatever the file's (WikiText ships with CRLF).
        return cls(count_kind, lambda t: detok.detokenize(t, count_kind, newline="\n"),
                   lambda t: detok.detokenize_line(t, count_kind), count_kind)

    def counts(self, original: str) -> tuple[int, int, int]:
        """(words, bytes, characters) of original text."""
        return detok.count_words(original, self.count_kind), detok.count_bytes(original), detok.count_chars(original)


def _identity(text: str) -> str:
    return text


# ----------------------------------------------------------------------------- language modelling

def _line_starts(text: str) -> np.ndarray:
    """Character offset of every line's start (a final newline opens one more, empty, line)."""
    return np.array([0] + [m.end() for m in re.finditer("\n", text)], dtype=np.int64)


def example_offsets(bench: BenchmarkSet, examples: Sequence[Example] | None = None) -> tuple[np.ndarray, bool]:
    """Start offset of each example in ``bench.full_text`` and whether the offsets are line
    numbers (``True``) or character offsets (``False``).

    Uses ``meta["line"]`` (line files, WikiText articles, paragraphs of text files),
    ``meta["offset"]`` (enwik8), ``meta["first_word"]`` (text8), else finds each example's
    first line in order among the file's stripped lines (WikiText paragraphs).
    """
    text = bench.full_text
    if text is None:
        raise ValueError(f"benchmark {bench.name} has no full text")
    examples = list(bench.examples if examples is None else examples)
    metas = [e.meta for e in examples]
    if all("line" in m for m in metas):
        return np.array([m["line"] for m in metas], dtype=np.int64), True
    if all("offset" in m for m in metas):
        return np.array([m["offset"] for m in metas], dtype=np.int64), False
    if all("first_word" in m for m in metas):
        word_starts = [m.start() for m in re.finditer(r"\S+", text)]
        return np.array([word_starts[m["first_word"]] for m in metas], dtype=np.int64), False
    stripped = [line.strip() for line in text.split("\n")]
    lines, position = [], 0
    for example in examples:
        first = example.text.split("\n", 1)[0].strip()
        while position < len(stripped) and stripped[position] != first:
            position += 1
        if position == len(stripped):
            raise ValueError(f"example {example.id} of {bench.name}: its first line was not found in the "
                             f"file's text (in order after the previous example)")
        lines.append(position)
        position += 1
    return np.array(lines, dtype=np.int64), True


def example_slices(bench: BenchmarkSet, examples: Sequence[Example]) -> tuple[str, np.ndarray, np.ndarray, bool]:
    """``(text, starts, offsets, by_line)``: ``bench.full_text`` cut after the last of ``examples``
    (the first ``len(examples)`` of the set), each example's start character in it (the first
    example's slice also takes any text before it), and ``example_offsets``'s offsets."""
    original = bench.full_text
    limited = len(examples) < len(bench.examples)
    # offsets of the examples, plus the next one's start when the text is cut by ``limit``
    offsets, by_line = example_offsets(bench, bench.examples[:len(examples) + 1] if limited else examples)
    if np.any(np.diff(offsets) < 0):
        raise ValueError(f"examples of {bench.name} are not in file order")
    starts = _line_starts(original)[offsets] if by_line else offsets
    if limited:
        original = original[:int(starts[-1])]
        offsets, starts = offsets[:-1], starts[:-1]
    starts = starts.copy()
    starts[0] = 0
    return original, starts, offsets, by_line


def _score_lm(sm: ScoringModel, bench: BenchmarkSet, examples: list[Example], stride, detok: _Detokenizer,
              progress: bool, documents: bool):
    stride_used = sm.default_stride() if stride is None else stride
    whole = bench.full_text is not None and not documents
    meta = {"stride": stride_used, "protocol": "whole_text" if whole else "documents"}
    if bench.full_text is None:
        originals = [e.text for e in examples]
    else:
        original, starts, offsets, by_line = example_slices(bench, examples)
        ends = [*map(int, starts[1:]), len(original)]
        originals = [original[a:b] for a, b in zip(map(int, starts), ends, strict=True)]
    if not whole:  # each example on its own, from the end-of-text token
        encoded = [sm.tokenizer.encode(detok.text(o)) for o in originals]
        nlls = sm.token_nlls_many(encoded, stride=stride, progress=progress, desc=f"{bench.name} windows")
        scores = [ExampleScore(e.id, math.fsum(nll), len(nll), *detok.counts(o))
                  for e, nll, o in zip(examples, nlls, originals, strict=True)]
        meta["tokens_scored"] = int(sum(len(n) for n in nlls))
        meta["total_nll"] = math.fsum(math.fsum(n) for n in nlls)
        return scores, meta

    text = detok.text(original)
    if text == original:
        bounds = starts
    elif by_line:
        detok_lines = _line_starts(text)
        if len(detok_lines) != len(_line_starts(original)):
            raise ValueError(f"detokenizer {detok.name!r} changed the line count of {bench.name} "
                             f"({len(_line_starts(original))} -> {len(detok_lines)}): cannot place examples")
        bounds = detok_lines[offsets]
    else:
        raise ValueError(f"detokenizer {detok.name!r} changed {bench.name}, whose examples are character "
                         f"chunks: pass detokenize=False")
    ids, token_starts = sm.tokenizer.encode_with_offsets(text)
    nll = sm.token_nlls(ids, stride=stride, progress=progress, desc=f"{bench.name} windows")
    # each token goes to the example its first character falls in; tokens before the first example to it
    owner = np.searchsorted(bounds, np.asarray(token_starts, dtype=np.int64), side="right") - 1
    owner = np.clip(owner, 0, len(examples) - 1)
    nll_sum = np.bincount(owner, weights=nll, minlength=len(examples))
    token_count = np.bincount(owner, minlength=len(examples))
    scores = [ExampleScore(e.id, float(nll_sum[k]), int(token_count[k]), *detok.counts(originals[k]))
              for k, e in enumerate(examples)]
    meta["tokens_scored"] = int(len(ids))
    meta["total_nll"] = math.fsum(nll)
    if "bytes" in bench.meta:  # enwik8/text8: the split's raw bytes (the text is UTF-8 decoded with errors replaced)
        meta["file_bytes"] = bench.meta["bytes"]
    return scores, meta


# ----------------------------------------------------------------------------- LAMBADA

_LAST_WORD = re.compile(r"\S+\s*\Z")


def split_last_word(text: str) -> tuple[str, str]:
    """``(context, continuation)``: the continuation is the last word with the whitespace before it."""
    text = text.rstrip()
    match = _LAST_WORD.search(text)
    if not match:
        raise ValueError("a LAMBADA passage needs at least one word")
    head = text[:match.start()]
    context = head.rstrip()
    return context, text[len(context):]


def _score_lambada(sm: ScoringModel, bench: BenchmarkSet, examples: list[Example], detok: _Detokenizer, progress: bool):
    requests, pieces = [], []
    for example in examples:
        text = detok.line(example.text)
        context, continuation = split_last_word(text)
        ctx_ids = sm.tokenizer.encode(context) if context else []
        cont_ids = sm.tokenizer.encode(continuation)
        requests.append(sm.continuation_request(ctx_ids, cont_ids))
        pieces.append((continuation.strip(), cont_ids))
    results = sm._run(requests, argmax=True, filtered=True, progress=progress, desc=f"{bench.name}")
    scores = []
    for example, (target, cont_ids), result in zip(examples, pieces, results, strict=True):
        greedy = result.argmax.tolist()
        whole = greedy == cont_ids
        filtered = [int(result.filtered_argmax[0]), *greedy[1:]] == cont_ids
        original_target = example.meta.get("target", target)
        scores.append(ExampleScore(
            example.id, math.fsum(result.nll), len(cont_ids), 1, len(original_target.encode("utf-8")),
            len(original_target),
            {"last_token": greedy[-1] == cont_ids[-1], "whole_word": whole, "stopword": filtered},
            {"target": target, "greedy": sm.tokenizer.decode(greedy).strip(),
             "filtered_first": sm.tokenizer.decode([int(result.filtered_argmax[0])]).strip()}))
    return scores, {"tokens_scored": int(sum(len(c) for _, c in pieces)), "stopwords": len(STOPWORDS)}


# ----------------------------------------------------------------------------- choices (CBT, WSC)

def _choose(sm: ScoringModel, groups: list[tuple[list[int], list[list[int]]]], progress: bool, desc: str):
    """For each ``(context_ids, [continuation_ids, ...])``: the summed NLL of every continuation."""
    requests, owners = [], []
    for number, (ctx_ids, conts) in enumerate(groups):
        for cont in conts:
            requests.append(sm.continuation_request(ctx_ids, cont))
            owners.append(number)
    results = sm._run(requests, progress=progress, desc=desc)
    nlls: list[list[float]] = [[] for _ in groups]
    for owner, result in zip(owners, results, strict=True):
        nlls[owner].append(math.fsum(result.nll))
    return nlls


def _split_context(context: str) -> tuple[str, str]:
    """Trailing whitespace moves to the continuation, so the continuation's first token keeps its space."""
    stripped = context.rstrip()
    return stripped, context[len(stripped):]


def cbt_prompt(example: Example, detokenize_line: Callable[[str], str] = _identity) -> tuple[str, list[str]]:
    """``(context, continuations)``: the 20 sentences and the query up to the blank, and for
    each candidate the candidate plus the rest of the query (its leading space included)."""
    meta = example.meta
    query = detokenize_line(meta["query"])
    if CBT_BLANK not in query:
        raise ValueError(f"CBT example {example.id}: the query has no blank {CBT_BLANK!r}")
    if not meta.get("candidates"):
        raise ValueError(f"CBT example {example.id}: no candidates")
    prefix, suffix = query.split(CBT_BLANK, 1)
    sentences = " ".join(detokenize_line(s) for s in meta["context"])
    context, space = _split_context(f"{sentences} {prefix}" if sentences else prefix)
    return context, [space + candidate + suffix for candidate in meta["candidates"]]


def _score_cbt(sm: ScoringModel, bench: BenchmarkSet, examples: list[Example], detok: _Detokenizer, progress: bool):
    groups, prompts = [], []
    for example in examples:
        context, continuations = cbt_prompt(example, detok.line)
        ctx_ids = sm.tokenizer.encode(context)
        groups.append((ctx_ids, [sm.tokenizer.encode(c) for c in continuations]))
        prompts.append(continuations)
    nlls = _choose(sm, groups, progress, bench.name)
    scores = []
    for example, (_, conts), candidate_nll, continuations in zip(examples, groups, nlls, prompts, strict=True):
        candidates = example.meta["candidates"]
        best = int(np.argmin(candidate_nll))
        answer = example.meta.get("answer", "")
        k = candidates.index(answer) if answer in candidates else best
        words, nbytes, chars = len(continuations[k].split()), len(continuations[k].encode("utf-8")), len(continuations[k])
        correct = {"candidates": candidates[best] == answer} if answer in candidates else {}
        scores.append(ExampleScore(example.id, candidate_nll[k], len(conts[k]), words, nbytes, chars, correct,
                                   {"prediction": candidates[best], "answer": answer,
                                    "candidate_nll": [round(x, 4) for x in candidate_nll]}))
    return scores, {"tokens_scored": int(sum(len(c) for _, conts in groups for c in conts))}


def wsc_option(example: Example, option: str) -> str:
    """The candidate as it replaces the pronoun (lm-evaluation-harness wsc273 normalisation):
    ``'s`` after a possessive pronoun; a capitalised first word lower-cased mid-sentence."""
    meta = example.meta
    if meta["pron"].lower() in WSC_POSSESSIVE:
        option += "'s"
    first = option.split()[0] if option.split() else ""
    start_of_sentence = not meta["txt1"] or meta["txt1"].rstrip().endswith((".", "!", "?"))
    if not start_of_sentence and first in WSC_UPPER_WORDS:
        option = first.lower() + option[len(first):]
    return option


def wsc_prompts(example: Example) -> list[tuple[str, str]]:
    """``(context, continuation)`` per candidate: the text up to and including the candidate,
    and the text after the pronoun (partial scoring)."""
    meta = example.meta
    txt2 = meta["txt2"]
    if not txt2:
        raise ValueError(f"WSC example {example.id}: no text after the pronoun to score")
    continuation = txt2 if txt2[0] in ".,;:!?'" else " " + txt2
    out = []
    for option in meta["options"]:
        option = wsc_option(example, option)
        out.append((f"{meta['txt1']} {option}" if meta["txt1"] else option, continuation))
    return out


def _score_wsc(sm: ScoringModel, bench: BenchmarkSet, examples: list[Example], progress: bool):
    groups, prompts = [], []
    for example in examples:
        pairs = wsc_prompts(example)
        if len(pairs) < 2:
            raise ValueError(f"WSC example {example.id}: fewer than two candidates")
        cont_ids = sm.tokenizer.encode(pairs[0][1])
        # one context per option: score each (context, continuation) pair as its own group entry
        groups.extend((sm.tokenizer.encode(ctx), [cont_ids]) for ctx, _ in pairs)
        prompts.append((pairs, len(cont_ids)))
    flat = [n[0] for n in _choose(sm, groups, progress, bench.name)]
    scores, position = [], 0
    for example, (pairs, n_tokens) in zip(examples, prompts, strict=True):
        option_nll = flat[position:position + len(pairs)]
        position += len(pairs)
        best = int(np.argmin(option_nll))
        label = example.meta.get("label")
        k = label if isinstance(label, int) and 0 <= label < len(pairs) else best
        continuation = pairs[0][1]
        scores.append(ExampleScore(
            example.id, option_nll[k], n_tokens, len(continuation.split()), len(continuation.encode("utf-8")),
            len(continuation), {"partial": best == label} if k == label else {},
            {"prediction": example.meta["options"][best],
             "answer": example.meta["options"][label] if k == label else None,
             "option_nll": [round(x, 4) for x in option_nll]}))
    return scores, {"tokens_scored": int(sum(n * len(pairs) for pairs, n in prompts))}
