"""A synthetic token-shard folder for trainer benchmarks: a Zipf-like unigram stream of GPT-2 ids.

Written with the project's own shard writer (``model.token_shards.write_token_shard``, llm.c's uint16
format), so ``corpusforge train --data FOLDER`` reads it with no tokenizer and no Beam job. The
loss falls from ln(50257) ~ 10.8 toward the stream's unigram entropy, enough to see a training
curve move.

    python benchmarks/synthetic_tokens.py FOLDER [--tokens 8500000]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from model.gpt import GPT2_VOCAB  # noqa: E402
from model.token_shards import shard_name, write_token_shard  # noqa: E402

ZIPF_EXPONENT = 1.2  # a heavy-tailed id distribution, roughly like text's


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folder")
    p.add_argument("--tokens", type=int, default=8_500_000, help="tokens in the train shard (default 8.5M: "
                                                                  "16 steps of 512k-token batches)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.tokens < 2:
        p.error("--tokens must be at least 2")
    os.makedirs(args.folder, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    tokens = (rng.zipf(ZIPF_EXPONENT, args.tokens) - 1) % GPT2_VOCAB
    n = write_token_shard(os.path.join(args.folder, shard_name("synthetic", "train", 0)), tokens)
    print(f"synthetic token shard: {n:,} tokens in {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
