"""Near-duplicate detection (dedup/minhash.py): shingles, MinHash, LSH, verification, keep rule."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.decision import PAGES
from corpus.records import Document
from dedup import minhash
from dedup.minhash import (
    DEFAULT_NUM_PERM,
    DEFAULT_THRESHOLD,
    MinHasher,
    band_keys,
    bucket_losers,
    candidate_pairs,
    candidate_probability,
    choose_bands,
    estimated_jaccard,
    jaccard,
    keep_key,
    losers,
    near_duplicate_pairs,
    near_duplicates,
    reference_shingles,
    shingles,
    verify,
    words,
)

REPO = Path(__file__).resolve().parents[1]
FOX = "The quick brown fox jumps over the lazy dog."
# Pinned values: shingles and signatures must never change between runs, processes or
# machines, or a corpus deduplicated in two runs would not agree with itself.
FOX_SHINGLES = [0xA97DD134066C45FF, 0xBED1F2E2A4370CCE, 0xCB64269667B098CA, 0xE617414FA4529762, 0xE99557D6F7779B39]
FOX_SIGNATURE_MD5 = "73735819507c18ba452a427d466acd70"  # md5 of MinHasher(96, seed 0) signature, uint32 LE


def vocabulary(size: int = 3000, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return sorted({"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)})


VOCAB = vocabulary()


def sentence(rng: random.Random, length: int = 15) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(length)).capitalize() + "."


def document(rng: random.Random, sentences: int = 20, length: int = 15) -> list[str]:
    """A synthetic document as a list of sentences (20 x 15 = 300 words by default)."""
    return [sentence(rng, length) for _ in range(sentences)]


def random_sets(rng: np.random.Generator, common: int, only_a: int, only_b: int):
    """Two shingle arrays with exactly ``common / (common + only_a + only_b)`` Jaccard."""
    values = np.unique(rng.integers(0, 2**64, size=2 * (common + only_a + only_b), dtype=np.uint64))
    values = rng.permutation(values)[:common + only_a + only_b]
    shared, a_only, b_only = np.split(values, [common, common + only_a])
    return np.concatenate([shared, a_only]), np.concatenate([shared, b_only])


# --- shingles -------------------------------------------------------------------------------

def test_words_are_case_punctuation_and_unicode_form_insensitive():
    assert words("Don't  STOP!\n(now)") == ["don", "t", "stop", "now"]
    assert words("snake_case ﬁne ＡＢＣ Straße café") == words("snake case fine abc STRASSE cafe\u0301")
    assert shingles("Hello, World! How are you today?").tolist() == shingles("hello world how  are you\ttoday").tolist()


def test_shingles_are_distinct_sorted_word_ngrams():
    text = "a b c d e f a b c d e"  # 7 five-grams, of which "a b c d e" twice
    s = shingles(text)
    assert s.dtype == np.uint64 and len(s) == 6 and (np.diff(s.astype(np.float64)) > 0).all()
    assert len(shingles(text, n=1)) == 6 and len(shingles(text, n=11)) == 1


@pytest.mark.parametrize("text", ["", "   ...  ", "one", "one two three four", "one two three four five"])
def test_short_texts_have_exactly_one_shingle(text):
    assert len(shingles(text)) == 1
    assert shingles(text).tolist() != shingles(text + " more").tolist()


@pytest.mark.parametrize("text", [FOX, "", "one", "a b c d e f a b c d e", "Ünïcödé – “quotes” and 数字 123 \ud800 x"])
def test_numpy_shingles_and_signature_equal_the_plain_python_reference(text):
    assert set(shingles(text).tolist()) == reference_shingles(text)
    hasher = MinHasher(num_perm=40, seed=3)
    assert hasher.signature(shingles(text)).tolist() == hasher.reference_signature(reference_shingles(text)).tolist()


def test_jaccard_is_exact_on_arrays_and_sets():
    a, b = shingles("a b c d e f g h"), shingles("a b c d e f g x")  # 4 five-grams each, 3 shared
    assert jaccard(a, b) == jaccard(set(a.tolist()), set(b.tolist())) == 3 / 5
    assert jaccard(a, a) == 1.0 and jaccard(set(), set()) == 1.0


def test_signature_of_the_empty_set_is_all_ones():
    hasher = MinHasher(num_perm=8)
    empty = np.array([], dtype=np.uint64)
    assert hasher.signature(empty).tolist() == hasher.reference_signature([]).tolist() == [0xFFFFFFFF] * 8


def test_signature_of_a_long_document_spans_several_blocks():
    rng = random.Random(1)
    text = " ".join(rng.choice(VOCAB) for _ in range(10_000))  # > _SIGNATURE_BLOCK shingles
    s = shingles(text)
    assert len(s) > minhash._SIGNATURE_BLOCK
    hasher = MinHasher(num_perm=8)
    assert hasher.signature(s).tolist() == hasher.reference_signature(s.tolist()).tolist()


@pytest.mark.pipeline  # fresh Python processes
def test_hashes_are_pinned_and_identical_in_other_processes():
    assert shingles(FOX).tolist() == FOX_SHINGLES
    signature = MinHasher().signature(shingles(FOX))
    assert signature.dtype == np.uint32 and len(signature) == DEFAULT_NUM_PERM
    assert hashlib.md5(signature.astype("<u4").tobytes()).hexdigest() == FOX_SIGNATURE_MD5
    script = (
        "import json, sys\n"
        "from dedup.minhash import MinHasher, shingles, band_keys\n"
        "s = shingles(sys.argv[1])\n"
        "sig = MinHasher(num_perm=32, seed=5).signature(s)\n"
        "print(json.dumps([s.tolist(), sig.tolist(), [k.hex() for k in band_keys(sig, 8, 4)]]))\n"
    )
    text = FOX + " Pack my box with five dozen liquor jugs!"
    s = shingles(text)
    sig = MinHasher(num_perm=32, seed=5).signature(s)
    expected = [s.tolist(), sig.tolist(), [k.hex() for k in band_keys(sig, 8, 4)]]
    for hash_seed in ("0", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(REPO))
        out = subprocess.run([sys.executable, "-c", script, text], env=env, cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
        assert json.loads(out) == expected


def test_minhasher_is_deterministic_from_its_seed():
    s = shingles(FOX)
    assert MinHasher(64, seed=9).signature(s).tolist() == MinHasher(64, seed=9).signature(s).tolist()
    assert MinHasher(64, seed=9).signature(s).tolist() != MinHasher(64, seed=10).signature(s).tolist()
    assert MinHasher(64, seed=9).signature(s)[:32].tolist() == MinHasher(32, seed=9).signature(s).tolist()


# --- the estimator and the S-curve ----------------------------------------------------------

@pytest.mark.parametrize("true_j", [0.1, 0.3, 0.5, 0.8, 0.9])
def test_signature_agreement_estimates_jaccard(true_j):
    """Each position agrees with probability J (up to 2**-32 ties), so the agreement count of
    K positions is Binomial(K, J): one estimate lies within 5 sigma = 5 sqrt(J(1-J)/K) (a
    miss has probability < 1e-6) and the mean of 100 independent pairs within 4 sigma/10."""
    rng = np.random.default_rng(int(true_j * 100))
    hasher = MinHasher(num_perm=128, seed=1)
    union = 400
    common = round(true_j * union)
    sigma = math.sqrt(true_j * (1 - true_j) / hasher.num_perm)
    estimates = []
    for _ in range(100):
        a, b = random_sets(rng, common, (union - common) // 2, union - common - (union - common) // 2)
        assert jaccard(a, b) == pytest.approx(common / union)
        est = estimated_jaccard(hasher.signature(a), hasher.signature(b))
        assert abs(est - common / union) <= 5 * sigma
        estimates.append(est)
    assert abs(np.mean(estimates) - common / union) <= 4 * sigma / 10


def test_candidate_rate_follows_the_s_curve():
    """200 pairs at exactly J = 0.7 under 16 x 6 bands: candidates ~ Binomial(200, P(0.7))."""
    rng = np.random.default_rng(70)
    hasher = MinHasher(num_perm=96, seed=2)
    hits = 0
    for _ in range(200):
        a, b = random_sets(rng, 140, 30, 30)
        keys_a = set(band_keys(hasher.signature(a), 16, 6))
        hits += bool(keys_a & set(band_keys(hasher.signature(b), 16, 6)))
    p = candidate_probability(0.7, 16, 6)
    assert abs(hits / 200 - p) <= 4 * math.sqrt(p * (1 - p) / 200)


def test_default_bands_and_documented_s_curve():
    assert choose_bands(DEFAULT_NUM_PERM, DEFAULT_THRESHOLD) == (16, 6)
    expected = {0.3: 0.0116, 0.5: 0.2227, 0.7: 0.8650, 0.8: 0.9923, 0.85: 0.9995, 0.9: 1.0000}
    for s, p in expected.items():
        assert candidate_probability(s, 16, 6) == pytest.approx(p, abs=1e-4)
    assert 1 - candidate_probability(DEFAULT_THRESHOLD, 16, 6) == pytest.approx(0.0077, abs=1e-4)


@pytest.mark.parametrize("num_perm", [16, 32, 64, 96, 128, 256])
@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_choose_bands_meets_the_false_negative_bound(num_perm, threshold):
    bands, rows = choose_bands(num_perm, threshold)
    assert bands * rows <= num_perm
    assert 1 - candidate_probability(threshold, bands, rows) <= 0.01
    stricter = choose_bands(num_perm, threshold, max_false_negative=0.001)
    assert 1 - candidate_probability(threshold, *stricter) <= 1 - candidate_probability(threshold, bands, rows)


def test_choose_bands_with_too_few_permutations_minimises_false_negatives():
    assert choose_bands(4, 0.5) == (4, 1)  # no layout of <= 4 permutations gets FN(0.5) <= 1%
    assert 1 - candidate_probability(0.5, 4, 1) == 0.0625


def test_band_keys_hold_the_band_index_and_values():
    signature = np.arange(12, dtype=np.uint32)
    keys = band_keys(signature, 3, 4)
    assert keys[1] == (1).to_bytes(2, "big") + np.array([4, 5, 6, 7], dtype="<u4").tobytes()
    assert len(band_keys(signature, 2, 5)) == 2  # bands * rows may be fewer than the signature
    with pytest.raises(ValueError):
        band_keys(signature, 4, 4)


# --- finding near-duplicates ------------------------------------------------------------------

def test_exact_duplicates_collide_in_every_band_and_verify():
    rng = random.Random(3)
    text = " ".join(document(rng))
    variant = text.upper().replace(".", " !! ").replace(" ", "\n ")  # the same words
    hasher = MinHasher()
    assert band_keys(hasher.signature(shingles(text)), 16, 6) == band_keys(hasher.signature(shingles(variant)), 16, 6)
    assert verify(("a", "b"), shingles(text), shingles(variant))
    assert not verify(("a", "a"), shingles(text), shingles(text))  # never its own duplicate
    pairs = near_duplicate_pairs({"a": text, "b": variant, "c": text})
    assert pairs == {tuple(sorted(p, key=keep_key)) for p in (("a", "b"), ("a", "c"), ("b", "c"))}


def test_one_changed_sentence_in_a_300_word_document_is_found_and_verified():
    rng = random.Random(4)
    found = 0
    for trial in range(20):
        original = document(rng)
        edited = list(original)
        edited[rng.randrange(len(edited))] = sentence(rng)
        a, b = " ".join(original), " ".join(edited)
        assert len(words(a)) == 300
        j = jaccard(shingles(a), shingles(b))
        assert 0.85 <= j < 1  # (296 - 19) / (296 + 19) = 0.879 unless the sentence is at an end
        found += near_duplicates({f"orig-{trial}": a, f"copy-{trial}": b}) == {
            max(f"orig-{trial}", f"copy-{trial}", key=keep_key)}
    assert found == 20


def test_unrelated_documents_are_not_candidates():
    rng = random.Random(5)
    docs = {f"doc-{i}": " ".join(document(rng)) for i in range(300)}
    hasher = MinHasher()
    buckets = {}
    for doc_id, text in docs.items():
        for key in band_keys(hasher.signature(shingles(text)), 16, 6):
            buckets.setdefault(key, []).append(doc_id)
    assert max(len(b) for b in buckets.values()) == 1
    assert near_duplicates(docs) == set()


def test_lsh_false_positives_are_rejected_by_verification():
    """One row per band: any single agreeing minhash makes a candidate, so a pair at
    Jaccard ~0.35 is a candidate (P = 1 - 0.65**96), and verification must reject it."""
    rng = random.Random(6)
    base = document(rng)
    a = " ".join(base)
    b = " ".join(base[:10] + document(rng, sentences=10))  # half the sentences shared
    sa, sb = shingles(a), shingles(b)
    assert 0.25 < jaccard(sa, sb) < DEFAULT_THRESHOLD
    hasher = MinHasher()
    shared = set(band_keys(hasher.signature(sa), 96, 1)) & set(band_keys(hasher.signature(sb), 96, 1))
    assert shared  # an LSH collision ...
    assert list(candidate_pairs([("b", sb), ("a", sa)])) == [tuple(sorted("ab", key=keep_key))]
    assert not verify(("a", "b"), sa, sb)  # ... that is not a near-duplicate
    assert near_duplicates({"a": a, "b": b}, bands=96, rows=1) == set()
    # the same loose banding still finds the real near-duplicate
    c = " ".join(base[:-1] + document(rng, sentences=1))
    assert near_duplicates({"a": a, "b": b, "c": c}, bands=96, rows=1) == {max("a", "c", key=keep_key)}


# --- keep rule --------------------------------------------------------------------------------

def ids_in_key_order(count: int, prefix: str = "https://example.com/") -> list[str]:
    return sorted((f"{prefix}{i}" for i in range(count)), key=keep_key)


def test_losers_take_the_larger_key_whatever_the_orientation_and_order():
    x, y, z = ids_in_key_order(3)
    assert keep_key(x) < keep_key(y) < keep_key(z)
    assert losers([(x, y)]) == losers([(y, x)]) == {y}
    pairs = [(x, y), (z, y), (x, z)]
    assert losers(pairs) == losers(reversed(pairs)) == {y, z}
    assert losers([(x, x)]) == set()


def test_chain_drops_both_later_members_under_the_pairwise_rule():
    """a ~ b, b ~ c, a !~ c: with keys a < b < c both b and c go (c loses to b although b
    is dropped too); with keys a < c < b only b goes."""
    rng = random.Random(8)
    b_sents = document(rng, sentences=40)
    a_sents = document(rng, sentences=3) + b_sents[3:]  # first 3 sentences differ from b
    c_sents = b_sents[:-3] + document(rng, sentences=3)  # last 3 sentences differ from b
    texts = [" ".join(s) for s in (a_sents, b_sents, c_sents)]
    sa, sb, sc = (shingles(t) for t in texts)
    assert jaccard(sa, sb) >= DEFAULT_THRESHOLD and jaccard(sb, sc) >= DEFAULT_THRESHOLD
    assert jaccard(sa, sc) < DEFAULT_THRESHOLD
    first, second, third = ids_in_key_order(3)
    assert near_duplicates(dict(zip((first, second, third), texts, strict=True))) == {second, third}
    assert near_duplicates(dict(zip((first, third, second), texts, strict=True))) == {third}  # b is third


def test_keep_rule_is_deterministic_and_order_independent():
    rng = random.Random(9)
    docs = {}
    for cluster in range(8):
        sents = document(rng)
        for copy in range(cluster % 4 + 1):  # copies one word apart: pairwise Jaccard >= 0.93
            edited = " ".join(sents).split()
            edited[20 * copy + 10] = "changed"
            docs[f"https://site{copy}.example/{cluster}"] = " ".join(edited)
    for extra in range(20):
        docs[f"https://other.example/{extra}"] = " ".join(document(rng))
    expected = near_duplicates(docs)
    assert len(expected) == sum(cluster % 4 for cluster in range(8))
    items = list(docs.items())
    for seed in range(5):
        random.Random(seed).shuffle(items)
        assert near_duplicates(dict(items)) == expected
    kept = set(docs) - expected
    assert not any(jaccard(shingles(docs[p]), shingles(docs[q])) >= DEFAULT_THRESHOLD
                   for p in kept for q in kept if p < q)


# --- buckets ----------------------------------------------------------------------------------

def test_candidate_pairs_are_all_pairs_of_a_small_bucket_in_key_order():
    ids = ids_in_key_order(6)
    bucket = [(doc_id, None) for doc_id in reversed(ids)]
    pairs = list(candidate_pairs(bucket))
    assert pairs == [(ids[i], ids[j]) for i in range(6) for j in range(i + 1, 6)]
    assert list(candidate_pairs(bucket[::2] + bucket[1::2])) == pairs
    assert list(candidate_pairs(bucket + bucket[:2])) == pairs  # an id twice is one member
    assert list(candidate_pairs(bucket[:1])) == []


def test_a_huge_bucket_is_capped_linearly_and_keeps_the_smallest_key():
    ids = ids_in_key_order(2000, prefix="https://boilerplate.example/")
    same = shingles("please enable javascript to view this page")
    bucket = [(doc_id, same) for doc_id in reversed(ids)]
    pairs = list(candidate_pairs(bucket, bucket_cap=10))
    assert len(pairs) == sum(2000 - 1 - i for i in range(10)) < 10 * 2000
    assert {p[0] for p in pairs} == set(ids[:10])
    verified = [p for p in pairs if verify(p, same, same)]
    assert losers(verified) == set(ids[1:])
    assert bucket_losers(bucket, bucket_cap=10) == ids[1:]


def test_bucket_losers_equals_verified_candidate_pairs():
    rng = random.Random(10)
    base = document(rng)
    texts = [" ".join(base[:k] + document(rng, sentences=20 - k)) for k in (20, 19, 18, 17, 12, 10, 5, 0)]
    bucket = [(f"https://x.example/{i}", shingles(t)) for i, t in enumerate(texts * 2)]  # each text twice
    shingle_of = dict(bucket)
    for cap in (1, 2, 3, 100):
        verified = [p for p in candidate_pairs(bucket, cap) if verify(p, shingle_of[p[0]], shingle_of[p[1]])]
        assert set(bucket_losers(bucket, bucket_cap=cap)) == losers(verified)


# --- real text ----------------------------------------------------------------------------------

def wiki_paragraphs(real_data: Path, min_words: int = 40) -> list[str]:
    raw = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    lines = [line.strip() for line in raw.split("\n")]
    return [line for line in lines if line and not line.startswith("=") and len(line.split()) >= min_words]


def edit(paragraph: str, kind: int, rng: random.Random) -> str:
    """Small edits of a real paragraph (each keeps Jaccard well above 0.8)."""
    tokens = paragraph.split()
    middle = len(tokens) // 2
    if kind == 0:  # one word replaced
        tokens[middle] = "zyxwv"
    elif kind == 1:  # case, punctuation and spacing only
        return paragraph.upper().replace(" , ", ",").replace(" . ", ".  ")
    elif kind == 2:  # a short clause inserted
        tokens[middle:middle] = "as reported by several sources at the time".split()
    elif kind == 3:  # two adjacent words swapped
        tokens[middle], tokens[middle + 1] = tokens[middle + 1], tokens[middle]
    else:  # the first four words removed, a word added at the end
        tokens = tokens[4:] + ["indeed"]
    return " ".join(tokens)


def test_real_wikitext_edited_copies_are_exactly_the_near_duplicates(real_data):
    paragraphs = wiki_paragraphs(real_data)
    assert len(paragraphs) > 1000
    docs = {f"https://en.wikipedia.org/wiki/p{i}": p for i, p in enumerate(paragraphs)}
    rng = random.Random(11)
    long_enough = [i for i, p in enumerate(paragraphs) if len(p.split()) >= 120]
    chosen = rng.sample(long_enough, 40)
    expected_pairs = set()
    for n, i in enumerate(chosen[:30]):
        original = f"https://en.wikipedia.org/wiki/p{i}"
        copy = f"https://mirror.example/copy-{n}"
        docs[copy] = edit(paragraphs[i], n % 5, rng)
        assert jaccard(shingles(docs[original]), shingles(docs[copy])) >= 0.85
        expected_pairs.add(tuple(sorted((original, copy), key=keep_key)))
    for n, i in enumerate(chosen[30:]):  # heavy rewrites: half the paragraph replaced
        tokens = paragraphs[i].split()
        donor = paragraphs[(i + 1) % len(paragraphs)].split()
        docs[f"https://rewrite.example/{n}"] = " ".join(tokens[:len(tokens) // 2] + donor[:len(tokens) // 2])
    pairs = near_duplicate_pairs(docs)
    assert pairs == expected_pairs
    assert near_duplicates(docs) == {pair[1] for pair in expected_pairs}


def test_real_wikitext_shingles_and_signatures_equal_the_reference(real_data):
    hasher = MinHasher()
    for paragraph in wiki_paragraphs(real_data)[::100]:
        s = shingles(paragraph)
        assert set(s.tolist()) == reference_shingles(paragraph)
        assert hasher.signature(s).tolist() == hasher.reference_signature(s.tolist()).tolist()


# --- the pipeline's dedup rules: Decisions, inputs left as they were ---------------------------

def _doc(url: str, text: str = "the same words in every copy of this page"):
    return Document(text=text, url=url, timestamp="2019-01-01T00:00:00Z", meta={"link": url})


def test_keep_first_copy_keeps_the_smallest_keep_key_and_samples_the_rest():
    docs = [_doc(f"https://example.com/{i}") for i in range(4)]
    before = list(docs)
    first = min(docs, key=lambda d: minhash.keep_key(d.url))
    decision = minhash.keep_first_copy("hash", iter(docs), id_of=lambda d: d.url)
    assert decision.record is first and docs == before
    assert decision.counts == (("passed", 1), ("filtered", 3)) and decision.units == (("passed", PAGES), ("filtered", PAGES))
    assert sorted(text for _, text in decision.dropped) == sorted(f"{d.url} {d.text}" for d in docs if d is not first)
    one = minhash.keep_first_copy("hash", [docs[0]], id_of=lambda d: d.url)
    assert one.record is docs[0] and one.counts == (("passed", 1),) and one.dropped == ()


def test_verified_losers_tallies_candidates_and_names_each_loser():
    near = minhash.shingles("one two three four five six seven eight nine ten")
    far = minhash.shingles("completely different words make up this other text here")
    pairs = [(("a", "b"), near), (("c", "b"), far)]
    decision = minhash.verified_losers("b", {"pairs": pairs, "shingles": [near]}, threshold=0.8)
    assert decision.record == (minhash.loser(("a", "b")),)
    assert decision.counts == (("candidate_pairs", 2), ("verified_pairs", 1)) and decision.dropped == ()
    assert dict(decision.units) == {"candidate_pairs": "other", "verified_pairs": "other"}
    none = minhash.verified_losers("b", {"pairs": pairs[1:], "shingles": [near]})
    assert none.record is None and none.counts == (("candidate_pairs", 1),)
    assert minhash.verified_losers("b", {"pairs": pairs, "shingles": []}).counts == ()


def test_drop_near_duplicate_drops_a_loser_only():
    doc = _doc("https://example.com/a")
    assert minhash.drop_near_duplicate("a", {"docs": [doc], "losers": []}).record is doc
    dropped = minhash.drop_near_duplicate("a", {"docs": [doc], "losers": [True]})
    assert dropped.record is None and dropped.dropped == (("filtered", f"{doc.url} {doc.text}"),)
    assert minhash.drop_near_duplicate("a", {"docs": [], "losers": [True]}).counts == ()
