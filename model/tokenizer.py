"""GPT-2's byte-level BPE tokenizer: train it on a corpus, save and load its files, encode
and decode any Python string losslessly.

The scheme (Radford et al. 2019, section 2.2; OpenAI ``gpt-2/src/encoder.py``):

- The base vocabulary is the 256 byte values, each written as one printable character
  (``bytes_to_unicode``: printable Latin-1 bytes stand for themselves, the other 68 bytes
  map to U+0100 and up, in byte order), so vocabulary files are plain text.
- Text is first split by ``GPT2_SPLIT_PATTERN`` (contractions, letter runs, number runs,
  other-symbol runs, whitespace runs), so that no merge crosses a character category.
- Each piece's UTF-8 bytes are merged pair by pair, lowest merge rank first.
- ``<|endoftext|>`` is one extra token, the last id (GPT-2: 50256 of 50,257).

Files: ``vocab.json`` (token -> id) and ``merges.txt`` (``#version: 0.2`` then one
``left right`` pair per line, in rank order), the Hugging Face names; OpenAI's original
``encoder.json`` and ``vocab.bpe`` are the same two formats under other names and load too.

Lossless on any ``str``: a Python string may hold lone surrogates (U+D800..U+DFFF, e.g.
from ``surrogateescape`` decoding), which have no UTF-8 form. They are encoded as their
3-byte generalised-UTF-8 form (``"surrogatepass"``, as WTF-8 does) and pre-tokenised as
"other symbol" characters (their category, Cs, is neither letter, number nor space), so
``decode(encode(s)) == s`` for every ``s``. ``decode`` of arbitrary ids (sampling) turns
bytes that are not UTF-8 into U+FFFD, keeping the surrogate forms.

Engines: training and the reference encoding are Hugging Face ``tokenizers`` (Rust BPE,
merges applied by rank). Encoding goes through ``tiktoken`` (Rust, several times faster)
when it is installed and the vocabulary is in merge order (every multi-byte token is made
by exactly one merge, ids increasing with merge rank: true of GPT-2's files and of every
vocabulary ``train_tokenizer`` makes); both give the same ids (tested on real text, and
compared by ``benchmarks/tokenizer_speed.py``). Strings with lone surrogates go through
the ``tokenizers`` BPE model piece by piece.
"""

from __future__ import annotations

import codecs
import importlib
import json
import logging
import os
import platform
import re
import sys
from collections.abc import Iterable, Sequence

import numpy as np

from common import storage
from common.errors import InputError

log = logging.getLogger(__name__)

EOT = "<|endoftext|>"  # GPT-2's end-of-text token (id 50256 in the released vocabulary)
# GPT-2 encoder.py's pre-tokenisation pattern (\p{L} letters, \p{N} numbers)
GPT2_SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_VOCAB_SIZE = 50257  # GPT-2 paper, section 2.2: 50,257 tokens including <|endoftext|>
MIN_VOCAB_SIZE = 257  # the 256 bytes and end-of-text
MERGES_HEADER = "#version: 0.2"  # first line of GPT-2's vocab.bpe and of Hugging Face merges.txt
ENGINES = ("auto", "tiktoken", "tokenizers")
FILE_PAIRS = (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))  # (Hugging Face), (OpenAI)
SURROGATE_PLACEHOLDER = "\ue000"  # a private-use character: category Co, split like Cs by the pattern
DECODE_ERRORS = "corpusforge-surrogates-else-replace"

_SURROGATES = re.compile("[\ud800-\udfff]")


class TokenizerFileError(InputError):
    """Vocabulary files that are missing, malformed, or not a byte-level BPE vocabulary."""


# What the tokenize job imports on its launcher and on every worker, pinned as in
# requirements-model.txt (beam_setup.py's `tokenize` extra; tests/test_tokenizer.py checks they agree).
TOKENIZE_LIBRARIES = {"tokenizers": "0.23.3", "tiktoken": "0.14.0"}
MISSING_LIBRARY = "the tokenize job needs"  # how MissingLibraryError's line begins
_MISSING_LINE = re.compile(re.escape(MISSING_LIBRARY) + r" [^\r\n]*")


