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
from collections.abc import Callable, Iterable

from common.decision import OTHER, PAGES, SPANS, Decision
from corpus.sentences import split_sentences
from corpus.urls import url_digest
from dedup.lines import EMPTY, LINE_DELIMITER, PASSED, TOO_FEW_SENTENCES, apply_page_floor

SPAN_SENTENCES = 3  # T5 paper, section 2.2: "any three-sentence span"
# What each span-dedup counter counts (sentence-removed: a tally of sentences).
SPAN_DEDUP_UNITS = (("span-passed", SPANS), ("span-filtered:global_duplicate", SPANS), ("span-filtered:local_duplicate", SPANS),
                    ("sentence-removed", OTHER), (PASSED, PAGES), (EMPTY, PAGES), (TOO_FEW_SENTENCES, PAGES))


def split_line(line: str, split_sentences: Callable[[str], list[str]] = split_sentences) -> list[str]:
    """The punkt sentences of one line (none for a blank line); ``split_sentences`` is the
    process's punkt by default, or a shipped model's (``corpus.sentences.PunktModel``)."""
    return split_sentences(line) if line.strip() else []


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


def span_claims(page, split_line: Callable[[str], list[str]] = split_line) -> tuple[bytes, set[bytes]]:
    """What a page (anything with ``url`` and ``text``) claims: (md5 of its URL, its span
    keys); claims are resolved as in line dedup (``dedup.lines.key_claims``)."""
    return url_digest(page.url), page_span_keys(page.text, split_line)


def remove_duplicate_spans(
    page_and_owned: tuple,
    *,
    min_num_sentences: int,
    split_line: Callable[[str], list[str]],
    has_sentences: Callable[[str, int], bool],
) -> Decision:
    """Apply span ownership to one page: ``page_and_owned`` is (a page with ``text``, the
    span keys it owns); the decision passes on the page with its duplicate spans removed."""
    page, owned_keys = page_and_owned
    text = page.text
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
    for (line_index, sentence), gone in zip(located, removed, strict=True):
        if not gone:
            lines.setdefault(line_index, []).append(sentence)
    new_text = LINE_DELIMITER.join(" ".join(parts) for _, parts in sorted(lines.items()))
    return apply_page_floor(page, new_text, counts, dropped, min_num_sentences, has_sentences, SPAN_DEDUP_UNITS)
