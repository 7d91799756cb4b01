"""Benchmark test sets as plain records, for the overlap audit and the evaluation harness.

Every loader returns a :class:`BenchmarkSet`: a name, a split, the ``examples`` (each an
:class:`Example` with an ``id``, the ``text`` the audit cuts into n-grams, and a ``meta``
map with what the harness needs to score it), the ``source`` path, and for the
language-modelling sets the ``full_text`` as read (what perplexity is computed over).

How each file is cut into examples (what the per-example clean/dirty numbers count):

========== ======================================= =============================================
kind       file layout                             one example is
========== ======================================= =============================================
wikitext2  ``wiki.test.raw`` / ``wiki.test.tokens`` an article (default): the lines from one
wikitext103 (raw or tokenized; LF or CRLF; with or ``= Title =`` line to the next, or with
           without the blank lines between          ``unit="paragraph"`` one paragraph line
           paragraphs)                             (headings of any level excluded)
ptb        ``ptb.test.txt``, one sentence a line   a line (stripped)
lambada    ``lambada_test.jsonl``: ``{"text": …}``  a passage, last word included
wsc        ``WSCollection.xml`` (ISO-8859-1)       a schema: its sentence, then each candidate
                                                   answer on its own line; WSC273 = the first
                                                   273 schemas (default), ``all`` = every one
cbt        ``cbtest_{CN,NE,V,P}_*.txt``             21 numbered lines: the 20 context sentences
                                                   and the query with ``XXXXX`` filled in
enwik8     raw bytes (UTF-8, errors replaced)      a chunk of ``chunk_chars`` characters, or
                                                   with ``unit="page"`` a ``<page>`` element
text8      one long line of lower-case words       a chunk of ``chunk_words`` words
1bw        1BW heldout: one sentence a line        a line
text       any UTF-8 text file                     a line (default) or, with ``paragraph``, a
                                                   blank-line-separated paragraph
jsonl      one JSON object a line                  a line's ``field`` (default ``text``)
coqa       official CoQA JSON (``data[]``)          a question; text = its story (document)
cnn_dm     ``test.source``/``test.target`` or       an article; text = the article
           ``.story`` files
wmt14      newstest2014 SGML, ``FOLDER:fr-en`` or   a segment; text = the source sentence
           ``FOLDER:en-fr``
nq         NQ-open JSONL (``question``/``answer``)  a question; text = the question
========== ======================================= =============================================

Text is kept as written: loaders never detokenize (the harness does that) and never
normalise (the audit's n-gram normaliser does). PTB's ``<unk>`` and ``N`` stay as
written; the GPT-2 normalisation (lower-cased alphanumeric words) sees them as the words
``unk`` and ``n``. WikiText's ``@-@`` etc. become separators the same way.

Ids are ``<name>-<index>`` with a zero-based index in file order (``wsc273-0``,
``lambada-5152``); the jsonl loader uses the row's ``id`` field when every row has one.

This module is imported by the evaluation harness: stdlib only.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import InputError
from common.jsonlines import json_objects

WSC273_SCHEMAS = 273  # Levesque et al.'s WSC273: the first 273 schemas of WSCollection.xml
CBT_LINES_PER_EXAMPLE = 21  # Hill et al. 2016: 20 context sentences + 1 query
CBT_BLANK = "XXXXX"
ENWIK8_SIZE = 100_000_000  # Hutter prize: enwik8 is the first 1e8 bytes of the 2006 enwiki dump
TEXT8_SIZE = 100_000_000
HUTTER_SPLIT = (90_000_000, 95_000_000)  # train / valid / test = first 90M, next 5M, last 5M
DEFAULT_CHUNK_CHARS = 10_000
DEFAULT_CHUNK_WORDS = 1_000

_WIKITEXT_TITLE = re.compile(r"^= (?!=)(.*) =$")  # level-1 heading (stripped line): "= Title ="
_WIKITEXT_HEADING = re.compile(r"^(= )+.*( =)+$")  # any level: "= = Section = ="
_SPLITS = ("test", "valid", "validation", "dev", "train", "heldout")


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    meta: dict = field(default_factory=dict)


@dataclass
class BenchmarkSet:
    name: str
    split: str
    examples: list[Example]
    source: str
    full_text: str | None = None  # the whole split as read, for perplexity (LM sets only)
    meta: dict = field(default_factory=dict)  # how it was cut (unit, chunk size, byte count, ...)

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self) -> Iterator[Example]:
        return iter(self.examples)

    def texts(self) -> list[str]:
        return [e.text for e in self.examples]


class BenchmarkSpecError(InputError):
    """A ``kind:path[:option]`` spec that names no known kind or has a bad option."""


# ----------------------------------------------------------------------------- helpers

def _check_file(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"benchmark file not found: {p}")
    if not p.is_file():
        raise FileNotFoundError(f"benchmark path is not a file: {p}")
    return p


def _read_text(p: Path, encoding: str = "utf-8") -> str:
    """The file's text exactly as written (no newline translation)."""
    with open(p, encoding=encoding, newline="") as f:
        return f.read()