class MissingLibraryError(ImportError):
    """A tokenizer library this Python cannot import: its name, the machine, and the pip
    command, in one line."""


def require_tokenize_libraries(where: str) -> None:
    """Import every library of ``TOKENIZE_LIBRARIES``; the first one that does not import
    raises ``MissingLibraryError``. ``where`` names the process: ``"the launcher"``, ``"a worker"``."""
    for name in TOKENIZE_LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            pins = " ".join(f"{n}=={v}" for n, v in TOKENIZE_LIBRARIES.items())
            cause = " ".join(str(exc).split())
            raise MissingLibraryError(
                f"{MISSING_LIBRARY} {name} on the launcher and on every worker, and {where} ({platform.node()}, "
                f"{sys.executable}) cannot import it ({cause}): pip install {pins} there "
                "(requirements-model.txt's pins; or pip install 'corpusforge[model]')", name=name) from exc


def missing_library_line(error: BaseException | str) -> str | None:
    """The ``MissingLibraryError`` line inside ``error``'s text (a Spark or Beam job failure
    that carries a worker's traceback), or ``None``."""
    found = _MISSING_LINE.search(str(error))
    return found.group() if found else None


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (``encoder.py``), in byte order.

    The 188 bytes that are printable Latin-1 (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``)
    stand for themselves; the other 68 (controls, space, DEL, NBSP, soft hyphen) map to
    U+0100, U+0101, ... in byte order, so that space is ``Ġ`` and newline is ``Ċ``.
    """
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(0x100 + shifted)
            shifted += 1
    return table


_BYTE_TO_CHAR = bytes_to_unicode()
_CHAR_TO_BYTE = {char: byte for byte, char in _BYTE_TO_CHAR.items()}
_BYTE_TRANSLATION = [_BYTE_TO_CHAR[b] for b in range(256)]


def _surrogates_else_replace(error: UnicodeError):
    """Decode error handler: a 3-byte surrogate form (ED A0..BF 80..BF) back to its lone
    surrogate, anything else that is not UTF-8 to U+FFFD (as ``"replace"`` does)."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    data, start = error.object, error.start
    if (start + 2 < len(data) and data[start] == 0xED and 0xA0 <= data[start + 1] <= 0xBF
            and 0x80 <= data[start + 2] <= 0xBF):
        code = 0xD000 | ((data[start + 1] & 0x3F) << 6) | (data[start + 2] & 0x3F)
        return chr(code), start + 3
    return "\ufffd", error.end


codecs.register_error(DECODE_ERRORS, _surrogates_else_replace)


def text_bytes(text: str) -> bytes:
    """The bytes BPE sees: UTF-8, with lone surrogates in their 3-byte form."""
    return text.encode("utf-8", "surrogatepass")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (strict UTF-8 encoding fails only then; it is
    4x faster than a regex search)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _byte_level(data: bytes) -> str:
    return "".join(_BYTE_TRANSLATION[b] for b in data)


def _token_to_bytes(token: str) -> bytes:
    try:
        return bytes(_CHAR_TO_BYTE[c] for c in token)
    except KeyError as exc:
        raise TokenizerFileError(f"token {token!r} holds {exc.args[0]!r}, which is not one of the 256 "
                                 "byte-level characters: not a byte-level BPE vocabulary") from None


