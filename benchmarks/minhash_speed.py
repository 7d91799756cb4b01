"""dedup.minhash: signatures against plain Python, and near-duplicate search against datasketch.

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

Without a data folder, the bundled sample crawl's WET documents are used. The run checks
that both gave identical signatures on every text; on a mismatch it prints the first
differing text and exits with status 1.

Then the search a user runs, end to end, against datasketch (the library a user would pick:
``MinHash`` + ``MinHashLSH``), on each text set plus edited copies of every third text
(one contiguous run of 1, 3, 6, 10 or 20% of its words deleted, in turn; exact Jaccard of
a copy and its original from ~0.97 down to ~0.7, so pairs on both sides of the threshold):

    ours        dedup.minhash.near_duplicate_pairs: shingles, signatures, band buckets,
                candidate pairs, exact Jaccard verification (word memo emptied each pass)
    datasketch  the same words (dedup.minhash.words) joined into 5-gram strings, UTF-8
                encoded, ``MinHash(num_perm).update_batch``, ``MinHashLSH(threshold,
                num_perm, params=(bands, rows))`` filled in an ``insertion_session`` and
                queried once per document: its candidate pairs, unverified (what
                ``query`` returns)
    datasketch + verify   the same plus the exact Jaccard of the two documents' shingle
                string sets for every candidate, kept when >= the threshold (what ours does)

Same num_perm, threshold and bands x rows on both sides (``choose_bands``: 16 x 6 for 96
permutations at 0.8). Each of --repeat passes runs the three in a rotated order; the table
gives documents per second of the best pass and ours / other as the min-max of the
passes' ratios. Quality: the true pairs are every pair of documents whose exact shingle
Jaccard is >= the threshold (all pairs compared); each side's pairs are counted against
them (found / missed / extra).

    python benchmarks/minhash_speed.py [--data ../shared/data] [--repeat 3] [--num-perm 96] [--limit 600]
        [--threshold 0.8] [--no-datasketch]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.records import Document  # noqa: E402
from corpus.warc import read_archive  # noqa: E402
from dedup import minhash  # noqa: E402
from dedup.minhash import (  # noqa: E402
    DEFAULT_NGRAM,
    DEFAULT_NUM_PERM,
    DEFAULT_THRESHOLD,
    MinHasher,
    choose_bands,
    reference_shingles,
    shingles,
)

EDIT_FRACTIONS = (0.01, 0.03, 0.06, 0.10, 0.20)  # share of a copy's words deleted, in turn


def text_sets(data: Path | None, limit: int) -> dict[str, list[str]]:
    if data is None:
        from samplecrawl.crawl import write_sample_crawl

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


# -- near-duplicate search against datasketch ------------------------------------------------


def with_edited_copies(texts: list[str], seed: int = 0) -> dict[str, str]:
    """The texts (ids ``t<i>``) plus, for every third text of >= 20 words, a copy (``t<i>-edit``)
    with one contiguous run of ``EDIT_FRACTIONS[j % 5]`` of its words deleted."""
    rng = random.Random(seed)
    docs = {f"t{i}": text for i, text in enumerate(texts)}
    for j, i in enumerate(range(0, len(texts), 3)):
        tokens = texts[i].split()
        if len(tokens) < 20:
            continue
        cut = max(1, round(len(tokens) * EDIT_FRACTIONS[j % len(EDIT_FRACTIONS)]))
        start = rng.randrange(0, len(tokens) - cut + 1)
        docs[f"t{i}-edit"] = " ".join(tokens[:start] + tokens[start + cut:])
    return docs


def string_shingles(text: str, n: int) -> set[bytes]:
    """A datasketch user's shingles: the same words, each n-gram as its UTF-8 string."""
    w = minhash.words(text)
    width = min(n, len(w))
    return {" ".join(w[j:j + width]).encode("utf-8") for j in range(len(w) - width + 1)} or {b""}


def set_jaccard(a: set, b: set) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def datasketch_pairs(docs: dict[str, str], num_perm: int, bands: int, rows: int, threshold: float, n: int,
                     verify: bool) -> set[tuple[str, str]]:
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, params=(bands, rows))
    sketches, sets = {}, {}
    with lsh.insertion_session() as session:
        for doc_id, text in docs.items():
            grams = sets[doc_id] = string_shingles(text, n)
            sketch = sketches[doc_id] = MinHash(num_perm=num_perm)
            sketch.update_batch(list(grams))
            session.insert(doc_id, sketch)
    pairs = set()
    for doc_id, sketch in sketches.items():
        for other in lsh.query(sketch):
            if other != doc_id:
                pairs.add((doc_id, other) if doc_id < other else (other, doc_id))
    if verify:
        pairs = {p for p in pairs if set_jaccard(sets[p[0]], sets[p[1]]) >= threshold}
    return pairs


