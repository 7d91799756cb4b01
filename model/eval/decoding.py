"""Generation for the eval harness: greedy or seeded top-k decoding of a batch of prompts with
a KV cache (``model.gpt.decode``), the stop rules GPT-2's zero-shot tasks use, and the left
truncation that fits a long context into the model's window with the task's prompt kept.

    prompt        ``fit_prompt(body, tail, window)``: the task's own tokens (``tail``: "TL;DR:",
                  "A:", the last "english sentence =") kept whole; the body (document, article,
                  example pairs) cut from the left so that prompt + new tokens fit the context
    decoding      greedy (argmax) or top-k sampling (``top_k``: keep the k most likely tokens,
                  softmax, draw) from a seeded ``torch.Generator``: the same seed, the same text.
                  Rows are left-padded to one length; padding is never attended to and positions
                  count real tokens only, so a row in a batch decodes as it would alone.
    stop rules    ``StopRule("newline")``, ``StopRule("sentences", n)`` (the first n sentences,
                  punkt; ``first_line=True``: of the first line only), ``StopRule("tokens")``
                  (only ``max_new_tokens``); end-of-text always stops a row. A batch stops when every row has stopped.

The draws match ``transformers``' ``generate(do_sample=True, top_k=k)`` token for token when
its global generator has the same seed (``tests/test_eval_decoding.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from common.errors import InputError
from corpus.sentences import split_sentences
from model.gpt import KVCache, decode
from model.sample import top_k_mask

STOP_KINDS = ("newline", "sentences", "tokens")


class GenerationError(InputError):
    """A generation request that cannot be run as asked (a prompt that cannot fit, a bad setting)."""


@dataclass(frozen=True)
class StopRule:
    kind: str = "tokens"
    count: int = 1  # sentences: how many
    first_line: bool = False  # sentences: read only the first line (a translation ends at its line break)

    def __post_init__(self):
        if self.kind not in STOP_KINDS:
            raise GenerationError(f"unknown stop rule {self.kind!r}; known: {', '.join(STOP_KINDS)}")
        if self.count < 1:
            raise GenerationError(f"a stop rule counts at least 1 sentence, got {self.count}")

    def complete(self, text: str) -> bool:
        """Whether ``text`` (the generation so far) already holds all that ``cut`` keeps."""
        if self.kind == "newline":
            return "\n" in text.lstrip("\n")
        if self.kind == "sentences":
            if self.first_line and "\n" in text.lstrip("\n"):
                return True
            stripped = text.strip()
            # n sentences are done once the (n+1)-th begins, or a line ends after the n-th
            return bool(stripped) and (len(word_sentences(stripped)) > self.count or
                                       ("\n" in stripped and len(word_sentences(stripped.split("\n")[0])) >= self.count))
        return False

    def cut(self, text: str) -> str:
        """The part of a generation the task reads."""
        if self.kind == "newline":
            return text.lstrip("\n").split("\n", 1)[0].strip()
        if self.kind == "sentences":
            text = text.lstrip("\n").split("\n", 1)[0] if self.first_line else text
            return " ".join(word_sentences(text.strip().replace("\n", " "))[:self.count]).strip()
        return text.strip()


def word_sentences(text: str) -> list[str]:
    """Punkt's sentences of ``text`` that hold a letter or a digit: a full stop standing alone
    (``defeat.\xa0. He``, two stops a no-break space apart, reads ``defeat. . He`` once the
    whitespace is normalised) is punctuation, not a sentence, for lead-3, random-3 and a
    summary's three sentences alike."""
    return [sentence for sentence in split_sentences(text) if any(ch.isalnum() for ch in sentence)]


def fit_prompt(body: list[int], tail: list[int], window: int) -> tuple[list[int], bool]:
    """``(body + tail, cut)`` with the body's oldest tokens dropped so that it fits ``window``;
    the tail (the task's prompt) is kept whole, unless it alone is longer than the window:
    then its own last ``window`` tokens are kept (the end of the prompt, where the answer starts)."""
    if window < 1:
        raise GenerationError(f"no room for a prompt in a window of {window} tokens")
    if len(tail) >= window:
        return tail[len(tail) - window:], bool(body) or len(tail) > window
    room = window - len(tail)
    if len(body) <= room:
        return body + tail, False
    return body[len(body) - room:] + tail, True


@dataclass
class Generation:
    tokens: list[int]  # the new tokens, up to (not including) end-of-text
    logprobs: list[float]  # the model's log-probability of each new token (full softmax, before top-k)
    text: str = ""  # decoded tokens
    answer: str = ""  # what the stop rule keeps


