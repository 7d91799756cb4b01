"""GPT-2's generative tasks in the eval harness (model/eval/generative.py): the loaders on the real
files (CoQA on a fixture in the official schema), the official metrics against their
libraries, each task end to end from a tiny random model with a clean/dirty split planted in
a training shard, and bad input refused with one line and exit 2 before the model runs."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from corpus.records import Document
from corpus.sentences import import_with_nltk
from corpus.shards import write_shards
from dedup.benchmark_sets import load_benchmark, load_cnn_dm, load_coqa, load_nq, load_wmt14
from model.eval.generative import (
    TASK_METRICS,
    bleu_values,
    coqa_turn_scores,
    draw_others,
    exact_match,
    normalize_answer,
    token_f1,
)
from model.eval.harness import run_eval
from model.eval.metrics import ExampleScore, compute_metric
from pipelines import cli
from tests.test_finetune import make_base

rouge_scorer = import_with_nltk("rouge_score.rouge_scorer")  # the library itself, as the metric's reference
torch.set_num_threads(1)
COQA = Path(__file__).parent / "fixtures" / "coqa" / "coqa-dev-schema.json"


@pytest.fixture(scope="module")
def lm(real_data) -> Path:
    folder = real_data / "lm_benchmarks"
    for part in ("cnn_dm", "wmt14_fren", "nq_open"):
        if not (folder / part).is_dir():
            pytest.skip(f"{folder / part} is missing: GPT-2's task files are not staged")
    return folder


# ----------------------------------------------------------------------------- loaders

def test_coqa_fixture_in_the_official_schema():
    bench = load_coqa(COQA)
    assert len(bench) == 12 and bench.meta["task"] == "coqa"
    first, second = bench.examples[0], bench.examples[1]
    assert first.id.endswith("-1") and first.text == first.meta["story"] and first.meta["history"] == []
    assert second.meta["history"] == [(first.meta["question"], first.meta["answers"][0])]
    assert len(first.meta["answers"]) == 4  # the answer and the three additional answers
    assert {e.meta["domain"] for e in bench.examples} == {"news", "wikipedia", "reddit"}


def test_real_gpt2_task_files_load_with_their_counts(lm):
    nq = load_nq(lm / "nq_open/NQ-open.dev.jsonl")
    assert len(nq) == 3610 and nq.examples[0].meta["answers"] == ["14 December 1972 UTC", "December 1972"]
    for direction, source, reference in (("fr-en", "french", "english"), ("en-fr", "english", "french")):
        wmt = load_benchmark(f"wmt14:{lm / 'wmt14_fren'}:{direction}")
        assert wmt.name == f"wmt14-{direction}" and len(wmt) == 3003
        first = wmt.examples[0]
        assert first.text == first.meta[source] == first.meta["source"] and first.meta["reference"] == first.meta[reference]
        assert first.meta["doc"] == "1009-lemondefr" and len({e.meta["doc"] for e in wmt.examples}) == 176
    assert load_wmt14(lm / "wmt14_fren", "fr-en").examples[0].meta["english"].startswith("Spectacular")
    folder, file = load_cnn_dm(lm / "cnn_dm"), load_cnn_dm(lm / "cnn_dm/test.source")
    assert len(folder) == len(file) == 2 and folder.examples[0].text.startswith("Club Tijuana star Juan Arango")
    assert folder.examples[0].meta["reference"].split("\n")[0] == \
        "Juan Arango escaped punishment from the referee for biting Jesus Zavela."


def test_story_files_are_read_as_article_and_highlights(tmp_path):
    (tmp_path / "a1.story").write_text("First paragraph here.\n\nSecond one.\n\n@highlight\n\nThe point\n\n"
                                       "@highlight\n\nAnother point\n", encoding="utf-8")
    (tmp_path / "a2.story").write_text("Only text.\n\n@highlight\n\nOnly point\n", encoding="utf-8")
    bench = load_benchmark(f"cnn_dm:{tmp_path}")
    assert [e.meta["reference"] for e in bench.examples] == ["The point\nAnother point", "Only point"]
    assert bench.examples[0].text == "First paragraph here.\nSecond one."
    assert len(load_cnn_dm(tmp_path / "a2.story")) == 1


def test_example_pairs_come_from_other_documents_seeded(lm):
    wmt = load_wmt14(lm / "wmt14_fren", "en-fr")
    example = wmt.examples[0]
    drawn = draw_others(wmt, example, 5, seed=0)
    assert len({e.id for e in drawn}) == 5 and all(e.meta["doc"] != example.meta["doc"] for e in drawn)
    assert [e.id for e in draw_others(wmt, example, 5, seed=0)] == [e.id for e in drawn]
    assert [e.id for e in draw_others(wmt, example, 5, seed=1)] != [e.id for e in drawn]
    nq = load_nq(lm / "nq_open/NQ-open.dev.jsonl")
    assert all(e.id != nq.examples[7].id for e in draw_others(nq, nq.examples[7], 5, seed=0))


# ----------------------------------------------------------------------------- metrics against their definitions

def test_squad_and_coqa_answer_scoring():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower" and normalize_answer("an apple a day") == "apple day"
    assert exact_match("the Beatles.", "Beatles") and not exact_match("Beatles band", "Beatles")
    assert token_f1("red big house", "the big red barn") == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert token_f1("", "") == 1.0 and token_f1("a", "x") == 0.0  # "a" normalises to nothing
    # several references: each left out in turn, the best against the others, averaged
    em, f1 = coqa_turn_scores("four hours", ["after four hours", "four hours", "4 hours"])
    assert em == pytest.approx((1 + 0 + 1) / 3)
    assert token_f1("four hours", "after four hours") == pytest.approx(0.8)  # beats "4 hours" (0.5)
    assert f1 == pytest.approx((1 + 0.8 + 1) / 3)
    assert coqa_turn_scores("yes", ["Yes"]) == (1.0, 1.0)


def test_corpus_bleu_from_sentence_statistics_equals_sacrebleu_on_any_subset():
    rng = random.Random(0)
    words = "le chat noir dort sur la table avec un chien blanc et une souris grise".split()
    refs = [" ".join(rng.choices(words, k=rng.randint(4, 12))) + " ." for _ in range(40)]
    hyps = [" ".join(rng.choices(words, k=rng.randint(2, 12))) for _ in range(40)]
    bleu = sacrebleu.BLEU(tokenize="13a", effective_order=True)
    scores = [ExampleScore(str(i), values=bleu_values(bleu, h, r)) for i, (h, r) in enumerate(zip(hyps, refs, strict=True))]
    for subset in (range(40), range(0, 40, 3), [5]):
        expected = sacrebleu.corpus_bleu([hyps[i] for i in subset], [[refs[i] for i in subset]], tokenize="13a").score
        assert compute_metric([scores[i] for i in subset], "bleu") == pytest.approx(expected, abs=1e-9)
    assert compute_metric([ExampleScore("x", values=bleu_values(bleu, "zz", "le chat"))], "bleu") == 0.0


ROUGE_PROBE = """
import json, sys
import model.eval.generative as generative
scores = generative.rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True).score(*sys.argv[1:3])
print(json.dumps({"loaded": sorted(m for m in ("nltk", "scipy", "sklearn") if m in sys.modules),
                  "f": [scores[k].fmeasure for k in ("rouge1", "rougeL")]}))
