"""How fast dedup.minhash turns text into MinHash signatures, against plain Python, in one process.

    baseline   dedup.minhash.reference_shingles + MinHasher.reference_signature: the same
               shingles and signature, one n-gram and one permutation at a time in Python ints
    ours       dedup.minhash.shingles + MinHasher.signature: numpy over all shingles and
               all permutations at once, word hashes memoised per process

Both run on the same texts (best of --repeat interleaved passes each); the table gives
documents per second for shingling + signature and the ratio ours/baseline. "ours cold"
empties the word-hash memo before each pass (every word hashed at least once per pass, a
worker's first documents); "ours warm" runs again with the memo kept (a worker's steady
state). Text sets, from the real-data folder (--data, else $CORPUSFORGE_TEST_DATA):

  wiki-paragraphs  WikiText-2 test paragraphs (headings left out)
  wet-c4           English Common Crawl WET records as the C4 reader sees them

Without a data folder, the bundled sample crawl's WET documents are used. At the end the
run checks that both gave identical signatures on every text; on a mismatch it prints the
first differing text and exits with status 1.

    python benchmarks/minhash_speed.py [--data ../shared/data] [--repeat 3] [--num-perm 96] [--limit 600]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.records import Document  # noqa: E402
from corpus.warc import read_archive  # noqa: E402
from dedup import minhash  # noqa: E402
from dedup.minhash import DEFAULT_NGRAM, DEFAULT_NUM_PERM, MinHasher, reference_shingles, shingles  # noqa: E402


def text_sets(data: Path | None, limit: int) -> dict[str, list[str]]:
    if data is None:
        from corpus.sample import write_sample_crawl

        crawl = write_sample_crawl(Path(tempfile.mkdtemp(prefix="minhash-bench-")), seed=0)
        docs = [d.text for p in crawl.wet_paths for d in read_archive(p) if isinstance(d, Document)]
        return {"sample-crawl": docs[:limit]}
    raw = (data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    paragraphs = [line.strip() for line in raw.split("\n") if line.strip() and not line.strip().startswith("=")]
    wet = [data / "warc/ccscalatools/filter_test_1.wet.gz", data / "warc/whirlwind/whirlwind.warc.wet.gz"]
    pages = [d.text for path in wet for d in read_archive(str(path), text_mode="c4") if isinstance(d, Document)]
    return {"wiki-paragraphs": paragraphs[:limit], "wet-c4": pages[:limit]}


def timed_signatures(shingle_fn, signature_fn, texts: list[str], n: int) -> tuple[list, float, float]:
    """Signatures, seconds shingling, seconds hashing, for one side's two functions."""
    start = time.perf_counter()
    sets = [shingle_fn(t, n) for t in texts]
    middle = time.perf_counter()
    sigs = [signature_fn(s) for s in sets]
    return sigs, middle - start, time.perf_counter() - middle


def best_of(repeat: int, hasher: MinHasher, texts: list[str], n: int):
    """Best (shingle, signature) seconds of each side over ``repeat`` interleaved passes."""
    best = {"baseline": (float("inf"), 0.0), "cold": (float("inf"), 0.0), "warm": (float("inf"), 0.0)}
    outputs = {}
    for _ in range(repeat):
        for name in ("baseline", "cold", "warm"):
            if name == "cold":
                minhash._WORD_CACHE.clear()
            if name == "baseline":
                sigs, shingle_s, sig_s = timed_signatures(reference_shingles, hasher.reference_signature, texts, n)
            else:
                sigs, shingle_s, sig_s = timed_signatures(shingles, hasher.signature, texts, n)
            if shingle_s + sig_s < sum(best[name]):
                best[name] = (shingle_s, sig_s)
            outputs[name] = sigs
    return best, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--repeat", type=int, default=3, help="passes per side; the best counts")
    parser.add_argument("--num-perm", type=int, default=DEFAULT_NUM_PERM, help="permutations per signature")
    parser.add_argument("--ngram", type=int, default=DEFAULT_NGRAM, help="words per shingle")
    parser.add_argument("--limit", type=int, default=600, help="documents per text set at most")
    args = parser.parse_args(argv)
    sets = text_sets(Path(args.data) if args.data else None, args.limit)
    hasher = MinHasher(args.num_perm, seed=0)

    print(f"shingling (word {args.ngram}-grams) + MinHash signature ({args.num_perm} permutations), "
          f"best of {args.repeat}, {sys.version.split()[0]}, numpy {minhash.np.__version__}")
    header = (f"{'texts':<16} {'docs':>5} {'words/doc':>9} {'baseline docs/s':>16} {'ours cold docs/s':>17} "
              f"{'ours warm docs/s':>17} {'ratio cold':>10} {'ratio warm':>10}")
    print(header)
    print("-" * len(header))
    stages = []
    mismatch = None
    for name, texts in sets.items():
        best, outputs = best_of(args.repeat, hasher, texts, args.ngram)
        for side in ("cold", "warm"):
            if mismatch is None:
                mismatch = next(((t, o, b) for t, o, b in zip(texts, outputs[side], outputs["baseline"])
                                 if o.tolist() != b.tolist()), None)
        docs = len(texts)
        words = sum(len(minhash.words(t)) for t in texts) // max(1, docs)
        rate = {side: docs / sum(best[side]) for side in best}
        print(f"{name:<16} {docs:>5} {words:>9} {rate['baseline']:>16.1f} {rate['cold']:>17.1f} {rate['warm']:>17.1f} "
              f"{rate['cold'] / rate['baseline']:>9.1f}x {rate['warm'] / rate['baseline']:>9.1f}x")
        stages.append((name, {side: (best[side][0] / docs * 1e6, best[side][1] / docs * 1e6) for side in best}))
    print()
    print(f"{'microseconds per document':<28} {'shingles':>10} {'signature':>10}")
    for name, per_side in stages:
        for side in ("baseline", "cold", "warm"):
            label = {"baseline": "baseline", "cold": "ours cold", "warm": "ours warm"}[side]
            shingle_us, sig_us = per_side[side]
            print(f"{name + ' ' + label:<28} {shingle_us:>10.1f} {sig_us:>10.1f}")
    if mismatch is not None:
        text, ours, base = mismatch
        print(f"MISMATCH on a text of {len(text)} characters:\n  ours:     {ours[:8]}\n  baseline: {base[:8]}")
        return 1
    print(f"\nsignatures identical on all {sum(len(t) for t in sets.values())} texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