class BPETokenizer:
    """A byte-level BPE vocabulary (``vocab``: token -> id, ``merges`` in rank order) with
    GPT-2's pre-tokenisation; ``eot_id`` is the end-of-text id, ``vocab_size`` counts it."""

    def __init__(self, vocab: dict[str, int], merges: Sequence[tuple[str, str]], engine: str = "auto"):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        vocab = dict(vocab)
        if EOT not in vocab:
            vocab[EOT] = len(vocab)
        ids = sorted(vocab.values())
        if ids != list(range(len(ids))):
            missing = sorted(set(range(len(ids))) - set(ids))[:5]
            raise TokenizerFileError(f"vocabulary ids must be 0..{len(ids) - 1}, each once "
                                     f"(missing or repeated around {missing or ids[-1]})")
        absent = [c for c in _CHAR_TO_BYTE if c not in vocab]
        if absent:
            raise TokenizerFileError(f"the vocabulary lacks {len(absent)} of the 256 byte tokens "
                                     f"(e.g. {absent[:5]}): not a byte-level BPE vocabulary")
        self.merges = [tuple(pair) for pair in merges]
        for rank, (left, right) in enumerate(self.merges):
            if left not in vocab or right not in vocab or left + right not in vocab:
                raise TokenizerFileError(f"merge {rank} ({left!r} {right!r}) uses or makes a token "
                                         "missing from the vocabulary")
        self.vocab = vocab
        self.eot_id = vocab[EOT]
        self.vocab_size = len(vocab)
        self._id_bytes: list[bytes] = [b""] * self.vocab_size
        for token, index in vocab.items():
            self._id_bytes[index] = EOT.encode() if index == self.eot_id else _token_to_bytes(token)
        self._lengths = np.fromiter((len(b) for b in self._id_bytes), dtype=np.int64, count=self.vocab_size)
        self.requested_engine = engine
        self._hf = None
        self._splitter = None
        self._tiktoken = None
        self.engine = self._choose_engine(engine)

    # --- construction -----------------------------------------------------------------------
    @classmethod
    def from_merges(cls, merges: Sequence[tuple[str, str]], engine: str = "auto") -> BPETokenizer:
        """The canonical vocabulary of a merge list: the 256 bytes in GPT-2's order, then each
        merge's new token in rank order (a merge that remakes an existing token adds none),
        then end-of-text -- GPT-2's own id layout."""
        vocab = {char: index for index, char in enumerate(sorted(_CHAR_TO_BYTE))}
        for left, right in merges:
            vocab.setdefault(left + right, len(vocab))
        vocab.pop(EOT, None)
        vocab[EOT] = len(vocab)
        return cls(vocab, merges, engine)

    def __reduce__(self):
        return self.__class__, (self.vocab, self.merges, self.requested_engine)

    def merge_ordered(self) -> bool:
        """True when ids rank merges the way tiktoken needs: each multi-byte token (but
        end-of-text) is made by exactly one merge, and its id grows with that merge's rank."""
        made, last = set(), -1
        for left, right in self.merges:
            token = left + right
            if token in made:
                return False
            made.add(token)
            if self.vocab[token] <= last:
                return False
            last = self.vocab[token]
        multi_byte = {t for t, i in self.vocab.items() if i != self.eot_id and len(self._id_bytes[i]) > 1}
        return multi_byte == made

    def _choose_engine(self, engine: str) -> str:
        if engine == "tokenizers":
            return engine
        try:
            import tiktoken  # noqa: F401  (optional engine: without it, tokenizers encodes)
        except ImportError:
            if engine == "tiktoken":
                raise
            return "tokenizers"
        if not self.merge_ordered():
            if engine == "tiktoken":
                raise ValueError("tiktoken needs a vocabulary in merge order (ids growing with merge rank, "
                                 "one merge per token); use engine='tokenizers'")
            return "tokenizers"
        return "tiktoken"

    def mergeable_ranks(self) -> dict[bytes, int]:
        """Every token's bytes -> id, end-of-text excluded (tiktoken's ``mergeable_ranks``)."""
        return {b: i for i, b in enumerate(self._id_bytes) if i != self.eot_id}

    def tiktoken_encoding(self, name: str = "corpusforge"):
        """This vocabulary as a ``tiktoken.Encoding`` (ids equal only when ``merge_ordered()``)."""
        import tiktoken  # the tokenizer libraries: `corpusforge tokenize --help` and the launcher never load them

        return tiktoken.Encoding(name, pat_str=GPT2_SPLIT_PATTERN, mergeable_ranks=self.mergeable_ranks(),
                                 special_tokens={EOT: self.eot_id})

    def hf_tokenizer(self):
        """This vocabulary as a Hugging Face ``tokenizers.Tokenizer`` (GPT-2 settings: no
        prefix space, the GPT-2 regex; end-of-text is a vocabulary entry, not a special token,
        so text that spells it is encoded as text)."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # see tiktoken_encoding

        tokenizer = Tokenizer(models.BPE(vocab=dict(self.vocab), merges=list(self.merges)))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
        return tokenizer

    @property
    def _hf_tokenizer(self):
        if self._hf is None:
            self._hf = self.hf_tokenizer()
        return self._hf

    @property
    def _tiktoken_encoding(self):
        if self._tiktoken is None:
            self._tiktoken = self.tiktoken_encoding()
        return self._tiktoken

    # --- encoding ---------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; an ``<|endoftext|>`` inside ``text`` is encoded as plain text."""
        if has_surrogates(text):
            return self._encode_with_surrogates(text)
        if self.engine == "tiktoken":
            return self._tiktoken_encoding.encode_ordinary(text)
        return self._hf_tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """``encode`` of each text, the texts spread over threads by the engine."""
        texts = list(texts)
        plain = [i for i, t in enumerate(texts) if not has_surrogates(t)]
        out: list[list[int] | None] = [None] * len(texts)
        if plain:
            batch = [texts[i] for i in plain] if len(plain) < len(texts) else texts
            if self.engine == "tiktoken":
                threads = max(1, min(8, os.cpu_count() or 1))
                encoded = self._tiktoken_encoding.encode_ordinary_batch(batch, num_threads=threads)
            else:
                encoded = [e.ids for e in self._hf_tokenizer.encode_batch(batch, add_special_tokens=False)]
            for i, ids in zip(plain, encoded, strict=True):
                out[i] = ids
        for i, text in enumerate(texts):
            if out[i] is None:
                out[i] = self._encode_with_surrogates(text)
        return out

    def _encode_with_surrogates(self, text: str) -> list[int]:
        """The slow path: split the text with each lone surrogate standing in as a private-use
        character (same category class), then BPE each piece's surrogatepass bytes."""
        if self._splitter is None:
            from tokenizers import Regex, pre_tokenizers  # see tiktoken_encoding

            self._splitter = pre_tokenizers.Split(Regex(GPT2_SPLIT_PATTERN), behavior="isolated")
        stand_in = _SURROGATES.sub(SURROGATE_PLACEHOLDER, text)
        model = self._hf_tokenizer.model
        ids: list[int] = []
        for _, (start, end) in self._splitter.pre_tokenize_str(stand_in):
            ids += [token.id for token in model.tokenize(_byte_level(text_bytes(text[start:end])))]
        return ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Ids, and for each token the offset in ``text`` (characters) where it starts; a token
        that starts inside a character's bytes gets that character's offset."""
        ids = self.encode(text)
        if not ids:
            return ids, []
        lengths = self._lengths[np.asarray(ids, dtype=np.int64)]
        byte_starts = np.cumsum(lengths) - lengths
        data = np.frombuffer(text_bytes(text), dtype=np.uint8)
        char_of_byte = np.cumsum((data & 0xC0) != 0x80) - 1  # UTF-8: one non-continuation byte per character
        return ids, char_of_byte[byte_starts].tolist()

    # --- decoding ---------------------------------------------------------------------------
    def token_bytes(self, id: int) -> bytes:
        if not 0 <= int(id) < self.vocab_size:
            raise ValueError(f"token id {id} is outside the vocabulary (0..{self.vocab_size - 1})")
        return self._id_bytes[int(id)]

    def decode_bytes(self, ids) -> bytes:
        ids = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
        if ids and (min(ids) < 0 or max(ids) >= self.vocab_size):
            bad = next(i for i in ids if not 0 <= i < self.vocab_size)
            raise ValueError(f"token id {bad} is outside the vocabulary (0..{self.vocab_size - 1})")
        if self.engine == "tiktoken":
            return self._tiktoken_encoding.decode_bytes(ids)
        table = self._id_bytes
        return b"".join([table[i] for i in ids])

    def decode(self, ids) -> str:
        """Text of ``ids``: the exact input of ``encode`` for its output; otherwise bytes that
        are not UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", DECODE_ERRORS)

    # --- files ------------------------------------------------------------------------------
    def save(self, folder: str | os.PathLike) -> None:
        """``vocab.json`` and ``merges.txt`` in ``folder``, each written atomically."""
        folder = os.fspath(folder)
        storage.makedirs(folder)
        ordered = dict(sorted(self.vocab.items(), key=lambda item: item[1]))
        storage.write_atomically(storage.join(folder, "vocab.json"), json.dumps(ordered, ensure_ascii=False) + "\n")
        lines = [MERGES_HEADER] + [f"{left} {right}" for left, right in self.merges]
        storage.write_atomically(storage.join(folder, "merges.txt"), "\n".join(lines) + "\n")

    @classmethod
    def load(cls, folder_or_file: str | os.PathLike, engine: str = "auto") -> BPETokenizer:
        """From ``vocab.json`` + ``merges.txt`` or OpenAI's ``encoder.json`` + ``vocab.bpe``:
        a folder holding one pair, or either file of a pair (its partner beside it)."""
        vocab_path, merges_path = _find_files(os.fspath(folder_or_file))
        return cls(_read_vocab(vocab_path), _read_merges(merges_path), engine)

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, eot_id={self.eot_id}, engine={self.engine!r})"


