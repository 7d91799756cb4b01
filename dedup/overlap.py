"""Train/test overlap of a benchmark with a training corpus, and the numbers of the report.

Two ways to learn which benchmark n-grams occur in the training corpus, one report:

- exact: ``BenchmarkIndex.build`` holds every n-gram hash of the (small) benchmark as a
  sorted unique uint64 array; each training document is hashed (``dedup.ngrams``) and
  looked up (``BenchmarkIndex.scan``: a cache-sized table over the top hash bits, then
  ``searchsorted`` for the few candidates). An
  ``OverlapCounter`` accumulates, per benchmark n-gram, in how many training documents it
  occurs and the few smallest training doc ids that contain it; counters from parallel
  workers ``merge`` into the same result as one counter over the whole stream.
- Bloom: ``overlap_from_membership(index, contains)`` with a filter's ``contains`` over the
  benchmark's unique hashes (no doc counts, no doc ids; false positives at the filter's rate).

Both end in ``compute_report(index, found, ...)`` over one boolean per unique benchmark
n-gram. The numbers (``BenchmarkReport``):

- ``percent_found``: % of the benchmark's UNIQUE n-grams found (GPT-2 Table 6 style);
  ``percent_found_weighted``: % of its n-gram POSITIONS whose n-gram was found, so an
  n-gram repeated in the benchmark weighs once per occurrence.
- ``max_doc_count`` (GPT-3 appendix C: "ignore 13-grams found in more than 10 training
  documents"): a found n-gram that occurs in more than that many training documents is
  treated as not found (counted in ``ignored_frequent``); it needs doc counts.
- per example: ``ngrams`` positions, ``found`` positions, ``fraction = found / ngrams``,
  ``dirty`` when ``found > 0`` and ``fraction >= dirty_threshold`` (default 0: any overlap,
  as GPT-3 Table C.1 and GPT-2's LAMBADA study), ``longest_run`` (most consecutive found
  positions) and ``longest_run_words`` (``run + n - 1``; a shorter-than-n example's
  whole-text key counts its own words), ``spans`` (merged character spans of the found
  n-grams in the example text), ``training_docs`` (exact path only).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np

from dedup.ngrams import (
    DEFAULT,
    HASH_ID,
    NgramConfig,
    ngram_char_spans,
    ngram_hashes,
    ngram_hashes_batch,
    ngram_hashes_many,
    word_spans,
)

GPT3_MAX_DOC_COUNT = 10  # GPT-3 appendix C: ignore n-grams found in more than 10 training documents
DEFAULT_MAX_DOC_IDS = 3  # training doc ids kept per benchmark n-gram (the smallest, so merges are exact)
_PREFILTER_SLOTS = 16  # prefilter table slots per benchmark hash (measured: 2.9x faster than sorted searchsorted)
DEFAULT_DIRTY_THRESHOLD = 0.0  # an example is dirty with any overlap (GPT-3 Table C.1, GPT-2 LAMBADA)

_EMPTY_U64 = np.zeros(0, dtype=np.uint64)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


def merge_spans(starts: np.ndarray | Sequence[int], ends: np.ndarray | Sequence[int]) -> list[tuple[int, int]]:
    """Overlapping or touching ``[start, end)`` spans merged; input in n-gram order (both non-decreasing)."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if not len(starts):
        return []
    breaks = np.flatnonzero(starts[1:] > np.maximum.accumulate(ends)[:-1]) + 1
    first = np.concatenate(([0], breaks))
    last = np.concatenate((breaks - 1, [len(starts) - 1]))
    closes = np.maximum.accumulate(ends)[last]
    return list(zip(starts[first].tolist(), closes.tolist(), strict=True))


def _longest_run(flags: np.ndarray) -> int:
    if not flags.any():
        return 0
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())


# --- the benchmark side -----------------------------------------------------------------------

