"""How good and how fast WebText's text extraction is, against trafilatura alone, on real gold pages.

Pages: ``$CORPUSFORGE_TEST_DATA/html_gold/trafilatura_eval_en`` (86 real English pages,
each with "must contain" and "must not contain" snippets; from trafilatura's own tests).
Per page, recall = the share of its must-contain snippets found in the text, precision =
the share of its must-not-contain snippets absent from it, F1 their harmonic mean. Totals:
"pooled" P/R/F1 over all snippets of the pages, and the mean of the per-page F1.

Extractors (each a function from ``(html, url)`` to text, one paragraph per line):

  trafilatura          corpus.webtext.extract_trafilatura: WebText's default (the baseline):
                       corpus.extract's settings plus fast=True, favor_recall=True
  trafilatura-full     corpus.extract.extract_main_text: the same without fast and
                       favor_recall (trafilatura's readability/jusText fallbacks on; C4's)
  trafilatura-default  trafilatura.extract(html, url=url) with trafilatura's defaults
  newspaper3k          newspaper.Article(url).download(input_html=html); .parse(); .text
  combined-previous    the previous rule: trafilatura, then newspaper's text when
                       trafilatura's is under 1000 characters and newspaper's twice as long
  combined             corpus.webtext.extract_combined (--extractor combined): trafilatura,
                       newspaper only where trafilatura's text has fewer than MIN_WORDS words
                       and newspaper's more

Rule search (held out): the pages are split in two halves by a seeded shuffle
(``--seed``). Families of rules choosing newspaper's text over trafilatura's per page
are fitted on the tuning half (best mean page F1, then pooled F1, then fewest pages given
to newspaper) and scored on the held-out half against trafilatura alone (">= trafilatura":
not below it on pooled P, R, F1 or mean page F1):

  short      newspaper when trafilatura's text is under L characters and newspaper's is at
             least k times as long (L=1: only when trafilatura's text is empty)
  agreement  newspaper when at least c of newspaper's word 5-grams are in trafilatura's
             text and trafilatura's text is lo to hi times as long as newspaper's (the
             extra would be boilerplate); needs newspaper on every page
  short, full  the length gate on trafilatura-full's text (scored against the baseline)

``--seeds N`` repeats the fit on the splits of seeds 1..N and counts, per family, how often
the fitted rule is better, equal or worse than trafilatura alone on the held-out half.

Speed: pages/s over the 86 pages, in-process (modules imported before timing, for every
row), ``--repeats`` rounds, the rows' order rotated each round; the ratio is each row's
pages/s over trafilatura's in the same round (min-max over rounds). Run timed under a lock
on a shared machine:

    CORPUSFORGE_TEST_DATA=/path/to/data flock /tmp/bench.lock .venv/bin/python benchmarks/extract_quality.py \
        [--repeats 5] [--seed 15] [--seeds 40]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import newspaper  # noqa: E402
import trafilatura  # noqa: E402

from corpus import webtext  # noqa: E402
from corpus.extract import extract_main_text  # noqa: E402
from corpus.http_decode import decode_html  # noqa: E402

GOLD = Path("html_gold") / "trafilatura_eval_en"
BASELINE = "trafilatura"


@dataclass(frozen=True)
class Page:
    url: str
    html: str
    must: tuple[str, ...]
    must_not: tuple[str, ...]


def load_gold(data: Path) -> list[Page]:
    folder = data / GOLD
    index = json.loads((folder / "evaldata-en-subset.json").read_text(encoding="utf-8"))
    pages = []
    for url, entry in index.items():
        html, _charset = decode_html(gzip.decompress((folder / "eval" / f"{entry['file']}.gz").read_bytes()), "")
        pages.append(Page(url, html, tuple(entry["with"]), tuple(entry["without"])))
    return pages


# -- the extractors -------------------------------------------------------------------------------


def as_lines(text: str | None) -> str:
    return "\n".join(line.strip() for line in (text or "").split("\n") if line.strip())


def trafilatura_default(html: str, url: str | None) -> str:
    return as_lines(trafilatura.extract(html, url=url))


PREVIOUS_BELOW_CHARS, PREVIOUS_MIN_RATIO = 1000, 2.0


_NEWSPAPER_CONFIG = newspaper.Config()
_NEWSPAPER_CONFIG.fetch_images = False
_NEWSPAPER_CONFIG.memoize_articles = False


def newspaper_article(html: str, url: str | None) -> str:
    article = newspaper.Article(url or "", config=_NEWSPAPER_CONFIG)
    article.download(input_html=html)
    try:
        article.parse()
    except Exception:  # a language newspaper has no stopwords for
        return ""
    return as_lines(article.text)


def previous_combined(html: str, url: str | None) -> str:
    primary = webtext.extract_trafilatura(html, url)
    if len(primary) >= PREVIOUS_BELOW_CHARS:
        return primary
    second = webtext.extract_newspaper(html, url)
    return second if second and len(second) >= PREVIOUS_MIN_RATIO * len(primary) else primary


def combined(html: str, url: str | None) -> str:
    return webtext.extract_combined(html, url)[0]


EXTRACTORS = {
    BASELINE: webtext.extract_trafilatura,
    "trafilatura-full": extract_main_text,
    "trafilatura-default": trafilatura_default,
    "newspaper3k": newspaper_article,
    "combined-previous": previous_combined,
    "combined": combined,
}


# -- scores -----------------------------------------------------------------------------------------


def page_scores(page: Page, text: str) -> tuple[float, float, float]:
    """(precision, recall, F1) of one page's text against its snippets."""
    recall = sum(s in text for s in page.must) / len(page.must)
    precision = sum(s not in text for s in page.must_not) / len(page.must_not)
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