def _lines(text: str) -> list[str]:
    """Lines without their ``\\n`` / ``\\r\\n`` ending; no empty last line for a final newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def split_from_filename(path: str | os.PathLike, default: str = "test") -> str:
    """``test``/``valid``/``train``/... from a file name (``wiki.valid.raw`` -> ``valid``)."""
    words = re.split(r"[^a-z]+", Path(path).name.lower())
    for split in _SPLITS:
        if split in words:
            return "valid" if split == "validation" else split
    return default


# ----------------------------------------------------------------------------- WikiText

def load_wikitext(path: str | os.PathLike, *, name: str = "wikitext2", unit: str = "article") -> BenchmarkSet:
    """WikiText-2/-103, raw (``wiki.test.raw``) or tokenized (``wiki.test.tokens``).

    Lines are stripped (and ``\\r`` removed); blank lines dropped. An article starts at
    each level-1 heading line ``= Title =`` (level 2+ headings are ``= = Section = =``);
    its text is its non-blank lines from the title on, joined by ``\\n``. Lines before the
    first title (none in the real files) form an article with title ``None``. Caveat: the
    test split has two equation lines in "Constant k filter" that are formatted exactly
    like titles (``= 1 rad / s and a nominal impedance k =``), so WikiText-2 test gives
    62 articles, not the paper's 60 (the same count as splitting on ``\\n = [^=]``).
    ``unit="paragraph"``: one example per non-heading line, with its article title in meta.
    ``full_text`` is the file as read (line endings untouched).
    """
    if unit not in ("article", "paragraph"):
        raise ValueError(f"wikitext unit must be 'article' or 'paragraph', not {unit!r}")
    p = _check_file(path)
    full_text = _read_text(p)
    articles: list[tuple[str | None, int, list[str]]] = []  # (title, first line number, lines)
    for number, raw in enumerate(_lines(full_text)):
        line = raw.strip()
        if not line:
            continue
        heading = _WIKITEXT_TITLE.match(line)
        if heading or not articles:
            articles.append((heading.group(1) if heading else None, number, []))
        articles[-1][2].append(line)
    examples: list[Example] = []
    if unit == "article":
        for index, (title, number, lines) in enumerate(articles):
            examples.append(Example(f"{name}-{index}", "\n".join(lines), {"title": title, "line": number}))
    else:
        for article_index, (title, _number, lines) in enumerate(articles):
            for line in lines:
                if not _WIKITEXT_HEADING.match(line):
                    examples.append(Example(f"{name}-{len(examples)}", line,
                                            {"title": title, "article": article_index}))
    return BenchmarkSet(name, split_from_filename(p), examples, str(p), full_text,
                        {"unit": unit, "articles": len(articles)})


# ----------------------------------------------------------------------------- line files

def _load_line_file(path: str | os.PathLike, name: str) -> BenchmarkSet:
    p = _check_file(path)
    full_text = _read_text(p)
    examples: list[Example] = []
    for number, line in enumerate(_lines(full_text)):
        if line.strip():
            examples.append(Example(f"{name}-{len(examples)}", line.strip(), {"line": number}))
    return BenchmarkSet(name, split_from_filename(p), examples, str(p), full_text, {"unit": "line"})


def load_ptb(path: str | os.PathLike, *, name: str = "ptb") -> BenchmarkSet:
    """Mikolov's PTB (``ptb.test.txt``): one sentence a line, ``<unk>`` and ``N`` as written.

    One example per non-blank line, stripped; ``meta["line"]`` is its zero-based line.
    """
    return _load_line_file(path, name)


def load_1bw(path: str | os.PathLike, *, name: str = "1bw") -> BenchmarkSet:
    """One Billion Word heldout (``news.en.heldout-00000-of-00050``): one sentence a line."""
    return _load_line_file(path, name)


# ----------------------------------------------------------------------------- LAMBADA

_LAST_WORD = re.compile(r"\S+\s*\Z")


def load_lambada(path: str | os.PathLike, *, name: str = "lambada") -> BenchmarkSet:
    """LAMBADA as GPT-2 used it (``lambada_test.jsonl``, one ``{"text": ...}`` a line).

    One example per passage, last word included. ``meta``: ``context`` (the text up to the
    last word, with the whitespace before it) and ``target`` (the last word, punctuation
    included if any), so that ``context + target == text``.
    """
    bset = load_jsonl(path, field="text", name=name, id_field=None)
    examples = []
    for e in bset.examples:
        match = _LAST_WORD.search(e.text)
        start = match.start() if match else len(e.text)
        examples.append(Example(e.id, e.text, {**e.meta, "context": e.text[:start], "target": e.text[start:].rstrip()}))
    bset.examples = examples
    return bset


# ----------------------------------------------------------------------------- WSC

def _collapse(text: str | None) -> str:
    return " ".join((text or "").split())


def _join_words(*parts: str) -> str:
    out = ""
    for part in parts:
        if not part:
            continue
        out = part if not out else out + ("" if part[0] in ".,;:!?'" else " ") + part
    return out


def load_wsc(path: str | os.PathLike, *, subset: str = "wsc273") -> BenchmarkSet:
    """The Winograd Schema Challenge (``WSCollection.xml``, ISO-8859-1, as declared).

    ``subset="wsc273"`` (default) keeps the first 273 schemas, ``"all"`` every one (283 in
    the nlu-winograd copy). Each schema's sentence is ``txt1 pron txt2`` with whitespace
    collapsed (no space before a ``txt2`` that starts with punctuation); the example text
    is the sentence, then each candidate answer on its own line. ``meta``: ``sentence``,
    ``txt1``, ``pron``, ``txt2``, ``options`` (the answers), ``label`` (0-based index of
    the correct answer, from ``A``/``A.``/``B``/...), ``source``.
    """
    if subset not in ("wsc273", "all"):
        raise ValueError(f"wsc subset must be 'wsc273' or 'all', not {subset!r}")
    p = _check_file(path)
    try:
        root = ET.parse(p).getroot()
    except ET.ParseError as err:
        raise ValueError(f"{p}: not a WSC XML file: {err}") from err
    schemas = root.findall("schema")
    if subset == "wsc273":
        if len(schemas) < WSC273_SCHEMAS:
            raise ValueError(f"{p}: {len(schemas)} schemas, fewer than the {WSC273_SCHEMAS} of WSC273")
        schemas = schemas[:WSC273_SCHEMAS]
    name = "wsc273" if subset == "wsc273" else "wsc"
    examples = []
    for index, schema in enumerate(schemas):
        text_el = schema.find("text")
        if text_el is None:
            raise ValueError(f"{p}: schema {index} has no <text>")
        txt1, pron, txt2 = (_collapse(text_el.findtext(tag)) for tag in ("txt1", "pron", "txt2"))
        options = [_collapse(a.text) for a in schema.findall("answers/answer")]
        letter = _collapse(schema.findtext("correctAnswer")).rstrip(".").upper()
        label = ord(letter) - ord("A") if len(letter) == 1 and "A" <= letter <= "Z" else None
        sentence = _join_words(txt1, pron, txt2)
        examples.append(Example(f"{name}-{index}", "\n".join([sentence, *options]), {
            "sentence": sentence, "txt1": txt1, "pron": pron, "txt2": txt2, "options": options,
            "label": label, "source": _collapse(schema.findtext("source"))}))
    return BenchmarkSet(name, "test", examples, str(p), None, {"unit": "schema", "subset": subset})


# ----------------------------------------------------------------------------- CBT

_CBT_LINE = re.compile(r"^(\d+) (.*)$")


def load_cbt(path: str | os.PathLike, *, name: str | None = None) -> BenchmarkSet:
    """The Children's Book Test (``cbtest_CN_test_2500ex.txt`` etc.).

    Examples are 21 numbered lines (``1 ...`` to ``20 ...`` context sentences, then
    ``21 query<TAB>answer<TAB><TAB>cand1|cand2|...``), separated by blank lines. Example
    text = the 20 sentences and the query with ``XXXXX`` replaced by the answer, one per
    line (numbers dropped). ``meta``: ``context`` (list), ``query`` (with ``XXXXX``),
    ``answer``, ``candidates``. Name: ``cbt-cn``/``cbt-ne``/``cbt-v``/``cbt-p`` from the
    file name, else ``cbt``.
    """
    p = _check_file(path)
    if name is None:
        kind = re.search(r"_(CN|NE|V|P)_", p.name, re.IGNORECASE)
        name = f"cbt-{kind.group(1).lower()}" if kind else "cbt"
    full_text = _read_text(p)
    examples: list[Example] = []
    block: list[tuple[int, str]] = []

    def close(end_line: int) -> None:
        if not block:
            return
        if len(block) != CBT_LINES_PER_EXAMPLE or [n for n, _ in block] != list(range(1, CBT_LINES_PER_EXAMPLE + 1)):
            raise ValueError(f"{p}: example ending at line {end_line} has {len(block)} numbered lines, "
                             f"expected 1..{CBT_LINES_PER_EXAMPLE}")
        context = [s for _, s in block[:-1]]
        fields = block[-1][1].split("\t")
        query = fields[0].strip()
        answer = fields[1].strip() if len(fields) > 1 else ""
        candidates = [c for c in fields[-1].split("|") if c] if len(fields) > 2 else []
        filled = query.replace(CBT_BLANK, answer) if answer else query
        examples.append(Example(f"{name}-{len(examples)}", "\n".join([*context, filled]),
                                {"context": context, "query": query, "answer": answer, "candidates": candidates}))
        block.clear()

    for number, line in enumerate(_lines(full_text)):
        if not line.strip():
            close(number)
            continue
        match = _CBT_LINE.match(line.strip())
        if not match:
            raise ValueError(f"{p}: line {number + 1} is not a numbered CBT line")
        if int(match.group(1)) == 1:
            close(number)
        block.append((int(match.group(1)), match.group(2).strip()))
    close(len(full_text))
    return BenchmarkSet(name, split_from_filename(p), examples, str(p), None, {"unit": "cbt-example"})


# ----------------------------------------------------------------------------- enwik8 / text8

def _hutter_slice(data, split: str | None, size: int):
    """(data, split name): the standard 90M/5M/5M split when the file is the whole set."""
    if split in (None, "auto"):
        split = "test" if len(data) == size else None
    if split is None or split == "all":
        return data, "all"
    if len(data) != size:
        raise ValueError(f"split {split!r} needs the whole {size}-unit file, got {len(data)}")
    train_end, valid_end = HUTTER_SPLIT
    bounds = {"train": (0, train_end), "valid": (train_end, valid_end), "test": (valid_end, size)}
    if split not in bounds:
        raise ValueError(f"split must be one of train/valid/test/all/auto, not {split!r}")
    start, end = bounds[split]
    return data[start:end], split


def load_enwik8(path: str | os.PathLike, *, unit: str = "chunk", chunk_chars: int = DEFAULT_CHUNK_CHARS,
                split: str | None = "auto", name: str = "enwik8") -> BenchmarkSet:
    """enwik8: a raw byte file. With ``split="auto"`` a file of exactly 1e8 bytes is cut to
    its test split (the last 5M bytes, the usual 90M/5M/5M protocol); any other file is
    taken whole (split ``all``). The bytes are decoded as UTF-8 with errors replaced.
    Examples: consecutive ``chunk_chars``-character chunks (the last may be shorter;
    n-grams across a chunk boundary belong to no example), or ``unit="page"``: each
    ``<page>...</page>`` element (text outside pages is dropped). ``meta["bytes"]`` is the
    byte count of the split, for bits per byte.
    """
    if unit not in ("chunk", "page"):
        raise ValueError(f"enwik8 unit must be 'chunk' or 'page', not {unit!r}")
    if chunk_chars <= 0:
        raise ValueError("chunk_chars must be positive")
    p = _check_file(path)
    data, split_name = _hutter_slice(p.read_bytes(), split, ENWIK8_SIZE)
    text = data.decode("utf-8", errors="replace")
    if unit == "chunk":
        pieces = [(i, text[i:i + chunk_chars]) for i in range(0, len(text), chunk_chars)]
    else:
        pieces = [(m.start(), m.group()) for m in re.finditer(r"<page>.*?(?:</page>|\Z)", text, re.DOTALL)]
    examples = [Example(f"{name}-{i}", piece, {"offset": offset}) for i, (offset, piece) in enumerate(pieces)]
    return BenchmarkSet(name, split_name, examples, str(p), text,
                        {"unit": unit, "chunk_chars": chunk_chars if unit == "chunk" else None, "bytes": len(data)})


def load_text8(path: str | os.PathLike, *, chunk_words: int = DEFAULT_CHUNK_WORDS, split: str | None = "auto",
               name: str = "text8") -> BenchmarkSet:
    """text8: one long line of lower-case words. ``split="auto"``: a file of exactly 1e8
    characters is cut to its last 5M characters (test), else taken whole (``all``); a
    test slice may start or end mid-word, the partial words are kept. Examples: runs of
    ``chunk_words`` words joined by single spaces (``meta["first_word"]`` = index)."""
    if chunk_words <= 0:
        raise ValueError("chunk_words must be positive")
    p = _check_file(path)
    data, split_name = _hutter_slice(p.read_bytes(), split, TEXT8_SIZE)
    text = data.decode("utf-8", errors="replace")
    words = text.split()
    examples = [Example(f"{name}-{i // chunk_words}", " ".join(words[i:i + chunk_words]), {"first_word": i})
                for i in range(0, len(words), chunk_words)]
    return BenchmarkSet(name, split_name, examples, str(p), text,
                        {"unit": "chunk", "chunk_words": chunk_words, "bytes": len(data)})


# ----------------------------------------------------------------------------- generic

def load_text(path: str | os.PathLike, *, unit: str = "line", name: str | None = None) -> BenchmarkSet:
    """Any UTF-8 text file: one example per non-blank line (``unit="line"``, stripped) or
    per paragraph (``unit="paragraph"``: runs of non-blank lines separated by blank lines,
    each line stripped, joined by ``\\n``). ``meta["line"]``: the zero-based first line."""
    if unit not in ("line", "paragraph"):
        raise ValueError(f"text unit must be 'line' or 'paragraph', not {unit!r}")
    p = _check_file(path)
    name = name or p.stem
    if unit == "line":
        return _load_line_file(p, name)
    full_text = _read_text(p)
    examples: list[Example] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate([*_lines(full_text), ""]):
        if line.strip():
            if not current:
                start = number
            current.append(line.strip())
        elif current:
            examples.append(Example(f"{name}-{len(examples)}", "\n".join(current), {"line": start}))
            current = []
    return BenchmarkSet(name, split_from_filename(p), examples, str(p), full_text, {"unit": "paragraph"})


def load_jsonl(path: str | os.PathLike, *, field: str = "text", name: str | None = None,
               id_field: str | None = "id") -> BenchmarkSet:
    """Any JSONL file: one example per non-blank line, text = the line's ``field`` (a string).

    Ids are the rows' ``id_field`` values (as strings) when every row has one and they are
    unique, else ``<name>-<index>``. ``meta``: ``line`` and every other field of the row.
    A line that is not a JSON object (``common.jsonlines``) or lacks a string ``field`` is an error naming it.
    """
    p = _check_file(path)
    name = name or p.stem
    rows: list[tuple[int, dict]] = []
    with open(p, encoding="utf-8") as f:
        for number, row in json_objects(f, str(p)):
            if not isinstance(row.get(field), str):
                raise ValueError(f"{p}:{number}: no string field {field!r}")
            rows.append((number - 1, row))
    ids = [row.get(id_field) for _, row in rows] if id_field else []
    use_ids = bool(id_field) and all(i is not None for i in ids) and len({str(i) for i in ids}) == len(ids)
    examples = []
    for index, (number, row) in enumerate(rows):
        meta = {"line": number, **{k: v for k, v in row.items() if k != field and not (use_ids and k == id_field)}}
        examples.append(Example(str(row[id_field]) if use_ids else f"{name}-{index}", row[field], meta))
    return BenchmarkSet(name, split_from_filename(p), examples, str(p), None, {"unit": "line", "field": field})


# ----------------------------------------------------------------------------- GPT-2's generative tasks

COQA_DOMAINS = {  # CoQA's official evaluation script: source name -> domain; the first five are "in domain"
    "mctest": "children_stories", "gutenberg": "literature", "race": "mid-high_school", "cnn": "news",
    "wikipedia": "wikipedia", "science": "science", "reddit": "reddit"}
COQA_IN_DOMAIN = ("children_stories", "literature", "mid-high_school", "news", "wikipedia")
WMT_DIRECTIONS = ("fr-en", "en-fr")


def _need(record, fields: tuple[str, ...], where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in fields if f not in record]
    if missing:
        raise ValueError(f"{where}: no field(s) {missing}")


def load_coqa(path: str | os.PathLike, *, name: str = "coqa") -> BenchmarkSet:
    """CoQA in its official JSON schema (``coqa-dev-v1.0.json``): ``{"version", "data": [{"id",
    "source", "story", "questions": [{"input_text", "turn_id"}], "answers": [{"input_text",
    "turn_id", ...}], "additional_answers": {"0": [...], ...}}]}``.

    One example per question; its text is the story (the document GPT-2 section 4 checks
    for overlap). ``meta``: ``story``, ``question``, ``history`` (the earlier turns' question
    and answer pairs), ``answers`` (the answer and the additional answers of that turn, the
    official script's references), ``source`` and ``domain``. A wrong schema, a missing
    field or turns that do not line up is an error.
    """
    p = _check_file(path)
    try:
        document = json.loads(_read_text(p))
    except json.JSONDecodeError as err:
        raise ValueError(f"{p}: not a CoQA JSON file ({err.msg})") from None
    _need(document, ("data",), f"{p}: not a CoQA file")
    if not isinstance(document["data"], list):
        raise ValueError(f"{p}: not a CoQA file: 'data' is not a list")
    examples = []
    for number, story in enumerate(document["data"]):
        where = f"{p}: data[{number}]"
        _need(story, ("id", "source", "story", "questions", "answers"), where)
        questions, answers = story["questions"], story["answers"]
        extra = story.get("additional_answers") or {}
        if not isinstance(questions, list) or not isinstance(answers, list) or len(questions) != len(answers):
            raise ValueError(f"{where}: questions and answers are not two lists of one length")
        history: list[tuple[str, str]] = []
        for turn, (question, answer) in enumerate(zip(questions, answers, strict=True)):
            _need(question, ("input_text", "turn_id"), f"{where}.questions[{turn}]")
            _need(answer, ("input_text", "turn_id"), f"{where}.answers[{turn}]")
            if question["turn_id"] != answer["turn_id"]:
                raise ValueError(f"{where}: question turn {question['turn_id']} meets answer turn {answer['turn_id']}")
            references = [answer["input_text"]]
            for key in sorted(extra):
                others = extra[key]
                if not isinstance(others, list) or len(others) != len(questions):
                    raise ValueError(f"{where}: additional_answers[{key!r}] does not give one answer per question")
                _need(others[turn], ("input_text", "turn_id"), f"{where}.additional_answers[{key!r}][{turn}]")
                references.append(others[turn]["input_text"])
            source = str(story["source"])
            examples.append(Example(f"{story['id']}-{question['turn_id']}", story["story"], {
                "story": story["story"], "question": question["input_text"], "history": list(history),
                "answers": references, "source": source, "domain": COQA_DOMAINS.get(source, source),
                "turn_id": question["turn_id"], "doc": story["id"]}))
            history.append((question["input_text"], answer["input_text"]))
    return BenchmarkSet(name, split_from_filename(p, "dev"), examples, str(p), None,
                        {"unit": "question", "task": "coqa", "version": document.get("version")})


def _story_file(p: Path) -> tuple[str, list[str]]:
    """A CNN/DM ``.story`` file: the article's paragraphs and the ``@highlight`` sentences."""
    article, highlights, next_is_highlight = [], [], False
    for line in _lines(_read_text(p)):
        line = line.strip()
        if not line:
            continue
        if line == "@highlight":
            next_is_highlight = True
        elif next_is_highlight:
            highlights.append(line)
            next_is_highlight = False
        else:
            article.append(line)
    return "\n".join(article), highlights


def load_cnn_dm(path: str | os.PathLike, *, name: str = "cnn_dm") -> BenchmarkSet:
    """CNN / Daily Mail: a ``test.source`` file (one article a line) with its ``test.target``
    beside it (the highlights of that article on the same line), a folder holding that
    pair, or ``.story`` files (a file or a folder of them: the article, then each highlight
    after an ``@highlight`` line). One example per article; its text is the article;
    ``meta``: ``article`` and ``reference`` (the highlights, one sentence a line). Source
    and target files of different lengths are an error."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"benchmark path not found: {p}")
    pairs: list[tuple[str, list[str], str]] = []
    if p.is_dir() and (p / "test.source").is_file():
        p = p / "test.source"
    if p.is_dir() or p.suffix == ".story":
        files = sorted(p.glob("*.story")) if p.is_dir() else [p]
        if not files:
            raise ValueError(f"{p}: neither test.source/test.target nor .story files")
        for file in files:
            article, highlights = _story_file(file)
            if not article or not highlights:
                raise ValueError(f"{file}: a .story file needs article text and at least one @highlight")
            pairs.append((article, highlights, file.stem))
    else:
        target = p.with_suffix(".target")
        if not target.is_file():
            raise FileNotFoundError(f"{p}: no {target.name} beside it (the highlights, one article a line)")
        sources, targets = _lines(_read_text(p)), _lines(_read_text(target))
        if len(sources) != len(targets):
            raise ValueError(f"{p}: {len(sources)} articles but {target.name} has {len(targets)} highlight lines")
        for number, (article, target_line) in enumerate(zip(sources, targets, strict=True)):
            # BRIO / fairseq layout: the highlight sentences joined by runs of spaces
            sentences = [h.strip() for h in re.split(r"\s{2,}", target_line) if h.strip()]
            if not article.strip() or not sentences:
                raise ValueError(f"{p}: line {number + 1}: an empty article or no highlights")
            pairs.append((article.strip(), sentences, str(number)))
    examples = [Example(f"{name}-{i}", article, {"article": article, "reference": "\n".join(highlights), "file": key})
                for i, (article, highlights, key) in enumerate(pairs)]
    return BenchmarkSet(name, "test", examples, str(p), None, {"unit": "article", "task": "cnn_dm"})


_SGM_DOC = re.compile(r"<doc\b([^>]*)>(.*?)</doc>", re.DOTALL | re.IGNORECASE)
_SGM_SEG = re.compile(r"<seg\b[^>]*>(.*?)</seg>", re.DOTALL | re.IGNORECASE)
_SGM_DOCID = re.compile(r"docid=\"([^\"]*)\"", re.IGNORECASE)


def read_sgm(path: Path) -> list[tuple[str, str]]:
    """The ``(docid, segment text)`` pairs of a WMT SGML file, in file order (text as written, stripped)."""
    text = _read_text(path)
    out: list[tuple[str, str]] = []
    for doc in _SGM_DOC.finditer(text):
        docid = _SGM_DOCID.search(doc.group(1))
        if docid is None:
            raise ValueError(f"{path}: a <doc> without a docid")
        out.extend((docid.group(1), seg.strip()) for seg in _SGM_SEG.findall(doc.group(2)))
    if not out:
        raise ValueError(f"{path}: no <doc>/<seg> elements (not a WMT SGML file)")
    return out


def load_wmt14(path: str | os.PathLike, direction: str | None = None, *, name: str | None = None) -> BenchmarkSet:
    """WMT-14 newstest2014 fr-en in its official SGML (``newstest2014-fren-src.fr.sgm`` and
    ``newstest2014-fren-ref.en.sgm`` for ``fr-en``; ``src.en`` / ``ref.fr`` for ``en-fr``)
    in the folder ``path``. One example per segment; its text is the source sentence;
    ``meta``: ``source``, ``reference``, ``doc`` (the docid), ``english``, ``french``. A
    source and a reference of different lengths or documents are an error."""
    if direction not in WMT_DIRECTIONS:
        raise BenchmarkSpecError(f"wmt14 needs a direction: wmt14:FOLDER:fr-en or wmt14:FOLDER:en-fr, got {direction!r}")
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"wmt14: {folder} is not a folder (it holds the newstest2014 .sgm files)")
    src_lang, tgt_lang = direction.split("-")
    found = {}
    for role, lang in (("src", src_lang), ("ref", tgt_lang)):
        matches = sorted(folder.glob(f"newstest2014*-{role}.{lang}.sgm"))
        if len(matches) != 1:
            raise FileNotFoundError(f"wmt14: {folder}: expected one newstest2014*-{role}.{lang}.sgm, found "
                                    f"{[m.name for m in matches]}")
        found[role] = matches[0]
    sources, references = read_sgm(found["src"]), read_sgm(found["ref"])
    if len(sources) != len(references):
        raise ValueError(f"wmt14: {found['src'].name} has {len(sources)} segments, {found['ref'].name} {len(references)}")
    name = name or f"wmt14-{direction}"
    examples = []
    for i, ((doc, source), (ref_doc, reference)) in enumerate(zip(sources, references, strict=True)):
        if doc != ref_doc:
            raise ValueError(f"wmt14: segment {i + 1} is in document {doc} of the source but {ref_doc} of the reference")
        langs = {src_lang: source, tgt_lang: reference}
        examples.append(Example(f"{name}-{i}", source, {"source": source, "reference": reference, "doc": doc,
                                                        "english": langs["en"], "french": langs["fr"]}))
    return BenchmarkSet(name, "test", examples, str(folder), None, {"unit": "segment", "task": "wmt14",
                                                                          "direction": direction})


def load_nq(path: str | os.PathLike, *, name: str = "nq") -> BenchmarkSet:
    """NQ-open (``NQ-open.dev.jsonl``): one ``{"question": str, "answer": [str, ...]}`` a line.
    One example per question; its text is the question; ``meta["answers"]`` every reference
    answer. A missing field or an empty answer list is an error."""
    p = _check_file(path)
    examples: list[Example] = []
    for number, row in json_objects(_lines(_read_text(p)), str(p)):
        _need(row, ("question", "answer"), f"{p}:{number}: not an NQ-open line")
        answers = row["answer"]
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
            raise ValueError(f"{p}:{number}: 'answer' must be a non-empty list of answer strings, got {answers!r}")
        examples.append(Example(f"{name}-{len(examples)}", row["question"], {"question": row["question"],
                                                                             "answers": answers}))
    return BenchmarkSet(name, split_from_filename(p, "dev"), examples, str(p), None,
                        {"unit": "question", "task": "nq"})


# ----------------------------------------------------------------------------- registry

def _opt_int(option: str | None, what: str) -> dict:
    if option is None:
        return {}
    try:
        value = int(option)
    except ValueError:
        raise BenchmarkSpecError(f"{what} must be an integer, not {option!r}") from None
    return {what: value}


def _enwik8(path, option):
    if option in ("chunk", "page"):
        return load_enwik8(path, unit=option)
    return load_enwik8(path, **_opt_int(option, "chunk_chars"))


# kind -> (loader(path, option), what the option is, or None when the kind takes none)
LOADERS: dict[str, tuple[Callable[[str, str | None], BenchmarkSet], str | None]] = {
    "wikitext2": (lambda p, o: load_wikitext(p, name="wikitext2", unit=o or "article"), "article|paragraph"),
    "wikitext103": (lambda p, o: load_wikitext(p, name="wikitext103", unit=o or "article"), "article|paragraph"),
    "ptb": (lambda p, o: load_ptb(p), None),
    "lambada": (lambda p, o: load_lambada(p), None),
    "wsc": (lambda p, o: load_wsc(p, subset=o or "wsc273"), "wsc273|all"),
    "wsc273": (lambda p, o: load_wsc(p, subset="wsc273"), None),
    "cbt": (lambda p, o: load_cbt(p), None),
    "enwik8": (_enwik8, "chunk_chars|chunk|page"),
    "text8": (lambda p, o: load_text8(p, **_opt_int(o, "chunk_words")), "chunk_words"),
    "1bw": (lambda p, o: load_1bw(p), None),
    "text": (lambda p, o: load_text(p, unit=o or "line"), "line|paragraph"),
    "jsonl": (lambda p, o: load_jsonl(p, field=o or "text"), "field"),
    "coqa": (lambda p, o: load_coqa(p), None),
    "cnn_dm": (lambda p, o: load_cnn_dm(p), None),
    "wmt14": (lambda p, o: load_wmt14(p, o), "fr-en|en-fr"),
    "nq": (lambda p, o: load_nq(p), None),
}
GENERATIVE_KINDS = ("coqa", "cnn_dm", "wmt14", "nq")  # scored by generating text (model/eval/generative.py)


def load_benchmark(spec: str) -> BenchmarkSet:
    """Load ``kind:path[:option]``, e.g. ``wikitext2:/data/wiki.test.raw``,
    ``lambada:/data/lambada_test.jsonl``, ``jsonl:/data/x.jsonl:question``,
    ``text:/data/x.txt:paragraph``, ``wsc:/data/WSCollection.xml:all``.

    The path may itself contain ``:``: the whole rest is tried as a path first, then the
    part before the last ``:`` with the part after it as the option.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise BenchmarkSpecError(f"benchmark spec {spec!r} is not kind:path[:option]; kinds: {', '.join(LOADERS)}")
    kind = kind.strip().lower()
    if kind not in LOADERS:
        raise BenchmarkSpecError(f"unknown benchmark kind {kind!r} in {spec!r}; kinds: {', '.join(LOADERS)}")
    loader, option_help = LOADERS[kind]
    path, option = rest, None
    if not os.path.exists(rest) and ":" in rest:
        head, _, tail = rest.rpartition(":")
        if os.path.exists(head):
            path, option = head, tail
    if not os.path.exists(path):
        raise FileNotFoundError(f"benchmark file not found: {path} (from spec {spec!r})")
    if option is not None and option_help is None:
        raise BenchmarkSpecError(f"benchmark kind {kind!r} takes no option, got {option!r}")
    return loader(path, option)