@dataclass
class DocHits:
    """Which benchmark n-grams one training document contains, and where.

    ``positions``: the document's n-gram positions whose hash is in the benchmark (in
    order); ``unique_index``: for each, the index of that hash in ``BenchmarkIndex.hashes``;
    ``examples``: indices of the benchmark examples sharing at least one n-gram.
    """

    doc_id: str
    num_ngrams: int
    positions: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    unique_index: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    examples: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    text: str = field(default="", repr=False)
    config: NgramConfig = field(default=DEFAULT, repr=False)

    def __len__(self) -> int:
        return len(self.positions)

    def __bool__(self) -> bool:
        return len(self.positions) > 0

    @cached_property
    def matched(self) -> np.ndarray:
        """Sorted unique indices (into ``BenchmarkIndex.hashes``) of the n-grams found."""
        return np.unique(self.unique_index)

    @cached_property
    def spans(self) -> list[tuple[int, int]]:
        """The character span in the TRAINING document of each hit position (computed on use)."""
        if not len(self.positions):
            return []
        all_spans = ngram_char_spans(self.text, self.config)
        return [all_spans[p] for p in self.positions.tolist()]

    def merged_spans(self) -> list[tuple[int, int]]:
        """``spans`` with overlapping ones merged: the matched passages of the training doc."""
        spans = self.spans
        return merge_spans([s for s, _ in spans], [e for _, e in spans])


