"""``corpusforge sample``: generate text from a trained model with temperature, top-k and top-p.

At each new position the logits of the last token are divided by the temperature, then
restricted to the ``k`` most likely tokens (top-k; Fan et al. 2018) and/or to the smallest
set of most likely tokens whose probability reaches ``p`` (nucleus / top-p; Holtzman et al.
2020, "The Curious Case of Neural Text Degeneration"), and the next token is drawn from
the softmax of what is left. Temperature 0 means greedy decoding (argmax). The context is
cropped to the model's ``block_size`` as the text grows.

The model comes from ``model.checkpoint.load_model`` (a run folder, a checkpoint file or a
Hugging Face GPT-2 folder) and the tokenizer from the files that came with it
(``tokenizer_folder``) or ``--tokenizer``.
"""

from __future__ import annotations

import argparse
import logging
import sys

import torch

from common.errors import InputError
from model.checkpoint import load_model, tokenizer_folder
from model.sample_options import DESCRIPTION, EXTRA_OPTIONS, add_arguments  # noqa: F401  (the job contract: pipelines.cli)
from model.tokenizer import BPETokenizer

log = logging.getLogger("corpusforge.sample")


def top_k_mask(logits: torch.Tensor, k: int) -> torch.Tensor:
    """``logits`` with everything below the ``k``-th largest (per row) set to -inf; ties at the edge kept."""
    if k < 1:
        raise ValueError(f"top_k must be at least 1, got {k}")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_mask(logits: torch.Tensor, p: float) -> torch.Tensor:
    """``logits`` restricted to the smallest most-likely set whose probability reaches ``p`` (the top token always kept)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must lie in (0, 1], got {p}")
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    before = torch.cumsum(probs, dim=-1) - probs  # probability of the tokens ranked above each one
    drop_sorted = before >= p  # already reached p without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


class NonFiniteError(InputError):
    """Next-token probabilities that are NaN or infinite: weights unusable for sampling."""


@torch.no_grad()
def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, generator: torch.Generator | None = None,
             stop_token: int | None = None) -> torch.Tensor:
    """Extend ``idx`` (``[B, T]`` token ids) by up to ``max_new_tokens`` sampled tokens; returns ``[B, T + n]``.

    ``temperature=0`` is greedy. With ``stop_token``, generation ends once every row has produced it.
    """
    if idx.dim() != 2 or idx.shape[1] == 0:
        raise ValueError(f"idx must be a [batch, time] tensor with at least one token, got shape {tuple(idx.shape)}")
    if temperature < 0:
        raise ValueError(f"temperature must not be negative, got {temperature}")
    was_training = model.training
    model.eval()
    block = model.config.block_size
    done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -block:])
        logits = logits[:, -1, :].float()
        if temperature == 0:
            next_id = logits.argmax(dim=-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k is not None:
                logits = top_k_mask(logits, top_k)
            if top_p is not None:
                logits = top_p_mask(logits, top_p)
            probs = torch.softmax(logits, dim=-1)
            if not bool(torch.isfinite(probs).all()):
                raise NonFiniteError("the model's next-token probabilities are not finite (NaN or infinite logits): "
                                 "its weights are not usable for sampling")
            if generator is not None and generator.device != probs.device:
                next_id = torch.multinomial(probs.cpu(), 1, generator=generator).to(probs.device)
            else:
                next_id = torch.multinomial(probs, 1, generator=generator)
        idx = torch.cat([idx, next_id], dim=1)
        if stop_token is not None:
            done |= next_id.squeeze(1) == stop_token
            if bool(done.all()):
                break
    model.train(was_training)
    return idx


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="corpusforge sample", description=DESCRIPTION)
    add_arguments(p)
    return p


def run(args: argparse.Namespace) -> dict:
    """``corpusforge sample`` (``pipelines.cli``): the prompt and the samples drawn."""
    if args.max_new_tokens < 1 or args.num_samples < 1:
        raise InputError("--max_new_tokens and --num_samples must be at least 1")
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    model = load_model(args.model, device=device)
    folder = args.tokenizer or tokenizer_folder(args.model)
    if folder is None:
        raise InputError(f"no tokenizer files came with {args.model} (vocab.json + merges.txt): pass --tokenizer")
    tokenizer = BPETokenizer.load(folder)
    prompt = tokenizer.encode(args.prompt) if args.prompt else [tokenizer.eot_id]
    if tokenizer.vocab_size > model.config.vocab_size:
        raise InputError(f"the tokenizer in {folder} has {tokenizer.vocab_size} tokens, the model only "
                         f"{model.config.vocab_size}: wrong --tokenizer?")
    try:  # the sampling options, checked before any token is drawn
        top_k_mask(torch.zeros(1, 2), args.top_k) if args.top_k is not None else None
        top_p_mask(torch.zeros(1, 2), args.top_p) if args.top_p is not None else None
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    if args.temperature < 0:
        raise InputError(f"--temperature must not be negative, got {args.temperature}")
    generator = torch.Generator(device=device).manual_seed(args.seed)
    start = torch.tensor([prompt[-model.config.block_size:]] * args.num_samples, dtype=torch.long, device=device)
    try:
        out = generate(model, start, args.max_new_tokens, args.temperature, args.top_k, args.top_p, generator,
                       stop_token=None if args.keep_going else tokenizer.eot_id)
    except NonFiniteError as exc:  # from weights that pass every check
        raise InputError(f"{args.model}: {exc}") from exc
    samples = []
    for row in out.tolist():
        new = row[start.shape[1]:]
        if not args.keep_going and tokenizer.eot_id in new:
            new = new[:new.index(tokenizer.eot_id)]
        samples.append(args.prompt + tokenizer.decode(new))
    return {"samples": samples}


def format_summary(summary: dict) -> str:
    samples = summary["samples"]
    if len(samples) == 1:
        return samples[0]
    return "\n".join(f"--- sample {n + 1}/{len(samples)}\n{text}" for n, text in enumerate(samples))


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["sample", *sys.argv[1:]]))
