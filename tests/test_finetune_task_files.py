"""GPT-1's task files as their distributors ship them (the shared data's ``finetune_tasks/``):
every staged file read by its loader with the published counts, and ``finetune`` runs on real
STS-B and Story Cloze from a tiny model with every metric on all / clean / dirty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from corpus.records import Document
from corpus.shards import write_shards
from model.finetune.task_files import NLI_LABELS, read_task_file
from model.finetune.tasks import metric_names
from pipelines import cli
from tests.test_finetune import make_base

torch.set_num_threads(1)
STORY_CLOZE = "story_cloze/cloze_test_val__spring2016 - cloze_test_ALL_val.csv"


@pytest.fixture(scope="module")
def tasks(real_data) -> Path:
    folder = real_data / "finetune_tasks"
    if not folder.is_dir():
        pytest.skip(f"{folder} is missing: the GPT-1 task files are not staged")
    return folder


def test_cola_raw_files_without_a_header(tasks):
    in_domain = read_task_file(tasks / "cola/in_domain_dev.tsv", "cola")
    out_domain = read_task_file(tasks / "cola/out_of_domain_dev.tsv", "cola")  # no final newline
    assert len(in_domain.examples) == 527 and len(out_domain.examples) == 516
    assert not in_domain.skipped and not out_domain.skipped
    assert in_domain.examples[0].segments == ("The sailors rode the breeze clear of the rocks.",)
    assert {e.label for e in in_domain.examples} == {"0", "1"}
    # the sentence is the fourth column even where the original mark (third) is empty or '*'
    raw = (tasks / "cola/in_domain_dev.tsv").read_text(encoding="utf-8").splitlines()
    assert [e.segments[0] for e in in_domain.examples] == [line.split("\t")[3] for line in raw]
    assert [e.label for e in in_domain.examples] == [line.split("\t")[1] for line in raw]


def test_stsb_and_mrpc_glue_files_with_their_headers(tasks):
    stsb = read_task_file(tasks / "sts-b/dev.tsv", "stsb")
    assert len(stsb.examples) == 1500 and stsb.regression and not stsb.skipped
    assert stsb.examples[0].segments == ("A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.")
    assert stsb.examples[0].label == 5.0 and all(0.0 <= e.label <= 5.0 for e in stsb.examples)
    mrpc = read_task_file(tasks / "mrpc/dev.tsv", "mrpc")  # starts with a byte-order mark
    assert len(mrpc.examples) == 408 and not mrpc.skipped
    labels = [e.label for e in mrpc.examples]
    assert labels.count("1") == 279 and labels.count("0") == 129
    assert mrpc.examples[1].segments[1].startswith('His wife said he was " 100 percent')  # a '"' is text


def test_snli_slice_leaves_out_the_no_consensus_pairs(tasks):
    snli = read_task_file(tasks / "snli/snli_1.0_dev.head1289.jsonl", "snli")
    lines = (tasks / "snli/snli_1.0_dev.head1289.jsonl").read_text(encoding="utf-8").splitlines()
    no_gold = sum(json.loads(line)["gold_label"] == "-" for line in lines)
    assert len(lines) == 1289 and no_gold == 16
    assert len(snli.examples) == 1289 - no_gold and snli.skipped == {"no gold label ('-')": no_gold}
    assert snli.examples[0].id == "4705552913.jpg#2r1n"
    counts = {name: sum(e.label == name for e in snli.examples) for name in NLI_LABELS}
    assert counts == {"entailment": 433, "neutral": 421, "contradiction": 419}


def test_race_per_passage_json_files(tasks):
    race = read_task_file(tasks / "race/dev", "race")
    assert len(race.examples) == 78
    files = sorted((tasks / "race/dev").rglob("*.txt"))
    assert len(files) == 20
    expected = sum(len(json.loads(f.read_text(encoding="utf-8"))["questions"]) for f in files)
    assert expected == 78
    assert all(len(e.choices) == 4 and 0 <= e.label < 4 for e in race.examples)
    # one level through a glob, the other through its folder: together the whole sample
    high = read_task_file(str(tasks / "race/dev/high/*.txt"), "race")
    middle = read_task_file(tasks / "race/dev/middle", "race")
    assert len(high.examples) + len(middle.examples) == 78


def test_story_cloze_csv_keeps_its_original_spacing(tasks):
    stories = read_task_file(tasks / STORY_CLOZE, "rocstories")
    assert len(stories.examples) == 1871
    assert all(len(e.choices) == 2 and e.label in (0, 1) for e in stories.examples)
    assert stories.examples[0].id == "138d5bfb-05cc-41e3-bf2c-fa85ebad14e2" and stories.examples[0].label == 0
    assert any("  " in e.segments[0] for e in stories.examples)  # e.g. "It was  my final performance"


@pytest.fixture(scope="module")
def task_base(tasks, tmp_path_factory) -> Path:
    stsb = read_task_file(tasks / "sts-b/dev.tsv", "stsb")
    stories = read_task_file(tasks / STORY_CLOZE, "rocstories")
    texts = [e.text() for e in stsb.examples[:200]] + [e.text() for e in stories.examples[:200]]
    return make_base(tmp_path_factory.mktemp("task-base"), texts, vocab=400, block=128)


def _planted_corpus(folder: Path, texts: list[str]) -> Path:
    docs = [Document(text=f"Before it.\n{t}\nAfter it.", url=f"https://example.org/{i}", timestamp="2019-01-01T00:00:00Z")
            for i, t in enumerate(texts)]
    docs.append(Document(text="Filler about rivers and hills, none of the task.", url="u", timestamp="t"))
    write_shards(docs, folder, fmt="jsonl", num_shards=1)
    return folder


@pytest.mark.parametrize("fmt,path,limit,planted", [("stsb", "sts-b/dev.tsv", 24, [2, 16, 22]),
                                                     ("rocstories", STORY_CLOZE, 16, [0, 5])])
def test_finetune_on_a_real_task_file_reports_every_metric_on_every_split(tasks, task_base, tmp_path, fmt, path,
                                                                          limit, planted):
    data = read_task_file(tasks / path, fmt)
    # the planted examples' own text has long runs of words in the "pre-training corpus"
    corpus = _planted_corpus(tmp_path / "corpus", [data.examples[i].text() for i in planted])
    out = tmp_path / "run"
    assert cli.main(["finetune", "--model", str(task_base), "--train", str(tasks / path), "--eval", str(tasks / path), "--format", fmt,
                 "--limit", str(limit), "--out", str(out), "--batch_size", "8", "--max_steps", "2", "--lr", "1e-3",
                 "--training", str(corpus), "--quiet", "--no_hf_export"]) == 0
    report = json.loads((out / "report.json").read_text())
    metrics = report["metrics"]
    names = metric_names(data.task, data.regression, 0)
    for split, n in (("all", limit), ("clean", limit - len(planted)), ("dirty", len(planted))):
        assert metrics[split]["n"] == n
        assert set(names) <= set(metrics[split])
        for name in names:
            value = metrics[split][name]
            assert -1.0 <= value <= 1.0, (split, name, value)
    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(rows) == limit
    assert [i for i, row in enumerate(rows) if row["dirty"]] == planted
    md = (out / "report.md").read_text()
    assert f"dirty (n={len(planted)})" in md and f"clean (n={limit - len(planted)})" in md


def test_limit_below_one_is_refused_before_training(tasks, task_base, tmp_path):
    assert cli.main(["finetune", "--model", str(task_base), "--train", str(tasks / "sts-b/dev.tsv"), "--format", "stsb",
                 "--limit", "0", "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert not (tmp_path / "run").exists()
