"""C4's line dedup (TFDS c4 3.1.0 ``remove_duplicate_text``): keys and the per-page rule.

Every line's key is ``md5(line.strip().lower())``. For each key the page that keeps the
line is the one whose URL has the smallest md5 digest ("hash before comparing, so no
domain is favoured"). A page then loses every line whose key it does not own (a global
duplicate) and every repeat of a line it already kept (a local duplicate), and is
dropped when nothing is left or fewer than 3 punkt sentences remain.

The pipeline computes owners with a ``CombinePerKey(min)`` over ``(url digest, url)``
and joins them back to pages by URL (``CoGroupByKey``); nothing here holds the corpus.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Callable, Iterable

LINE_DELIMITER = "\n"


def line_key(line: str) -> bytes:
    """The dedup key of a line: md5 of its stripped, lower-cased UTF-8 text (16 bytes)."""
    return hashlib.md5(line.strip().lower().encode("utf-8", "surrogatepass")).digest()


def page_line_keys(text: str) -> set[bytes]:
    """The distinct line keys of a page (each page claims each of its keys once)."""
    return {line_key(line) for line in text.split(LINE_DELIMITER)}


def remove_duplicate_lines(
    text: str,
    owned_keys: Iterable[bytes],
    *,
    min_num_sentences: int,
    has_sentences: Callable[[str, int], bool],
) -> tuple[str | None, Counter, list[tuple[str, str]]]:
    """Apply the ownership verdicts to one page: ``(new text or None, counters, dropped)``.

    ``has_sentences(text, n)`` says whether the text has at least ``n`` punkt sentences.
    ``min_num_sentences=0`` skips the sentence floor (the reference does so when it
    dedups without cleaning).
    """
    owned = set(owned_keys)
    counts: Counter = Counter()
    dropped: list[tuple[str, str]] = []
    kept: list[str] = []
    seen: set[bytes] = set()
    for line in text.split(LINE_DELIMITER):
        key = line_key(line)
        if key not in owned:
            counts["line-filtered:global_duplicate"] += 1
            dropped.append(("line-filtered:global_duplicate", line))
        elif key in seen:
            counts["line-filtered:local_duplicate"] += 1
            dropped.append(("line-filtered:local_duplicate", line))
        else:
            counts["line-passed"] += 1
            kept.append(line)
            seen.add(key)
    new_text = LINE_DELIMITER.join(kept)
    return apply_page_floor(text, new_text, counts, dropped, min_num_sentences, has_sentences)


def apply_page_floor(text, new_text, counts, dropped, min_num_sentences, has_sentences):
    """After any dedup: drop a page left empty or with fewer than ``min_num_sentences``."""
    if not new_text:
        counts["filtered:empty"] += 1
        return None, counts, dropped + [("filtered:empty", text)]
    if min_num_sentences and not has_sentences(new_text, min_num_sentences):
        counts["filtered:too_few_sentences"] += 1
        return None, counts, dropped + [("filtered:too_few_sentences", new_text)]
    counts["passed"] += 1
    return new_text, counts, dropped
