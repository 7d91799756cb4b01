"""How fast model.tokenizer.BPETokenizer encodes, against Hugging Face ``tokenizers`` and
``tiktoken`` on the same vocabulary, in one process.

    baseline   tokenizers   a ``tokenizers.Tokenizer`` (BPE model, ByteLevel pre-tokenizer:
                            GPT-2's settings) built from our vocabulary and merges
    other      tiktoken     ``tiktoken.Encoding(name, pat_str, mergeable_ranks, special_tokens)``
                            built offline from the same vocabulary
    ours       BPETokenizer ``encode`` (one document at a time) and ``encode_batch``

The text is real: WikiText-2 raw test (one document per top-level heading), PTB test
lines (joined 50 to a document), and the English Common Crawl WET records of the
real-data folder (--data, else $CORPUSFORGE_TEST_DATA). A vocabulary of --vocab_size is
trained on it once. Each line of the table is the best of --repeat passes (the three
tokenizers interleaved); MB/s counts UTF-8 bytes of input. The run then checks that the
three give identical ids on every document and exits with status 1 if not.

    python benchmarks/tokenizer_speed.py [--data ../shared/data] [--vocab_size 16384] [--repeat 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.tokenizer import BPETokenizer, train_tokenizer  # noqa: E402


def documents(data: Path) -> dict[str, list[str]]:
    from corpus.records import Document
    from corpus.warc import read_archive

    wiki = (data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    ptb = (data / "lm_benchmarks/ptb/ptb.test.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    wet = [data / "warc/ccscalatools/filter_test_1.wet.gz", data / "warc/whirlwind/whirlwind.warc.wet.gz"]
    return {
        "wikitext2": [d for d in wiki.split("\n = ") if d.strip()],
        "ptb": ["".join(ptb[i:i + 50]) for i in range(0, len(ptb), 50)],
        "wet": [d.text for p in wet for d in read_archive(str(p), text_mode="c4") if isinstance(d, Document)],
    }


def encoders(ours: BPETokenizer):
    hf = ours.hf_tokenizer()
    tk = ours.tiktoken_encoding()
    threads = max(1, min(8, os.cpu_count() or 1))
    single = {
        "tokenizers": lambda docs: [hf.encode(d, add_special_tokens=False).ids for d in docs],
        "tiktoken": lambda docs: [tk.encode_ordinary(d) for d in docs],
        "ours": lambda docs: [ours.encode(d) for d in docs],
    }
    batch = {
        "tokenizers": lambda docs: [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)],
        "tiktoken": lambda docs: tk.encode_ordinary_batch(docs, num_threads=threads),
        "ours": lambda docs: ours.encode_batch(docs),
    }
    return single, batch


def best_of(repeat: int, fns: dict, docs: list[str]) -> tuple[dict, dict]:
    seconds = {name: float("inf") for name in fns}
    outputs = {}
    names = list(fns)
    for turn in range(repeat):
        for name in names[turn % len(names):] + names[:turn % len(names)]:  # each goes first in turn
            fn = fns[name]
            start = time.perf_counter()
            outputs[name] = fn(docs)
            seconds[name] = min(seconds[name], time.perf_counter() - start)
    return seconds, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--vocab_size", type=int, default=16384, help="vocabulary trained on the text")
    parser.add_argument("--repeat", type=int, default=6, help="passes per tokenizer; the best counts")
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("point --data (or CORPUSFORGE_TEST_DATA) at the real-data folder")
    sets = documents(Path(args.data))
    start = time.perf_counter()
    ours = train_tokenizer((d for docs in sets.values() for d in docs), vocab_size=args.vocab_size, show_progress=False)
    print(f"trained {ours.vocab_size:,} tokens in {time.perf_counter() - start:.1f} s; our engine: {ours.engine}; "
          f"{os.cpu_count()} CPU cores")
    single, batch = encoders(ours)
    header = f"{'text':<10} {'docs':>5} {'MB':>6} {'mode':<7} {'tokenizers MB/s':>16} {'tiktoken MB/s':>14} {'ours MB/s':>10} {'ours/tokenizers':>16} {'ours/tiktoken':>14}"
    print(header)
    print("-" * len(header))
    mismatch = None
    totals: dict[str, dict[str, float]] = {"single": {}, "batch": {}}
    megabytes_all = 0.0
    for name, docs in sets.items():
        megabytes = sum(len(d.encode("utf-8")) for d in docs) / 1e6
        megabytes_all += megabytes
        for mode, fns in (("single", single), ("batch", batch)):
            seconds, outputs = best_of(args.repeat, fns, docs)
            for who, s in seconds.items():
                totals[mode][who] = totals[mode].get(who, 0.0) + s
            if mismatch is None:
                for who in ("tiktoken", "ours"):
                    for doc, got, want in zip(docs, outputs[who], outputs["tokenizers"], strict=True):
                        if list(got) != list(want):
                            mismatch = (who, mode, doc, got, want)
                            break
            rate = {who: megabytes / s for who, s in seconds.items()}
            print(f"{name:<10} {len(docs):>5} {megabytes:>6.2f} {mode:<7} {rate['tokenizers']:>16.2f} {rate['tiktoken']:>14.2f} "
                  f"{rate['ours']:>10.2f} {rate['ours'] / rate['tokenizers']:>15.2f}x {rate['ours'] / rate['tiktoken']:>13.2f}x")
    print("-" * len(header))
    for mode in ("single", "batch"):
        rate = {who: megabytes_all / s for who, s in totals[mode].items()}
        print(f"{'all':<10} {sum(map(len, sets.values())):>5} {megabytes_all:>6.2f} {mode:<7} {rate['tokenizers']:>16.2f} "
              f"{rate['tiktoken']:>14.2f} {rate['ours']:>10.2f} {rate['ours'] / rate['tokenizers']:>15.2f}x {rate['ours'] / rate['tiktoken']:>13.2f}x")
    if mismatch is not None:
        who, mode, doc, got, want = mismatch
        print(f"MISMATCH ({who}, {mode}) on a document of {len(doc)} characters:\n  {who}: {list(got)[:20]}...\n  tokenizers: {list(want)[:20]}...")
        return 1
    print(f"ids identical on all {sum(map(len, sets.values()))} documents (tokenizers, tiktoken, ours; single and batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
