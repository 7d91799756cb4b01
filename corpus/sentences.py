"""Sentence splitting with NLTK's English punkt model, loaded once per process.

C4 counts punkt sentences per kept line (``clean_page``) and per deduplicated page
(``dedupe_lines``); the T5 paper's span dedup hashes windows of punkt sentences. NLTK
ships the model as ``punkt_tab``; ``require_punkt()`` checks for it before a pipeline
reads any input and says how to install it when it is missing.

Workers need no NLTK data of their own: a job takes the launcher's model with it
(``shipped_punkt()``: a ``PunktModel``, the model's files as bytes, pickled into every rule
that splits sentences). A worker that unpickles a rule bound to the model's methods
(``PunktModel.count_line_sentences``, ``has_sentences``, ``split_sentences``) loads the
tokenizer from those bytes, whatever its own ``NLTK_DATA`` holds, so every worker splits as
the launcher does (Dataflow's workers, Spark executors on a clean cluster).

Punkt decides each candidate break (a ``.``, ``?`` or ``!`` with what follows it) from a
short context string alone: the word before, the mark, and the token after. With the
model's parameters fixed, that decision is a pure function of the string, and the same
contexts ("it. The", "said. He") come back on page after page, so the process's tokenizer
remembers the decision per context (``remember_break_decisions``). Every split and count is
the same as punkt's own; only the repeated work goes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import itertools
import marshal
import os
import shlex
import shutil
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterable

from common.environ import environment_with, prepended

PUNKT_LANGUAGE = "english"
PUNKT_INSTALL_COMMAND = f"{shlex.quote(sys.executable)} -c 'import nltk; nltk.download(\"punkt_tab\")'"  # this Python (the venv's)
PUNKT_INSTALL_HINT = (
    "NLTK's English punkt sentence model is not installed. Install it once with\n"
    f"    {PUNKT_INSTALL_COMMAND}\n"
    "or point NLTK_DATA at a folder that holds tokenizers/punkt_tab/english/."
)
_LINE_CACHE_SIZE = 1 << 16
_BREAK_CACHE_SIZE = 1 << 17  # break decisions remembered per process (short context strings)

# Packages that NLTK's package import pulls in for features punkt never uses (collocation
# statistics, the scikit-learn classifier wrapper), each behind NLTK's own ImportError guard.
# Where they are installed they cost about a second of CPU in every process and Beam worker.
NLTK_OPTIONAL_IMPORTS = ("scipy", "sklearn")

_lock = threading.Lock()
_tokenizer = None
_tokenizer_digest: str | None = None  # the sha256 of the model files the process's tokenizer was loaded from
PUNKT_RESOURCE = f"tokenizers/punkt_tab/{PUNKT_LANGUAGE}/"  # where NLTK keeps the English model under a data root


@contextlib.contextmanager
def _optional_imports_hidden(names: tuple[str, ...] = NLTK_OPTIONAL_IMPORTS):
    """While NLTK's package loads, make ``import scipy`` / ``import sklearn`` fail as if they
    were not installed (a ``None`` entry in ``sys.modules``), then put everything back.

    A package the process has already imported is left alone; afterwards both import
    normally again. NLTK then binds its fallbacks (``nltk.metrics.association.fisher_exact``
    raises NotImplementedError in this process), which nothing in punkt calls.
    """
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # a None entry blocks the import; typeshed allows modules only
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def import_with_nltk(name: str):
    """Module ``name``, one that loads NLTK (punkt here, rouge-score's Porter stemmer in
    ``model.eval.generative``), imported without NLTK's optional SciPy/scikit-learn imports
    when NLTK is not loaded yet: ``rouge_score.rouge_scorer`` in 0.35 s instead of 1.7 s."""
    if "nltk" in sys.modules:
        return importlib.import_module(name)
    with _optional_imports_hidden():
        return importlib.import_module(name)


def import_punkt():
    """``nltk.tokenize.punkt``, imported without NLTK's optional SciPy/scikit-learn imports."""
    return import_with_nltk("nltk.tokenize.punkt")


class PunktMissingError(RuntimeError):
    """The punkt model cannot be found; the message says how to install it."""


def punkt_tokenizer():
    """The process-wide English punkt tokenizer (loaded on first use, thread-safe): the
    shipped model where a job brought one (``PunktModel``), else NLTK's data roots'."""
    global _tokenizer, _tokenizer_digest
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                model = PunktModel.from_nltk_data()
                _tokenizer, _tokenizer_digest = _load_tokenizer(model.model_dir()), model.digest
    return _tokenizer


