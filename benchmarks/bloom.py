"""Bloom filter of word 8-grams, from raw text to answer: dedup.bloom against rbloom and pybloom-live.

    rbloom     the filter a user would pick today (Rust, ``rbloom.Bloom(n, p)``): each 8-gram
               built as a Python string, ``" ".join`` of its normalised words, then
               ``Bloom.update`` over all of them (its batch call) and ``in`` one string at
               a time (it has no batch query). With the default ``hash_func`` it hashes with
               Python's built-in ``hash``, which is salted per process for strings, so such
               a filter cannot be saved (``save`` refuses); "rbloom, saveable" passes the
               128-bit ``hash_func`` its README asks for persistence (blake2b-128 of the
               UTF-8 bytes here), as an audit that keeps its filter must.
    pybloom-live  the package the users first named: the same strings, ``BloomFilter.add``
               and ``in`` one string at a time (its real cost: it only takes strings)
    ours       dedup.ngrams.ngram_hashes_batch (one uint64 per 8-gram, no strings) +
               dedup.bloom.BloomFilter.add / .contains over the whole batch (their loops in
               the C kernel of dedup.bloom_native where a C compiler is present; the first
               line says which)

All sides see the same words (GPT-2 section 4: lower-cased alphanumeric words): rbloom's
and pybloom-live's through ``dedup.ngrams.words`` (the regular-expression definition),
ours through the byte-stream path of ``ngram_hashes_batch`` (tests check the two agree),
so the word-finding cost is in every side. Our per-process memo of normalised non-ASCII
tokens is emptied before every timed pass (repeats inside one pass still hit it: the
build set is WikiText-2 repeated). Texts, from the real-data folder (--data, else
$CORPUSFORGE_TEST_DATA):

  build    WikiText-2 raw test lines, repeated --copies times (a few million 8-grams)
  query    Penn Treebank test lines (mostly absent: the audit's usual shape, most probes
           stop after ~2 bits) and WikiText-2 test once (all present: every probe done)

Every filter is sized for the distinct 8-grams at p = 1e-8 (so half their bits end up
set, as in real use). Each of --repeat passes runs every side once, in a rotated order;
the tables give 8-grams per second of the best pass, one process on one core, and the
ratio ours / other as the min-max over the passes (each pass's ratio from that pass's
two times). Ours is split into hashing (dedup.ngrams) and filter time.

  end to end   text -> 8-grams -> filter, as a user runs each
  filter only  the filters alone over prebuilt input: rbloom and pybloom-live over the
               prebuilt 8-gram strings (a fresh list each pass, so no string carries a
               cached hash), rbloom also over our uint64 keys as Python ints (its best
               case: ``hash`` of an int is the int), ours over the prebuilt uint64 keys

  large filter  --large random uint64 keys (default 10M: a 48 MB filter, far beyond the CPU
               caches, as every WebText-scale filter is) added and --large / 10 never-added
               random keys queried, ours over the uint64 array, rbloom over the same keys as
               Python ints (strings would need GBs of Python objects at this size)

The memory table gives bits per element against the optimum -ln p / (ln 2)^2 = 38.34, the
fill, the fill^k estimate and a measured false-positive rate: --fp-queries random
never-added 8-gram-like strings ("fp-probe <32 hex digits>", through each side's own
hashing) with the one-sided 95% upper bound. At the end the run checks that all sides
found the same number of 8-grams in each query set (a difference would be a false
positive at 1e-8, or a bug) and exits 1 otherwise.

    python benchmarks/bloom.py [--data ../shared/data] [--copies 10] [--repeat 3] [--no-pybloom] [--large 10000000]
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dedup import bloom_native, ngrams  # noqa: E402
from dedup.bloom import BloomFilter, fp_upper_bound, optimal_parameters  # noqa: E402

N = 8  # GPT-2 section 4: Bloom filters of 8-grams
ERROR_RATE = 1e-8  # GPT-2 section 4
CONFIG = ngrams.NgramConfig(n=N)
HASHING = f"dedup.ngrams ({ngrams.HASH_ID})"
SIDES = ("pybloom-live", "rbloom", "rbloom, saveable", "ours")


def words(text: str) -> list[str]:
    return ngrams.words(text, CONFIG)


def keys_of(texts: list[str]) -> np.ndarray:
    """All 8-gram hashes of the texts, concatenated (``ngram_hashes_batch``)."""
    return ngrams.ngram_hashes_batch(texts, CONFIG)[0]


def ngram_strings(text: str) -> list[str]:
    w = words(text)
    width = min(N, len(w))
    return [" ".join(w[j : j + width]) for j in range(len(w) - width + 1)] if w else []


def all_strings(texts: list[str]) -> list[str]:
    return [gram for text in texts for gram in ngram_strings(text)]


def read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def blake2b_128(gram: str) -> int:
    """A process-independent 128-bit hash, as rbloom asks of a ``hash_func`` to ``save``."""
    return int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=16).digest(), "little", signed=True)


def fp_probe_strings(queries: int, seed: int) -> list[str]:
    """Random never-added 8-gram-like strings (three words each: one n-gram for every side)."""
    raw = np.random.default_rng(seed).integers(0, 1 << 64, size=(queries, 2), dtype=np.uint64)
    return [f"fp probe {a:016x}{b:016x}" for a, b in raw.tolist()]


# -- end to end: text -> 8-grams -> filter ----------------------------------------------------


def ours_build(texts: list[str], capacity: int) -> tuple[BloomFilter, float, float]:
    ngrams._TOKEN_MEMO.clear()  # no head start from an earlier pass
    start = time.perf_counter()
    keys = keys_of(texts)
    middle = time.perf_counter()
    bloom = BloomFilter(capacity, ERROR_RATE)
    bloom.add(keys)
    return bloom, middle - start, time.perf_counter() - middle


def ours_query(bloom: BloomFilter, texts: list[str]) -> tuple[int, float, float]:
    ngrams._TOKEN_MEMO.clear()  # no head start from the build or an earlier pass
    start = time.perf_counter()
    keys = keys_of(texts)
    middle = time.perf_counter()
    found = int(bloom.contains(keys).sum())
    return found, middle - start, time.perf_counter() - middle


def new_other(side: str, capacity: int):
    if side == "pybloom-live":
        import pybloom_live

        return pybloom_live.BloomFilter(capacity=capacity, error_rate=ERROR_RATE)
    import rbloom

    if side == "rbloom":
        return rbloom.Bloom(capacity, ERROR_RATE)
    return rbloom.Bloom(capacity, ERROR_RATE, hash_func=blake2b_128)


def other_build(side: str, texts: list[str], capacity: int):
    start = time.perf_counter()
    bloom = new_other(side, capacity)
    if side == "pybloom-live":
        add = bloom.add
        for text in texts:
            for gram in ngram_strings(text):
                add(gram)
    else:
        bloom.update(gram for text in texts for gram in ngram_strings(text))
    return bloom, time.perf_counter() - start


def other_query(bloom, texts: list[str]) -> tuple[int, float]:
    start = time.perf_counter()
    found = 0
    for text in texts:
        for gram in ngram_strings(text):
            found += gram in bloom
    return found, time.perf_counter() - start


# -- filters alone over prebuilt input --------------------------------------------------------


def filter_only_pass(sides: list[str], build_texts: list[str], build_keys: np.ndarray, capacity: int,
                     query_sets: dict[str, list[str]], query_keys: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Seconds of each filter's own build and query calls over input prepared untimed."""
    out: dict[str, dict[str, float]] = {}
    for side in sides:
        times: dict[str, float] = {}
        if side == "ours":
            start = time.perf_counter()
            bloom = BloomFilter(capacity, ERROR_RATE)
            bloom.add(build_keys)
            times["add"] = time.perf_counter() - start
            for name, keys in query_keys.items():
                start = time.perf_counter()
                int(bloom.contains(keys).sum())
                times[name] = time.perf_counter() - start
        else:
            if side == "rbloom over ints":
                build, queries = build_keys.tolist(), {n: k.tolist() for n, k in query_keys.items()}
                side_filter = "rbloom"
            else:  # fresh strings: no str object carries a cached hash into the timing
                build, queries = all_strings(build_texts), {n: all_strings(t) for n, t in query_sets.items()}
                side_filter = side
            start = time.perf_counter()
            bloom = new_other(side_filter, capacity)
            if side_filter == "pybloom-live":
                add = bloom.add
                for item in build:
                    add(item)
            else:
                bloom.update(build)
            times["add"] = time.perf_counter() - start
            for name, items in queries.items():
                start = time.perf_counter()
                sum(item in bloom for item in items)
                times[name] = time.perf_counter() - start
        out[side] = times
    return out


