"""The T5 paper's dedup, as written: "discarded all but one of any three-sentence span
occurring more than once in the data set" (``--dedup spans``).

What this implementation does, exactly:

1. A page's sentences are the punkt sentences of each of its lines, in order (a sentence
   never crosses a line, so lines can be rebuilt afterwards).
2. A span is every window of 3 consecutive sentences of the page (a page with fewer
   than 3 sentences has none). Its key is md5 of the three sentences, each with its
   whitespace collapsed and lower-cased, joined by newlines.
3. Each key is owned by the page whose URL has the smallest md5 digest (the same
   deterministic, domain-blind rule as C4's line dedup).
4. In every other page the three sentences of that span are removed (global
   duplicate); a span repeated inside its owner page is removed from the second
   occurrence on (local duplicate). A sentence removed by any span stays removed.
5. Each line is rebuilt from its remaining sentences joined by one space; empty lines
   go. The page is dropped when nothing is left or when fewer than 3 punkt sentences
   remain, as after line dedup.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Callable, Iterable

from dedup.lines import apply_page_floor

SPAN_SENTENCES = 3  # T5 paper, section 2.2: "any three-sentence span"
LINE_DELIMITER = "\n"


def page_sentences(text: str, split_line: Callable[[str], list[str]]) -> list[tuple[int, str]]:
    """``(line index, sentence)`` for every punkt sentence of every line, in order."""
    return [(i, s) for i, line in enumerate(text.split(LINE_DELIMITER)) for s in split_line(line)]


def span_key(sentences: Iterable[str]) -> bytes:
    normalized = LINE_DELIMITER.join(" ".join(s.split()).lower() for s in sentences)
    return hashlib.md5(normalized.encode("utf-8", "surrogatepass")).digest()


def page_span_keys(text: str, split_line: Callable[[str], list[str]]) -> set[bytes]:
    """The distinct span keys of a page."""
    sentences = [s for _, s in page_sentences(text, split_line)]
    return {span_key(sentences[i:i + SPAN_SENTENCES]) for i in range(len(sentences) - SPAN_SENTENCES + 1)}


def remove_duplicate_spans(
    text: str,
    owned_keys: Iterable[bytes],
    *,
    min_num_sentences: int,
    split_line: Callable[[str], list[str]],
    has_sentences: Callable[[str, int], bool],
) -> tuple[str | None, Counter, list[tuple[str, str]]]:
    """Apply span ownership to one page: ``(new text or None, counters, dropped)``."""
    owned = set(owned_keys)
    located = page_sentences(text, split_line)
    sentences = [s for _, s in located]
    removed = [False] * len(sentences)
    counts: Counter = Counter()
    dropped: list[tuple[str, str]] = []
    seen: set[bytes] = set()
    for i in range(len(sentences) - SPAN_SENTENCES + 1):
        window = sentences[i:i + SPAN_SENTENCES]
        key = span_key(window)
        if key not in owned:
            reason = "span-filtered:global_duplicate"
        elif key in seen:
            reason = "span-filtered:local_duplicate"
        else:
            counts["span-passed"] += 1
            seen.add(key)
            continue
        counts[reason] += 1
        dropped.append((reason, " ".join(window)))
        for j in range(i, i + SPAN_SENTENCES):
            removed[j] = True
    counts["sentence-removed"] += sum(removed)
    lines: dict[int, list[str]] = {}
    for (line_index, sentence), gone in zip(located, removed):
        if not gone:
            lines.setdefault(line_index, []).append(sentence)
    new_text = LINE_DELIMITER.join(" ".join(parts) for _, parts in sorted(lines.items()))
    return apply_page_floor(text, new_text, counts, dropped, min_num_sentences, has_sentences)