@dataclass(frozen=True)
class Totals:
    found: int
    must: int
    avoided: int
    must_not: int
    mean_f1: float

    @property
    def precision(self) -> float:
        return self.avoided / self.must_not

    @property
    def recall(self) -> float:
        return self.found / self.must

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    def at_least(self, other: Totals) -> bool:
        """Not worse than ``other`` on any aggregate (pooled P, R, F1 and mean page F1)."""
        eps = 1e-12
        return all(a >= b - eps for a, b in [(self.precision, other.precision), (self.recall, other.recall),
                                              (self.f1, other.f1), (self.mean_f1, other.mean_f1)])


def totals(pages: list[Page], texts: list[str], subset: list[int]) -> Totals:
    found = sum(s in texts[i] for i in subset for s in pages[i].must)
    avoided = sum(s not in texts[i] for i in subset for s in pages[i].must_not)
    mean_f1 = sum(page_scores(pages[i], texts[i])[2] for i in subset) / len(subset)
    return Totals(found, sum(len(pages[i].must) for i in subset), avoided, sum(len(pages[i].must_not) for i in subset), mean_f1)


def split_halves(pages: list[Page], seed: int) -> tuple[list[int], list[int]]:
    """(tuning, held-out) page indices: URLs sorted, shuffled with ``seed``, cut in two."""
    order = sorted(range(len(pages)), key=lambda i: pages[i].url)
    random.Random(seed).shuffle(order)
    half = len(order) // 2
    return sorted(order[:half]), sorted(order[half:])


# -- rule search --------------------------------------------------------------------------------------


def shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def short_rule(limit: float, ratio: float):
    def choose(t: str, n: str) -> bool:
        return len(t) < limit and bool(n) and len(n) >= ratio * len(t)

    limit_name = "inf" if limit == float("inf") else f"{limit:g}"
    return f"short(L={limit_name} chars, k={ratio:g})", choose


def agreement_rule(contained: float, low: float, high: float):
    def choose(t: str, n: str) -> bool:
        ngrams = shingles(n)
        if not ngrams or not low * len(n) <= len(t) < high * len(n):
            return False
        return len(ngrams & shingles(t)) / len(ngrams) >= contained

    high_name = "inf" if high == float("inf") else f"{high:g}"
    return f"agreement(c={contained:g}, {low:g}<=T/N<{high_name})", choose


def rule_families() -> dict[str, tuple[str, list]]:
    """family -> (the trafilatura row it starts from, its rules)."""
    inf = float("inf")
    short = [short_rule(limit, ratio) for limit in (1, 250, 500, 1000, 2000, 4000, inf) for ratio in (1, 1.5, 2, 3)]
    agreement = [agreement_rule(c, low, high) for c in (0.5, 0.8, 0.95) for low in (1.0, 1.2, 1.5, 2.0)
                 for high in (2, 3, 5, 10, inf) if high > low]
    return {"short": (BASELINE, short), "agreement": (BASELINE, agreement), "short, full": ("trafilatura-full", short)}


