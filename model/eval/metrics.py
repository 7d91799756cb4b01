"""Per-example scores: what every benchmark's scorer produces and every report aggregates.

A metric over a set of examples is computed from sums over those examples, so the same
function gives the number for all, clean and dirty examples alike:

- token perplexity  = exp(sum nll / sum tokens)
- word perplexity   = exp(sum nll / sum words)      (words of the original, pre-detokenized text)
- bits per byte     = sum nll / ln 2 / sum bytes    (UTF-8 bytes of the original text)
- bits per character = sum nll / ln 2 / sum chars
- accuracy          = mean of ``correct[protocol]``
- ``mean:<key>``    = mean of ``values[key]`` over the examples that have it (CoQA F1, a
  domain's F1, ROUGE F1 of one summary each)
- ``bleu``          = corpus BLEU from the summed n-gram statistics of each example
  (``values["bleu_correct_1".."4"]``, ``bleu_total_1..4``, ``bleu_sys_len``, ``bleu_ref_len``,
  sacrebleu's sentence statistics): sacrebleu's ``corpus_bleu`` with its default
  exponential smoothing, for any subset of the examples
- ``conf_acc:<percent>:<protocol>`` = accuracy on the ``percent`` % of examples the model was
  most confident about (``values["confidence"]``, highest first; at least one example)
- last-word perplexity (LAMBADA) = exp(mean of per-example ``nll``) when ``nll`` is the
  last word's NLL

For perplexity over a whole file scored with overlapping windows, each scored token's NLL
is attributed to the example whose characters it covers, so the sums over all examples
equal the whole-file numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class ExampleScore:
    id: str
    nll: float = 0.0  # summed negative log-likelihood in nats of the scored tokens
    tokens: int = 0  # scored BPE tokens
    words: int = 0  # words of the original (pre-detokenization) text
    bytes: int = 0  # UTF-8 bytes of the original text
    chars: int = 0  # characters of the original text
    correct: dict[str, bool] = field(default_factory=dict)  # accuracy protocol -> correct
    extra: dict = field(default_factory=dict)  # anything a report shows per example (prediction, target)
    values: dict[str, float] = field(default_factory=dict)  # per-example numbers a metric averages or sums

    def to_dict(self) -> dict:
        return {"id": self.id, "nll": self.nll, "tokens": self.tokens, "words": self.words, "bytes": self.bytes,
                "chars": self.chars, "correct": dict(self.correct), "extra": dict(self.extra),
                "values": dict(self.values)}

    @classmethod
    def from_dict(cls, data: dict) -> ExampleScore:
        return cls(data["id"], float(data["nll"]), int(data["tokens"]), int(data["words"]), int(data["bytes"]),
                   int(data["chars"]), dict(data.get("correct", {})), dict(data.get("extra", {})),
                   {k: float(v) for k, v in (data.get("values") or {}).items()})


LN2 = math.log(2)
BLEU_ORDER = 4  # Papineni et al. 2002: n-grams up to 4 (sacrebleu's default)
BLEU_ZERO_LOG = -9999999999  # the log sacrebleu takes of a zero precision


def _exp(x: float) -> float:
    """exp that says ``inf`` for a perplexity too large for a float (an untrained model's)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def compute_metric(scores: Sequence[ExampleScore], metric: str) -> float:
    """One metric over a set of examples (see the module docstring); NaN for an empty set.

    ``metric``: ``token_ppl``, ``word_ppl``, ``bpb``, ``bpc``, ``lastword_ppl``, ``mean_nll``,
    or ``acc:<protocol>`` (e.g. ``acc:last_token``).
    """
    if not scores:
        return math.nan
    if metric.startswith("acc:"):
        protocol = metric[4:]
        flags = [s.correct[protocol] for s in scores if protocol in s.correct]
        return sum(flags) / len(flags) if flags else math.nan
    nll = math.fsum(s.nll for s in scores)
    denominators = {"token_ppl": "tokens", "word_ppl": "words", "bpb": "bytes", "bpc": "chars"}
    if metric in denominators:
        total = sum(getattr(s, denominators[metric]) for s in scores)
        if total == 0:
            return math.nan
        return _exp(nll / total) if metric.endswith("ppl") else nll / LN2 / total
    if metric.startswith("mean:"):
        values = [s.values[metric[5:]] for s in scores if metric[5:] in s.values]
        return math.fsum(values) / len(values) if values else math.nan
    if metric == "bleu":
        return corpus_bleu_from_stats(scores)
    if metric.startswith("conf_acc:"):
        percent, _, protocol = metric[9:].partition(":")
        ranked = sorted((s for s in scores if protocol in s.correct and "confidence" in s.values),
                        key=lambda s: -s.values["confidence"])
        if not ranked:
            return math.nan
        top = ranked[:max(1, math.ceil(len(ranked) * float(percent) / 100.0))]
        return sum(s.correct[protocol] for s in top) / len(top)
    if metric == "lastword_ppl":
        return _exp(nll / len(scores))
    if metric == "mean_nll":
        return nll / len(scores)
    raise ValueError(f"unknown metric {metric!r}")


def corpus_bleu_from_stats(scores: Sequence[ExampleScore]) -> float:
    """Corpus BLEU (0-100) of the examples' summed sentence statistics: brevity penalty times
    the geometric mean of the 1- to 4-gram precisions; an order with no match counts as
    ``100 / (2^k * total)`` for the k-th such order (sacrebleu's ``exp`` smoothing)."""
    rows = [s.values for s in scores if "bleu_sys_len" in s.values]
    if not rows:
        return math.nan
    correct = [sum(r[f"bleu_correct_{n}"] for r in rows) for n in range(1, BLEU_ORDER + 1)]
    total = [sum(r[f"bleu_total_{n}"] for r in rows) for n in range(1, BLEU_ORDER + 1)]
    sys_len, ref_len = sum(r["bleu_sys_len"] for r in rows), sum(r["bleu_ref_len"] for r in rows)
    if sys_len == 0 or not any(correct):
        return 0.0
    penalty = 1.0 if sys_len >= ref_len else math.exp(1 - ref_len / sys_len)
    logs, smooth = [], 1.0
    for n in range(BLEU_ORDER):
        if total[n] == 0:
            logs.append(BLEU_ZERO_LOG)
            continue
        if correct[n] == 0:
            smooth *= 2
            logs.append(math.log(100.0 / (smooth * total[n])))
        else:
            logs.append(math.log(100.0 * correct[n] / total[n]))
    return penalty * math.exp(sum(logs) / BLEU_ORDER)
