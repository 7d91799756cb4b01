"""How fast corpus.langid.detect_langs is, against langdetect itself, in one process.

    baseline   corpus.langid.reference_detect_langs: langdetect.detect_langs, seed 0, locked
    ours       corpus.langid.detect_langs: the same answer, computed our way

Both run on the same texts (best of --repeat interleaved passes each, after both have
loaded their profiles); the table gives documents per second and the ratio ours/baseline.
Text sets, from the real-data folder (--data, else $CORPUSFORGE_TEST_DATA):

  wet-c4       English Common Crawl WET records as the C4 reader sees them
  html-gold    86 English web pages, text extracted with trafilatura
  non-english  the resiliparse WARC's HTML pages, tags stripped (mostly not English)
  wiki-lines   single lines of WikiText-2 (short texts: slow convergence, many draws)

Without a data folder, the bundled sample crawl's WET documents are used. At the end the
run checks that both gave identical results on every text; on a mismatch it prints the
first differing text and exits with status 1.

    python benchmarks/langid_speed.py [--data ../shared/data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import html
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.langid import LanguageDetectionError, detect_langs, reference_detect_langs  # noqa: E402
from corpus.records import Document, HtmlPage  # noqa: E402
from corpus.warc import read_archive  # noqa: E402


def crude_text(markup: str) -> str:
    markup = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", markup)
    return html.unescape(re.sub(r"(?s)<[^>]*>", " ", markup))


def text_sets(data: Path | None) -> dict[str, list[str]]:
    if data is None:
        from samplecrawl.crawl import write_sample_crawl

        crawl = write_sample_crawl(Path(tempfile.mkdtemp(prefix="langid-bench-")), seed=0)
        return {"sample-crawl": [d.text for p in crawl.wet_paths for d in read_archive(p) if isinstance(d, Document)]}
    sets: dict[str, list[str]] = {}
    wet = [data / "warc/ccscalatools/filter_test_1.wet.gz", data / "warc/whirlwind/whirlwind.warc.wet.gz"]
    sets["wet-c4"] = [d.text for path in wet for d in read_archive(str(path), text_mode="c4") if isinstance(d, Document)]
    pages = sorted((data / "html_gold/trafilatura_eval_en/eval").glob("*.html.gz"))
    try:
        import trafilatura

        extracted = [trafilatura.extract(gzip.decompress(p.read_bytes()).decode("utf-8", "replace")) for p in pages]
        sets["html-gold"] = [t for t in extracted if t]
    except ImportError:
        sets["html-gold"] = [crude_text(gzip.decompress(p.read_bytes()).decode("utf-8", "replace")) for p in pages]
    warc = data / "warc/resiliparse/warcfile.warc.gz"
    sets["non-english"] = [crude_text(p.html) for p in read_archive(str(warc)) if isinstance(p, HtmlPage)]
    lines = (data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8").split("\n")
    sets["wiki-lines"] = [line for line in lines if line.strip()][::25][:100]
    return sets


def run_all(detect, texts: list[str]) -> list:
    results = []
    for text in texts:
        try:
            results.append(detect(text))
        except LanguageDetectionError as exc:
            results.append(("LanguageDetectionError", str(exc)))
    return results


def best_of(repeat: int, texts: list[str]) -> tuple[float, list, float, list]:
    """Best time of each detector over ``repeat`` passes, the passes interleaved so that
    whatever else the machine does falls on both alike."""
    base_s = ours_s = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        base = run_all(reference_detect_langs, texts)
        middle = time.perf_counter()
        ours = run_all(detect_langs, texts)
        base_s, ours_s = min(base_s, middle - start), min(ours_s, time.perf_counter() - middle)
    return base_s, base, ours_s, ours


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the real-data folder")
    parser.add_argument("--repeat", type=int, default=3, help="passes per detector; the best counts")
    args = parser.parse_args(argv)
    sets = text_sets(Path(args.data) if args.data else None)

    load = {}
    for name, detect in (("langdetect", reference_detect_langs), ("ours", detect_langs)):
        start = time.perf_counter()
        detect("warm up: load the profiles")
        load[name] = time.perf_counter() - start

    header = f"{'texts':<12} {'docs':>5} {'chars/doc':>9} {'langdetect docs/s':>18} {'ours docs/s':>12} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    totals = [0, 0.0, 0.0]
    mismatch = None
    for name, texts in sets.items():
        base_s, base, ours_s, ours = best_of(args.repeat, texts)
        if mismatch is None:
            mismatch = next(((t, o, b) for t, o, b in zip(texts, ours, base) if o != b), None)
        chars = sum(len(t) for t in texts) // max(1, len(texts))
        print(f"{name:<12} {len(texts):>5} {chars:>9} {len(texts) / base_s:>18.1f} {len(texts) / ours_s:>12.1f} {base_s / ours_s:>6.1f}x")
        totals[0] += len(texts)
        totals[1] += base_s
        totals[2] += ours_s
    print("-" * len(header))
    print(f"{'all':<12} {totals[0]:>5} {'':>9} {totals[0] / totals[1]:>18.1f} {totals[0] / totals[2]:>12.1f} {totals[1] / totals[2]:>6.1f}x")
    print(f"profile load (once per process): langdetect {load['langdetect']:.2f} s, ours {load['ours']:.2f} s")
    if mismatch is not None:
        text, ours, base = mismatch
        print(f"MISMATCH on a text of {len(text)} characters:\n  ours:       {ours}\n  langdetect: {base}\n  text: {text!r}")
        return 1
    print(f"outputs identical on all {totals[0]} texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