def apply_rule(choose, traf: list[str], news: list[str]) -> tuple[list[str], list[int]]:
    picks = [i for i, (t, n) in enumerate(zip(traf, news, strict=True)) if choose(t, n)]
    chosen = set(picks)
    return [news[i] if i in chosen else traf[i] for i in range(len(traf))], picks


def search_rules(pages, texts, news, tune):
    """For each family, the rule fitted on ``tune``: rows of (family, start, rule name, texts, picks)."""
    rows = []
    for family, (start, rules) in rule_families().items():
        best = None
        for name, choose in rules:
            chosen, picks = apply_rule(choose, texts[start], news)
            t = totals(pages, chosen, tune)
            key = (round(t.mean_f1, 12), round(t.f1, 12), -sum(i in set(tune) for i in picks))
            if best is None or key > best[0]:
                best = (key, name, chosen, picks)
        rows.append((family, start, best[1], best[2], best[3]))
    return rows


# -- report ---------------------------------------------------------------------------------------------


def fmt_totals(t: Totals) -> str:
    return f"{t.found:>3}/{t.must:<3} {t.avoided:>3}/{t.must_not:<3} {t.precision:6.4f} {t.recall:6.4f} {t.f1:6.4f} {t.mean_f1:6.4f}"


TOTALS_HEAD = f"{'found':>7} {'avoided':>7} {'P':>6} {'R':>6} {'F1':>6} {'pageF1':>6}"


def time_rows(pages: list[Page], repeats: int) -> dict[str, list[float]]:
    """pages/s of each extractor per round (rows in a rotated order each round)."""
    names = list(EXTRACTORS)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names[round_ % len(names):] + names[: round_ % len(names)]:
            fn = EXTRACTORS[name]
            start = time.perf_counter()
            for page in pages:
                fn(page.html, page.url)
            rates[name].append(len(pages) / (time.perf_counter() - start))
    return rates