def _load_tokenizer(data_root: str):
    """A punkt tokenizer from ``data_root/tokenizers/punkt_tab/english/`` (NLTK's own loader,
    that folder put first on NLTK's data path while it loads)."""
    punkt = import_punkt()
    data_path = sys.modules["nltk.data"].path
    data_path.insert(0, data_root)
    try:
        return remember_break_decisions(punkt.PunktTokenizer(PUNKT_LANGUAGE))
    finally:
        data_path.remove(data_root)


class PunktModel:
    """NLTK's English punkt model as the job takes it to its workers: the model folder's
    files (``name -> bytes``), read once from the launcher's NLTK data.

    Pickled, it is its files marshalled and zlib-compressed (the English model: 252 KB,
    about 100 KB packed). Its methods are the sentence functions a rule binds
    (``functools.partial(c4.clean_page, count_line_sentences=model.count_line_sentences)``):
    on a worker the first call loads the process's tokenizer from these files (written once
    under the temporary folder), so the worker needs no NLTK data and splits exactly as the
    launcher does. In the launcher, whose tokenizer came from the same files, nothing reloads.
    """

    def __init__(self, files: dict[str, bytes], root: str | None = None):
        self.files = dict(sorted(files.items()))
        self.digest = hashlib.sha256(b"".join(name.encode() + b"\0" + data + b"\0" for name, data in self.files.items())).hexdigest()
        self._root = root  # an NLTK data root that holds exactly these files (the launcher's), if known
        self._ready = False

    @classmethod
    def from_nltk_data(cls) -> PunktModel:
        """The model NLTK finds on this process's data path; ``PunktMissingError`` (with
        install instructions) when there is none."""
        import_punkt()
        try:
            found = sys.modules["nltk.data"].find(PUNKT_RESOURCE)
        except LookupError as exc:
            raise PunktMissingError(PUNKT_INSTALL_HINT) from exc
        folder = str(found.path) if hasattr(found, "path") else str(found)
        if not os.path.isdir(folder):  # a zipped data root: NLTK's pointer reads its members
            raise PunktMissingError(f"NLTK's punkt model at {folder} is not a folder; unzip it under an NLTK data root. {PUNKT_INSTALL_HINT}")
        files = {}
        for name in sorted(os.listdir(folder)):
            if os.path.isfile(os.path.join(folder, name)):
                with open(os.path.join(folder, name), "rb") as f:
                    files[name] = f.read()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.normpath(folder))))
        return cls(files, root)

    def __getstate__(self):
        return {"packed": zlib.compress(marshal.dumps(self.files), 9), "digest": self.digest}

    def __setstate__(self, state):
        type(self).__init__(self, marshal.loads(zlib.decompress(state["packed"])))
        if self.digest != state["digest"]:
            raise PunktMissingError("the punkt model shipped with the job arrived damaged (its sha256 differs); rerun the job")

    def model_dir(self) -> str:
        """An NLTK data root holding these files as ``tokenizers/punkt_tab/english/``: the
        launcher's own, or one written once per model under the temporary folder."""
        if self._root is not None:
            return self._root
        root = os.path.join(tempfile.gettempdir(), f"corpusforge-punkt-{self.digest[:16]}")
        if not os.path.isdir(os.path.join(root, PUNKT_RESOURCE)):
            staging = tempfile.mkdtemp(prefix=f"corpusforge-punkt-{self.digest[:16]}-", dir=tempfile.gettempdir())
            folder = os.path.join(staging, PUNKT_RESOURCE)
            os.makedirs(folder)
            for name, data in self.files.items():
                with open(os.path.join(folder, name), "wb") as f:
                    f.write(data)
            try:
                os.rename(staging, root)
            except OSError:  # another worker of this machine wrote it first
                shutil.rmtree(staging, ignore_errors=True)
        self._root = root
        return root

    def install(self) -> None:
        """Make this model the process's punkt tokenizer (a no-op where it already is)."""
        global _tokenizer, _tokenizer_digest
        with _lock:
            if _tokenizer_digest != self.digest:
                _tokenizer, _tokenizer_digest = _load_tokenizer(self.model_dir()), self.digest
                _cached_count.cache_clear()
        self._ready = True

    def count_line_sentences(self, line: str) -> int:
        if not self._ready:
            self.install()
        return count_line_sentences(line)

    def has_sentences(self, text: str, minimum: int) -> bool:
        if not self._ready:
            self.install()
        return has_sentences(text, minimum)

    def split_sentences(self, text: str) -> list[str]:
        if not self._ready:
            self.install()
        return split_sentences(text)


