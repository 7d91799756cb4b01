"""Corpus statistics: the numbers ``corpusforge stats <shards>`` prints and plots.

``compute_stats`` reads the documents once and keeps only counters: totals, a domain
counter (the one part that grows, with the number of distinct hosts), a histogram over
power-of-two length bins, and a counter of lengths for the quantiles. Lengths are kept
exactly below 10,000 characters and to four significant digits above (at most ~9,000
keys per decade), so that counter stays small whatever the corpus size; p50/p90/p99 of
longer documents are therefore exact to within 0.1%, and ``max`` is always exact.

Lengths and the histogram count characters (Python code points); ``bytes`` counts the
UTF-8 encoding of the text; ``words`` counts whitespace-separated tokens
(``len(text.split())``). A domain is the URL's host, lower-cased, without a leading
``www.`` (not the public-suffix registered domain).
"""

from __future__ import annotations

import heapq
import math
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from common.storage import atomic_path
from corpus.records import Document

if TYPE_CHECKING:
    from matplotlib.figure import Figure

QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
# Lengths below this are counted exactly for the quantiles; longer ones to 4 digits.
EXACT_LENGTH_LIMIT = 10_000


@dataclass(frozen=True)
class LengthBin:
    """Documents whose length in characters is in ``[min_characters, max_characters)``."""

    min_characters: int
    max_characters: int
    documents: int


@dataclass(frozen=True)
class CorpusStats:
    """Totals, top domains and the length distribution of one corpus."""

    documents: int
    bytes: int
    characters: int
    words: int
    empty_documents: int
    top_domains: tuple[tuple[str, int], ...]
    length_histogram: tuple[LengthBin, ...]
    length_quantiles: dict[str, int]

    def to_dict(self) -> dict:
        result = asdict(self)
        result["top_domains"] = [{"domain": d, "documents": n} for d, n in self.top_domains]
        return result


