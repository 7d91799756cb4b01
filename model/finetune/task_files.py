"""Labelled task files for fine-tuning, read into one shape: ``TaskExample``.

Formats (``--format``), each in its distributors' exact column layout:

    sst2        GLUE TSV  ``sentence  label``                                  classification, 0/1
    cola        GLUE TSV without a header: ``source  label  mark  sentence``    classification, 0/1
    mrpc        GLUE TSV  ``Quality  #1 ID  #2 ID  #1 String  #2 String``      similarity, 0/1
    qqp         GLUE TSV  ``id qid1 qid2 question1 question2 is_duplicate``    similarity, 0/1
    rte         GLUE TSV  ``index  sentence1  sentence2  label``               entailment
    qnli        GLUE TSV  ``index  question  sentence  label``                 entailment
    stsb        GLUE TSV, 10 columns, ``sentence1``/``sentence2``/``score``    similarity, regression 0..5
    snli, mnli  JSONL ``gold_label``/``sentence1``/``sentence2``; ``-`` (no consensus) skipped
    race        RACE JSON, one passage per file (a file, a folder or a glob):
                ``article``, ``questions``, ``options`` (4 each), ``answers`` (letters)
    rocstories  Story Cloze Test CSV: ``InputStoryid, InputSentence1..4,
                RandomFifthSentenceQuiz1, RandomFifthSentenceQuiz2, AnswerRightEnding``
    jsonl       any JSON lines with named fields (``--fields role=field,...``)

The GLUE files are read as the GLUE loaders do: tab-separated, no quoting (a ``"`` is
text), UTF-8 with an optional byte-order mark (MRPC's files start with one). A row whose
column count differs from the header's is skipped and counted (QQP's files have a few);
a missing column, an unknown label or a file of another format is an error, raised
before any training starts.
"""

from __future__ import annotations

import csv
import glob
import json
import os
from dataclasses import dataclass, field

from common.errors import InputError
from common.jsonlines import json_objects
from common.storage import local_copy

TASK_TYPES = ("classification", "entailment", "similarity", "multiple_choice")
# the roles a task's examples fill, per task type (the generic JSONL's default field names)
ROLES = {"classification": ("text", "label"), "entailment": ("premise", "hypothesis", "label"),
         "similarity": ("text_a", "text_b", "label"), "multiple_choice": ("context", "choices", "label")}
NLI_LABELS = ("entailment", "neutral", "contradiction")  # SNLI / MultiNLI label order
RACE_LETTERS = "ABCD"


class TaskFormatError(InputError):
    """A task file that cannot be read as the format it was given as: said with file and line."""


@dataclass
class TaskExample:
    """One labelled example: its text segments (1 for classification, 2 for pair tasks, the
    context for multiple choice), the candidate answers (multiple choice only) and its label
    as written (a class name, a number for regression, an answer index for multiple choice)."""

    id: str
    segments: tuple[str, ...]
    label: object
    choices: tuple[str, ...] = ()

    def text(self) -> str:
        """All of its text, one part per line (what the contamination check reads)."""
        return "\n".join([*self.segments, *self.choices])


@dataclass
class TaskData:
    format: str
    task: str  # one of TASK_TYPES
    examples: list[TaskExample]
    source: str
    labels: tuple[str, ...] | None = None  # the class names in index order (None: regression or multiple choice)
    regression: bool = False
    skipped: dict = field(default_factory=dict)  # reason -> rows skipped


@dataclass(frozen=True)
class TsvSpec:
    task: str
    columns: tuple  # the role columns (names, or indices for a file without a header)
    labels: tuple[str, ...] | None
    header: bool = True
    regression: bool = False


GLUE = {
    "sst2": TsvSpec("classification", ("sentence", "label"), ("0", "1")),
    "cola": TsvSpec("classification", (3, 1), ("0", "1"), header=False),
    "mrpc": TsvSpec("similarity", ("#1 String", "#2 String", "Quality"), ("0", "1")),
    "qqp": TsvSpec("similarity", ("question1", "question2", "is_duplicate"), ("0", "1")),
    "rte": TsvSpec("entailment", ("sentence1", "sentence2", "label"), ("entailment", "not_entailment")),
    "qnli": TsvSpec("entailment", ("question", "sentence", "label"), ("entailment", "not_entailment")),
    "stsb": TsvSpec("similarity", ("sentence1", "sentence2", "score"), None, regression=True),
}
FORMAT_TASKS = {**{name: spec.task for name, spec in GLUE.items()}, "snli": "entailment", "mnli": "entailment",
                "race": "multiple_choice", "rocstories": "multiple_choice", "jsonl": None}
FORMATS = tuple(FORMAT_TASKS)
# a two-text format may be run as entailment or as similarity (the paper runs MRPC, QQP and STS-B as similarity)
PAIR_TASKS = ("entailment", "similarity")