def _find_files(where: str) -> tuple[str, str]:
    names = " or ".join(" + ".join(pair) for pair in FILE_PAIRS)
    if os.path.isdir(where):
        for vocab_name, merges_name in FILE_PAIRS:
            vocab_path, merges_path = os.path.join(where, vocab_name), os.path.join(where, merges_name)
            if os.path.isfile(vocab_path) and os.path.isfile(merges_path):
                return vocab_path, merges_path
        raise TokenizerFileError(f"{where}: no tokenizer files here (expected {names})")
    if not os.path.exists(where):
        raise TokenizerFileError(f"{where}: no such tokenizer folder or file (expected a folder with {names})")
    folder, name = os.path.split(where)
    for pair in FILE_PAIRS:
        if name in pair:
            vocab_path, merges_path = (os.path.join(folder, n) for n in pair)
            partner = merges_path if name == pair[0] else vocab_path
            if not os.path.isfile(partner):
                raise TokenizerFileError(f"{where}: its partner {os.path.basename(partner)} is missing from {folder or '.'}")
            return vocab_path, merges_path
    raise TokenizerFileError(f"{where}: not a tokenizer file (expected {names})")


def _read_vocab(path: str) -> dict[str, int]:
    try:
        with open(path, encoding="utf-8") as f:
            vocab = json.load(f)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerFileError(f"{path}: not a JSON vocabulary ({exc})") from exc
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and type(v) is int for k, v in vocab.items()):
        raise TokenizerFileError(f"{path}: expected a JSON object of token -> integer id")
    return vocab


