"""Removing benchmark text from a training document, GPT-3 style (Brown et al. 2020, appendix C).

GPT-3's recipe: "we removed the 13-gram as well as a 200 character window around it,
splitting the original document into pieces. For filtering purposes we define a document
as contaminated if it were split into more than 10 pieces ... pieces less than 200
characters long were discarded."

Input: a document's text and the ``(start, end)`` character spans (end exclusive) where
benchmark n-grams matched it. Exactly what each mode does:

``spans`` (GPT-3)
    Every span is widened by ``margin`` characters on each side (clipped to the text);
    widened spans that overlap or touch (``next.start <= current.end``) are merged. The
    text between merged regions, and before the first and after the last, are the pieces
    (empty ones do not count). If there are more than ``max_splits`` pieces the whole
    document is dropped (``too_many_pieces``); otherwise pieces shorter than
    ``min_piece`` characters are discarded, and when none is left the document is dropped
    (``no_piece_left``). A document without spans is kept whole as one piece, whatever
    its length (``clean``).
``drop``
    A document with any span is dropped (``contaminated``), else kept whole.
``mask``
    Each merged region (spans + margin, merged as above) is replaced by one
    ``mask_token`` (default ``MASK_TOKEN``; pass ``" "`` for a blank, or ``""`` to cut);
    the document is always kept. ``min_piece``/``max_splits`` do not apply.

``decontaminate(matched, **options)`` is the rule the decontamination job runs over each
training document (``match_documents`` finds its spans, hashing a batch once for every
benchmark): a ``common.decision.Decision`` whose record holds the kept pieces as
``Document`` s and, for a document any benchmark matched, the row of ``_removed.jsonl``.

``removed_chars`` counts the original characters that are not in the output: the merged
regions, plus discarded short pieces, or the whole text when the document is dropped.
Empty spans (``start == end``) mark nothing and are ignored; a span outside the text or
with ``start > end`` is an error. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from common.decision import DOCUMENTS, OTHER, Decision
from corpus.records import Document
from dedup.audit import batches, shared_config
from dedup.ngrams import ngram_hashes_batch
from dedup.overlap import BenchmarkIndex

GPT3_MARGIN = 200  # GPT-3 appendix C: "a 200 character window around it"
GPT3_MIN_PIECE = 200  # GPT-3 appendix C: "pieces less than 200 characters long were discarded"
GPT3_MAX_SPLITS = 10  # GPT-3 appendix C: "contaminated if it were split into more than 10 pieces"
MASK_TOKEN = "<|masked|>"
MODES = ("spans", "drop", "mask")


@dataclass(frozen=True)
class Decontaminated:
    """The outcome for one document.

    ``kept``: the kept pieces (a list, in document order) in ``spans`` mode; the text in
    ``drop``/``mask`` mode; ``None`` when the document is dropped. ``reason``: ``clean``,
    ``split`` (spans), ``masked`` (mask), ``contaminated`` (drop), ``too_many_pieces`` or
    ``no_piece_left`` (spans, dropped).
    """

    kept: list[str] | str | None
    removed_chars: int
    reason: str

    @property
    def dropped(self) -> bool:
        return self.kept is None

    @property
    def pieces(self) -> list[str]:
        """The output as a list of texts (empty when dropped)."""
        if self.kept is None:
            return []
        return [self.kept] if isinstance(self.kept, str) else list(self.kept)


def merge_spans(spans, length: int, margin: int = 0) -> list[tuple[int, int]]:
    """``spans`` widened by ``margin`` each side, clipped to ``[0, length]``, sorted, and
    merged where they overlap or touch. Empty spans are ignored."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, not {margin}")
    widened = []
    for span in spans:
        start, end = span
        if not (0 <= start <= end <= length):
            raise ValueError(f"span {tuple(span)} is not within a text of {length} characters")
        if start < end:
            widened.append((max(0, start - margin), min(length, end + margin)))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(widened):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def decontaminate_document(text: str, spans, mode: str = "spans", margin: int = GPT3_MARGIN,
                           min_piece: int = GPT3_MIN_PIECE, max_splits: int = GPT3_MAX_SPLITS,
                           mask_token: str = MASK_TOKEN) -> Decontaminated:
    """Apply ``mode`` (``spans``, ``drop`` or ``mask``) to one document; see the module doc."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if min_piece < 0 or max_splits < 1:
        raise ValueError("min_piece must be >= 0 and max_splits >= 1")
    regions = merge_spans(spans, len(text), margin if mode != "drop" else 0)
    if not regions:
        return Decontaminated([text] if mode == "spans" else text, 0, "clean")
    if mode == "drop":
        return Decontaminated(None, len(text), "contaminated")
    if mode == "mask":
        out, cursor, removed = [], 0, 0
        for start, end in regions:
            out += [text[cursor:start], mask_token]
            removed += end - start
            cursor = end
        out.append(text[cursor:])
        return Decontaminated("".join(out), removed, "masked")
    bounds = [0] + [b for region in regions for b in region] + [len(text)]
    pieces = [text[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2) if bounds[i] < bounds[i + 1]]
    if len(pieces) > max_splits:
        return Decontaminated(None, len(text), "too_many_pieces")
    kept = [piece for piece in pieces if len(piece) >= min_piece]
    if not kept:
        return Decontaminated(None, len(text), "no_piece_left")
    return Decontaminated(kept, len(text) - sum(map(len, kept)), "split")


# --- the rule of the decontamination job ------------------------------------------------------
REMOVED_CHARS = "removed_chars"  # a tally: original characters not in the output


@dataclass(frozen=True)
class Matched:
    """A training document and where benchmark n-grams matched it."""

    doc: Document
    benchmarks: tuple[str, ...]  # the benchmarks with a match, in index order
    spans: tuple[tuple[int, int], ...]  # every benchmark's matched character spans


@dataclass(frozen=True)
class Decontamination:
    """What became of one document: its kept pieces and, when a benchmark matched it, the
    ``_removed.jsonl`` row saying which benchmarks, why and how much was removed."""

    pieces: tuple[Document, ...]
    removed: dict | None


def match_documents(indexes: Mapping[str, BenchmarkIndex], docs: Iterable[tuple[str, Document]]):
    """``(doc_id, Document)`` pairs -> a ``Matched`` per document, in order; each batch is
    hashed once for every benchmark (``dedup.audit.SCAN_BATCH`` documents at a time)."""
    for batch in batches(docs):
        texts = [(doc_id, doc.text) for doc_id, doc in batch]
        hashed = ngram_hashes_batch([text for _, text in texts], shared_config(indexes))
        scanned = {name: index.scan_many(texts, hashed) for name, index in indexes.items()}
        for i, (_, doc) in enumerate(batch):
            spans, benchmarks = [], []
            for name, hits in scanned.items():
                if hits[i]:
                    spans += list(hits[i].spans)
                    benchmarks.append(name)
            yield Matched(doc, tuple(benchmarks), tuple(spans))


def decontaminate(matched: Matched, mode: str = "spans", margin: int = GPT3_MARGIN, min_piece: int = GPT3_MIN_PIECE,
                  max_splits: int = GPT3_MAX_SPLITS, mask_token: str = MASK_TOKEN) -> Decision:
    """``decontaminate_document`` on one matched document, as a ``Decision``: counted by its
    reason (``clean``, ``split``, ... ; one per document) and ``removed_chars``; its record a
    ``Decontamination`` (no piece when the document is dropped, a piece number in ``meta``
    when it was split), never the input changed."""
    doc = matched.doc
    result = decontaminate_document(doc.text, matched.spans, mode, margin, min_piece, max_splits, mask_token)
    pieces = []
    for number, text in enumerate(result.pieces):
        meta = dict(doc.meta)
        if result.reason == "split":
            meta["piece"] = str(number)
        pieces.append(replace(doc, text=text, meta=meta))
    removed = None
    if matched.benchmarks:
        removed = {"url": doc.url, "benchmarks": list(matched.benchmarks), "reason": result.reason,
                   "removed_chars": result.removed_chars, "spans": len(matched.spans)}
    counts = ((result.reason, 1), (REMOVED_CHARS, result.removed_chars))
    units = ((result.reason, DOCUMENTS), (REMOVED_CHARS, OTHER))
    dropped = ((result.reason, f"{doc.url} {doc.text}"),) if result.dropped else ()
    return Decision(Decontamination(tuple(pieces), removed), counts, dropped, units)

