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

``--baseline FILE`` also times another version of ``corpus/langid.py`` (for instance the
last commit's: ``git show HEAD:corpus/langid.py > /tmp/langid_head.py``) in the same
process, in CPU seconds, alternating chunks of 500 texts between the two, and checks that
both give identical results. ``--scale PAGES`` uses instead the page texts of
``benchmarks/c4_scale.py``'s Common Crawl-shaped WET set (built once, cached), read as the
C4 reader reads them; with ``--baseline`` only (langdetect itself would take minutes).

    python benchmarks/langid_speed.py [--data ../shared/data] [--repeat 3]
    python benchmarks/langid_speed.py --scale 20000 --baseline /tmp/langid_head.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import gzip
import html
import importlib.util
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parent))

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


def scale_texts(data: Path, pages: int) -> list[str]:
    """The page texts of c4_scale's WET set of ``pages`` pages, as the C4 reader reads them."""
    import c4_scale

    cache = Path(tempfile.gettempdir()) / "corpusforge-c4-scale"  # c4_scale.py's default --cache
    manifest = c4_scale.build_wet_set(data, cache, pages, 0)
    folder = c4_scale.wet_set_folder(cache, pages, 0) / "wet"
    return [d.text for name in manifest["files"] for d in read_archive(str(folder / name), text_mode="c4") if isinstance(d, Document)]


def load_baseline(path: str):
    """Another version of corpus/langid.py, loaded as its own module."""
    spec = importlib.util.spec_from_file_location("langid_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    module._cached_model = module._load_model  # its tables are built here, never kept under its module's name
    return module


def against_baseline(baseline, texts: list[str], repeat: int) -> int:
    """CPU seconds of the baseline's detect_langs and ours over ``texts``, alternating chunks."""
    def detect_with(module):
        def detect(text):
            try:
                return module.detect_langs(text)
            except module.LanguageDetectionError as exc:
                return ("LanguageDetectionError", str(exc))
        return detect

    sides = {"baseline": detect_with(baseline), "ours": detect_with(sys.modules["corpus.langid"])}
    for detect in sides.values():
        detect("warm up: load the profiles")
    chunks = [texts[i : i + 500] for i in range(0, len(texts), 500)]
    print(f"{len(texts)} texts, {sum(map(len, texts)) // max(1, len(texts))} characters each on average; CPU seconds (process time)")
    print(f"{'pass':>4} {'baseline s':>11} {'ours s':>8} {'baseline us/text':>17} {'ours us/text':>13} {'ratio':>7}")
    same = True
    for number in range(1, repeat + 1):
        spent = dict.fromkeys(sides, 0.0)
        for index, chunk in enumerate(chunks):
            order = list(sides) if index % 2 == 0 else list(reversed(sides))
            results = {}
            for side in order:
                start = time.process_time()
                results[side] = [sides[side](text) for text in chunk]
                spent[side] += time.process_time() - start
            same = same and results["baseline"] == results["ours"]
        base, ours = spent["baseline"], spent["ours"]
        print(f"{number:>4} {base:>11.2f} {ours:>8.2f} {base / len(texts) * 1e6:>17.1f} {ours / len(texts) * 1e6:>13.1f} {base / ours:>6.2f}x")
    print(f"outputs identical on all {len(texts)} texts: {same}")
    return 0 if same else 1


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
    parser.add_argument("--baseline", metavar="FILE", help="another version of corpus/langid.py to time ours against, side by side")
    parser.add_argument("--scale", type=int, metavar="PAGES", help="with --baseline: the page texts of c4_scale's set of PAGES pages")
    args = parser.parse_args(argv)
    if args.baseline:
        data = Path(args.data) if args.data else None
        if args.scale:
            texts = scale_texts(data or Path(__file__).resolve().parents[2] / "shared" / "data", args.scale)
        else:
            texts = [t for group in text_sets(data).values() for t in group]
        return against_baseline(load_baseline(args.baseline), texts, args.repeat)
    if args.scale:
        parser.error("--scale needs --baseline")
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
            mismatch = next(((t, o, b) for t, o, b in zip(texts, ours, base, strict=True) if o != b), None)
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