def _read_merges(path: str) -> list[tuple[str, str]]:
    merges = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(parts):
                raise TokenizerFileError(f"{path}:{number}: a merge is two tokens separated by one space, got {line!r}")
            merges.append((parts[0], parts[1]))
    return merges


def _trainable(texts: Iterable[str]) -> Iterable[str]:
    """Texts for the trainer, which takes only valid Unicode: lone surrogates become U+FFFD
    (a rare symbol's bytes; the vocabulary still covers the surrogate forms byte by byte)."""
    for text in texts:
        if has_surrogates(text):
            text = _SURROGATES.sub("\ufffd", text)
        yield text


def train_tokenizer(texts: Iterable[str], vocab_size: int = GPT2_VOCAB_SIZE, min_frequency: int = 2,
                    show_progress: bool = True) -> BPETokenizer:
    """Learn ``vocab_size - 257`` merges from ``texts`` (Hugging Face's BPE trainer, GPT-2's
    pre-tokenisation); end-of-text is the last id. A corpus too small for that many merges
    (pairs seen fewer than ``min_frequency`` times are never merged) gives a smaller vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # see BPETokenizer.tiktoken_encoding

    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at least {MIN_VOCAB_SIZE} (256 bytes + end-of-text), got {vocab_size}")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be at least 1, got {min_frequency}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 1, min_frequency=min_frequency, show_progress=show_progress,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tokenizer.train_from_iterator(_trainable(texts), trainer=trainer)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in json.loads(tokenizer.to_str())["model"]["merges"]]
    trained = BPETokenizer.from_merges(merges)
    if trained.vocab_size < vocab_size:
        log.warning("the training text allowed %d merges: vocabulary of %d, not %d", len(merges), trained.vocab_size, vocab_size)
    return trained