def compatible_tasks(fmt: str) -> tuple[str, ...]:
    task = FORMAT_TASKS[fmt]
    if task is None:
        return TASK_TYPES
    return PAIR_TASKS if task in PAIR_TASKS else (task,)


def _open_text(path: str):
    if not os.path.isfile(path):
        raise TaskFormatError(f"{path}: no such file")
    return open(path, encoding="utf-8-sig", newline="")


def read_glue_tsv(path: str, fmt: str) -> TaskData:
    spec = GLUE[fmt]
    examples, skipped = [], {}
    with _open_text(path) as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows, None) if spec.header else None
        if spec.header:
            if header is None:
                raise TaskFormatError(f"{path}: empty file (expected a {fmt} header)")
            missing = [c for c in spec.columns if c not in header]
            if missing:
                raise TaskFormatError(f"{path}: not a {fmt} file: no column(s) {missing} in its header {header}")
            where = [header.index(c) for c in spec.columns]
            width = len(header)
        else:
            where, width = list(spec.columns), None
        for line, row in enumerate(rows, start=2 if spec.header else 1):
            if not row or row == [""]:
                continue
            if (width is not None and len(row) != width) or len(row) <= max(where):
                skipped["wrong column count"] = skipped.get("wrong column count", 0) + 1
                continue
            *texts, label = (row[i] for i in where)
            if spec.regression:
                try:
                    label = float(label)
                except ValueError:
                    raise TaskFormatError(f"{path}:{line}: {fmt} score {label!r} is not a number") from None
            examples.append(TaskExample(f"{fmt}-{len(examples)}", tuple(texts), label))
    return TaskData(fmt, spec.task, examples, path, spec.labels, spec.regression, skipped)


def _json_lines(path: str):
    with _open_text(path) as f:
        yield from json_objects(f, path, TaskFormatError)


def read_nli_jsonl(path: str, fmt: str) -> TaskData:
    examples, skipped = [], {}
    for line, record in _json_lines(path):
        missing = [k for k in ("gold_label", "sentence1", "sentence2") if k not in record]
        if missing:
            raise TaskFormatError(f"{path}:{line}: not a {fmt} line: no field(s) {missing}")
        if record["gold_label"] == "-":  # the annotators reached no consensus: SNLI/MultiNLI leave it out
            skipped["no gold label ('-')"] = skipped.get("no gold label ('-')", 0) + 1
            continue
        ident = str(record.get("pairID", f"{fmt}-{len(examples)}"))
        examples.append(TaskExample(ident, (record["sentence1"], record["sentence2"]), record["gold_label"]))
    return TaskData(fmt, "entailment", examples, path, NLI_LABELS, False, skipped)


def _race_files(path: str) -> list[str]:
    if os.path.isdir(path):
        found = [p for p in glob.glob(os.path.join(glob.escape(path), "**", "*"), recursive=True) if os.path.isfile(p)]
    elif glob.has_magic(path):
        found = [p for p in glob.glob(path, recursive=True) if os.path.isfile(p)]
    else:
        found = [path] if os.path.isfile(path) else []
    if not found:
        raise TaskFormatError(f"{path}: no RACE files (a .txt/.json file, a folder of them, or a glob)")
    return sorted(found)


def read_race(path: str) -> TaskData:
    """RACE: per question, the context is the passage (and the question, unless the question
    has a ``_`` blank, which each option then fills), the candidates the four options."""
    examples = []
    for file in _race_files(path):
        with _open_text(file) as f:
            try:
                record = json.load(f)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(f"{file}: not a RACE JSON file ({exc.msg})") from None
        missing = [k for k in ("article", "questions", "options", "answers") if k not in record]
        if missing:
            raise TaskFormatError(f"{file}: not a RACE file: no field(s) {missing}")
        if not len(record["questions"]) == len(record["options"]) == len(record["answers"]):
            raise TaskFormatError(f"{file}: {len(record['questions'])} questions, {len(record['options'])} option "
                                  f"lists and {len(record['answers'])} answers")
        name = str(record.get("id", os.path.basename(file)))
        for q, (question, options, answer) in enumerate(zip(record["questions"], record["options"], record["answers"], strict=True)):
            if answer not in RACE_LETTERS[:len(options)]:
                raise TaskFormatError(f"{file}: question {q}: answer {answer!r} is not one of "
                                      f"{list(RACE_LETTERS[:len(options)])}")
            if "_" in question:
                context, choices = record["article"], [question.replace("_", option) for option in options]
            else:
                context, choices = f"{record['article']} {question}", list(options)
            examples.append(TaskExample(f"{name}-{q}", (context,), RACE_LETTERS.index(answer), tuple(choices)))
    return TaskData("race", "multiple_choice", examples, path)


ROC_COLUMNS = ("InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3", "InputSentence4",
               "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding")


