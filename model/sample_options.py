"""``corpusforge sample``'s options and ``--help`` line, without torch: the command line parses
them before ``model.sample`` (and torch) is imported (``pipelines.cli.OPTIONS_MODULES``)."""

from __future__ import annotations

import argparse

DESCRIPTION = "Generate text from a trained GPT (top-k / top-p / temperature)."
EXTRA_OPTIONS = "store"  # pipelines.cli: s3:// / gs:// / memory:// models take the store options (common.storage)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="a training run folder, a checkpoint file, or a Hugging Face GPT-2 folder")
    p.add_argument("--prompt", default="", help="text to continue (default: start from the end-of-text token)")
    p.add_argument("--tokenizer", help="tokenizer folder (default: the one that came with the model)")
    p.add_argument("--max_new_tokens", type=int, default=100, help="tokens to generate per sample (default 100)")
    p.add_argument("--temperature", type=float, default=1.0, help="softmax temperature; 0 = greedy (default 1.0)")
    p.add_argument("--top_k", type=int, default=None, help="keep only the k most likely tokens (default off)")
    p.add_argument("--top_p", type=float, default=None, help="nucleus sampling: keep the smallest set reaching p (default off)")
    p.add_argument("--num_samples", type=int, default=1, help="independent samples (default 1)")
    p.add_argument("--seed", type=int, default=1337, help="random seed (default 1337)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda ... (default auto)")
    p.add_argument("--keep_going", action="store_true", help="do not stop a sample at the end-of-text token")