@dataclass
class BenchmarkIndex:
    """Every n-gram hash of a benchmark, and where each occurs.

    ``hashes``: sorted unique uint64. For unique hash ``u``, the examples containing it are
    ``example_members[example_indptr[u]:example_indptr[u + 1]]`` (sorted). Example ``e``'s
    n-gram positions are ``pos_indptr[e]:pos_indptr[e + 1]`` into ``pos_unique`` (index into
    ``hashes``) and ``pos_starts``/``pos_ends`` (character spans in the example text).
    """

    name: str
    config: NgramConfig
    example_ids: list[str]
    hashes: np.ndarray
    example_indptr: np.ndarray
    example_members: np.ndarray
    pos_indptr: np.ndarray
    pos_unique: np.ndarray
    pos_starts: np.ndarray
    pos_ends: np.ndarray
    word_counts: np.ndarray

    @classmethod
    def build(cls, examples: Sequence[tuple[str, str]], config: NgramConfig = DEFAULT,
              name: str = "benchmark") -> BenchmarkIndex:
        """Index ``examples`` (example id, text); ids must be distinct."""
        ids = [example_id for example_id, _ in examples]
        if len(set(ids)) != len(ids):
            raise ValueError("example ids must be distinct")
        texts = [text for _, text in examples]
        per_example = ngram_hashes_many(texts, config)
        counts = np.array([len(h) for h in per_example], dtype=np.int64)
        pos_indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        all_hashes = np.concatenate(per_example) if per_example else _EMPTY_U64
        hashes, pos_unique = np.unique(all_hashes, return_inverse=True)
        pos_unique = pos_unique.astype(np.int64).reshape(-1)
        spans = [span for text in texts for span in ngram_char_spans(text, config)]
        pos_starts = np.array([s for s, _ in spans], dtype=np.int64)
        pos_ends = np.array([e for _, e in spans], dtype=np.int64)
        owner = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
        pairs = np.unique(pos_unique * max(len(texts), 1) + owner)  # (unique hash, example), sorted
        members = pairs % max(len(texts), 1)
        example_indptr = np.searchsorted(pairs // max(len(texts), 1), np.arange(len(hashes) + 1)).astype(np.int64)
        word_counts = np.array([len(word_spans(text, config)) for text in texts], dtype=np.int64)
        return cls(name, config, ids, hashes.astype(np.uint64), example_indptr, members.astype(np.int64),
                   pos_indptr, pos_unique, pos_starts, pos_ends, word_counts)

    def __len__(self) -> int:
        return len(self.hashes)

    @cached_property
    def fingerprint(self) -> str:
        """Identifies the index (scheme, config, hashes): counters merge only on equal ones."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{HASH_ID}|{sorted(self.config.to_dict().items())}|".encode())
        digest.update(self.hashes.astype("<u8").tobytes())
        return digest.hexdigest()

    def examples_of(self, unique_index: int) -> np.ndarray:
        """Indices of the examples that contain the unique hash ``hashes[unique_index]``."""
        return self.example_members[self.example_indptr[unique_index]:self.example_indptr[unique_index + 1]]

    @cached_property
    def _prefilter(self) -> tuple[np.ndarray, np.uint64]:
        """A bool table over the top bits of the hashes (~16 slots per hash, so ~94% of
        non-benchmark queries stop at one lookup in a table that stays in cache): no false
        negatives; candidates go on to ``searchsorted``. Built on first use, never stored.
        """
        bits = int(min(max(np.ceil(np.log2(max(len(self.hashes), 1) * _PREFILTER_SLOTS)), 16), 26))
        shift = np.uint64(64 - bits)
        table = np.zeros(1 << bits, dtype=bool)
        table[self.hashes >> shift] = True
        return table, shift

    def _find(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions of the query hashes that are benchmark n-grams, their indices in ``hashes``)."""
        if not len(self.hashes) or not len(hashes):
            return _EMPTY_I64, _EMPTY_I64
        table, shift = self._prefilter
        candidates = np.flatnonzero(table[hashes >> shift])
        if not len(candidates):
            return _EMPTY_I64, _EMPTY_I64
        queries = hashes[candidates]
        idx = np.searchsorted(self.hashes, queries)
        np.minimum(idx, len(self.hashes) - 1, out=idx)
        hit = self.hashes[idx] == queries
        return candidates[hit].astype(np.int64), idx[hit].astype(np.int64)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """For each query hash its index in ``self.hashes``, or -1."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        out = np.full(len(hashes), -1, dtype=np.int64)
        positions, idx = self._find(hashes)
        out[positions] = idx
        return out

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """Membership of each query hash among the benchmark's n-grams."""
        return self.lookup(hashes) >= 0

    def scan(self, doc_id: str, text: str) -> DocHits:
        """The benchmark n-grams that occur in one training document."""
        hashes = ngram_hashes(text, self.config)
        return self._hits(doc_id, text, *self._find(hashes), len(hashes))

    def scan_many(self, docs: Sequence[tuple[str, str]], hashed: tuple[np.ndarray, np.ndarray] | None = None) -> list[DocHits]:
        """``[scan(doc_id, text) for doc_id, text in docs]``, hashed and looked up as one batch
        (``ngram_hashes_batch``): no fixed per-document cost, which dominates short documents.
        ``hashed``: the batch's ``ngram_hashes_batch(texts, self.config)`` when already computed
        (several indexes with one config scanning the same documents hash them once)."""
        docs = docs if isinstance(docs, list) else list(docs)
        keys, counts = hashed if hashed is not None else ngram_hashes_batch([text for _, text in docs], self.config)
        if len(counts) != len(docs):
            raise ValueError(f"hashed holds {len(counts)} documents' n-grams, the batch has {len(docs)}")
        positions, idx = self._find(keys)
        starts = np.concatenate([[0], np.cumsum(counts)])
        cut = np.searchsorted(positions, starts)  # positions are in order: each document's hits are one slice
        return [self._hits(doc_id, text, positions[cut[i]:cut[i + 1]] - starts[i], idx[cut[i]:cut[i + 1]], int(counts[i]))
                for i, (doc_id, text) in enumerate(docs)]

    def _hits(self, doc_id: str, text: str, positions: np.ndarray, idx: np.ndarray, count: int) -> DocHits:
        hits = DocHits(doc_id, count, text=text, config=self.config)
        if len(positions):
            hits.positions, hits.unique_index = positions, idx
            hits.examples = np.unique(np.concatenate([self.examples_of(u) for u in hits.matched.tolist()]))
        return hits


# --- the training side ------------------------------------------------------------------------

class OverlapCounter:
    """Per benchmark n-gram: how many training documents contain it, and a few of their ids.

    Feed every training document once (``add``); ids should be distinct (a document added
    twice counts twice). ``doc_ids`` keeps, per n-gram, the ``max_doc_ids`` smallest ids (by
    string order), so a merge of counters over parts of a stream equals one counter over it,
    whatever the split or order.
    """

    def __init__(self, index: BenchmarkIndex, max_doc_ids: int = DEFAULT_MAX_DOC_IDS):
        if max_doc_ids < 0:
            raise ValueError(f"max_doc_ids must be >= 0, got {max_doc_ids}")
        self.index = index
        self.max_doc_ids = max_doc_ids
        self.doc_counts = np.zeros(len(index), dtype=np.int64)
        self.doc_ids: dict[int, list[str]] = {}
        self.docs_scanned = 0
        self.ngrams_scanned = 0
        self.docs_with_hits = 0

    def add(self, doc_id: str, text: str) -> DocHits:
        hits = self.index.scan(doc_id, text)
        self.add_hits(hits)
        return hits

    def add_many(self, docs: Sequence[tuple[str, str]], hashed: tuple[np.ndarray, np.ndarray] | None = None) -> list[DocHits]:
        """``add`` for a batch of ``(doc_id, text)``, hashed in one pass (the fast way to stream);
        ``hashed`` as in ``BenchmarkIndex.scan_many``."""
        hits = self.index.scan_many(docs, hashed)
        for h in hits:
            self.add_hits(h)
        return hits

    def add_hits(self, hits: DocHits) -> None:
        self.docs_scanned += 1
        self.ngrams_scanned += hits.num_ngrams
        if not hits:
            return
        self.docs_with_hits += 1
        matched = hits.matched
        self.doc_counts[matched] += 1
        if self.max_doc_ids:
            for u in matched.tolist():
                self._keep_id(u, hits.doc_id)

    def _keep_id(self, u: int, doc_id: str) -> None:
        kept = self.doc_ids.setdefault(u, [])
        if len(kept) < self.max_doc_ids:
            bisect.insort(kept, doc_id)
        elif doc_id < kept[-1]:
            kept.pop()
            bisect.insort(kept, doc_id)

    def _check_compatible(self, fingerprint: str, max_doc_ids: int) -> None:
        if fingerprint != self.index.fingerprint:
            raise ValueError("counters over different benchmark indexes cannot be merged")
        if max_doc_ids != self.max_doc_ids:
            raise ValueError(f"max_doc_ids differ: {self.max_doc_ids} vs {max_doc_ids}")

    def merge(self, other: OverlapCounter) -> OverlapCounter:
        """Add ``other``'s counts into this counter (in place); returns self."""
        self._check_compatible(other.index.fingerprint, other.max_doc_ids)
        self.doc_counts += other.doc_counts
        self.docs_scanned += other.docs_scanned
        self.ngrams_scanned += other.ngrams_scanned
        self.docs_with_hits += other.docs_with_hits
        for u, ids in other.doc_ids.items():
            for doc_id in ids:
                self._keep_id(u, doc_id)
        return self

    def to_dict(self) -> dict:
        """JSON-ready, sparse: only the n-grams found at least once."""
        found = np.flatnonzero(self.doc_counts)
        return {
            "index_fingerprint": self.index.fingerprint,
            "hash_id": HASH_ID,
            "config": self.index.config.to_dict(),
            "max_doc_ids": self.max_doc_ids,
            "docs_scanned": self.docs_scanned,
            "ngrams_scanned": self.ngrams_scanned,
            "docs_with_hits": self.docs_with_hits,
            "found": found.tolist(),
            "doc_counts": self.doc_counts[found].tolist(),
            "doc_ids": [self.doc_ids.get(u, []) for u in found.tolist()],
        }

    @classmethod
    def from_dict(cls, index: BenchmarkIndex, data: Mapping) -> OverlapCounter:
        counter = cls(index, data["max_doc_ids"])
        if data["hash_id"] != HASH_ID:
            raise ValueError(f"counter written with hash scheme {data['hash_id']!r}, this is {HASH_ID!r}")
        counter._check_compatible(data["index_fingerprint"], data["max_doc_ids"])
        found = np.asarray(data["found"], dtype=np.int64)
        counter.doc_counts[found] = np.asarray(data["doc_counts"], dtype=np.int64)
        counter.doc_ids = {u: list(ids) for u, ids in zip(found.tolist(), data["doc_ids"], strict=True) if ids}
        counter.docs_scanned = data["docs_scanned"]
        counter.ngrams_scanned = data["ngrams_scanned"]
        counter.docs_with_hits = data["docs_with_hits"]
        return counter

    def report(self, max_doc_count: int | None = None,
               dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD) -> BenchmarkReport:
        return compute_report(self.index, self.doc_counts > 0, doc_counts=self.doc_counts,
                              max_doc_count=max_doc_count, dirty_threshold=dirty_threshold,
                              doc_ids=self.doc_ids, max_doc_ids=self.max_doc_ids)


# --- the report -------------------------------------------------------------------------------

@dataclass
class ExampleOverlap:
    id: str
    words: int
    ngrams: int
    found: int
    fraction: float
    dirty: bool
    longest_run: int
    longest_run_words: int
    spans: list[tuple[int, int]]
    training_docs: list[str]


@dataclass
class BenchmarkReport:
    benchmark: str
    hash_id: str
    config: dict
    n: int
    unique_ngrams: int
    unique_found: int
    percent_found: float
    total_ngrams: int
    total_found: int
    percent_found_weighted: float
    ignored_frequent: int
    max_doc_count: int | None
    dirty_threshold: float
    dirty_count: int
    clean_count: int
    examples: list[ExampleOverlap]

    @property
    def dirty_ids(self) -> list[str]:
        return [e.id for e in self.examples if e.dirty]

    @property
    def percent_dirty(self) -> float:
        return 100.0 * self.dirty_count / len(self.examples) if self.examples else 0.0

    @property
    def longest_run(self) -> int:
        """The most consecutive found n-gram positions in any one example."""
        return max((e.longest_run for e in self.examples), default=0)

    def to_dict(self) -> dict:
        data = asdict(self)
        for example in data["examples"]:
            example["spans"] = [list(span) for span in example["spans"]]
        return data

    def to_report_row(self, fp_evidence: Mapping | None = None, **extra) -> dict:
        """The per-benchmark dict that ``dedup.report`` renders (its ``REQUIRED_KEYS``).

        ``fp_evidence``: the Bloom filter's false-positive evidence (empty for the exact path,
        whose only false positives are 64-bit collisions); ``extra``: e.g. ``corpus``.
        """
        return {
            "name": self.benchmark, "n": self.n, "unique_ngrams": self.unique_ngrams,
            "unique_found": self.unique_found, "percent_found": self.percent_found,
            "token_weighted_percent": self.percent_found_weighted, "examples": len(self.examples),
            "dirty_examples": self.dirty_count, "clean_examples": self.clean_count,
            "longest_run": self.longest_run, "fp_evidence": dict(fp_evidence or {}),
            "per_example": [{"id": e.id, "ngrams": e.ngrams, "found": e.found, "fraction": e.fraction,
                             "dirty": e.dirty, "longest_run": e.longest_run} for e in self.examples],
            **extra,
        }


def compute_report(index: BenchmarkIndex, found: np.ndarray, *, doc_counts: np.ndarray | None = None,
                   max_doc_count: int | None = None, dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD,
                   doc_ids: Mapping[int, list[str]] | None = None,
                   max_doc_ids: int = DEFAULT_MAX_DOC_IDS) -> BenchmarkReport:
    """The report from one boolean per unique benchmark n-gram (``index.hashes`` order).

    ``doc_counts`` (training documents per n-gram) are needed for ``max_doc_count``;
    ``doc_ids`` (unique index -> training doc ids) fill ``training_docs``.
    """
    found = np.asarray(found, dtype=bool).reshape(-1)
    if len(found) != len(index):
        raise ValueError(f"found has {len(found)} values for {len(index)} benchmark n-grams")
    ignored = np.zeros(len(index), dtype=bool)
    if max_doc_count is not None:
        if doc_counts is None:
            raise ValueError("max_doc_count needs per-n-gram training doc counts (the exact path)")
        ignored = found & (np.asarray(doc_counts) > max_doc_count)
    effective = found & ~ignored
    pos_found = effective[index.pos_unique]
    n = index.config.n
    examples = []
    for e, example_id in enumerate(index.example_ids):
        a, b = int(index.pos_indptr[e]), int(index.pos_indptr[e + 1])
        flags = pos_found[a:b]
        hit_count = int(flags.sum())
        run = _longest_run(flags)
        run_words = 0 if run == 0 else min(run + n - 1, int(index.word_counts[e]))
        fraction = hit_count / (b - a) if b > a else 0.0
        spans, training = [], []
        if hit_count:
            where = np.flatnonzero(flags) + a
            spans = merge_spans(index.pos_starts[where], index.pos_ends[where])
            if doc_ids:
                seen: set[str] = set()
                for u in np.unique(index.pos_unique[where]).tolist():
                    seen.update(doc_ids.get(u, ()))
                training = sorted(seen)[:max_doc_ids]
        examples.append(ExampleOverlap(
            id=example_id, words=int(index.word_counts[e]), ngrams=b - a, found=hit_count, fraction=fraction,
            dirty=hit_count > 0 and fraction >= dirty_threshold, longest_run=run, longest_run_words=run_words,
            spans=spans, training_docs=training))
    unique_ngrams, unique_found = len(index), int(effective.sum())
    total, total_found = len(pos_found), int(pos_found.sum())
    dirty = sum(1 for x in examples if x.dirty)
    return BenchmarkReport(
        benchmark=index.name, hash_id=HASH_ID, config=index.config.to_dict(), n=n,
        unique_ngrams=unique_ngrams, unique_found=unique_found,
        percent_found=100.0 * unique_found / unique_ngrams if unique_ngrams else 0.0,
        total_ngrams=total, total_found=total_found,
        percent_found_weighted=100.0 * total_found / total if total else 0.0,
        ignored_frequent=int(ignored.sum()), max_doc_count=max_doc_count, dirty_threshold=dirty_threshold,
        dirty_count=dirty, clean_count=len(examples) - dirty, examples=examples)


def overlap_from_membership(index_or_examples: BenchmarkIndex | Sequence[tuple[str, str]],
                            contains: Callable[[np.ndarray], np.ndarray], *, config: NgramConfig = DEFAULT,
                            name: str = "benchmark", doc_counts: np.ndarray | None = None,
                            max_doc_count: int | None = None,
                            dirty_threshold: float = DEFAULT_DIRTY_THRESHOLD) -> BenchmarkReport:
    """The report when a membership test over the training corpus (a Bloom filter's
    ``contains``: uint64 hashes -> bool array) says which benchmark n-grams it holds.

    ``config``/``name`` are used only when examples (not an index) are given.
    """
    index = index_or_examples if isinstance(index_or_examples, BenchmarkIndex) \
        else BenchmarkIndex.build(index_or_examples, config, name)
    found = np.asarray(contains(index.hashes), dtype=bool)
    return compute_report(index, found, doc_counts=doc_counts, max_doc_count=max_doc_count,
                          dirty_threshold=dirty_threshold)