"""


@pytest.mark.pipeline  # a fresh interpreter, which imports NLTK
def test_rouge_loads_without_nltks_optional_scipy_and_sklearn_imports():
    """``model.eval.generative`` loads rouge-score (and NLTK, for its Porter stemmer) without
    NLTK's optional SciPy/scikit-learn imports, about 1.3 s of every `corpusforge eval`; the
    scores are the library's own, stemmer included."""
    if importlib.util.find_spec("scipy") is None or importlib.util.find_spec("sklearn") is None:
        pytest.skip("SciPy and scikit-learn are not installed here: nothing to keep out")
    reference, summary = "The cats were running across the fields.", "A cat runs in the field."
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", ROUGE_PROBE, reference, summary], capture_output=True, text=True,
                          check=True, env=env, timeout=120)
    probe = json.loads(done.stdout)
    assert probe["loaded"] == ["nltk"]
    expected = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True).score(reference, summary)
    assert probe["f"] == [expected["rouge1"].fmeasure, expected["rougeL"].fmeasure]
    assert expected["rouge1"].fmeasure > 0.5  # "cats"/"cat", "running"/"runs", "fields"/"field": stemmed alike


def test_confidence_accuracy_takes_the_most_confident_share():
    scores = [ExampleScore(str(i), correct={"em": i < 3}, values={"confidence": -float(i)}) for i in range(200)]
    assert compute_metric(scores, "conf_acc:1:em") == 1.0  # the 2 most confident: both right
    assert compute_metric(scores, "conf_acc:10:em") == pytest.approx(3 / 20)
    assert compute_metric(scores, "acc:em") == pytest.approx(3 / 200)
    assert compute_metric(scores[:5], "mean:missing") != compute_metric(scores[:5], "mean:missing")  # NaN