def read_rocstories(path: str) -> TaskData:
    examples = []
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        missing = [c for c in ROC_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TaskFormatError(f"{path}: not a Story Cloze Test CSV: no column(s) {missing}")
        for line, row in enumerate(reader, start=2):
            answer = (row["AnswerRightEnding"] or "").strip()
            if answer not in ("1", "2"):
                raise TaskFormatError(f"{path}:{line}: AnswerRightEnding {answer!r} is neither 1 nor 2")
            context = " ".join(row[f"InputSentence{i}"].strip() for i in range(1, 5))
            examples.append(TaskExample(row["InputStoryid"], (context,), int(answer) - 1,
                                        (row["RandomFifthSentenceQuiz1"], row["RandomFifthSentenceQuiz2"])))
    return TaskData("rocstories", "multiple_choice", examples, path)


def parse_fields(spec: str | None) -> dict[str, str]:
    """``"premise=sentence1,hypothesis=sentence2"`` -> ``{"premise": "sentence1", ...}``."""
    if not spec:
        return {}
    out = {}
    for part in spec.split(","):
        role, eq, name = part.partition("=")
        if not eq or not role.strip() or not name.strip():
            raise TaskFormatError(f"--fields {spec!r}: each item is role=field (e.g. text=sentence,label=label)")
        out[role.strip()] = name.strip()
    return out


def read_named_jsonl(path: str, task: str, fields: dict[str, str] | None = None, regression: bool = False) -> TaskData:
    """Any JSON lines: each role of ``task`` (``ROLES``) read from the field of that name, or
    the one ``fields`` maps it to. Multiple choice: ``choices`` is a list field, ``label`` the
    right answer's index (or its letter A, B, ...)."""
    roles = ROLES[task]
    fields = dict(fields or {})
    unknown = sorted(set(fields) - set(roles))
    if unknown:
        raise TaskFormatError(f"--fields: {unknown} are not roles of a {task} task (its roles: {list(roles)})")
    names = {role: fields.get(role, role) for role in roles}
    examples = []
    for line, record in _json_lines(path):
        missing = [f"{names[r]!r} ({r})" for r in roles if names[r] not in record]
        if missing:
            raise TaskFormatError(f"{path}:{line}: no field(s) {', '.join(missing)}; map roles to fields with "
                                  f"--fields {','.join(f'{r}=NAME' for r in roles)}")
        ident = str(record.get("id", f"jsonl-{len(examples)}"))
        label = record[names["label"]]
        if task == "multiple_choice":
            choices = record[names["choices"]]
            if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
                raise TaskFormatError(f"{path}:{line}: {names['choices']!r} must be a list of at least two strings")
            if isinstance(label, str) and len(label) == 1 and label.isalpha():
                label = ord(label.upper()) - ord("A")
            if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(choices):
                raise TaskFormatError(f"{path}:{line}: label {record[names['label']]!r} is not the index (or letter) "
                                      f"of one of its {len(choices)} choices")
            examples.append(TaskExample(ident, (str(record[names["context"]]),), label, tuple(choices)))
            continue
        texts = tuple(str(record[names[r]]) for r in roles[:-1])
        if regression:
            try:
                label = float(label)
            except (TypeError, ValueError):
                raise TaskFormatError(f"{path}:{line}: label {label!r} is not a number (regression)") from None
        else:
            label = str(label)
        examples.append(TaskExample(ident, texts, label))
    return TaskData("jsonl", task, examples, path, None, regression)


def read_task_file(path: str, fmt: str, task: str | None = None, fields: dict[str, str] | None = None,
                   regression: bool = False) -> TaskData:
    """Read ``path`` as ``fmt``; ``task`` (default: the format's own) must suit the format."""
    path = local_copy(os.fspath(path))
    if fmt not in FORMAT_TASKS:
        raise TaskFormatError(f"unknown --format {fmt!r}; known: {', '.join(FORMATS)}")
    if task is not None and task not in TASK_TYPES:
        raise TaskFormatError(f"unknown --task {task!r}; known: {', '.join(TASK_TYPES)}")
    if fmt == "jsonl":
        if task is None:
            raise TaskFormatError("--format jsonl needs --task (" + ", ".join(TASK_TYPES) + ")")
        return read_named_jsonl(path, task, fields, regression)
    if task is not None and task not in compatible_tasks(fmt):
        raise TaskFormatError(f"--format {fmt} holds {FORMAT_TASKS[fmt]} examples; it cannot be run as --task {task} "
                              f"(it can as: {', '.join(compatible_tasks(fmt))})")
    if fields:
        raise TaskFormatError(f"--fields is for --format jsonl; {fmt} has fixed columns")
    if fmt in GLUE:
        data = read_glue_tsv(path, fmt)
    elif fmt in ("snli", "mnli"):
        data = read_nli_jsonl(path, fmt)
    elif fmt == "race":
        data = read_race(path)
    else:
        data = read_rocstories(path)
    if task is not None:
        data.task = task
    return data
