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

    def to_dict(self) -> dict:
        return {"id": self.id, "nll": self.nll, "tokens": self.tokens, "words": self.words, "bytes": self.bytes,
                "chars": self.chars, "correct": dict(self.correct), "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, data: dict) -> "ExampleScore":
        return cls(data["id"], float(data["nll"]), int(data["tokens"]), int(data["words"]), int(data["bytes"]),
                   int(data["chars"]), dict(data.get("correct", {})), dict(data.get("extra", {})))
