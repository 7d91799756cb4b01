"""C4's line dedup (TFDS c4 3.1.0 ``remove_duplicate_text``): keys, claims and the per-page rule.

Every line's key is ``md5(line.strip().lower())``. For each key the page that keeps the
line is the one whose URL has the smallest md5 digest ("hash before comparing, so no
domain is favoured"). A page then loses every line whose key it does not own (a global
duplicate) and every repeat of a line it already kept (a local duplicate), and is
dropped when nothing is left or fewer than 3 punkt sentences remain.

A page claims each of its keys with ``(md5(url), staging reference)`` (``line_claims``,
``key_claims``); the pipeline gives each key to its smallest claim (``CombinePerKey(min)``),
and every page comes back with the keys it owns to ``remove_duplicate_lines``, which
returns a ``Decision`` (a new page, never the old one changed). Nothing here holds the
corpus.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from common.decision import LINES, PAGES, PASSED, Decision
from corpus.urls import url_digest

LINE_DELIMITER = "\n"
EMPTY, TOO_FEW_SENTENCES = "filtered:empty", "filtered:too_few_sentences"
# What each line-dedup counter counts.
LINE_DEDUP_UNITS = (("line-passed", LINES), ("line-filtered:global_duplicate", LINES), ("line-filtered:local_duplicate", LINES),
                    (PASSED, PAGES), (EMPTY, PAGES), (TOO_FEW_SENTENCES, PAGES))


# The claims cross a shuffle in batches, one per bucket (a key's first byte, modulo this)...
CLAIM_BUCKETS = 256
# ... sent on by a task once it holds this many keys, and at its end.
CLAIMS_PER_BATCH = 1 << 17


def line_key(line: str) -> bytes:
    """The dedup key of a line: md5 of its stripped, lower-cased UTF-8 text (16 bytes)."""
    return hashlib.md5(line.strip().lower().encode("utf-8", "surrogatepass")).digest()


def page_line_keys(text: str) -> set[bytes]:
    """The distinct line keys of a page (each page claims each of its keys once)."""
    return {line_key(line) for line in text.split(LINE_DELIMITER)}


def line_claims(page) -> tuple[bytes, set[bytes]]:
    """What a page (anything with ``url`` and ``text``) claims: (md5 of its URL, its line keys)."""
    return url_digest(page.url), page_line_keys(page.text)


def key_claims(staged: tuple) -> list[tuple[bytes, tuple]]:
    """A staged page's claim on each of its keys: ``(key, (md5(url), staging reference))``.
    The smallest claim owns the key: the smallest md5(url) ("hash before comparing, so no
    domain is favoured"), and on an md5 collision of two URLs a fixed one of them."""
    ref, (digest, keys) = staged
    claim = (digest, ref)
    return [(key, claim) for key in keys]


def keep_smallest_claims(best: dict, claims) -> dict:
    """Fold ``(key, claim)`` pairs into ``best`` (key -> the smallest claim seen so far) and
    return it: the same owner per key as taking ``min`` over all of a key's claims at once,
    in any order and any split of the claims."""
    for key, claim in claims:
        held = best.get(key)
        if held is None or claim < held:
            best[key] = claim
    return best


def claim_batches(best: dict, buckets: int) -> list[tuple[int, list]]:
    """``best`` (key -> smallest claim, ``keep_smallest_claims``) as ``(bucket, [(key, claim),
    ...])`` batches, a key's bucket its first byte modulo ``buckets``: what one task sends
    across the shuffle instead of one element per claim."""
    by_bucket: dict[int, list] = {}
    for key, claim in best.items():
        by_bucket.setdefault(key[0] % buckets, []).append((key, claim))
    return list(by_bucket.items())


def owned_keys_by_file(bucket_batches: tuple) -> list[tuple[int, list]]:
    """One bucket's batches -> ``(staging file id, [(index in file, owned key), ...])``: each
    key goes to its smallest claim ``(md5(url), (file id, index))``, as ``CombinePerKey(min)``
    gives it, grouped by the owner's staging file for ``LoadStaged(batched=True)``."""
    _, batches = bucket_batches
    best: dict = {}
    for batch in batches:
        keep_smallest_claims(best, batch)
    by_file: dict[int, list] = {}
    for key, (_, (file_id, index)) in best.items():
        by_file.setdefault(file_id, []).append((index, key))
    return list(by_file.items())


def remove_duplicate_lines(
    page_and_owned: tuple,
    *,
    min_num_sentences: int,
    has_sentences: Callable[[str, int], bool],
) -> Decision:
    """Apply line ownership to one page: ``page_and_owned`` is (a page with ``text``, the
    line keys it owns); the decision passes on the page with its duplicate lines removed.

    ``has_sentences(text, n)`` says whether the text has at least ``n`` punkt sentences.
    ``min_num_sentences=0`` skips the sentence floor (the reference does so when it
    dedups without cleaning).
    """
    page, owned_keys = page_and_owned
    text = page.text
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
    return apply_page_floor(page, new_text, counts, dropped, min_num_sentences, has_sentences, LINE_DEDUP_UNITS)


def apply_page_floor(page, new_text: str, counts: Counter, dropped: list, min_num_sentences: int, has_sentences, units) -> Decision:
    """After any dedup: drop a page left empty or with fewer than ``min_num_sentences``;
    else pass on the page with ``new_text`` (the same page when nothing was removed)."""
    if not new_text:
        counts[EMPTY] += 1
        dropped.append((EMPTY, page.text))
        return Decision(None, tuple(counts.items()), tuple(dropped), units)
    if min_num_sentences and not has_sentences(new_text, min_num_sentences):
        counts[TOO_FEW_SENTENCES] += 1
        dropped.append((TOO_FEW_SENTENCES, new_text))
        return Decision(None, tuple(counts.items()), tuple(dropped), units)
    counts[PASSED] += 1
    kept = page if new_text == page.text else replace(page, text=new_text)
    return Decision(kept, tuple(counts.items()), tuple(dropped), units)