def short_url(url: str, width: int = 52) -> str:
    url = url.split("://", 1)[-1]
    return url if len(url) <= width else url[: width - 1] + "~"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA"), help="the shared data folder")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds over all pages (0: quality only)")
    parser.add_argument("--seed", type=int, default=15, help="seed of the tuning/held-out split")
    parser.add_argument("--seeds", type=int, default=40, help="also fit the rules on the splits of seeds 1..N and count "
                                                              "held-out outcomes (0: skip)")
    args = parser.parse_args()
    if not args.data or not (Path(args.data) / GOLD).is_dir():
        raise SystemExit(f"needs the gold pages: set CORPUSFORGE_TEST_DATA or --data (looked for {GOLD})")
    pages = load_gold(Path(args.data))
    tune, held = split_halves(pages, args.seed)
    everything = list(range(len(pages)))
    texts = {name: [fn(p.html, p.url) for p in pages] for name, fn in EXTRACTORS.items()}
    names = list(EXTRACTORS)
    asked = sum(len(t.split()) < webtext.MIN_WORDS for t in texts[BASELINE])  # where combined asks newspaper
    chose = [webtext.extract_combined(p.html, p.url)[1] for p in pages]

    print(f"{len(pages)} gold pages ({GOLD}): {sum(len(p.must) for p in pages)} must-contain, "
          f"{sum(len(p.must_not) for p in pages)} must-not-contain snippets; split seed {args.seed}: "
          f"{len(tune)} tuning, {len(held)} held-out pages")
    print(f"trafilatura {trafilatura.__version__}, newspaper3k {newspaper.__version__}")
    print("P = share of must-not-contain snippets absent, R = share of must-contain found (pooled over pages); "
          "pageF1 = mean of per-page F1\n")

    rates = time_rows(pages, args.repeats) if args.repeats > 0 else {}
    print(f"{'extractor':<21} {'all pages: ' + TOTALS_HEAD:<56}  {'held-out: F1 pageF1':>19}  {'pages/s':>11} {'x ' + BASELINE:>15}")
    for name in names:
        t_all, t_held = totals(pages, texts[name], everything), totals(pages, texts[name], held)
        speed = ratio = ""
        if rates:
            speed = f"{min(rates[name]):.0f}-{max(rates[name]):.0f}"
            ratios = [r / b for r, b in zip(rates[name], rates[BASELINE], strict=True)]
            ratio = f"{min(ratios):.2f}-{max(ratios):.2f}"
        print(f"{name:<21} {'':>11}{fmt_totals(t_all)}  {t_held.f1:>9.4f} {t_held.mean_f1:>6.4f}  {speed:>11} {ratio:>15}")
    print(f"\ncombined: newspaper asked on {asked} page(s) (trafilatura under {webtext.MIN_WORDS} words), "
          f"its text taken on {chose.count(webtext.NEWSPAPER)}")

    print("\nPages where the extractors' F1 differ (T = tuning half, H = held-out):")
    short = {"trafilatura": "traf", "trafilatura-full": "tfull", "trafilatura-default": "tdef", "newspaper3k": "news",
             "combined-previous": "cprev", "combined": "comb"}
    print(f"{'page':<53} {'':>1} " + " ".join(f"{short[n]:>5}" for n in names))
    wins = losses = 0
    for i, page in enumerate(pages):
        f1s = [page_scores(page, texts[name][i])[2] for name in names]
        if len(set(f1s)) > 1:
            print(f"{short_url(page.url):<53} {'T' if i in tune else 'H'} " + " ".join(f"{f:5.2f}" for f in f1s))
        base, news = f1s[0], f1s[names.index("newspaper3k")]
        wins += news > base
        losses += news < base
    print(f"newspaper3k's F1 is higher than trafilatura's on {wins} pages, lower on {losses}")

    print("\nRules choosing newspaper's text per page, fitted on the tuning half, scored on each half:")
    print(f"{'rule':<40} {'half':<9} {TOTALS_HEAD}   >= trafilatura")
    news_texts = [webtext.extract_newspaper(p.html, p.url) for p in pages]
    for _family, start, name, rule_texts, picks in search_rules(pages, texts, news_texts, tune):
        for label, subset in (("tuning", tune), ("held-out", held), ("all", everything)):
            t, b = totals(pages, rule_texts, subset), totals(pages, texts[BASELINE], subset)
            verdict = "yes" if t.at_least(b) else "no"
            title = {"tuning": name, "held-out": f"  on {start}"}.get(label, "")
            print(f"{title:<40} {label:<9} {fmt_totals(t)}   {verdict}")
        print(f"{'':<40} newspaper chosen on {len(picks)} page(s): tuning {sum(i in set(tune) for i in picks)}, "
              f"held-out {sum(i in set(held) for i in picks)}")
    for label, subset in (("tuning", tune), ("held-out", held), ("all", everything)):
        print(f"{'trafilatura (baseline)' if label == 'tuning' else '':<40} {label:<9} {fmt_totals(totals(pages, texts[BASELINE], subset))}")
    if args.seeds > 0:
        print(f"\nThe same fit on the splits of seeds 1..{args.seeds}: held-out result against trafilatura alone "
              "(better: >= on every aggregate and > on F1 or pageF1; worse: below on any)")
        outcomes: dict[str, dict[str, int]] = {}
        for seed in range(1, args.seeds + 1):
            tune_s, held_s = split_halves(pages, seed)
            base = totals(pages, texts[BASELINE], held_s)
            for family, _start, _name, rule_texts, picks in search_rules(pages, texts, news_texts, tune_s):
                t = totals(pages, rule_texts, held_s)
                if not t.at_least(base):
                    outcome = "worse"
                elif t.f1 > base.f1 + 1e-12 or t.mean_f1 > base.mean_f1 + 1e-12:
                    outcome = "better"
                else:
                    outcome = "equal"
                counts = outcomes.setdefault(family, {"better": 0, "equal": 0, "worse": 0, "uses newspaper": 0})
                counts[outcome] += 1
                counts["uses newspaper"] += bool(picks)
        print(f"{'family':<14} {'better':>7} {'equal':>6} {'worse':>6} {'uses newspaper':>15}")
        for family, counts in outcomes.items():
            print(f"{family:<14} {counts['better']:>7} {counts['equal']:>6} {counts['worse']:>6} {counts['uses newspaper']:>15}")


if __name__ == "__main__":
    main()
