"""The cost of marking benchmark examples clean or dirty (model.eval.contamination), per example.

    baseline   index only: dedup.overlap.BenchmarkIndex.build over the benchmark (its
               n-grams hashed, sorted, mapped back to examples), the floor every path pays
    bloom      model.eval.contamination.mark_examples against a Bloom filter file: load
               (memory-mapped, checksum verified), index, one contains() over the
               benchmark's unique n-grams, per-example report (no FP-evidence queries)
    exact      mark_examples against the training shards: index, then every training
               document streamed once (read, hashed, looked up), per-example report

Training corpus (from the real-data folder, --data, else $CORPUSFORGE_TEST_DATA): the
WikiText-2 raw test articles, --copies times (each copy a distinct document), written as
jsonl shards, with --plant LAMBADA passages inside them; the Bloom filter (p = 1e-8) is
built from the same shards beforehand (a one-off, reported apart, as the audit builds it).
Benchmarks: LAMBADA test (5,153 passages), WikiText-2 test (62 articles), PTB test (3,761
lines). Times: best of --repeat runs, one process. The exact path's cost grows with the
corpus (it reads it); the Bloom path's does not (it reads only the bits it probes).
At the end the run checks that Bloom and exact mark the same examples dirty, exit 1 if not.

    python benchmarks/contamination_cost.py [--data ../shared/data] [--copies 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from corpus.records import Document  # noqa: E402
from corpus.shards import read_documents, write_shards  # noqa: E402
from dedup.benchmark_sets import load_benchmark  # noqa: E402
from dedup.bloom import BloomFilter, ngram_meta  # noqa: E402
from dedup.ngrams import NgramConfig, ngram_hashes  # noqa: E402
from dedup.overlap import BenchmarkIndex  # noqa: E402
from model.eval.contamination import mark_examples  # noqa: E402

N = 8  # GPT-2 section 4: 8-grams
ERROR_RATE = 1e-8  # GPT-2 section 4


def best_of(repeat: int, fn):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def training_corpus(data: Path, folder: str, copies: int, plant: int, lambada) -> int:
    wiki = load_benchmark(f"wikitext2:{data / 'lm_benchmarks/wikitext2_raw/wiki.test.raw'}")
    rng = np.random.default_rng(0)
    planted = set(rng.choice(len(lambada.examples), plant, replace=False).tolist())
    docs = []
    for copy in range(copies):
        for a, article in enumerate(wiki.examples):
            docs.append(Document(text=article.text, url=f"https://wiki.example/{copy}/{a}", timestamp="2019-01-01T00:00:00Z"))
    for i, p in enumerate(sorted(planted)):
        doc = docs[(i * 7) % len(docs)]
        docs[(i * 7) % len(docs)] = Document(text=doc.text + "\n\n" + lambada.examples[p].text, url=doc.url,
                                             timestamp=doc.timestamp)
    write_shards(docs, folder, fmt="jsonl", name="train", num_shards=4)
    return len(docs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--copies", type=int, default=4, help="copies of WikiText-2 test in the training corpus")
    parser.add_argument("--plant", type=int, default=50, help="LAMBADA passages planted in the training corpus")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("pass --data or set CORPUSFORGE_TEST_DATA")
    data = Path(args.data)
    config = NgramConfig(n=N)
    lambada = load_benchmark(f"lambada:{data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")
    benches = [lambada, load_benchmark(f"wikitext2:{data / 'lm_benchmarks/wikitext2_raw/wiki.test.raw'}"),
               load_benchmark(f"ptb:{data / 'lm_benchmarks/ptb/ptb.test.txt'}")]
    with tempfile.TemporaryDirectory() as tmp:
        shards = os.path.join(tmp, "shards")
        docs = training_corpus(data, shards, args.copies, args.plant, lambada)
        start = time.perf_counter()
        keys = np.concatenate([ngram_hashes(d.text, config) for d in read_documents(shards)])
        bloom = BloomFilter(max(len(keys), 1), ERROR_RATE, meta=ngram_meta(config))
        bloom.add(keys)
        bloom_path = os.path.join(tmp, "train.bloom")
        bloom.save(bloom_path)
        build = time.perf_counter() - start
        print(f"training corpus: {docs:,} documents (WikiText-2 test x {args.copies} + {args.plant} LAMBADA passages), "
              f"{len(keys):,} {N}-grams; Bloom filter {bloom.m / 8 / 1e6:.2f} MB, k={bloom.k}, built in {build:.2f} s "
              f"(one-off, not below)")
        print(f"best of {args.repeat}; baseline = index only (BenchmarkIndex.build)\n")
        header = f"{'benchmark':<10} {'examples':>8} {'method':<11} {'seconds':>8} {'us/example':>11} {'vs baseline':>11} {'dirty':>6}"
        print(header)
        print("-" * len(header))
        ok = True
        for bench in benches:
            pairs = [(e.id, e.text) for e in bench.examples]
            base, _ = best_of(args.repeat, lambda pairs=pairs, bench=bench: BenchmarkIndex.build(pairs, config, bench.name))
            t_bloom, m_bloom = best_of(args.repeat,
                                       lambda bench=bench: mark_examples(bench, bloom_path, fp_queries=0, progress=False))
            t_exact, m_exact = best_of(args.repeat, lambda bench=bench: mark_examples(bench, shards, progress=False))
            count = len(bench.examples)
            for method, seconds, marks in (("index only", base, None), ("bloom", t_bloom, m_bloom), ("exact", t_exact, m_exact)):
                dirty = "" if marks is None else f"{marks.dirty_count:,}"
                print(f"{bench.name:<10} {count:>8,} {method:<11} {seconds:>8.3f} {seconds / count * 1e6:>11.1f} "
                      f"{seconds / base:>10.2f}x {dirty:>6}")
            if m_bloom.dirty_ids != m_exact.dirty_ids:
                ok = False
                print(f"MISMATCH in {bench.name}: bloom {m_bloom.dirty_count} dirty, exact {m_exact.dirty_count}")
        start = time.perf_counter()
        mark_examples(lambada, bloom_path, fp_queries=1_000_000, progress=False)
        print(f"\nFP evidence (1M random-key queries, GPT-2 section 4) adds {time.perf_counter() - start - t_bloom:.2f} s "
              "per run to the Bloom path (once, not per example)")
    print("bloom and exact mark the same examples dirty" if ok else "bloom and exact DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