# ----------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def tiny(lm, tmp_path_factory) -> Path:
    texts = [line for line in (lm / "wikitext2_raw/wiki.test.raw").read_text(encoding="utf-8").splitlines()
             if len(line) > 60][:200]
    texts += [e.meta["question"] + " " + e.meta["answers"][0] for e in load_nq(lm / "nq_open/NQ-open.dev.jsonl").examples[:200]]
    return make_base(tmp_path_factory.mktemp("gen-base"), texts, vocab=400, block=256)


@pytest.mark.pipeline  # the whole evaluation job over every generative task
@pytest.mark.usefixtures("needs_punkt")
def test_every_task_end_to_end_with_a_planted_clean_dirty_split(lm, tiny, tmp_path):
    coqa = load_coqa(COQA)
    cnn = load_cnn_dm(lm / "cnn_dm")
    fr_en = load_wmt14(lm / "wmt14_fren", "fr-en")
    nq = load_nq(lm / "nq_open/NQ-open.dev.jsonl")
    planted = [coqa.examples[0].meta["story"], cnn.examples[1].text, fr_en.examples[2].text, nq.examples[0].text]
    docs = [Document(text=f"Intro words.\n{t}\nOutro words.", url=f"https://example.org/{i}", timestamp="t")
            for i, t in enumerate(planted)]
    docs.append(Document(text="Filler about rivers and hills and nothing else at all.", url="u", timestamp="t"))
    write_shards(docs, tmp_path / "corpus", fmt="jsonl", num_shards=1)
    specs = [f"coqa:{COQA}", f"cnn_dm:{lm / 'cnn_dm'}", f"wmt14:{lm / 'wmt14_fren'}:fr-en",
             f"wmt14:{lm / 'wmt14_fren'}:en-fr", f"nq:{lm / 'nq_open/NQ-open.dev.jsonl'}"]
    document = run_eval(str(tiny), specs, training=str(tmp_path / "corpus"), limit=6, bootstrap=20,
                        report=tmp_path / "out", progress=False, batch_size=4)
    entries = {e["name"]: e for e in document["benchmarks"]}
    counts = {name: (e["results"][0]["clean"]["count"], e["results"][0]["dirty"]["count"]) for name, e in entries.items()}
    # CoQA: the first story's 5 turns (its document planted), not the next story's first; CNN/DM: the second
    # article; WMT fr-en: segment 2 (its French source); en-fr's sources are English, none planted; NQ: question 0
    assert counts == {"coqa": (1, 5), "cnn_dm": (1, 1), "wmt14-fr-en": (5, 1), "wmt14-en-fr": (6, 0), "nq": (5, 1)}
    dirty = {name: [r["id"] for r in e["per_example"] if r["dirty"]] for name, e in entries.items()}
    assert dirty["wmt14-fr-en"] == ["wmt14-fr-en-2"] and dirty["nq"] == ["nq-0"] and dirty["cnn_dm"] == ["cnn_dm-1"]
    for entry in entries.values():
        assert [r["metric"] for r in entry["results"]][:len(TASK_METRICS[entry["kind"]])] == TASK_METRICS[entry["kind"]]
        assert entry["reference"]["label"] == "GPT-2 1542M (paper)"
    # the metrics are the libraries' numbers on the generated outputs
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for row, example in zip(entries["cnn_dm"]["per_example"], cnn.examples, strict=True):
        expected = scorer.score(example.meta["reference"], row["extra"]["prediction"])
        assert row["values"]["tldr:rouge2"] == pytest.approx(100 * expected["rouge2"].fmeasure)
        assert row["values"]["tldr:rougeL"] == pytest.approx(100 * expected["rougeL"].fmeasure)
        assert row["extra"]["prediction"] != row["extra"]["no_hint"] or row["extra"]["prediction"] == ""
    cnn_rouge1 = next(r for r in entries["cnn_dm"]["results"] if r["metric"] == "mean:lead3:rouge1")["all"]["value"]
    assert 0 < cnn_rouge1 < 100
    for name in ("wmt14-fr-en", "wmt14-en-fr"):
        rows = entries[name]["per_example"]
        expected = sacrebleu.corpus_bleu([r["extra"]["prediction"] for r in rows],
                                         [[r["extra"]["references"][0] for r in rows]], tokenize="13a").score
        assert entries[name]["results"][0]["all"]["value"] == pytest.approx(expected, abs=1e-9)
        assert "tok:13a" in entries[name]["meta"]["bleu_signature"]
        assert "drawn (seed 0) from other documents" in entries[name]["meta"]["example_pairs"]
    for row, example in zip(entries["nq"]["per_example"], nq.examples, strict=False):  # the first examples (--limit)
        assert row["correct"]["em"] == any(exact_match(row["extra"]["prediction"], a) for a in example.meta["answers"])
        assert 0.0 <= row["extra"]["probability"] <= 1.0
    assert len(entries["nq"]["most_confident"]) == 6
    probabilities = [r["probability"] for r in entries["nq"]["most_confident"]]
    assert probabilities == sorted(probabilities, reverse=True)
    for row, example in zip(entries["coqa"]["per_example"], coqa.examples, strict=False):  # the first examples (--limit)
        assert row["values"]["f1"] == pytest.approx(100 * coqa_turn_scores(row["extra"]["prediction"],
                                                                           example.meta["answers"])[1])
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "sacrebleu signature: nrefs:1|case:mixed|eff:no|tok:13a" in md and "most confident answers" in md
    assert "ROUGE-1 F1 (TL;DR:)" in md and "| 29.34 |" in md and "| 11.50 |" in md
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "F1 (CoQA official)" in html and "55.00" in html


