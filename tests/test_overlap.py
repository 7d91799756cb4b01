"""dedup.overlap: exact overlap of a benchmark with a training stream, and the report numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dedup.audit import benchmark_rows, bloom_report, build_indexes, exact_report, merge_counters, scan_documents
from dedup.benchmark_sets import BenchmarkSet, Example, load_benchmark
from dedup.ngrams import NgramConfig, ngram_hashes, ngram_hashes_batch
from dedup.overlap import BenchmarkIndex, OverlapCounter, compute_report, merge_spans, overlap_from_membership
from dedup.report import validate_reports

C3 = NgramConfig(n=3)

EXAMPLES = [
    ("q1", "The cat sat on the mat. It was a sunny day in the old town."),
    ("q2", "Paris is the capital of France, and it is famous for art."),
    ("q3", "Nothing in this one is ever going to be copied anywhere."),
    ("q4", "Too short."),
]


def _lines(path):
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


@pytest.fixture(scope="module")
def ptb(real_data):
    """PTB's test lines as benchmark examples and their index, built once for the module (read only)."""
    examples = [(f"ptb{i}", line) for i, line in enumerate(_lines(real_data / "lm_benchmarks/ptb/ptb.test.txt"))]
    return examples, BenchmarkIndex.build(examples, name="ptb")


def _strip_training_docs(report_dict):
    for example in report_dict["examples"]:
        example.pop("training_docs")
    return report_dict


def test_index_structure():
    index = BenchmarkIndex.build([("a", "x y z x y z"), ("b", "y z x"), ("c", "")], C3, "toy")
    # a: "x y z", "y z x", "z x y", "x y z" -> 3 unique; b: "y z x"
    assert len(index) == 3
    assert np.all(np.diff(index.hashes.astype(object)) > 0)
    assert index.pos_indptr.tolist() == [0, 4, 5, 5]
    assert index.word_counts.tolist() == [6, 3, 0]
    yzx = int(np.searchsorted(index.hashes, ngram_hashes("y z x", C3)[0]))
    assert index.examples_of(yzx).tolist() == [0, 1]
    with pytest.raises(ValueError):
        BenchmarkIndex.build([("a", "x"), ("a", "y")], C3)


def test_self_overlap_is_total(ptb):
    examples, index = ptb
    counter = OverlapCounter(index)
    for example_id, text in examples:
        counter.add("train-" + example_id, text)
    report = counter.report()
    assert report.unique_found == report.unique_ngrams == len(index) > 50_000
    assert report.percent_found == 100.0 and report.percent_found_weighted == 100.0
    assert report.total_found == report.total_ngrams > report.unique_ngrams  # PTB repeats n-grams
    assert report.dirty_count == len(examples) and report.clean_count == 0
    assert all(e.fraction == 1.0 and e.longest_run == e.ngrams for e in report.examples)
    assert all(e.longest_run_words == e.words for e in report.examples)


def test_unrelated_text_is_zero():
    index = BenchmarkIndex.build(EXAMPLES, C3)
    counter = OverlapCounter(index)
    hits = counter.add("t", "Quantum chromodynamics describes quarks and gluons bound by color charge.")
    assert not hits and hits.spans == [] and len(hits.examples) == 0
    report = counter.report()
    assert report.unique_found == 0 and report.percent_found == 0.0 and report.percent_found_weighted == 0.0
    assert report.dirty_count == 0 and report.clean_count == 4
    assert counter.docs_scanned == 1 and counter.docs_with_hits == 0 and counter.ngrams_scanned == 8  # 10 words