def large_pass(keys: np.ndarray, absent: np.ndarray, first: str) -> dict[str, dict[str, float]]:
    """Seconds to build a filter of ``keys.size`` keys and to query ``absent``: ours, rbloom (ints)."""
    import rbloom

    out: dict[str, dict[str, float]] = {}
    for side in (("ours", "rbloom over ints") if first == "ours" else ("rbloom over ints", "ours")):
        if side == "ours":
            start = time.perf_counter()
            bloom = BloomFilter(keys.size, ERROR_RATE)
            bloom.add(keys)
            middle = time.perf_counter()
            found = int(bloom.contains(absent).sum())
        else:
            build, queries = keys.tolist(), absent.tolist()
            start = time.perf_counter()
            bloom = rbloom.Bloom(keys.size, ERROR_RATE)
            bloom.update(build)
            middle = time.perf_counter()
            found = sum(q in bloom for q in queries)
            del build, queries
        out[side] = {"add": middle - start, "absent": time.perf_counter() - middle, "found": found}
        del bloom
    return out


# -- report -----------------------------------------------------------------------------------


def rate_and_ratios(count: int, passes: list[dict[str, float]], side: str, op: str) -> tuple[float, str]:
    """8-grams/s of ``side``'s best pass and ours/side ratio min-max over the passes."""
    seconds = [p[side][op] for p in passes if side in p]
    if not seconds:
        return float("nan"), "-"
    ratios = [p[side][op] / p["ours"][op] for p in passes if side in p]
    low, high = min(ratios), max(ratios)
    span = f"{low:.1f}x" if len(ratios) == 1 or f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}x"
    if high < 1.0:
        span = f"{low:.2f}-{high:.2f}x" if len(ratios) > 1 else f"{low:.2f}x"
    return count / min(seconds), span