def shipped_punkt() -> PunktModel:
    """The launcher's punkt model, checked and ready to travel with a job (``PunktModel``);
    ``PunktMissingError`` with install instructions when NLTK has none. Also loads the
    launcher's tokenizer, so a missing or broken model stops the job before any input is read."""
    model = PunktModel.from_nltk_data()
    model.install()
    return model


def remember_break_decisions(tokenizer):
    """``tokenizer`` with its break decision (``text_contains_sentbreak(context)``, which
    reads only the context and the fixed model) remembered per context string: an
    instance attribute in front of the class's method, an LRU cache of
    ``_BREAK_CACHE_SIZE`` contexts. Returns the same tokenizer."""
    tokenizer.text_contains_sentbreak = functools.lru_cache(maxsize=_BREAK_CACHE_SIZE)(tokenizer.text_contains_sentbreak)
    return tokenizer


def use_trained_punkt(texts: Iterable[str], data_dir: str) -> str:
    """Train a punkt model on ``texts`` (punkt learns abbreviations, collocations and sentence
    starters without labels), save it as NLTK data under ``data_dir``
    (``tokenizers/punkt_tab/english/``; ``data_dir`` becomes one of this process's NLTK data
    roots) and use it in this process; returns ``data_dir``.

    The demo's stand-in when NLTK's English model is not installed: it splits the demo's own
    sample pages well enough, while a real corpus needs the real model for sentence counts as
    C4 made them. Saved, the same model reaches processes started later (Spark's Python
    workers, Beam's worker processes) through ``NLTK_DATA`` (``punkt_data_environment``), and
    this process loads it back from the files, so every process splits alike."""
    global _tokenizer, _tokenizer_digest
    punkt = import_punkt()
    trainer = punkt.PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    for text in texts:
        trainer.train(text, finalize=False)
    trainer.finalize_training()
    model_dir = os.path.join(data_dir, "tokenizers", "punkt_tab", PUNKT_LANGUAGE)
    os.makedirs(os.path.dirname(model_dir), exist_ok=True)
    data_path = sys.modules["nltk.data"].path  # NLTK writes and reads only under its data roots
    if os.path.abspath(data_dir) not in data_path:
        data_path.insert(0, os.path.abspath(data_dir))
    punkt.save_punkt_params(trainer.get_params(), dir=model_dir)
    model = PunktModel.from_nltk_data()  # as a worker loads it: from the files
    with _lock:
        _tokenizer, _tokenizer_digest = _load_tokenizer(model.model_dir()), model.digest
    _cached_count.cache_clear()
    return data_dir


def punkt_data_environment(data_dir: str | None):
    """``NLTK_DATA`` with ``data_dir`` first while the block runs, then as it was: a process
    started meanwhile (a Spark session's JVM and its Python workers) finds the punkt model
    saved there. ``None``: nothing changes."""
    if data_dir is None:
        return contextlib.nullcontext()
    return environment_with({"NLTK_DATA": prepended("NLTK_DATA", os.path.abspath(data_dir))})  # a worker may start elsewhere


def require_punkt() -> None:
    """Raise ``PunktMissingError`` (with install instructions) unless punkt loads."""
    punkt_tokenizer()


def split_sentences(text: str) -> list[str]:
    """Punkt sentences of ``text``."""
    return punkt_tokenizer().tokenize(text)


def count_sentences(text: str) -> int:
    """Number of punkt sentences in ``text`` (``len(split_sentences(text))``)."""
    return sum(1 for _ in punkt_tokenizer().span_tokenize(text))


def has_sentences(text: str, minimum: int) -> bool:
    """``count_sentences(text) >= minimum``, stopping after ``minimum`` sentences.

    Punkt yields sentences lazily and never revises one it has yielded (it looks one
    candidate ahead), so the first ``minimum`` spans are final: this is exact, and on a
    long page it reads only the first few sentences.
    """
    return sum(1 for _ in itertools.islice(punkt_tokenizer().span_tokenize(text), minimum)) >= minimum


def count_line_sentences(line: str) -> int:
    """``count_sentences(line)``, with two exact shortcuts.

    Punkt can only break after a ``.``, ``?`` or ``!`` that something follows, so a
    stripped line whose only such character (if any) is its last is one sentence.
    Other lines go through punkt once and are remembered: boilerplate lines repeat.
    """
    if not line:
        return 0
    body = line[:-1]
    if "." not in body and "?" not in body and "!" not in body and not line[0].isspace() and not line[-1].isspace():
        return 1
    return _cached_count(line)


@functools.lru_cache(maxsize=_LINE_CACHE_SIZE)
def _cached_count(line: str) -> int:
    return count_sentences(line)