@pytest.mark.usefixtures("needs_punkt")
def test_generation_is_reproducible_and_user_pairs_replace_drawn_ones(lm, tiny, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("who wrote hamlet\twilliam shakespeare\nwhat is the capital of france\tparis\n", encoding="utf-8")
    spec = [f"nq:{lm / 'nq_open/NQ-open.dev.jsonl'}", f"cnn_dm:{lm / 'cnn_dm'}"]
    first = run_eval(str(tiny), spec, limit=3, bootstrap=0, progress=False, example_pairs=pairs, seed=3)
    again = run_eval(str(tiny), spec, limit=3, bootstrap=0, progress=False, example_pairs=pairs, seed=3)
    predictions = lambda doc: [[r["extra"]["prediction"] for r in e["per_example"]] for e in doc["benchmarks"]]  # noqa: E731
    assert predictions(first) == predictions(again)
    assert first["benchmarks"][0]["meta"]["example_pairs"] == "2 pairs from the user's file"


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_bad_input_is_one_line_and_exit_2_before_the_model_runs(lm, tmp_path, capsys):
    model = tmp_path / "no-model-needed"  # never loaded: every error comes first
    model.mkdir()
    cases = []
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"version": "1.0", "stories": []}), encoding="utf-8")
    cases.append((f"coqa:{wrong}", "no field(s) ['data']"))
    story = json.loads(COQA.read_text(encoding="utf-8"))
    del story["data"][1]["answers"][2]["input_text"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(story), encoding="utf-8")
    cases.append((f"coqa:{missing}", "answers[2]: no field(s) ['input_text']"))
    folder = tmp_path / "wmt"
    folder.mkdir()
    shutil.copy(lm / "wmt14_fren/newstest2014-fren-src.fr.sgm", folder)
    ref = (lm / "wmt14_fren/newstest2014-fren-ref.en.sgm").read_text(encoding="utf-8")
    cut = ref.rindex("<seg")
    (folder / "newstest2014-fren-ref.en.sgm").write_text(ref[:cut] + ref[ref.index("</seg>", cut) + 6:], encoding="utf-8")
    cases.append((f"wmt14:{folder}:fr-en", "3003 segments"))
    cases.append((f"wmt14:{lm / 'wmt14_fren'}", "needs a direction"))
    nq = tmp_path / "nq.jsonl"
    nq.write_text('{"question": "who", "answer": ["x"]}\n{"question": "what", "answer": []}\n', encoding="utf-8")
    cases.append((f"nq:{nq}", "nq.jsonl:2: 'answer' must be a non-empty list"))
    cnn = tmp_path / "cnn"
    cnn.mkdir()
    (cnn / "test.source").write_text("one article\ntwo article\n", encoding="utf-8")
    (cnn / "test.target").write_text(" one point \n", encoding="utf-8")
    cases.append((f"cnn_dm:{cnn}", "2 articles but test.target has 1"))
    for spec, message in cases:
        out = tmp_path / "report"
        assert cli.main(["eval", "--model", str(model), "--benchmark", spec, "--report", str(out), "-q"]) == 2
        line = _error_line(capsys)
        assert message in line and line.startswith("corpusforge eval: error:"), (spec, line)
        assert not out.exists()
    bad_pairs = tmp_path / "pairs.tsv"
    bad_pairs.write_text("no tab here\n", encoding="utf-8")
    assert cli.main(["eval", "--model", str(model), "--benchmark", f"nq:{lm / 'nq_open/NQ-open.dev.jsonl'}",
                 "--example_pairs", str(bad_pairs), "-q"]) == 2
    assert "expected 'left<TAB>right'" in _error_line(capsys)