def domain_of(url: str) -> str:
    """The URL's host, lower-cased, without ``www.``; ``""`` when it has none."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # e.g. an unbalanced "[" in the host
        return ""
    return host.removeprefix("www.")


def length_bin(length: int) -> int:
    """Index of the power-of-two bin of ``length``: 0 holds 0, bin k holds [2**(k-1), 2**k)."""
    return length.bit_length()


def bin_range(index: int) -> tuple[int, int]:
    return (0, 1) if index == 0 else (1 << (index - 1), 1 << index)


def quantile_key(length: int) -> int:
    """``length`` exactly below EXACT_LENGTH_LIMIT, else rounded down to 4 significant digits."""
    if length < EXACT_LENGTH_LIMIT:
        return length
    scale = 10 ** (len(str(length)) - 4)
    return length // scale * scale


def nearest_rank(lengths: Counter, total: int, q: float) -> int:
    """The smallest length L with at least ceil(q * total) documents of length <= L."""
    rank = max(1, math.ceil(q * total))
    seen = 0
    for length in sorted(lengths):
        seen += lengths[length]
        if seen >= rank:
            return length
    return 0


def compute_stats(docs: Iterable[Document], *, top_domains: int = 20) -> CorpusStats:
    """Count documents, bytes, characters, words, domains and lengths in one pass."""
    documents = size = characters = words = empty = 0
    longest = 0
    domains: Counter = Counter()
    bins: Counter = Counter()
    lengths: Counter = Counter()
    for doc in docs:
        length = len(doc.text)
        documents += 1
        # surrogatepass: a lone surrogate counts 3 bytes, as the U+FFFD a shard stores.
        size += len(doc.text.encode("utf-8", "surrogatepass"))
        characters += length
        words += len(doc.text.split())
        if length == 0:
            empty += 1
        longest = max(longest, length)
        domain = domain_of(doc.url)
        if domain:
            domains[domain] += 1
        bins[length_bin(length)] += 1
        lengths[quantile_key(length)] += 1
    histogram = tuple(LengthBin(*bin_range(i), bins[i]) for i in range(length_bin(longest) + 1)) if documents else ()
    quantiles = {name: nearest_rank(lengths, documents, q) for name, q in QUANTILES.items()}
    quantiles["max"] = longest
    return CorpusStats(
        documents=documents,
        bytes=size,
        characters=characters,
        words=words,
        empty_documents=empty,
        top_domains=tuple(heapq.nsmallest(top_domains, domains.items(), key=lambda item: (-item[1], item[0]))),
        length_histogram=histogram,
        length_quantiles=quantiles,
    )


def _human_bytes(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def format_stats(stats: CorpusStats) -> str:
    """A one-screen, plain-text table of ``stats``."""
    q = stats.length_quantiles
    lines = [
        f"{'documents':<22}{stats.documents:>16,}",
        f"{'empty documents':<22}{stats.empty_documents:>16,}",
        f"{'bytes (UTF-8)':<22}{stats.bytes:>16,}  ({_human_bytes(stats.bytes)})",
        f"{'characters':<22}{stats.characters:>16,}",
        f"{'words':<22}{stats.words:>16,}",
        f"{'characters per doc':<22}"
        f"p50 {q['p50']:,}  p90 {q['p90']:,}  p99 {q['p99']:,}  max {q['max']:,}",
    ]
    if stats.top_domains:
        lines += ["", f"top {len(stats.top_domains)} domains"]
        width = max(len(d) for d, _ in stats.top_domains)
        for rank, (domain, count) in enumerate(stats.top_domains, start=1):
            share = 100 * count / stats.documents
            lines.append(f"{rank:>4}. {domain:<{width}}  {count:>12,}  {share:5.1f}%")
    if stats.length_histogram:
        lines += ["", "characters per doc (histogram, non-empty bins)"]
        peak = max(b.documents for b in stats.length_histogram)
        for b in (b for b in stats.length_histogram if b.documents):
            bar = "#" * round(30 * b.documents / peak)
            lines.append(f"  [{b.min_characters:>9,}, {b.max_characters:>9,})  {b.documents:>12,}  {bar}")
    return "\n".join(lines)


def length_histogram_figure(stats: CorpusStats, title: str = "Document lengths") -> Figure:
    """The length histogram as an Agg-backed matplotlib ``Figure`` (log x axis)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # about 0.5 s: only when a plot is drawn
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(figure)  # render with Agg: no window, no pyplot state
    axes = figure.subplots()
    axes.set_title(title)
    shown = [b for b in stats.length_histogram if b.min_characters > 0]
    first = next((i for i, b in enumerate(shown) if b.documents), None)
    if first is None:
        message = "no documents" if stats.documents == 0 else f"all {stats.documents:,} documents are empty"
        axes.text(0.5, 0.5, message, ha="center", va="center", fontsize=16, transform=axes.transAxes)
        axes.set_axis_off()
        return figure
    shown = shown[first:]
    edges = [b.min_characters for b in shown] + [shown[-1].max_characters]
    axes.stairs([b.documents for b in shown], edges, fill=True, alpha=0.7)
    for (name, value), style in zip(stats.length_quantiles.items(), (":", "--", "-.", "-"), strict=True):
        axes.axvline(value, linestyle=style, linewidth=1, color="black", label=f"{name} {value:,}")
    axes.legend(title="characters")
    axes.set_xscale("log")
    xlabel = "characters per document (log scale)"
    if stats.empty_documents:
        xlabel += f"; {stats.empty_documents:,} empty documents not shown"
    axes.set_xlabel(xlabel)
    axes.set_ylabel("documents")
    figure.tight_layout()
    return figure


def plot_length_histogram(stats: CorpusStats, png_path: str | os.PathLike, title: str = "Document lengths") -> None:
    """Write the length histogram as a PNG, atomically (temporary name, then rename)."""
    with atomic_path(png_path) as temporary:
        length_histogram_figure(stats, title).savefig(temporary, format="png")
