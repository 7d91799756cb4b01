"""Clean/dirty marking against a training corpus (shards, Bloom file, audit folder) and the
all / clean / dirty aggregation with bootstrap intervals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from corpus.records import Document
from corpus.shards import read_documents, write_shards
from dedup.benchmark_sets import BenchmarkSet, load_benchmark
from dedup.bloom import BloomFilter, ngram_meta
from dedup.ngrams import NgramConfig, ngram_hashes, words
from model.eval.contamination import (
    BUCKETS,
    ContaminationError,
    bootstrap_ci,
    bootstrap_replicates,
    bucket_of,
    mark_benchmarks,
    mark_examples,
    open_source,
    summarize_benchmark,
)
from model.eval.metrics import ExampleScore, compute_metric
from pipelines.cli import run_job  # `corpusforge audit` through the registry: Apache Beam loads when the job runs

torch.set_num_threads(1)

PLANTED = [3, 17, 256, 1024, 2048, 4000, 5152]  # LAMBADA test passages written into the training shards
PARTIAL = 4000  # only its first 20 words are planted
PARTIAL_WORDS = 20
SUBSET = 400  # examples in the small LAMBADA file given to the audit (the planted ones + the first ones)


def _filler(rng, vocab, count):
    return " ".join(rng.choice(vocab, count))


@pytest.fixture(scope="module")
def lambada(real_data):
    return load_benchmark(f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}")


@pytest.fixture(scope="module")
def planted_corpus(lambada, tmp_path_factory):
    """Five training documents (two shards): random filler words with the planted passages inside."""
    rng = np.random.default_rng(7)
    vocab = sorted({w for e in lambada.examples[:300] for w in e.text.split()})
    docs = []
    for d in range(5):
        parts = [_filler(rng, vocab, 200)]
        for p in PLANTED[d::5]:
            text = lambada.examples[p].text
            parts.append(" ".join(text.split()[:PARTIAL_WORDS]) if p == PARTIAL else text)
            parts.append(_filler(rng, vocab, 40))
        docs.append(Document(text="\n\n".join(parts), url=f"https://example.org/doc-{d}", timestamp="2019-02-14T00:00:00Z"))
    folder = tmp_path_factory.mktemp("planted-shards")
    write_shards(docs, folder, fmt="jsonl", name="webtext", num_shards=2)
    return folder


def _write_bloom(shards, path, config):
    keys = np.concatenate([ngram_hashes(doc.text, config) for doc in read_documents(shards)])
    bloom = BloomFilter(len(keys), 1e-8, meta=ngram_meta(config))  # sized for exactly these n-grams
    bloom.add(keys)
    bloom.save(path)
    return path


@pytest.fixture(scope="module")
def bloom_file(planted_corpus, tmp_path_factory):
    return _write_bloom(planted_corpus, tmp_path_factory.mktemp("bloom") / "webtext.bloom", NgramConfig(n=8))


@pytest.fixture(scope="module")
def exact_marks(lambada, planted_corpus):
    return mark_examples(lambada, planted_corpus, progress=False)


@pytest.fixture(scope="module")
def bloom_marks(lambada, bloom_file):
    return mark_examples(lambada, bloom_file, fp_queries=100_000, progress=False)


def _ids(indices):
    return [f"lambada-{i}" for i in indices]


def test_exact_marking_finds_exactly_the_planted_passages(lambada, exact_marks):
    assert exact_marks.source_kind == "exact"
    assert exact_marks.dirty_ids == _ids(PLANTED)
    by_id = exact_marks.by_id()
    for i in PLANTED:
        mark = by_id[f"lambada-{i}"]
        assert mark.training_docs and mark.training_docs[0].startswith("https://example.org/doc-")
        if i == PARTIAL:
            planted = len(words(" ".join(lambada.examples[i].text.split()[:PARTIAL_WORDS])))
            assert mark.found == planted - 8 + 1 and 0 < mark.fraction < 1
            assert mark.longest_run_words == planted
        else:
            assert mark.fraction == 1.0 and mark.found == mark.ngrams
            assert mark.longest_run_words == mark.words
    assert sum(m.found for m in exact_marks.examples if not m.dirty) == 0
    assert exact_marks.fp_evidence == {}


def test_bloom_marking_agrees_with_exact(exact_marks, bloom_marks):
    assert bloom_marks.source_kind == "bloom"
    assert bloom_marks.dirty_ids == exact_marks.dirty_ids == _ids(PLANTED)
    assert [(m.id, m.found, m.longest_run) for m in bloom_marks.examples] == \
        [(m.id, m.found, m.longest_run) for m in exact_marks.examples]
    assert bloom_marks.percent_found == exact_marks.percent_found > 0
    evidence = bloom_marks.fp_evidence
    assert evidence["estimated_fp_rate"] < 1e-8 and evidence["empirical_queries"] == 100_000
    assert evidence["empirical_found"] == 0


def _part(bench, count=200):
    """The planted examples and the first ``count`` others, as a smaller benchmark."""
    keep = sorted(set(PLANTED) | set(range(count)))
    return BenchmarkSet(bench.name, bench.split, [bench.examples[i] for i in keep], bench.source)


def test_threshold_leaves_the_partial_passage_clean(lambada, planted_corpus, exact_marks):
    fraction = exact_marks.by_id()[f"lambada-{PARTIAL}"].fraction
    part = _part(lambada)
    marks = mark_examples(part, planted_corpus, threshold=fraction + 0.01, progress=False)
    assert marks.dirty_ids == _ids([i for i in PLANTED if i != PARTIAL])
    at = mark_examples(part, planted_corpus, threshold=fraction, progress=False)  # the audit's rule: >=
    assert at.dirty_ids == _ids(PLANTED)


def test_mismatched_ngram_settings_are_refused(lambada, bloom_file):
    with pytest.raises(ContaminationError, match="mismatched n-gram settings.*--ngram 8"):
        mark_examples(lambada, bloom_file, n=13, progress=False)


def test_bad_sources_say_what_is_wrong(lambada, tmp_path):
    with pytest.raises(ContaminationError, match="no such file or folder"):
        open_source(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("not a corpus")
    with pytest.raises(ContaminationError, match="unknown shard format"):
        open_source(tmp_path / "notes.txt")
    truncated = tmp_path / "cut.bloom"
    truncated.write_bytes(b"CFBLOOM\x00" + b"\x01" * 40)
    with pytest.raises(ContaminationError, match="cannot open the Bloom filter"):
        mark_examples(lambada, truncated, progress=False)


@pytest.mark.pipeline
def test_audit_folder_is_reused_and_its_bloom_serves_other_benchmarks(lambada, planted_corpus, tmp_path):
    keep = sorted(set(PLANTED) | set(range(SUBSET)))
    subset = tmp_path / "lambada_subset.jsonl"
    subset.write_text("".join(json.dumps({"text": lambada.examples[i].text}) + "\n" for i in keep), encoding="utf-8")
    audit = tmp_path / "audit"
    run_job("audit", ["--corpus", str(planted_corpus), "--benchmark", f"lambada:{subset}", "--output", str(audit),
                      "--mode", "both", "--fp_queries", "1000"])
    bench = load_benchmark(f"lambada:{subset}")
    expected = [f"lambada-{keep.index(i)}" for i in PLANTED]
    reused = mark_examples(bench, audit, progress=False)
    assert reused.source_kind == "audit" and "reused from the audit" in reused.notes[0]
    assert reused.dirty_ids == expected
    assert reused.by_id()[expected[0]].training_docs  # the audit's localisation comes along
    # A benchmark the audit did not cover is answered by the audit's Bloom filter.
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"text": lambada.examples[17].text}) + "\n"
                     + json.dumps({"text": lambada.examples[18].text}) + "\n", encoding="utf-8")
    other_bench = load_benchmark(f"jsonl:{other}")
    marks = mark_examples(other_bench, audit, progress=False)
    assert marks.source_kind == "bloom" and marks.dirty_ids == [other_bench.examples[0].id]
    with pytest.raises(ContaminationError, match="mismatched n-gram settings"):
        mark_examples(bench, audit, n=13, progress=False)


def test_examples_shorter_than_n_words_match_only_whole(tmp_path):
    bench_file = tmp_path / "short.jsonl"
    bench_file.write_text("".join(json.dumps({"text": t}) + "\n" for t in
                                  ["Paris is lovely", "the quick brown fox", "Nothing here at all"]), encoding="utf-8")
    bench = load_benchmark(f"jsonl:{bench_file}")
    docs = [Document(text="PARIS, is lovely!", url="u1", timestamp="t"),
            Document(text="the quick brown fox jumps over the lazy dog again", url="u2", timestamp="t")]
    write_shards(docs, tmp_path / "shards", fmt="jsonl", num_shards=1)
    marks = mark_examples(bench, tmp_path / "shards", progress=False)
    # A 3-word example matches a training text of exactly those words; inside a longer
    # document it cannot (that document's keys are its 8-grams).
    assert marks.dirty_ids == ["short-0"]
    assert marks.by_id()["short-0"].longest_run_words == 3


def test_one_stream_marks_several_benchmarks(lambada, planted_corpus, real_data):
    ptb = load_benchmark(f"ptb:{real_data / 'lm_benchmarks/ptb/ptb.test.txt'}")
    ptb = BenchmarkSet(ptb.name, ptb.split, ptb.examples[:500], ptb.source)
    marks = mark_benchmarks([_part(lambada), ptb], planted_corpus, progress=False)
    assert list(marks) == ["lambada", "ptb"]
    assert marks["lambada"].dirty_ids == _ids(PLANTED)
    assert len(marks["ptb"].examples) == len(ptb.examples)


# ----------------------------------------------------------------------------- aggregation

@pytest.fixture(scope="module")
def bigram_scores(lambada, real_data):
    """LAMBADA-style scores of a byte-bigram language model fitted (add-one) on WikiText-2
    test: the NLL of each passage's last word (its bytes) given the bytes before it, and
    whether the model's most likely byte after the context is the word's first byte."""
    train = (real_data / "lm_benchmarks/wikitext2_raw/wiki.test.raw").read_bytes()
    data = torch.tensor(list(train), dtype=torch.long)
    counts = torch.ones(256, 256, dtype=torch.float64)
    counts.index_put_((data[:-1], data[1:]), torch.ones(len(data) - 1, dtype=torch.float64), accumulate=True)
    logp = torch.log(counts / counts.sum(dim=1, keepdim=True))
    scores = []
    for example in lambada.examples:
        context, target = example.meta["context"].encode("utf-8"), example.meta["target"].encode("utf-8")
        b = torch.tensor(list(context + target), dtype=torch.long)
        start = len(context)
        nll = float(-logp[b[start - 1:-1], b[start:]].sum())
        hit = int(logp[b[start - 1]].argmax()) == int(b[start])
        scores.append(ExampleScore(example.id, nll=nll, tokens=len(target), words=1, bytes=len(target),
                                   chars=len(example.meta["target"]), correct={"first_byte": hit}))
    return scores


METRICS = ["lastword_ppl", "acc:first_byte", "token_ppl", "bpb"]


@pytest.fixture(scope="module")
def summary(bigram_scores, exact_marks):
    return summarize_benchmark("lambada", bigram_scores, METRICS, exact_marks, resamples=400, seed=11)


def test_all_clean_dirty_equal_compute_metric_on_the_subsets(summary, bigram_scores, exact_marks):
    dirty_ids = set(exact_marks.dirty_ids)
    clean = [s for s in bigram_scores if s.id not in dirty_ids]
    dirty = [s for s in bigram_scores if s.id in dirty_ids]
    for metric in METRICS:
        result = summary.result(metric)
        assert result.all.value == compute_metric(bigram_scores, metric)
        assert result.clean.value == compute_metric(clean, metric)
        assert result.dirty.value == compute_metric(dirty, metric)
        assert (result.all.count, result.clean.count, result.dirty.count) == (5153, 5153 - 7, 7)
        expected = 100 * (result.clean.value - result.all.value) / result.all.value
        assert result.relative_difference == pytest.approx(expected)
        assert sum(b["count"] for b in result.buckets) == 5153
        assert [b["bucket"] for b in result.buckets] == [label for label, _, _ in BUCKETS]
    top = summary.result("bpb").buckets[-1]  # (0.75, 1]
    assert top["count"] == 6  # the six passages planted whole
    assert top["value"] == compute_metric([s for s in dirty if s.id != f"lambada-{PARTIAL}"], "bpb")


def test_bootstrap_interval_contains_the_estimate_and_is_seeded(summary, bigram_scores):
    for metric in METRICS:
        r = summary.result(metric)
        for subset in (r.all, r.clean, r.dirty):
            assert subset.ci_low <= subset.value <= subset.ci_high
        assert r.all.ci_high - r.all.ci_low > 0
    again = bootstrap_ci(bigram_scores, "bpb", resamples=200, seed=5)
    assert again == bootstrap_ci(bigram_scores, "bpb", resamples=200, seed=5)
    assert again != bootstrap_ci(bigram_scores, "bpb", resamples=200, seed=6)
    wider = bootstrap_ci(bigram_scores, "bpb", resamples=200, seed=5, confidence=0.99)
    assert wider[0] <= again[0] and wider[1] >= again[1]


def test_each_bootstrap_replicate_is_compute_metric_on_a_resample(bigram_scores):
    sample = bigram_scores[:300]
    replicates = bootstrap_replicates(sample, METRICS, resamples=4, seed=2)
    rng = np.random.default_rng(2)
    rows = rng.integers(0, len(sample), size=(4, len(sample)))
    for r, row in enumerate(rows):
        resample = [sample[i] for i in row]
        for metric in METRICS:
            assert replicates[metric][r] == pytest.approx(compute_metric(resample, metric), rel=1e-12)


def test_without_marks_everything_is_all(bigram_scores):
    s = summarize_benchmark("lambada", bigram_scores[:50], ["bpb"], None, resamples=50)
    r = s.result("bpb")
    assert r.clean is None and r.dirty is None and r.buckets == [] and r.all.count == 50
    assert s.to_dict()["contamination"] is None


def test_scores_of_another_benchmark_are_refused(exact_marks):
    with pytest.raises(ContaminationError, match="no contamination mark"):
        summarize_benchmark("lambada", [ExampleScore("wikitext2-0", 1.0, 1)], ["token_ppl"], exact_marks)


def test_bucket_edges():
    assert bucket_of(0.0) == "0" and bucket_of(0.25) == "(0, 0.25]" and bucket_of(0.2501) == "(0.25, 0.5]"
    assert bucket_of(1.0) == "(0.75, 1]"
    with pytest.raises(ValueError):
        bucket_of(math.nan)


@pytest.mark.pipeline
@pytest.mark.parametrize("mode", ["exact", "bloom"])
def test_the_audit_job_and_mark_benchmarks_share_one_core(lambada, planted_corpus, tmp_path, mode):
    """``corpusforge audit`` (Beam, one counter per shard, merged) and ``mark_benchmarks`` (one
    stream) run ``dedup.audit``: the same numbers for every example, whichever path."""
    keep = sorted(set(PLANTED) | set(range(SUBSET)))
    subset = tmp_path / "lambada_subset.jsonl"
    subset.write_text("".join(json.dumps({"text": lambada.examples[i].text}) + "\n" for i in keep), encoding="utf-8")
    out = tmp_path / "audit"
    result = run_job("audit", ["--corpus", str(planted_corpus), "--benchmark", f"lambada:{subset}", "--output", str(out),
                               "--mode", mode, "--fp_queries", "1000"])
    [row] = result["rows"]
    bench = load_benchmark(f"lambada:{subset}")
    marks = mark_examples(bench, planted_corpus if mode == "exact" else out / "bloom", fp_queries=1000, progress=False)
    assert row["source"] == marks.source_kind == mode
    assert row["dirty_ids"] == marks.dirty_ids == [f"lambada-{keep.index(i)}" for i in PLANTED]
    assert row["percent_found"] == marks.percent_found > 0
    assert [(r["id"], r["ngrams"], r["found"], r["fraction"], r["dirty"], r["longest_run"]) for r in row["per_example"]] == \
        [(m.id, m.ngrams, m.found, m.fraction, m.dirty, m.longest_run) for m in marks.examples]
    by_id = marks.by_id()
    for r in row["per_example"]:
        if r["dirty"]:
            assert r["spans"] == [list(span) for span in by_id[r["id"]].spans] and r["spans"]
            assert r["training_docs"] == by_id[r["id"]].training_docs
            assert bool(r["training_docs"]) == (mode == "exact")  # only the exact path knows the documents