def test_real_unrelated_pair_is_near_zero(real_data, ptb):
    # PTB test (WSJ news) as the benchmark, LAMBADA test (novels) as the training stream: measured 0.
    examples, index = ptb
    counter = OverlapCounter(index)
    with open(real_data / "lm_benchmarks/lambada/lambada_test.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            counter.add(f"lambada{i}", json.loads(line)["text"])
    report = counter.report()
    assert counter.docs_scanned == 5153
    assert report.percent_found < 1.0 and report.percent_found_weighted < 1.0
    assert report.dirty_count < 0.01 * len(examples)


def test_planted_passage_spans_and_longest_run():
    index = BenchmarkIndex.build(EXAMPLES, C3, "toy")
    counter = OverlapCounter(index)
    planted = "Blog post. As we know, PARIS is the capital of France -- a fact. Bye."
    hits = counter.add("doc-1", planted)
    start = planted.index("PARIS")
    assert hits.merged_spans() == [(start, start + len("PARIS is the capital of France"))]
    assert [planted[s:e] for s, e in hits.spans] == ["PARIS is the", "is the capital", "the capital of",
                                                     "capital of France"]
    assert hits.examples.tolist() == [1]
    report = counter.report()
    q2 = report.examples[1]
    assert q2.id == "q2" and q2.dirty and q2.found == 4 and q2.ngrams == 10
    assert q2.fraction == 0.4 and q2.longest_run == 4 and q2.longest_run_words == 6
    text = EXAMPLES[1][1]
    assert [text[s:e] for s, e in q2.spans] == ["Paris is the capital of France"]
    assert q2.training_docs == ["doc-1"]
    assert [e.dirty for e in report.examples] == [False, True, False, False]
    assert report.unique_found == 4 and report.total_found == 4


def test_two_runs_and_repeated_ngrams():
    index = BenchmarkIndex.build([("e", "a b c d e f g h a b c")], C3)
    counter = OverlapCounter(index)
    counter.add("t", "zz a b c d yy f g h")  # "a b c" (twice in e), "b c d", "f g h"
    report = counter.report()
    e = report.examples[0]
    assert report.unique_ngrams == 8 and report.unique_found == 3
    assert e.ngrams == 9 and e.found == 4  # positions 0, 1 (a run), 5 and 8 ("a b c" again)
    assert report.total_found == 4 and report.percent_found_weighted == pytest.approx(400 / 9)
    assert e.longest_run == 2 and e.longest_run_words == 4
    assert e.spans == [(0, 7), (10, 15), (16, 21)]  # separate n-grams, not overlapping


def test_short_example_whole_text_key():
    index = BenchmarkIndex.build(EXAMPLES, C3)
    counter = OverlapCounter(index)
    counter.add("t1", "This is too short. Too short.")  # n-grams only: no whole-text match
    assert not counter.report().examples[3].dirty
    counter.add("t2", "too SHORT!")
    q4 = counter.report().examples[3]
    assert q4.dirty and q4.ngrams == 1 and q4.longest_run_words == 2 and q4.spans == [(0, 9)]


def test_dirty_threshold():
    index = BenchmarkIndex.build(EXAMPLES, C3)
    counter = OverlapCounter(index)
    counter.add("d", "the capital of France")  # q2: 2 of 10 positions
    assert counter.report().examples[1].dirty
    assert counter.report(dirty_threshold=0.2).examples[1].dirty
    assert not counter.report(dirty_threshold=0.5).examples[1].dirty


def test_doc_counts_and_max_doc_count_rule():
    index = BenchmarkIndex.build(EXAMPLES, C3)
    counter = OverlapCounter(index, max_doc_ids=3)
    for i in range(11):
        counter.add(f"common{i:02d}", "it was a sunny day")  # 3 n-grams of q1, in 11 docs
    for i in range(10):
        counter.add(f"rare{i:02d}", "Paris is the capital")  # 2 n-grams of q2, in 10 docs
    u = int(np.searchsorted(index.hashes, ngram_hashes("a sunny day", C3)[0]))
    assert counter.doc_counts[u] == 11 and counter.doc_ids[u] == ["common00", "common01", "common02"]
    assert sorted(counter.doc_counts[counter.doc_counts > 0].tolist()) == [10, 10, 11, 11, 11]
    plain = counter.report()
    assert plain.unique_found == 5 and plain.dirty_ids == ["q1", "q2"]
    gpt3 = counter.report(max_doc_count=10)  # ignore n-grams found in more than 10 docs
    assert gpt3.unique_found == 2 and gpt3.ignored_frequent == 3 and gpt3.dirty_ids == ["q2"]
    assert counter.report(max_doc_count=9).dirty_ids == []
    with pytest.raises(ValueError):
        overlap_from_membership(index, lambda h: np.ones(len(h), bool), max_doc_count=10)


def test_merge_equals_one_counter_and_round_trips(real_data):
    wiki = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    paragraphs = [p for p in wiki.split("\n") if len(p.split()) > 20]
    index = BenchmarkIndex.build([(f"w{i}", p) for i, p in enumerate(paragraphs[::25])], name="wiki-sample")
    stream = [(f"doc{i:05d}", p) for i, p in enumerate(paragraphs)] + [(f"dup{i}", p) for i, p in
                                                                      enumerate(paragraphs[:200:25])]
    whole, left, right = OverlapCounter(index), OverlapCounter(index), OverlapCounter(index)
    for i, (doc_id, text) in enumerate(stream):
        whole.add(doc_id, text)
        (left if i % 3 else right).add(doc_id, text)
    merged = OverlapCounter(index).merge(right).merge(left)  # any order
    assert merged.to_dict() == whole.to_dict()
    assert merged.report().to_dict() == whole.report().to_dict()
    assert whole.report().dirty_count == len(index.example_ids)
    assert int(whole.doc_counts.max()) >= 2  # the planted duplicates (and common phrases)
    restored = OverlapCounter.from_dict(index, json.loads(json.dumps(whole.to_dict())))
    assert restored.to_dict() == whole.to_dict()
    other = BenchmarkIndex.build([("x", "a different benchmark entirely here")])
    with pytest.raises(ValueError):
        OverlapCounter(other).merge(whole)


def test_membership_path_matches_exact_path(real_data):
    wiki = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    paragraphs = [p for p in wiki.split("\n") if p.strip()]
    examples = [(f"w{i}", p) for i, p in enumerate(paragraphs[:400])]
    index = BenchmarkIndex.build(examples, name="wiki")
    counter = OverlapCounter(index)
    training = paragraphs[300:1000]  # overlaps the last 100 examples
    training_hashes = set()
    for i, text in enumerate(training):
        counter.add(f"t{i}", text)
        training_hashes.update(ngram_hashes(text).tolist())
    exact = counter.report()
    assert 0 < exact.dirty_count < len(examples)
    members = np.array(sorted(training_hashes), dtype=np.uint64)
    contains = lambda h: np.isin(h, members)  # an exact "filter"
    via_index = overlap_from_membership(index, contains)
    via_examples = overlap_from_membership(examples, contains, name="wiki")
    assert _strip_training_docs(via_index.to_dict()) == _strip_training_docs(exact.to_dict())
    assert via_examples.to_dict() == via_index.to_dict()
    assert compute_report(index, counter.doc_counts > 0).to_dict() == via_index.to_dict()


def test_report_to_dict_is_json():
    index = BenchmarkIndex.build(EXAMPLES, C3, "toy")
    counter = OverlapCounter(index)
    counter.add("t", "Paris is the capital of France")
    data = json.loads(json.dumps(counter.report().to_dict()))
    assert data["benchmark"] == "toy" and data["n"] == 3 and data["config"] == C3.to_dict()
    assert data["examples"][1]["spans"] == [[0, 30]]
    row = counter.report().to_report_row(corpus="toy-corpus")
    assert row["name"] == "toy" and row["examples"] == 4 and row["dirty_examples"] == 1
    assert row["token_weighted_percent"] == counter.report().percent_found_weighted
    assert row["longest_run"] == 4 and row["fp_evidence"] == {} and row["corpus"] == "toy-corpus"
    assert row["per_example"][1] == {"id": "q2", "ngrams": 10, "found": 4, "fraction": 0.4, "dirty": True,
                                     "longest_run": 4}
    assert validate_reports([row]) == [row]


def test_merge_spans():
    assert merge_spans([], []) == []
    assert merge_spans([0, 2, 10], [5, 7, 12]) == [(0, 7), (10, 12)]
    assert merge_spans([0, 5], [5, 9]) == [(0, 9)]  # touching spans merge


def test_batched_scan_equals_one_document_at_a_time(real_data):
    lambada = load_benchmark(f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")
    index = BenchmarkIndex.build([(e.id, e.text) for e in lambada.examples[:300]], name="lambada")
    # Short and long documents, some holding benchmark passages, some with no n-gram at all.
    docs = [(f"d{i}", e.text) for i, e in enumerate(lambada.examples[250:350])]
    docs += [("short", "too few words"), ("empty", ""), ("mixed", "Zürich " + lambada.examples[3].text + " ¿qué?")]
    one, counter_one = [index.scan(d, t) for d, t in docs], OverlapCounter(index)
    for d, t in docs:
        counter_one.add(d, t)
    counter_many = OverlapCounter(index)
    many = counter_many.add_many(docs)
    assert sum(bool(h) for h in many) >= 51  # the 50 shared passages and the planted one
    for a, b in zip(one, many, strict=True):
        assert (a.doc_id, a.num_ngrams) == (b.doc_id, b.num_ngrams)
        assert a.positions.tolist() == b.positions.tolist() and a.unique_index.tolist() == b.unique_index.tolist()
        assert a.examples.tolist() == b.examples.tolist() and a.spans == b.spans
    assert counter_one.to_dict() == counter_many.to_dict()


def test_precomputed_batch_hashes_serve_several_indexes():
    texts = ["the quick brown fox jumps over the lazy dog again and again today",
             "nothing in common with any benchmark passage at all here today", ""]
    a = BenchmarkIndex.build([("a", texts[0])], name="a")
    b = BenchmarkIndex.build([("b", "over the lazy dog again and again today and then some more")], name="b")
    docs = [(f"d{i}", t) for i, t in enumerate(texts)]
    hashed = ngram_hashes_batch(texts, a.config)
    for index in (a, b):
        fresh, shared = index.scan_many(docs), index.scan_many(docs, hashed)
        assert [h.positions.tolist() for h in fresh] == [h.positions.tolist() for h in shared]
    assert [bool(h) for h in a.scan_many(docs, hashed)] == [True, False, False]
    assert [bool(h) for h in b.scan_many(docs, hashed)] == [True, False, False]
    with pytest.raises(ValueError, match="the batch has 2"):
        a.scan_many(docs[:2], hashed)


# --- dedup.audit: the one core of the audit job and of evaluation ---------------------------------

class _SetFilter:
    """An exact stand-in for a Bloom filter: ``contains`` over a set of n-gram hashes."""

    def __init__(self, hashes):
        self.members = np.array(sorted(hashes), dtype=np.uint64)

    def contains(self, keys):
        return np.isin(keys, self.members)


def test_audit_core_scans_once_for_every_benchmark_and_merges_by_parts(real_data):
    wiki = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8")
    paragraphs = [p for p in wiki.split("\n") if len(p.split()) > 20]
    sets = [BenchmarkSet("early", "test", [Example(f"e{i}", p) for i, p in enumerate(paragraphs[:300:20])], "-"),
            BenchmarkSet("late", "test", [Example(f"l{i}", p) for i, p in enumerate(paragraphs[600:900:20])], "-")]
    indexes = build_indexes(sets, NgramConfig(n=8))
    stream = [(f"doc{i:05d}", p) for i, p in enumerate(paragraphs[100:700])]  # half of each benchmark
    whole = scan_documents(indexes, stream)
    parts = [scan_documents(indexes, stream[i::3]) for i in range(3)]  # three shards, any split
    for name, index in indexes.items():
        alone = OverlapCounter(index)
        for doc_id, text in stream:
            alone.add(doc_id, text)
        assert whole[name].to_dict() == alone.to_dict()  # one hashing pass serves both benchmarks
        merged = merge_counters(index, [part[name].to_dict() for part in parts])
        assert merged.to_dict() == whole[name].to_dict()
        report = exact_report(merged)
        assert 0 < report.dirty_count < len(sets[0].examples)
    members = set()
    for _, text in stream:
        members.update(ngram_hashes(text, NgramConfig(n=8)).tolist())
    exact = {name: counter.to_dict() for name, counter in whole.items()}
    rows = benchmark_rows(indexes, corpus_name="wiki", exact=exact, bloom=_SetFilter(members), own_train={"late": 1.5})
    for row, name in zip(rows, ("early", "late"), strict=True):
        assert row["name"] == name and row["source"] == "exact" and row["corpus"] == "wiki"
        assert row["agreement"]["false_negatives"] == row["agreement"]["bloom_only"] == 0
        assert row["agreement"]["exact_found"] == row["unique_found"] > 0
        bloom_row = benchmark_rows({name: indexes[name]}, corpus_name="wiki", bloom=_SetFilter(members))[0]
        assert bloom_row["source"] == "bloom"
        assert [{**e, "training_docs": None} for e in bloom_row["per_example"]] == \
            [{**e, "training_docs": None} for e in row["per_example"]]  # only the exact path knows the documents
        assert bloom_report(indexes[name], _SetFilter(members)).percent_found == row["percent_found"]
    assert rows[1]["own_train_percent"] == 1.5 and "own_train_percent" not in rows[0]
    dirty = [e for e in rows[0]["per_example"] if e["dirty"]]
    assert dirty and all(e["spans"] and e["training_docs"] for e in dirty)