def ours_pairs(docs: dict[str, str], num_perm: int, threshold: float, n: int) -> set[tuple[str, str]]:
    minhash._WORD_CACHE.clear()  # cold: no head start from an earlier pass
    found = minhash.near_duplicate_pairs(docs, threshold=threshold, n=n, num_perm=num_perm)
    return {(a, b) if a < b else (b, a) for a, b in found}


def true_pairs(docs: dict[str, str], threshold: float, n: int) -> set[tuple[str, str]]:
    """Every pair with exact shingle Jaccard >= threshold (all pairs; a size-ratio bound first)."""
    ids = sorted(docs)
    sets = [string_shingles(docs[i], n) for i in ids]
    out = set()
    for x in range(len(ids)):
        for y in range(x + 1, len(ids)):
            small, large = sorted((len(sets[x]), len(sets[y])))
            if small >= threshold * large and set_jaccard(sets[x], sets[y]) >= threshold:
                out.add((ids[x], ids[y]))
    return out


def import_seconds(module: str) -> float:
    """Seconds to import ``module`` in a fresh interpreter (numpy already imported there)."""
    code = (f"import sys, time; sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r}); import numpy; "
            f"t = time.perf_counter(); import {module}; print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def against_datasketch(sets: dict[str, list[str]], num_perm: int, threshold: float, n: int, repeat: int) -> None:
    import datasketch  # noqa: F401  (imported before the first timed pass; import times printed below)

    bands, rows = choose_bands(num_perm, threshold)
    print(f"\nnear-duplicate search end to end against datasketch {importlib.metadata.version('datasketch')} "
          f"(MinHash + MinHashLSH): word {n}-grams, {num_perm} permutations, {bands} bands x {rows} rows, "
          f"threshold {threshold}; {repeat} passes, rotated order")
    sides = ("ours", "datasketch", "datasketch + verify")
    print("documents per second of the best pass; ratio = ours / it, min-max over the passes")
    header = (f"{'texts':<24} {'docs':>5} {'ours docs/s':>12} {'datasketch docs/s':>18} {'ratio':>11}"
              f" {'+ verify docs/s':>16} {'ratio':>11}")
    print(header)
    print("-" * len(header))
    quality = []
    for name, texts in sets.items():
        docs = with_edited_copies(texts)
        passes, found = [], {}
        for number in range(repeat):
            times = {}
            for side in sides[number % 3:] + sides[:number % 3]:
                start = time.perf_counter()
                if side == "ours":
                    found[side] = ours_pairs(docs, num_perm, threshold, n)
                else:
                    found[side] = datasketch_pairs(docs, num_perm, bands, rows, threshold, n, side.endswith("verify"))
                times[side] = time.perf_counter() - start
            passes.append(times)

        def span(other: str, passes: list[dict[str, float]] = passes) -> str:
            ratios = [p[other] / p["ours"] for p in passes]
            return f"{min(ratios):.2f}-{max(ratios):.2f}x" if len(ratios) > 1 else f"{ratios[0]:.2f}x"

        rate = {side: len(docs) / min(p[side] for p in passes) for side in sides}
        print(f"{name + ' + edits':<24} {len(docs):>5} {rate['ours']:>12.1f} {rate['datasketch']:>18.1f} "
              f"{span('datasketch'):>11} {rate['datasketch + verify']:>16.1f} {span('datasketch + verify'):>11}")
        quality.append((name, true_pairs(docs, threshold, n), found))
    print(f"\n{'quality (pairs)':<24} {'true':>5}" + "".join(f" {s + ': found/missed/extra':>38}" for s in sides))
    for name, truth, found in quality:
        line = f"{name + ' + edits':<24} {len(truth):>5}"
        for side in sides:
            got = found[side]
            line += f" {f'{len(got & truth)} / {len(truth - got)} / {len(got - truth)}':>38}"
        print(line)
    print("(true: exact Jaccard of the shingle sets >= the threshold over all pairs; extra: reported pairs below it)")
    print(f"import, fresh interpreter, not in the rates above: dedup.minhash {import_seconds('dedup.minhash'):.3f} s, "
          f"datasketch {import_seconds('datasketch'):.3f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--repeat", type=int, default=3, help="passes per side; the best counts")
    parser.add_argument("--num-perm", type=int, default=DEFAULT_NUM_PERM, help="permutations per signature")
    parser.add_argument("--ngram", type=int, default=DEFAULT_NGRAM, help="words per shingle")
    parser.add_argument("--limit", type=int, default=600, help="documents per text set at most")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="Jaccard threshold of the search")
    parser.add_argument("--no-datasketch", action="store_true", help="leave out the search against datasketch")
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
                mismatch = next(((t, o, b) for t, o, b in zip(texts, outputs[side], outputs["baseline"], strict=True)
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
    if not args.no_datasketch:
        against_datasketch(sets, args.num_perm, args.threshold, args.ngram, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