@torch.no_grad()
def generate_batch(model, prompts: list[list[int]], max_new_tokens: int, *, top_k: int | None = None,
                   generator: torch.Generator | None = None, eot_id: int | None = None, pad_id: int = 0,
                   stopped=None) -> list[Generation]:
    """Decode each prompt (token ids) by up to ``max_new_tokens``: greedy without ``top_k``,
    else top-k sampling with ``generator``. ``stopped(row, tokens)`` says whether a row is
    finished early (a stop rule); end-of-text (``eot_id``) finishes a row too."""
    if not prompts or any(not p for p in prompts):
        raise GenerationError("every prompt needs at least one token")
    if max_new_tokens < 1:
        raise GenerationError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    longest = max(len(p) for p in prompts)
    if longest + max_new_tokens > model.config.block_size:
        raise GenerationError(f"a prompt of {longest} tokens + {max_new_tokens} new ones exceeds the model's context "
                              f"({model.config.block_size}); fit it with fit_prompt")
    was_training = model.training
    model.eval()
    device = model.transformer.wte.weight.device
    B = len(prompts)
    idx = torch.full((B, longest), pad_id, dtype=torch.long)
    valid = torch.zeros((B, longest), dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        idx[row, longest - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
        valid[row, longest - len(prompt):] = True
    cache = KVCache(model.config, B, longest + max_new_tokens, device=device, dtype=model.transformer.wte.weight.dtype)
    logits = decode(model, idx.to(device), cache, valid.to(device))
    out = [Generation([], []) for _ in range(B)]
    done = [False] * B
    for step in range(max_new_tokens):
        if top_k is None:
            chosen = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(top_k_mask(logits, top_k), dim=-1)
            if generator is not None and generator.device != probs.device:
                chosen = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(probs.device)
            else:
                chosen = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        logp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1)
        for row, (token, lp) in enumerate(zip(chosen.tolist(), logp.tolist(), strict=True)):
            if done[row]:
                continue
            if token == eot_id:
                done[row] = True
                continue
            out[row].tokens.append(token)
            out[row].logprobs.append(lp)
            if stopped is not None and stopped(row, out[row].tokens):
                done[row] = True
        if all(done) or step == max_new_tokens - 1:
            break
        logits = decode(model, chosen[:, None], cache)
    model.train(was_training)
    return out


@dataclass(frozen=True)
class Decoding:
    """How a task decodes: the paper's settings per task (``max_new_tokens``, greedy or top-k, the stop rule)."""

    max_new_tokens: int
    stop: StopRule
    top_k: int | None = None  # None: greedy
    seed: int = 0


def generate_texts(model, tokenizer, prompts: list[tuple[str, str]], decoding: Decoding, *,
                   batch_size: int = 8, progress=None) -> tuple[list[Generation], int]:
    """Generate for each ``(body, tail)`` prompt text as ``decoding`` says; returns the
    generations (``answer`` = what the stop rule keeps) and how many prompts were cut."""
    window = model.config.block_size - decoding.max_new_tokens
    if window < 1:
        raise GenerationError(f"{decoding.max_new_tokens} new tokens leave no room in a context of "
                              f"{model.config.block_size}")
    device = model.transformer.wte.weight.device
    generator = torch.Generator(device=device).manual_seed(decoding.seed) if decoding.top_k else None
    fitted, cut = [], 0
    for body, tail in prompts:
        ids, was_cut = fit_prompt(tokenizer.encode(body) if body else [], tokenizer.encode(tail), window)
        if not ids:
            ids = [tokenizer.eot_id]
        fitted.append(ids)
        cut += was_cut
    results: list[Generation] = []
    for start in range(0, len(fitted), batch_size):
        batch = fitted[start:start + batch_size]

        def stopped(row, tokens, rule=decoding.stop):
            return rule.kind != "tokens" and rule.complete(tokenizer.decode(tokens))

        for g in generate_batch(model, batch, decoding.max_new_tokens, top_k=decoding.top_k, generator=generator,
                                eot_id=tokenizer.eot_id, pad_id=tokenizer.eot_id, stopped=stopped):
            g.text = tokenizer.decode(g.tokens)
            g.answer = decoding.stop.cut(g.text)
            results.append(g)
        if progress is not None:
            progress(len(batch))
    return results, cut


def answer_logprob(tokenizer, generation: Generation) -> float:
    """The log-probability of the generated answer: the sum over the tokens up to the first line
    break (the answer an NQ-style prompt reads); -inf when nothing was generated."""
    total, text = 0.0, ""
    for token, lp in zip(generation.tokens, generation.logprobs, strict=True):
        piece = tokenizer.decode([token])
        if "\n" in piece and text.strip():
            break
        text += piece
        total += lp
    return total if generation.tokens else -math.inf
