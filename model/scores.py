"""Per-example scores: what every benchmark's scorer produces and every report aggregates.

A metric over a set of examples is computed from sums over those examples, so the same
function gives the number for all, clean and dirty examples alike:

- token perplexity  = exp(sum nll / sum tokens)
- word perplexity   = exp(sum nll / sum words)      (words of the original, pre-detokenized text)
- bits per byte     = sum nll / ln 2 / sum bytes    (UTF-8 bytes of the original text)
- bits per character = sum nll / ln 2 / sum chars
- accuracy          = mean of ``correct[protocol]``
- last-word perplexity (LAMBADA) = exp(mean of per-example ``nll``) when ``nll`` is the
  last word's NLL

For perplexity over a whole file scored with overlapping windows, each scored token's NLL
is attributed to the example whose characters it covers, so the sums over all examples
equal the whole-file numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence


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

    def to_dict(self) -> dict:
        return {"id": self.id, "nll": self.nll, "tokens": self.tokens, "words": self.words, "bytes": self.bytes,
                "chars": self.chars, "correct": dict(self.correct), "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, data: dict) -> "ExampleScore":
        return cls(data["id"], float(data["nll"]), int(data["tokens"]), int(data["words"]), int(data["bytes"]),
                   int(data["chars"]), dict(data.get("correct", {})), dict(data.get("extra", {})))


LN2 = math.log(2)


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
    if metric == "lastword_ppl":
        return _exp(nll / len(scores))
    if metric == "mean_nll":
        return nll / len(scores)
    raise ValueError(f"unknown metric {metric!r}")