def print_table(title: str, sides: list[str], ops: list[tuple[str, str, int]], passes: list[dict[str, dict[str, float]]],
                split: dict[str, tuple[float, float]] | None = None) -> None:
    others = [s for s in sides if s != "ours"]
    print(title + "; ratio = ours / it, min-max over the passes")
    header = f"{'operation':<26} {'keys':>10} {'ours /s':>11}" + "".join(
        f" {s + ' /s':>19} {'ratio':>12}" for s in others)
    if split:
        header += f"   {'ours ns/8-gram: hash / filter':>30}"
    print(header)
    print("-" * len(header))
    for op, label, count in ops:
        ours_rate = count / min(p["ours"][op] for p in passes)
        line = f"{label:<26} {count:>10,} {ours_rate:>11,.0f}"
        for side in others:
            rate, span = rate_and_ratios(count, passes, side, op)
            line += f" {rate:>19,.0f} {span:>12}"
        if split:
            hash_s, filter_s = split[op]
            line += f"   {hash_s / count * 1e9:>19.0f} / {filter_s / count * 1e9:<8.0f}"
        print(line)
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--copies", type=int, default=10, help="times the WikiText-2 test split is repeated")
    parser.add_argument("--repeat", type=int, default=3, help="passes; every side once per pass, rotated order")
    parser.add_argument("--no-pybloom", action="store_true", help="leave pybloom-live out (the slowest side)")
    parser.add_argument("--large", type=int, default=10_000_000, help="random keys of the large-filter table (0: none)")
    parser.add_argument("--fp-queries", type=int, default=1_000_000, help="never-added strings for the measured FP rate")
    args = parser.parse_args(argv)
    if not args.data:
        parser.error("no data folder: pass --data or set CORPUSFORGE_TEST_DATA")
    data = Path(args.data) / "lm_benchmarks"
    wiki = read_lines(data / "wikitext2_raw/wiki.test.raw")
    ptb = read_lines(data / "ptb/ptb.test.txt")
    build_texts = wiki * args.copies
    query_sets = {"ptb (absent)": ptb, "wikitext (present)": wiki}
    sides = [s for s in SIDES if not (args.no_pybloom and s == "pybloom-live")]

    build_keys = keys_of(build_texts)
    total, distinct = build_keys.size, np.unique(build_keys).size
    query_keys = {name: keys_of(texts) for name, texts in query_sets.items()}
    sizes = {name: keys.size for name, keys in query_keys.items()}
    print(f"word {N}-grams, p = {ERROR_RATE:g}, hashing: {HASHING}; numpy {np.__version__}, rbloom "
          f"{version('rbloom')}, pybloom-live {version('pybloom-live')}, Python {sys.version.split()[0]}; our filter's loops: "
          + ("C kernel (dedup.bloom_native)" if bloom_native.kernel() else "numpy (no C compiler)"))
    print(f"build: WikiText-2 test x {args.copies} = {total:,} 8-grams ({distinct:,} distinct = capacity); "
          + ", ".join(f"query {k}: {v:,}" for k, v in sizes.items()) + f"; {args.repeat} passes\n")

    ends: list[dict[str, dict[str, float]]] = []
    alone: list[dict[str, dict[str, float]]] = []
    split: dict[str, tuple[float, float]] = {}
    found: dict[str, int] = {}
    filters: dict[str, object] = {}
    alone_sides = [s for s in ("pybloom-live", "rbloom", "rbloom over ints", "ours") if s != "pybloom-live" or s in sides]
    for number in range(args.repeat):
        times: dict[str, dict[str, float]] = {}
        for side in sides[number % len(sides):] + sides[: number % len(sides)]:
            if side == "ours":
                bloom, hash_s, add_s = ours_build(build_texts, distinct)
                times[side] = {"add": hash_s + add_s}
                parts = {"add": (hash_s, add_s)}
                for name, texts in query_sets.items():
                    found[f"{side} {name}"], hash_s, query_s = ours_query(bloom, texts)
                    times[side][name] = hash_s + query_s
                    parts[name] = (hash_s, query_s)
                if times[side]["add"] <= min((p["ours"]["add"] for p in ends), default=math.inf):
                    split.update(parts)
            else:
                bloom, seconds = other_build(side, build_texts, distinct)
                times[side] = {"add": seconds}
                for name, texts in query_sets.items():
                    found[f"{side} {name}"], times[side][name] = other_query(bloom, texts)
            filters[side] = bloom
        ends.append(times)
        order = alone_sides[number % len(alone_sides):] + alone_sides[: number % len(alone_sides)]
        alone.append(filter_only_pass(order, build_texts, build_keys, distinct, query_sets, query_keys))

    ops = [("add", "add (build)", total)] + [(name, f"query {name}", sizes[name]) for name in query_sets]
    print_table("end to end (text -> 8-grams -> filter), 8-grams per second of the best pass",
                sides, ops, ends, split)
    print_table("filter only (strings / keys prebuilt, untimed)", alone_sides, ops, alone)

    if args.large:
        rng = np.random.default_rng(2024)
        large_keys = rng.integers(0, 1 << 64, size=args.large, dtype=np.uint64)
        absent = rng.integers(0, 1 << 64, size=max(1, args.large // 10), dtype=np.uint64)
        large = [large_pass(large_keys, absent, "ours" if number % 2 else "rbloom") for number in range(args.repeat)]
        m_large = optimal_parameters(args.large, ERROR_RATE)[0]
        print_table(f"large filter, filter only: {args.large:,} random keys, {m_large / 8 / 1e6:.0f} MB "
                    f"(found among {absent.size:,} absent: ours {large[-1]['ours']['found']}, "
                    f"rbloom {large[-1]['rbloom over ints']['found']})", ["rbloom over ints", "ours"],
                    [("add", "add (build)", args.large), ("absent", "query absent", absent.size)], large)
        del large_keys, absent

    ours = filters["ours"]
    optimum = -math.log(ERROR_RATE) / math.log(2) ** 2
    probes = fp_probe_strings(args.fp_queries, seed=12345)
    probe_keys = keys_of(probes)
    assert probe_keys.size == len(probes), "each probe string must be exactly one n-gram"
    print(f"{'memory, false positives':<22} {'bits/element':>12} {'vs 38.34':>9} {'k':>4} {'fill':>6} {'fill^k':>9}"
          f" {'measured FP (' + format(args.fp_queries, ',') + ' never-added)':>36} {'95% upper':>10}")
    print(f"{'optimum':<22} {optimum:>12.3f} {'':>9} {-math.log2(ERROR_RATE):>4.1f}")

    def row(name: str, bits: int, k: int, set_bits: int, hits: int) -> None:
        fill = set_bits / bits
        print(f"{name:<22} {bits / distinct:>12.3f} {(bits / distinct / optimum - 1) * 100:>+8.2f}% {k:>4} {fill:>6.3f}"
              f" {fill ** k:>9.2e} {f'{hits} found = {hits / args.fp_queries:.1e}':>36} "
              f"{fp_upper_bound(hits, args.fp_queries):>10.1e}")

    row("ours", ours.m, ours.k, ours.bits_set(), int(ours.contains(probe_keys).sum()))
    for side in ("rbloom", "rbloom, saveable"):
        other = filters[side]
        if side == "rbloom":  # save_bytes refuses the built-in hash: rebuild with the saveable one to read bits
            raw = filters["rbloom, saveable"].save_bytes()
        else:
            raw = other.save_bytes()
        k = int.from_bytes(raw[:8], "little")  # rbloom's save format: k (u64), then the bit array
        set_bits = int(np.unpackbits(np.frombuffer(raw[8:], np.uint8)).sum())
        row(side, other.size_in_bits, k, set_bits, sum(p in other for p in probes))
    if "pybloom-live" in filters:
        other = filters["pybloom-live"]
        row("pybloom-live", other.num_bits, other.num_slices, other.bitarray.count(), sum(p in other for p in probes))
    print("(rbloom's fill and k are read from the saveable filter's bytes: same size, same keys; ours is a numpy array"
          " of m/8 bytes, rbloom a Rust bit vector of the same size, pybloom-live a bitarray plus small Python objects)")

    exact_stream(Path(args.data), args.copies)
    print("\nfound: " + ", ".join(f"{key} {value:,}" for key, value in sorted(found.items())))
    for name in query_sets:
        counts = {side: found[f"{side} {name}"] for side in sides}
        if len(set(counts.values())) > 1:
            print(f"MISMATCH in {name}: " + ", ".join(f"{side} {count:,}" for side, count in counts.items()))
            return 1
    print("all sides found the same number of 8-grams in every query set")
    return 0


def exact_stream(data: Path, copies: int) -> None:
    """Exact mode: training 8-grams per second through ``OverlapCounter.add`` (hash, look up
    against a benchmark index, count documents per n-gram), WikiText-2 articles as the
    training stream against the LAMBADA test index. Target: >= 2M per second per core."""
    from dedup.benchmark_sets import load_benchmark
    from dedup.overlap import BenchmarkIndex, OverlapCounter

    lambada = load_benchmark(f"lambada:{data / 'lm_benchmarks' / 'lambada' / 'lambada_test.jsonl'}")
    index = BenchmarkIndex.build([(e.id, e.text) for e in lambada.examples], name="lambada")
    articles = load_benchmark(f"wikitext2:{data / 'lm_benchmarks' / 'wikitext2_raw' / 'wiki.test.raw'}").texts()
    print(f"\nexact stream (OverlapCounter.add) against the LAMBADA test index ({len(index.hashes):,} unique 8-grams)")
    paragraphs = [line for article in articles for line in article.split("\n") if len(line.split()) > 8]
    for label, docs in (("WikiText-2 articles", articles), ("ASCII-only articles", [a for a in articles if a.isascii()]),
                        ("articles with non-ASCII", [a for a in articles if not a.isascii()]),
                        ("paragraphs (one per doc)", paragraphs)):
        counter, started = OverlapCounter(index), time.perf_counter()
        for number, text in enumerate(docs * copies):
            counter.add(str(number), text)
        seconds = time.perf_counter() - started
        batched, started = OverlapCounter(index), time.perf_counter()
        stream = [(str(number), text) for number, text in enumerate(docs * copies)]
        for start in range(0, len(stream), 256):
            batched.add_many(stream[start:start + 256])
        batched_seconds = time.perf_counter() - started
        assert batched.to_dict() == counter.to_dict()
        print(f"  {label:<26} {counter.ngrams_scanned:>12,} 8-grams  add {counter.ngrams_scanned / seconds / 1e6:>6.2f} M/s"
              f"  add_many (256 docs) {batched.ngrams_scanned / batched_seconds / 1e6:>6.2f} M/s")


if __name__ == "__main__":
    sys.exit(main())