def test_lead3_and_a_summarys_sentences_never_count_a_lone_full_stop(lm):
    """The real CNN/DM test articles hold full stops a no-break space apart (``defeat.\\xa0. He``):
    punkt, after whitespace is normalised, reads the second stop as a sentence of its own."""
    from corpus.sentences import split_sentences
    from model.eval.decoding import StopRule, word_sentences
    from model.eval.generative import CNN_DM_SENTENCES, _article_sentences

    cnn = load_cnn_dm(str(lm / "cnn_dm"))
    articles = [e.meta["article"] for e in cnn.examples]
    punct_only = lambda sentences: [s for s in sentences if not any(ch.isalnum() for ch in s)]  # noqa: E731
    before = [punct_only(split_sentences(" ".join(a.split()))) for a in articles]
    assert any(before), "the file no longer holds the case this test is about"
    for article, lone in zip(articles, before, strict=True):
        sentences = _article_sentences(article)
        assert not punct_only(sentences)
        words = [s for s in split_sentences(" ".join(article.split())) if s not in lone]
        assert sentences == words  # only the punctuation went; every other sentence is punkt's, in order
    rule = StopRule("sentences", CNN_DM_SENTENCES)
    text = "The Reds lost. . They will play again on Sunday. . Fans were upset. More news later."
    assert rule.cut(text) == "The Reds lost. They will play again on Sunday. Fans were upset."
    assert word_sentences(". . .") == []


def test_a_task_the_model_cannot_fit_is_refused_before_any_benchmark_is_scored(lm, tmp_path, capsys):
    """A 64-token model: NQ would fit (32 new tokens), CNN/DM's 100 cannot; nothing is scored
    or written, the line names the option; with it both run, several benchmarks after one
    --benchmark, and the report says the protocol changed."""
    cnn = load_cnn_dm(str(lm / "cnn_dm"))
    model = make_base(tmp_path / "short", [e.meta["article"] for e in cnn.examples], vocab=300, block=64)
    nq, cnn_dm = f"nq:{lm / 'nq_open/NQ-open.dev.jsonl'}", f"cnn_dm:{lm / 'cnn_dm'}"
    out = tmp_path / "report"
    assert cli.main(["eval", "--model", str(model), "--benchmark", nq, cnn_dm, "--report", str(out), "--limit", "2", "-q"]) == 2
    line = _error_line(capsys)
    assert "cnn_dm: 100 new tokens leave no room" in line and "--max_new_tokens cnn_dm=N" in line, line
    assert not out.exists()  # NQ, first in the list, was not scored either
    assert cli.main(["eval", "--model", str(model), "--benchmark", nq, cnn_dm, "--max_new_tokens", "cnn_dm=16",
                     "--report", str(out), "--limit", "2", "--bootstrap", "0", "-q"]) == 0
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    entries = {e["name"]: e for e in report["benchmarks"]}
    assert set(entries) == {"nq", "cnn_dm"}
    assert entries["cnn_dm"]["meta"]["max_new_tokens"] == 16 and entries["nq"]["meta"]["max_new_tokens"] == 32
    assert all(row["tokens"] <= 16 for row in entries["cnn_dm"]["per_example"])
    assert any("cnn_dm: 16 new tokens instead of the paper's 100" in note for note in report["notes"])
    assert not any(note.startswith("nq:") and "new tokens" in note for note in report["notes"])
    for bad, message in (("cnn=4", "no generative task 'cnn'"), ("nq=0", "whole number >= 1")):
        assert cli.main(["eval", "--model", str(model), "--benchmark", nq, "--max_new_tokens", bad, "-q"]) == 2
        assert message in _error_line(capsys)
    assert cli.main(["eval", "--model", str(model), "--benchmark", nq, "--max_new_tokens", "nq", "-q"]) == 2
    assert "expected TASK=N" in _error_line(capsys)
