"""Near-duplicate documents: word 5-gram shingles, MinHash signatures, LSH band keys, and
exact Jaccard verification of every candidate, as plain functions a Beam pipeline wires.

The method (Broder 1997, "On the resemblance and containment of documents"; LSH banding as
in Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets", ch. 3):

1. ``shingles``: a text is normalised (Unicode NFKC, case-folded; a word is a maximal run
   of Unicode letters and digits, everything else — punctuation, whitespace, ``_`` — is a
   separator, so ``"Don't  STOP!"`` and ``"don t stop"`` give the same words). Each word
   is hashed with blake2b (8 bytes, little-endian), and each run of ``n`` consecutive
   words becomes one 64-bit shingle: a polynomial over the word hashes mod 2**64 (base
   ``SHINGLE_BASE``) passed through the MurmurHash3 64-bit finaliser. A text of fewer than
   ``n`` words (none included) has exactly one shingle, the same formula over all its
   words. Nothing depends on Python's ``hash()``: the values are the same in every process,
   on every machine (the tests pin some) for a given Unicode database, i.e. Python minor
   version (NFKC, case folding and letter classes come from it) — pin it across workers.
2. ``MinHasher.signature``: for each of ``num_perm`` hash functions
   ``h_j(x) = ((a_j * x + b_j) mod 2**64) >> 32`` (multiply-add-shift, Dietzfelbinger et
   al. 1997; ``a_j`` odd, ``a_j``/``b_j`` drawn from blake2b of the seed, so stable across
   numpy versions) the signature holds ``min h_j`` over the shingles (uint32). Two
   documents agree on one position with probability ~ their Jaccard similarity.
3. ``band_keys``: the signature is cut into ``bands`` bands of ``rows`` values; each band
   gives one key (band index + its values). Two documents sharing any key are a
   candidate pair; a pair of Jaccard ``s`` is a candidate with probability
   ``1 - (1 - s**rows)**bands`` (the S-curve, ``candidate_probability``).
4. ``verify``: a candidate is a near-duplicate only if its exact Jaccard similarity of
   shingle sets is ``>= threshold``. OpenWebText2 dropped every LSH candidate unverified
   (threshold 0.5, 10 permutations); here LSH only proposes and ``jaccard`` decides, so an
   LSH false positive costs one set intersection and never a document.
5. Keep rule (``losers``), pairwise: a document is dropped when it has a verified
   near-duplicate with a smaller ``keep_key`` (md5 of its id, then the id: "hash before
   comparing", as C4's line dedup, so no site is favoured). No two kept documents are a
   verified pair. In a chain ``a ~ b``, ``b ~ c``, ``a !~ c`` with keys ``a < b < c``,
   both ``b`` and ``c`` are dropped — ``c`` loses to ``b`` even though ``b`` is itself
   dropped, so ``c``'s text (not near ``a``) is gone; with keys ``a < c < b`` only ``b``
   is dropped. Connected components would also drop ``c`` in the first order and more
   besides (everything but one per component); a sequential greedy rule would keep ``c``
   but cannot be computed in one shuffle. The pairwise rule needs only the verified pairs:
   the loser of each is known locally, so it distributes as a flat map + ``Distinct``.

Defaults (``DEFAULT_*`` below): Jaccard threshold 0.8 on word 5-grams, the level of Lee et
al. 2022 ("Deduplicating Training Data Makes Language Models Better", NearDup: 5-gram
MinHash, near-duplicates at ~0.8 similarity). OpenWebText2's 0.5 merges pages that share
only half their 5-grams — same-site templates with different articles, a story and its
follow-up. One changed 20-word sentence in a 300-word page leaves Jaccard 0.85
((296 - 24) / (296 + 24)), so 0.8 still catches it. 96 permutations cut as 16 bands x 6 rows: that is what
``choose_bands(96, 0.8)`` picks (the fewest false positives with a false-negative
probability at the threshold <= 1%), and it uses every permutation. The S-curve:

    Jaccard s            0.3     0.5     0.7     0.8     0.85     0.9
    P(candidate)        0.012   0.223   0.865   0.9923  0.99949  0.999995

so a pair exactly at the threshold is missed with probability 0.77% (FN), 0.05% at 0.85.
GPT-3's 10 hashes can't separate: ``choose_bands(10, 0.8)`` = 5 x 2 makes 76% of the
pairs at s = 0.5 candidates.

Bucket cap: a band bucket of ``m`` documents has ``m (m-1) / 2`` pairs, and a bucket of a
million near-identical boilerplate pages ("enable JavaScript") would be 5e11. Members are
sorted by ``keep_key`` and only pairs ``(i, j)``, ``i < j``, with ``i`` among the first
``bucket_cap`` ("anchors") are proposed: all pairs while ``m <= bucket_cap``, at most
``bucket_cap * m`` beyond. Every document is still compared with the ``bucket_cap``
smallest keys of its bucket, which are the ones that would win it: in a cluster of
near-identical pages every member verifies against the first anchor and is dropped, as
with all pairs. What a large bucket can miss is a pair of two non-anchors where the
larger one matches no anchor (a bucket mixing several clusters); the document is then
still found through any other band it shares with a smaller near-duplicate.
``bucket_losers`` goes further for the pipeline: it stops at a document's first
verified anchor, so a cluster of ``m`` copies costs ~``m`` verifications, not ``k m``.

In Beam::

    docs | ParDo(doc -> [(key, (doc_id, shingles)) for key in band_keys(signature)])
         | GroupByKey() | FlatMap(lambda kv: bucket_losers(kv[1], threshold))
         | Distinct()   -> doc ids to drop, joined back to the documents by id

(or ``candidate_pairs`` -> ``Distinct`` -> join shingles -> ``verify`` -> ``losers``,
which shuffles the shingles once instead of once per band). ``near_duplicates`` does the
same in memory for tests and small runs.

The rules the WebText pipeline runs after its group-bys return a ``common.decision.Decision``
(unit ``pages``; pair tallies ``other``): ``keep_first_copy`` (exact dedup: of the documents
sharing a text hash, the smallest ``keep_key``), ``verified_losers`` (the losers of the
verified candidate pairs of one document) and ``drop_near_duplicate``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import cast

import numpy as np

from common.decision import FILTERED, OTHER, PAGES, PASSED, Decision

DEFAULT_NGRAM = 5  # OpenWebText2 / OpenWebTextCorpus and Lee et al. 2022 (NearDup): word 5-grams
DEFAULT_THRESHOLD = 0.8  # Lee et al. 2022 (NearDup) level on 5-grams; OpenWebText2's 0.5 is aggressive
DEFAULT_NUM_PERM = 96  # = 16 bands x 6 rows, choose_bands(96, 0.8): FN at the threshold 0.77%
DEFAULT_MAX_FALSE_NEGATIVE = 0.01  # choose_bands: most a pair exactly at the threshold may be missed
DEFAULT_BUCKET_CAP = 100  # anchors per band bucket: <= 100 * m candidate pairs in a bucket of m
DEFAULT_SEED = 0

SHINGLE_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit base of the n-gram polynomial
_FMIX_1 = np.uint64(0xFF51AFD7ED558CCD)  # MurmurHash3 fmix64 multipliers (public-domain constants)
_FMIX_2 = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT_33 = np.uint64(33)
_SHIFT_32 = np.uint64(32)
_MASK64 = (1 << 64) - 1
_SIGNATURE_BLOCK = 4096  # shingles per block in signature(): bounds memory to block * num_perm * 8 bytes

_WORD_RE = re.compile(r"[^\W_]+")
_WORD_CACHE: dict[str, bytes] = {}
_WORD_CACHE_SIZE = 1 << 18


# --- shingles ---------------------------------------------------------------------------

def words(text: str) -> list[str]:
    """The normalised words of a text: NFKC, case-folded, maximal runs of letters and digits."""
    return _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())


def word_hashes(tokens: Sequence[str]) -> np.ndarray:
    """blake2b-64 of each word's UTF-8 bytes, little-endian, as uint64 (one per token).

    Digests are memoised per process (a pure function, so only speed depends on it): web
    text is Zipfian, and a lookup costs a fifth of a blake2b call. The memo is emptied when
    it reaches ``_WORD_CACHE_SIZE`` words (~35 MB).
    """
    cache = _WORD_CACHE
    digests = list(map(cache.get, tokens))  # measured 1.1-1.4x a list comprehension (warm memo)
    if None in digests:
        if len(cache) >= _WORD_CACHE_SIZE:
            cache.clear()
        blake2b = hashlib.blake2b
        for i, digest in enumerate(digests):
            if digest is None:
                w = tokens[i]
                digests[i] = cache[w] = blake2b(w.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return np.frombuffer(b"".join(cast("list[bytes]", digests)), dtype="<u8").astype(np.uint64, copy=False)


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    x = np.sort(x)
    keep = np.empty(len(x), dtype=bool)
    keep[:1] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _SHIFT_33)
    x = x * _FMIX_1
    x = x ^ (x >> _SHIFT_33)
    x = x * _FMIX_2
    return x ^ (x >> _SHIFT_33)


def shingles(text: str, n: int = DEFAULT_NGRAM) -> np.ndarray:
    """The distinct word ``n``-gram hashes of a text: sorted unique uint64, never empty.

    A text of fewer than ``n`` words (or none) gives one shingle over all of its words.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    hashes = word_hashes(words(text))
    width = min(n, len(hashes))
    count = len(hashes) - width + 1
    acc = np.zeros(count, dtype=np.uint64)
    for i in range(width):
        acc = acc * SHINGLE_BASE + hashes[i:i + count]
    return _sorted_unique(_fmix64(acc))


