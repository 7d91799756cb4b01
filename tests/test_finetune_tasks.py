"""model.finetune.task_files and model.finetune.tasks: the task files in their real layouts, GPT-1's input
transformations token by token, batches, metrics, and the clean/dirty marking."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from corpus.records import Document
from corpus.shards import write_shards
from model.finetune.task_files import NLI_LABELS, TaskData, TaskExample, TaskFormatError, parse_fields, read_task_file
from model.finetune.tasks import (
    IGNORE,
    EncodedExample,
    SpecialTokens,
    TaskError,
    accuracy,
    average_ranks,
    collate,
    encode_task,
    f1_score,
    label_space,
    mark_task,
    matthews,
    metric_names,
    pearson,
    spearman,
    split_metrics,
    transform,
)

FIXTURES = Path(__file__).parent / "fixtures" / "finetune"
SPECIAL = SpecialTokens(start=100, delim=101, extract=102)


# ----------------------------------------------------------------------------- formats

def test_glue_tsv_files_read_in_their_own_layouts():
    sst2 = read_task_file(FIXTURES / "sst2.tsv", "sst2")
    assert sst2.task == "classification" and sst2.labels == ("0", "1")
    assert [(e.segments, e.label) for e in sst2.examples][1] == (("the plot falls apart long before the end ",), "0")

    mrpc = read_task_file(FIXTURES / "mrpc.tsv", "mrpc")  # starts with a byte-order mark, as MRPC's files do
    assert mrpc.task == "similarity" and len(mrpc.examples) == 2
    assert mrpc.examples[0].segments == ("The council approved the new budget on Monday.",
                                         "On Monday the council passed the new budget.")
    assert [e.label for e in mrpc.examples] == ["1", "0"]

    rte = read_task_file(FIXTURES / "rte.tsv", "rte")
    qnli = read_task_file(FIXTURES / "qnli.tsv", "qnli")
    assert rte.task == qnli.task == "entailment"
    assert qnli.examples[0].segments == ("When did the bridge open?", "The bridge opened to traffic in 1932.")
    assert [e.label for e in rte.examples] == ["entailment", "not_entailment"]

    stsb = read_task_file(FIXTURES / "stsb.tsv", "stsb")
    assert stsb.regression and stsb.labels is None and [e.label for e in stsb.examples] == [4.8, 0.25, 3.6]
    assert stsb.examples[1].segments == ("A woman is slicing bread.", "A dog runs on the beach.")

    cola = read_task_file(FIXTURES / "cola.tsv", "cola")  # no header: source, label, mark, sentence
    assert [(e.segments[0], e.label) for e in cola.examples] == [("The cat sat on the mat.", "1"),
                                                                  ("Cat the mat on sat the.", "0")]


def test_a_row_with_another_column_count_is_skipped_and_counted(tmp_path):
    path = tmp_path / "qqp.tsv"
    path.write_text("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                    "0\t1\t2\tHow do tides work?\tWhat causes the tides?\t1\n"
                    "1\t3\t4\tA question cut\tby a stray newline\n"
                    '2\t5\t6\tIs "quoted" text kept?\tWhy is the sky blue?\t0\n', encoding="utf-8")
    qqp = read_task_file(path, "qqp")
    assert [e.label for e in qqp.examples] == ["1", "0"] and qqp.skipped == {"wrong column count": 1}
    assert qqp.examples[1].segments[0] == 'Is "quoted" text kept?'  # no quoting, as GLUE's files are read


def test_snli_skips_the_no_consensus_pairs_and_counts_them():
    snli = read_task_file(FIXTURES / "snli.jsonl", "snli")
    assert [e.label for e in snli.examples] == ["entailment", "contradiction", "neutral"]
    assert snli.skipped == {"no gold label ('-')": 1}
    assert snli.labels == NLI_LABELS and snli.examples[0].id == "1.jpg#0r1e"


def test_race_fills_blanks_and_appends_questions():
    race = read_task_file(FIXTURES / "race", "race")  # a folder of RACE files, as distributed
    assert len(race.examples) == 2 and race.task == "multiple_choice"
    first, second = race.examples
    assert first.segments[0].endswith("better than anyone. What was Tom's job?")
    assert first.choices == ("a baker", "a fisherman", "a teacher", "a doctor") and first.label == 1
    assert second.choices[3] == "Tom usually left home before sunrise ." and second.label == 3


def test_story_cloze_csv():
    roc = read_task_file(FIXTURES / "rocstories.csv", "rocstories")
    assert [e.label for e in roc.examples] == [0, 1]
    assert roc.examples[1].segments[0] == ("Ben forgot his umbrella at home. The sky grew dark on his way to work. "
                                           "Soon it began to pour, and he ran. He arrived at the office soaked.")
    assert roc.examples[1].choices == ("Ben stayed perfectly dry all day.", "Ben borrowed a towel from a coworker.")


def test_named_jsonl_with_mapped_fields(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"s1": "a b", "s2": "c", "y": "yes", "id": "x1"}, {"s1": "d", "s2": "e f", "y": "no", "id": "x2"}]))
    data = read_task_file(path, "jsonl", "entailment", parse_fields("premise=s1,hypothesis=s2,label=y"))
    assert [(e.id, e.segments, e.label) for e in data.examples] == [("x1", ("a b", "c"), "yes"), ("x2", ("d", "e f"), "no")]
    mc = tmp_path / "mc.jsonl"
    mc.write_text(json.dumps({"context": "q", "choices": ["a", "b", "c"], "label": "C"}) + "\n")
    assert read_task_file(mc, "jsonl", "multiple_choice").examples[0].label == 2


@pytest.mark.parametrize("args, message", [
    (("sst2.tsv", "rte"), "not a rte file: no column(s) ['sentence1', 'sentence2'] in its header ['sentence', 'label']"),
    (("rte.tsv", "rte", "classification"), "cannot be run as --task classification"),
    (("race", "race", "similarity"), "cannot be run as --task similarity"),
    (("sst2.tsv", "jsonl"), "needs --task"),
    (("rocstories.csv", "snli"), "not a JSON line"),
    (("snli.jsonl", "rocstories"), "not a Story Cloze Test CSV"),
])
def test_bad_files_and_mismatches_say_what_is_wrong(args, message):
    name, fmt, *task = args
    with pytest.raises(TaskFormatError, match=re.escape(message)):
        read_task_file(FIXTURES / name, fmt, task[0] if task else None)


def test_named_jsonl_errors(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"sentence": "a", "label": 1}) + "\n")
    with pytest.raises(TaskFormatError, match=r"x.jsonl:1: no field\(s\) 'text' \(text\)"):
        read_task_file(path, "jsonl", "classification")
    with pytest.raises(TaskFormatError, match="not roles of a classification task"):
        read_task_file(path, "jsonl", "classification", {"premise": "sentence"})
    with pytest.raises(TaskFormatError, match="role=field"):
        parse_fields("text")
    path.write_text(json.dumps({"context": "c", "choices": ["a", "b"], "label": 2}) + "\n")
    with pytest.raises(TaskFormatError, match="index \\(or letter\\) of one of its 2 choices"):
        read_task_file(path, "jsonl", "multiple_choice")


def test_unknown_labels_are_refused():
    train = read_task_file(FIXTURES / "rte.tsv", "rte")
    bad = TaskData("rte", "entailment", [TaskExample("x", ("a", "b"), "contradiction")], "dev.tsv")
    with pytest.raises(TaskError, match=r"dev.tsv: unknown label\(s\) \['contradiction'\]"):
        label_space(train, [bad])
    assert label_space(train, []) == ("entailment", "not_entailment")
    assert label_space(train, [], ["not_entailment", "entailment"]) == ("not_entailment", "entailment")


# ----------------------------------------------------------------------------- transformations

def test_token_layouts_of_the_four_transformations():
    s, d, e = 100, 101, 102
    a, b = [1, 2, 3], [4, 5]
    assert transform("classification", [a], [], SPECIAL, 64) == ([[s, 1, 2, 3, e]], False)
    assert transform("entailment", [a, b], [], SPECIAL, 64) == ([[s, 1, 2, 3, d, 4, 5, e]], False)
    assert transform("similarity", [a, b], [], SPECIAL, 64) == ([[s, 1, 2, 3, d, 4, 5, e], [s, 4, 5, d, 1, 2, 3, e]], False)
    assert transform("multiple_choice", [a], [[7], [8, 9]], SPECIAL, 64) == (
        [[s, 1, 2, 3, d, 7, e], [s, 1, 2, 3, d, 8, 9, e]], False)


def test_truncation_keeps_the_special_tokens_and_the_right_ends():
    seqs, cut = transform("classification", [list(range(20))], [], SPECIAL, 8)
    assert cut and seqs == [[100, 0, 1, 2, 3, 4, 5, 102]]
    seqs, cut = transform("entailment", [list(range(10)), [50, 51]], [], SPECIAL, 9)  # the longer text is cut
    assert cut and seqs == [[100, 0, 1, 2, 3, 101, 50, 51, 102]]
    seqs, cut = transform("multiple_choice", [list(range(10))], [[60, 61]], SPECIAL, 9)  # the context loses its start
    assert cut and seqs == [[100, 6, 7, 8, 9, 101, 60, 61, 102]]


class _Chars:
    """A stand-in tokenizer: one id per character (ord % 90), enough to check layouts."""
    eot_id = 99

    def encode_batch(self, texts):
        return [[ord(c) % 90 for c in t] for t in texts]


def test_encode_task_and_collate_pad_after_the_extract_token():
    data = read_task_file(FIXTURES / "rocstories.csv", "rocstories")
    encoded = encode_task(data, _Chars(), SPECIAL, 64, None)
    assert [len(e.sequences) for e in encoded] == [2, 2] and [e.target for e in encoded] == [0, 1]
    assert all(seq[0] == 100 and seq[-1] == 102 and 101 in seq for e in encoded for seq in e.sequences)
    batch = collate(encoded, pad_id=99)
    assert batch.idx.shape[:2] == (2, 2)
    for b, example in enumerate(encoded):
        for k, seq in enumerate(example.sequences):
            n = len(seq)
            assert batch.extract[b, k] == n - 1 and batch.idx[b, k, n - 1] == 102
            assert batch.idx[b, k, :n].tolist() == seq and set(batch.idx[b, k, n:].tolist()) <= {99}
            assert batch.lm_targets[b, k, :n - 1].tolist() == seq[1:]
            assert set(batch.lm_targets[b, k, n - 1:].tolist()) == {IGNORE}
    with pytest.raises(TaskError, match="no room"):
        encode_task(data, _Chars(), SPECIAL, 5, None)


def test_a_missing_candidate_is_masked():
    batch = collate([EncodedExample("a", [[1, 2], [3]], 0), EncodedExample("b", [[4, 5, 6]], 0)], pad_id=0)
    assert batch.choice_mask.tolist() == [[True, True], [True, False]]


# ----------------------------------------------------------------------------- metrics

def test_metrics_agree_with_scipy_and_sklearn():
    stats = pytest.importorskip("scipy.stats")
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    gold, pred = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert accuracy(pred, gold) == pytest.approx(sk.accuracy_score(gold, pred))
    assert f1_score(pred, gold) == pytest.approx(sk.f1_score(gold, pred))
    assert matthews(pred, gold) == pytest.approx(sk.matthews_corrcoef(gold, pred))
    gold3, pred3 = rng.integers(0, 3, 300), rng.integers(0, 3, 300)
    assert matthews(pred3, gold3) == pytest.approx(sk.matthews_corrcoef(gold3, pred3))
    x = rng.integers(0, 6, 100).astype(float)  # many ties
    y = x + rng.normal(0, 2, 100)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
    assert average_ranks([3, 1, 3, 2]).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert matthews([1, 1, 1], [1, 1, 1]) == 0.0 and math.isnan(f1_score([0, 0], [0, 0]))


def test_metric_choice_per_task():
    assert metric_names("similarity", True, 0) == ["pearson", "spearman"]
    assert metric_names("similarity", False, 2) == ["accuracy", "f1", "matthews"]
    assert metric_names("entailment", False, 3) == ["accuracy", "matthews"]
    assert metric_names("multiple_choice", False, 0) == ["accuracy"]


def test_all_clean_dirty_split_adds_up():
    pred, gold = [1, 0, 1, 1, 0, 0], [1, 0, 0, 1, 1, 0]
    dirty = [True, True, False, False, False, True]
    out = split_metrics(["accuracy"], pred, gold, dirty)
    assert out["all"] == {"accuracy": 4 / 6, "n": 6}
    assert out["dirty"] == {"accuracy": 1.0, "n": 3} and out["clean"] == {"accuracy": 1 / 3, "n": 3}
    assert list(split_metrics(["accuracy"], pred, gold, None)) == ["all"]


def test_marking_uses_the_harness_rule_on_every_segment(tmp_path):
    premises = ["the river rose over the old stone wall during the long wet spring",
                "a small boat drifted past the lighthouse late on a calm evening",
                "the choir sang three hymns before the bishop arrived at the cathedral door",
                "two students argued about the rules of chess until the library closed"]
    examples = [TaskExample(f"e{i}", (p, f"hypothesis {i}"), "entailment") for i, p in enumerate(premises)]
    data = TaskData("rte", "entailment", examples, "dev.tsv")
    corpus = [Document(text="Unrelated words. " + examples[2].segments[0] + " More words.", url="u", timestamp="t")]
    write_shards(corpus, tmp_path / "shards", fmt="jsonl", num_shards=1)
    dirty, marks = mark_task(data, tmp_path / "shards", name="rte-dev")
    assert dirty == [False, False, True, False] and marks.dirty_ids == ["e2"] and marks.source_kind == "exact"