def reference_shingles(text: str, n: int = DEFAULT_NGRAM) -> set[int]:
    """``shingles`` in plain Python integers, one n-gram at a time (the oracle and baseline)."""
    hashes = [int.from_bytes(hashlib.blake2b(w.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
              for w in words(text)]
    width = min(n, len(hashes))
    base = int(SHINGLE_BASE)
    out = set()
    for start in range(len(hashes) - width + 1):
        acc = 0
        for h in hashes[start:start + width]:
            acc = (acc * base + h) & _MASK64
        acc ^= acc >> 33
        acc = (acc * int(_FMIX_1)) & _MASK64
        acc ^= acc >> 33
        acc = (acc * int(_FMIX_2)) & _MASK64
        out.add(acc ^ (acc >> 33))
    return out


def _as_shingle_array(shingle_set) -> np.ndarray:
    if isinstance(shingle_set, np.ndarray):
        return shingle_set.astype(np.uint64, copy=False)
    return np.fromiter(shingle_set, dtype=np.uint64)


def jaccard(a, b) -> float:
    """Exact Jaccard similarity |a & b| / |a | b| of two shingle sets (arrays or sets).

    Two empty sets are identical (1.0); ``shingles`` never returns an empty set.
    """
    if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        inter, union = len(a & b), len(a | b)
    else:
        a, b = np.unique(_as_shingle_array(a)), np.unique(_as_shingle_array(b))
        inter = len(np.intersect1d(a, b, assume_unique=True))
        union = len(a) + len(b) - inter
    return inter / union if union else 1.0


# --- MinHash ----------------------------------------------------------------------------

class MinHasher:
    """``num_perm`` multiply-add-shift hash functions drawn from ``seed`` (stable everywhere)."""

    def __init__(self, num_perm: int = DEFAULT_NUM_PERM, seed: int = DEFAULT_SEED):
        if num_perm < 1:
            raise ValueError(f"num_perm must be >= 1, got {num_perm}")
        self.num_perm = num_perm
        self.seed = seed
        draws = [hashlib.blake2b(f"corpusforge-minhash:{seed}:{j}".encode(), digest_size=16).digest()
                 for j in range(num_perm)]
        self.a = np.array([int.from_bytes(d[:8], "little") | 1 for d in draws], dtype=np.uint64)
        self.b = np.array([int.from_bytes(d[8:], "little") for d in draws], dtype=np.uint64)

    def __repr__(self) -> str:
        return f"MinHasher(num_perm={self.num_perm}, seed={self.seed})"

    def signature(self, shingle_set) -> np.ndarray:
        """uint32[num_perm]: ``min over x of ((a_j x + b_j) mod 2**64) >> 32`` per function ``j``.

        An empty set gives all 0xFFFFFFFF.
        """
        x = _as_shingle_array(shingle_set)
        if not len(x):
            return np.full(self.num_perm, np.iinfo(np.uint32).max, dtype=np.uint32)
        a, b = self.a[:, None], self.b[:, None]
        buffer = np.empty((self.num_perm, min(len(x), _SIGNATURE_BLOCK)), dtype=np.uint64)
        sig = None
        for start in range(0, len(x), _SIGNATURE_BLOCK):
            block = x[None, start:start + _SIGNATURE_BLOCK]
            values = buffer[:, :block.shape[1]]  # one buffer, all in place: fresh temporaries
            np.multiply(a, block, out=values)  # of this size cost more than the arithmetic
            values += b
            values >>= _SHIFT_32
            sig = values.min(axis=1) if sig is None else np.minimum(sig, values.min(axis=1), out=sig)
        assert sig is not None  # x is not empty: one block at least
        return sig.astype(np.uint32)

    def reference_signature(self, shingle_set: Iterable[int]) -> np.ndarray:
        """``signature`` in plain Python, one permutation at a time (the oracle and baseline)."""
        values = [int(x) for x in shingle_set]
        out = []
        for a, b in zip(self.a.tolist(), self.b.tolist(), strict=True):
            out.append(min((((a * x + b) & _MASK64) >> 32 for x in values), default=0xFFFFFFFF))
        return np.array(out, dtype=np.uint32)


def estimated_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """The fraction of signature positions that agree: an unbiased estimate of Jaccard."""
    return float(np.mean(np.asarray(sig_a) == np.asarray(sig_b)))


# --- LSH ----------------------------------------------------------------------------------

def band_keys(signature: np.ndarray, bands: int, rows: int) -> list[bytes]:
    """One key per band: the band index (2 bytes, big-endian) + its ``rows`` values (uint32 LE).

    Equal keys <=> same band with identical values, i.e. a candidate pair.
    """
    if bands < 1 or rows < 1 or bands * rows > len(signature) or bands >= 1 << 16:
        raise ValueError(f"{bands} bands x {rows} rows do not fit a signature of {len(signature)}")
    values = np.asarray(signature, dtype="<u4")[:bands * rows].reshape(bands, rows)
    return [band.to_bytes(2, "big") + values[band].tobytes() for band in range(bands)]


def candidate_probability(s: float, bands: int, rows: int) -> float:
    """The LSH S-curve: probability that a pair of Jaccard ``s`` shares at least one band key."""
    return 1.0 - (1.0 - s ** rows) ** bands


@lru_cache(maxsize=256)
def choose_bands(num_perm: int, threshold: float,
                 max_false_negative: float = DEFAULT_MAX_FALSE_NEGATIVE) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` for a Jaccard ``threshold``.

    Since every candidate is verified, a false positive costs one Jaccard computation
    but a false negative keeps a duplicate. So: among the layouts whose false-negative
    probability at the threshold, ``(1 - t**rows)**bands``, is at most
    ``max_false_negative`` (pairs above the threshold are missed less often still), take
    the one with the smallest false-positive area ``integral_0^t P(candidate | s) ds``
    (fewer permutations, then fewer bands, on a tie). If none qualifies, the layout with
    the smallest false-negative probability.
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    if num_perm < 1:
        raise ValueError(f"num_perm must be >= 1, got {num_perm}")
    grid = np.linspace(0.0, threshold, 1001)
    best = None
    for rows in range(1, num_perm + 1):
        bands = np.arange(1, num_perm // rows + 1)
        fn = (1.0 - threshold ** rows) ** bands
        curve = 1.0 - (1.0 - grid[None, :] ** rows) ** bands[:, None]
        fp = ((curve[:, 1:] + curve[:, :-1]) / 2).sum(axis=1) * (grid[1] - grid[0])
        for b, fn_b, fp_b in zip(bands.tolist(), fn.tolist(), fp.tolist(), strict=True):
            feasible = fn_b <= max_false_negative
            rank = (0, round(fp_b, 12), b * rows, b) if feasible else (1, round(fn_b, 12), round(fp_b, 12), b * rows)
            if best is None or rank < best[0]:
                best = (rank, (b, rows))
    assert best is not None  # num_perm >= 1: rows=1 has num_perm layouts
    return best[1]


# --- pairs, verification, keep rule -------------------------------------------------------

def keep_key(doc_id: str) -> bytes:
    """The order of the keep rule: md5 of the id's UTF-8 bytes, then the id (a total order)."""
    raw = doc_id.encode("utf-8", "surrogatepass")
    return hashlib.md5(raw).digest() + raw


def _sorted_members(bucket: Iterable[tuple[str, object]]) -> list[tuple[str, object]]:
    members: dict[str, object] = {}
    for doc_id, payload in bucket:
        members.setdefault(doc_id, payload)  # an id twice in one bucket is one member
    return sorted(members.items(), key=lambda item: keep_key(item[0]))


def candidate_pairs(bucket: Iterable[tuple[str, object]],
                    bucket_cap: int = DEFAULT_BUCKET_CAP) -> Iterator[tuple[str, str]]:
    """The candidate pairs of one band bucket, each ``(smaller, larger)`` by ``keep_key``.

    Members sorted by ``keep_key``; the pairs ``(i, j)``, ``i < j``, with ``i`` among the
    first ``bucket_cap``: all pairs while the bucket has at most ``bucket_cap`` members,
    at most ``bucket_cap * m`` for ``m`` members. Output order does not depend on input
    order. The payload (shingles, or anything) is not looked at.
    """
    if bucket_cap < 1:
        raise ValueError(f"bucket_cap must be >= 1, got {bucket_cap}")
    ids = [doc_id for doc_id, _ in _sorted_members(bucket)]
    for i, first in enumerate(ids[:bucket_cap]):
        for second in ids[i + 1:]:
            yield first, second


def verify(pair: tuple[str, str], shingles_a, shingles_b, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """A candidate is a near-duplicate pair when its exact shingle Jaccard is >= ``threshold``.

    A document is never its own near-duplicate.
    """
    return pair[0] != pair[1] and jaccard(shingles_a, shingles_b) >= threshold


def loser(pair: tuple[str, str]) -> str:
    """The member of a verified pair that the keep rule drops: the larger ``keep_key``."""
    return max(pair, key=keep_key)


def losers(verified_pairs: Iterable[tuple[str, str]]) -> set[str]:
    """Pairwise keep rule: every document with a verified near-duplicate of smaller key."""
    return {loser(pair) for pair in verified_pairs if pair[0] != pair[1]}


def bucket_losers(bucket: Iterable[tuple[str, object]], threshold: float = DEFAULT_THRESHOLD,
                  bucket_cap: int = DEFAULT_BUCKET_CAP) -> list[str]:
    """``losers`` of the verified ``candidate_pairs`` of one bucket, computed with early exit.

    Each member is verified against the smaller anchors in key order and stops at the first
    match, so a bucket of ``m`` near-identical copies costs about ``m`` verifications.
    Returned in key order. Same result as
    ``losers(p for p in candidate_pairs(bucket, cap) if verify(p, ...))``.
    """
    if bucket_cap < 1:
        raise ValueError(f"bucket_cap must be >= 1, got {bucket_cap}")
    members = [(doc_id, _as_shingle_array(s)) for doc_id, s in _sorted_members(bucket)]
    dropped = []
    for j in range(1, len(members)):
        doc_id, sj = members[j]
        if any(jaccard(members[i][1], sj) >= threshold for i in range(min(j, bucket_cap))):
            dropped.append(doc_id)
    return dropped


# --- in memory ----------------------------------------------------------------------------

def near_duplicate_pairs(
    docs: Mapping[str, str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n: int = DEFAULT_NGRAM,
    num_perm: int = DEFAULT_NUM_PERM,
    seed: int = DEFAULT_SEED,
    bands: int | None = None,
    rows: int | None = None,
    bucket_cap: int = DEFAULT_BUCKET_CAP,
) -> set[tuple[str, str]]:
    """Every verified near-duplicate pair ``(smaller, larger)`` among ``docs`` (id -> text).

    The pipeline's steps in memory: shingles, signature, band buckets, ``candidate_pairs``,
    ``verify``. ``bands``/``rows`` default to ``choose_bands(num_perm, threshold)``.
    """
    if (bands is None) != (rows is None):
        raise ValueError("give both bands and rows, or neither")
    if bands is None or rows is None:  # (both or neither, checked above)
        bands, rows = choose_bands(num_perm, threshold)
    hasher = MinHasher(num_perm, seed)
    shingle_sets = {doc_id: shingles(text, n) for doc_id, text in docs.items()}
    buckets: dict[bytes, list[tuple[str, np.ndarray]]] = {}
    for doc_id, shingle_set in shingle_sets.items():
        for key in band_keys(hasher.signature(shingle_set), bands, rows):
            buckets.setdefault(key, []).append((doc_id, shingle_set))
    candidates = {pair for bucket in buckets.values() if len(bucket) > 1
                  for pair in candidate_pairs(bucket, bucket_cap)}
    return {pair for pair in candidates if verify(pair, shingle_sets[pair[0]], shingle_sets[pair[1]], threshold)}


def near_duplicates(docs: Mapping[str, str], **options) -> set[str]:
    """The ids to drop from ``docs`` (id -> text) under the pairwise keep rule.

    ``options`` are those of ``near_duplicate_pairs``.
    """
    return losers(near_duplicate_pairs(docs, **options))


# --- the rules of the pipeline's dedup stages -------------------------------------------------
CANDIDATE_PAIRS = "candidate_pairs"  # LSH candidates checked by exact Jaccard (a tally)
VERIFIED_PAIRS = "verified_pairs"  # of them, pairs at or above the threshold (a tally)


def _sample(doc) -> str:
    return f"{doc.url} {doc.text[:200]}"


def keep_first_copy(key, docs: Iterable, id_of) -> Decision:
    """Exact dedup of the documents that share one text hash: the one with the smallest
    ``keep_key(id_of(doc))`` goes on (counted ``passed``), every other copy is ``filtered``."""
    docs = sorted(docs, key=lambda doc: keep_key(id_of(doc)))
    if len(docs) == 1:
        return Decision.keep(docs[0], PASSED, PAGES)
    return Decision(docs[0], ((PASSED, 1), (FILTERED, len(docs) - 1)), tuple((FILTERED, _sample(d)) for d in docs[1:]),
                    ((PASSED, PAGES), (FILTERED, PAGES)))


def verified_losers(key, groups: Mapping, threshold: float = DEFAULT_THRESHOLD) -> Decision:
    """One document's candidate pairs (``{"pairs": [(pair, first's shingles)], "shingles":
    [its own]}``, keyed by the pair's second member) -> the ``loser`` of every pair that
    ``verify`` accepts; candidates and verified pairs tallied."""
    second = list(groups["shingles"])
    if not second:
        return Decision(None)
    candidates, dropped = 0, []
    for pair, first_shingles in groups["pairs"]:
        candidates += 1
        if verify(pair, first_shingles, second[0], threshold):
            dropped.append(loser(pair))
    counts = tuple((name, n) for name, n in ((CANDIDATE_PAIRS, candidates), (VERIFIED_PAIRS, len(dropped))) if n)
    return Decision(tuple(dropped) or None, counts, (), tuple((name, OTHER) for name, _ in counts))


def drop_near_duplicate(key, groups: Mapping) -> Decision:
    """A document (``{"docs": [doc], "losers": [...]}``) is ``filtered`` when some verified
    pair made it the loser, else it goes on (``passed``)."""
    docs = list(groups["docs"])
    if not docs:
        return Decision(None)
    if list(groups["losers"]):
        return Decision.drop(FILTERED, _sample(docs[0]), PAGES)
    return Decision.keep(docs[0], PASSED, PAGES)

