"""Invertible detokenizers for the language-modelling benchmarks, and their original word/byte counts.

GPT-2 (Radford et al. 2019, section 3.1) scores WikiText, PTB, 1BW and LAMBADA after
"invertible de-tokenizers" remove the benchmarks' artificial tokenization, and credits
them with 2.5-5 perplexity. This module gives one detokenizer per benchmark style:

- ``wikitext``: ``guest @-@ starring`` -> ``guest-starring``, ``1 @,@ 000 @.@ 5`` ->
  ``1,000.5``, punctuation and closing brackets/quotes attached to the word before, opening
  brackets/quotes to the word after, ``Teddy 's`` / ``don 't`` -> ``Teddy's`` / ``don't``,
  ``= = Career = =`` -> ``== Career ==``, and the space that opens and closes every line
  of the WikiText files removed.
- ``ptb`` (Mikolov's PTB: lower case, no punctuation, numbers are ``N``): ``did n't`` ->
  ``didn't``, ``dow 's`` -> ``dow's``, ``investors '`` -> ``investors'``, ``$ N`` -> ``$N``,
  ``mgm\\/ua`` -> ``mgm/ua``, line-edge spaces removed. ``<unk>`` and ``N`` are kept as
  written: they stand for words and numbers that are gone, and any replacement would
  invent text the inverse cannot tell from real text.
- ``1bw`` (One Billion Word, Moses-tokenized news): as ``wikitext`` without the ``@-@``
  separators and headings (1BW keeps ``go-ahead`` and ``30,000`` whole), no line-edge
  spaces, and ``$ 800`` / ``£ 100,000`` -> ``$800`` / ``£100,000``.
- ``lambada``: the identity. The GPT-2 LAMBADA file (``lambada_test.jsonl``) is OpenAI's
  own detokenized copy: its text is already natural (``don't``, ``"Figured if``), so any
  rule that joined tokens would also have to split the same shapes in natural text on the
  way back. Its mix of curly and straight quotes cannot be unified invertibly either.
- ``none``: the identity (enwik8, text8, plain text).

What "invertible" means: ``retokenize(detokenize(x, kind), kind) == x`` for every line.
``retokenize`` is a small tokenizer in the benchmark's own style; ``detokenize`` joins the
tokens of a line into groups and keeps a group joined only when ``retokenize`` splits it
back into exactly those tokens. A group that would not come back (``Jr .`` -> ``Jr.``,
which the tokenizer keeps whole, as it keeps ``U.S.``) is left as written, and counted
(``DetokenizedText.kept_groups``). A line that cannot be restored even as written (a
WikiText/PTB line without the format's edge spaces, e.g. text stripped by a loader) is
counted in ``not_invertible`` with a warning, or refused with ``strict=True``.

Detokenizers work line by line: the output has exactly the input's lines, in order, each
with its own line ending (LF or CRLF, kept unless ``newline=`` says otherwise), so the
evaluation harness can map a range of original lines to a range of detokenized
characters (``detokenize_with_offsets`` -> ``DetokenizedText.line_span``).

The counts perplexities divide by are taken on the ORIGINAL text: the benchmark file as
written, before detokenization (WikiText/PTB/1BW: the tokenized file, ``@-@`` and edge
spaces included; LAMBADA: OpenAI's passage text; enwik8/text8: the raw bytes), so that a
number does not depend on the detokenizer and compares with earlier work on the same
files (GPT-2 Table 3 reports word perplexity, which divides by the benchmark's own word
count):

- ``count_words``: whitespace-separated tokens, plus for the one-sentence-or-paragraph-
  per-line sets (``wikitext``, ``ptb``, ``1bw``) one end-of-line word per line, the
  ``<eos>`` these sets are modelled with (Mikolov et al. 2010 for PTB: 82,430 test words
  = 78,669 tokens + 3,761 lines; Merity et al. 2016 for WikiText-2: 245,569 test words on
  the 4,358-line ``wiki.test.tokens``). ``eos=False`` counts tokens only.
  lm-evaluation-harness's ``wikitext`` task divides by ``len(re.split(r"\\s+", page))``
  instead: tokens without ``<eos>`` (plus one or two for leading/trailing whitespace).
- ``count_bytes``: UTF-8 bytes of the original text, line endings included (a CRLF
  file counts two per line); ``count_chars``: its characters.
"""

from __future__ import annotations

import re
import warnings
from bisect import bisect_right
from dataclasses import dataclass
from functools import cache

# Merity et al. 2016 (WikiText): hyphens and number separators split out as @-@, @,@, @.@
WIKITEXT_SEPARATORS = (("@-@", "-"), ("@,@", ","), ("@.@", "."))
# Moses tokenizer.perl (English): the apostrophe stays with the clitic: "don 't", "Teddy 's"
MOSES_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'d", "'ll")
PTB_CONTRACTIONS = ("n't", "'s", "'re", "'ve", "'m", "'d", "'ll")  # Penn Treebank: "do n't", "it 's", "we 're"
PTB_ESCAPES = (("\\/", "/"), ("\\*", "*"))  # Penn Treebank escapes / and * with a backslash: "mgm\/ua"
CURRENCY = ("$", "£", "€", "¥")  # symbols split from the amount after them: "$ 800", "US$ 5" (1BW), "c$ N" (PTB)
PTB_NUMBER = "N"  # Mikolov et al. 2010 PTB: every number is replaced by N
CLOSERS = frozenset(",.;:!?%)]}")  # attach to the word before
OPENERS = frozenset("([{")  # attach to the word after
# titles, ranks, months and company words whose period Moses' tokenizer keeps (after its nonbreaking_prefix.en)
ABBREVIATIONS = frozenset("""
Adj Adm Adv Art Asst Bart Bldg Brig Bros Capt Cmdr Co Col Comdr Con Corp Cpl DR Dr Drs Ens Ft Gen Gov Hon Hosp
Hr Inc Insp Jr Lt Ltd MM MR MRS MS Maj Messrs Mlle Mme Mr Mrs Ms Msgr Mt No Nos Nr Op Ord Pfc Ph Prof Pvt Rep
Reps Res Rev Rt Sen Sens Sfc Sgt Sr St Supt Surg pp v vs rev Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec
""".split())
_ABBREVIATIONS_LOWER = frozenset(word.lower() for word in ABBREVIATIONS)  # also lower-cased ("mr." in PTB style)
_ABBREVIATION_SHAPE = re.compile(r"[A-Z]|[^\W\d_]+(?:\.[^\W\d_]+)+")  # Moses: "A" (A-Z), "U.S", "Ph.D"
_SPLIT_HYPHEN = re.compile(r"(?<=[^\s@-])-(?=[^\s@-])")  # a hyphen inside a word: "guest-starring"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)+")  # "1,000.5": WikiText splits its separators
_NUMBER_SEPARATOR = re.compile(r"[.,]")


@cache
def _currency_pattern(symbols: str) -> re.Pattern:
    return re.compile(rf"[^\W\d_]*[{re.escape(symbols)}]")


def _clitic_follows(stem: str, clitic: str) -> bool:
    """Whether ``clitic`` attaches to ``stem``. Moses splits a clitic from a letter, and ``'s`` from a
    digit too ("1990 's", but "5'd" stays whole); here also from a placeholder or an abbreviation
    ("<unk> 's", "corp. 's"). PTB's ``n't`` is one token in either style."""
    if clitic == "'t" and stem.lower() == "n":
        return False
    return stem[-1].isalpha() or stem[-1] in ">." or (clitic == "'s" and stem[-1].isdigit())


@dataclass(frozen=True)
class Detokenizer:
    """One benchmark's tokenization style: what ``detokenize`` joins and ``retokenize`` splits."""

    name: str
    description: str
    edge_spaces: bool = False  # every non-blank line of the files starts and ends with one space
    separators: tuple[tuple[str, str], ...] = ()  # joiner tokens and the character they stand for (WikiText)
    contractions: tuple[str, ...] = ()
    closers: frozenset[str] = frozenset()
    openers: frozenset[str] = frozenset()
    quotes: bool = False  # straight double quotes, paired within a line
    dots: bool = False  # sentence periods and ellipses attach to the word before
    headings: bool = False  # "= = Section = =" -> "== Section =="
    possessive: bool = False  # "players '" -> "players'"
    currency: tuple[str, ...] = ()
    number_placeholder: str | None = None  # PTB's N, for "$ N" -> "$N"
    escapes: tuple[tuple[str, str], ...] = ()
    eos_words: bool = False  # count_words adds one end-of-line word per line

    @property
    def identity(self) -> bool:
        return not (self.edge_spaces or self.separators or self.contractions or self.closers or self.openers
                    or self.quotes or self.dots or self.headings or self.possessive or self.currency or self.escapes)

    # ------------------------------------------------------------------ retokenize (the tokenizer)

    def retokenize_line(self, line: str) -> str:
        """The tokenized line that ``line`` (detokenized, without its line ending) came from."""
        if self.identity:
            return line
        pieces = line.split(" ")
        tokens: list[str] = []
        for k, piece in enumerate(pieces):
            following = pieces[k + 1][:1] if k + 1 < len(pieces) else ""
            tokens.extend(self._tokens(piece, following))
        body = " ".join(tokens)
        if self.edge_spaces and body:
            if body[0] != " ":
                body = " " + body
            if body[-1] != " ":
                body = body + " "
        return body

    def _tokens(self, piece: str, following: str) -> list[str]:
        """The tokens one space-free piece of detokenized text came from."""
        return [self._escape(t) for t in self._split_piece(piece, following)] if self.escapes else \
            self._split_piece(piece, following)

    def _split_piece(self, piece: str, following: str) -> list[str]:
        """The tokens of one space-free piece; ``following`` is the first character after it."""
        if len(piece) < 2 or piece.isalnum():  # every rule involves a punctuation character
            return [piece]
        if self.headings and not piece.strip("="):
            return ["="] * len(piece)
        head: list[str] = []
        core = piece
        while len(core) > 1 and (core[0] in self.openers or (self.quotes and core[0] == '"')):
            head.append(core[0])
            core = core[1:]
        tail: list[str] = []  # innermost last
        while len(core) > 1:
            suffix = self._closing_suffix(core, tail[-1][0] if tail else following)
            if not suffix:
                break
            tail.append(suffix)
            core = core[:-len(suffix)]
        if self.currency:
            symbol = self._currency_prefix.match(core)
            if symbol and self._is_amount(core[symbol.end():]):
                head.append(symbol.group())
                core = core[symbol.end():]
        return head + self._split_inner(core) + tail[::-1]

    def _closing_suffix(self, core: str, following: str) -> str | None:
        """The token at the end of ``core`` that the tokenizer splits off, if any."""
        if self.dots and core[-1] == ".":
            run = len(core) - len(core.rstrip("."))
            if run >= 2:
                return "." * run if run < len(core) else None
            return None if self._keeps_period(core[:-1], following) else "."
        if core[-1] in self.closers or (self.quotes and core[-1] == '"'):
            return core[-1]
        lowered = core.lower()
        for clitic in self.contractions:
            if len(core) > len(clitic) and lowered.endswith(clitic) and _clitic_follows(core[:-len(clitic)], clitic):
                return core[-len(clitic):]
        if self.possessive and following and len(core) > 2 and core[-1] == "'" and core[-2] in "sS":
            return "'"
        return None

    @staticmethod
    def _keeps_period(stem: str, following: str) -> bool:
        """Moses' rule: an abbreviation keeps its period, and so does any word before a lower-case word."""
        return bool(_ABBREVIATION_SHAPE.fullmatch(stem)) or stem.lower() in _ABBREVIATIONS_LOWER or following.islower()

    @property
    def _currency_prefix(self) -> re.Pattern:
        """A currency symbol, perhaps after letters that name the dollar ("US$", "c$", "hk$")."""
        return _currency_pattern("".join(self.currency))

    def _is_amount(self, rest: str) -> bool:
        return rest[:1].isdigit() or (self.number_placeholder is not None and rest == self.number_placeholder)

    def _split_inner(self, core: str) -> list[str]:
        if not self.separators:
            return [core]
        out: list[str] = []
        for k, part in enumerate(_SPLIT_HYPHEN.split(core)):
            if k:
                out.append("@-@")
            if _NUMBER.fullmatch(part):
                position = 0
                for match in _NUMBER_SEPARATOR.finditer(part):
                    out += [part[position:match.start()], "@,@" if match.group() == "," else "@.@"]
                    position = match.end()
                out.append(part[position:])
            else:
                out.append(part)
        return out

    def _escape(self, token: str) -> str:
        for escaped, plain in self.escapes:
            if plain in token:  # escape each plain character not already escaped
                token = re.sub(r"(?<!\\)" + re.escape(plain), lambda _, escaped=escaped: escaped, token)
        return token

    # ------------------------------------------------------------------ detokenize

    def _surface(self, token: str) -> str:
        """How a token is written once detokenized (a separator becomes its character, escapes go)."""
        for joiner, character in self.separators:
            if token == joiner:
                return character
        for escaped, plain in self.escapes:
            token = token.replace(escaped, plain)
        return token

    def _joins(self, tokens: list[str]) -> list[bool]:
        """For each gap between two tokens, whether the detokenizer proposes to remove it."""
        roles: dict[int, str] = {}
        if self.quotes:
            quotes = [i for i, t in enumerate(tokens) if t == '"']
            if len(quotes) % 2 == 0:  # unpaired quotes stay apart: their direction is unknown
                roles = {i: ("open" if k % 2 == 0 else "close") for k, i in enumerate(quotes)}
        joiners = {joiner for joiner, _ in self.separators}
        out = []
        for i in range(len(tokens) - 1):
            a, b = tokens[i], tokens[i + 1]
            out.append(not (a.isalnum() and b.isalnum()) and bool(a and b) and (
                a in joiners or b in joiners
                or (self.headings and a == "=" and b == "=")
                or b in self.closers
                or (self.dots and not b.strip("."))
                or roles.get(i) == "open" or roles.get(i + 1) == "close"
                or a in self.openers
                or (b.lower() in self.contractions and _clitic_follows(a, b.lower()))
                or (self.possessive and b == "'" and a[-1] in "sS" and i + 2 < len(tokens))
                or (bool(self.currency) and self._currency_prefix.fullmatch(a) is not None and self._is_amount(b))))
        return out

    def detokenize_line(self, line: str) -> tuple[str, int, bool]:
        """``(detokenized line, groups left as written, whether retokenize restores the line)``."""
        if self.identity:
            return line, 0, True
        body = line
        if self.edge_spaces:
            body = body[1:] if body.startswith(" ") else body
            body = body[:-1] if body.endswith(" ") else body
        tokens = body.split(" ")
        joins = self._joins(tokens)
        groups, start = [], 0
        for i, joined in enumerate(joins):
            if not joined:
                groups.append((start, i + 1))
                start = i + 1
        groups.append((start, len(tokens)))
        texts = ["".join(self._surface(t) for t in tokens[a:b]) for a, b in groups]
        pieces: list[str] = []
        kept = 0
        for k, ((a, b), text) in enumerate(zip(groups, texts, strict=True)):
            following = texts[k + 1][:1] if k + 1 < len(texts) else ""
            if b - a == 1 and text == tokens[a] or self._tokens(text, following) == tokens[a:b]:
                pieces.append(text)
            else:
                kept += 1
                pieces.extend(tokens[a:b])
        out = " ".join(pieces)
        if self.retokenize_line(out) == line:
            return out, kept, True
        if self.retokenize_line(line) == line:  # the whole line as written comes back
            return line, kept + 1, True
        return out, kept, False


def _moses_style(name: str, description: str, **options) -> Detokenizer:
    return Detokenizer(name, description, contractions=MOSES_CONTRACTIONS, closers=CLOSERS, openers=OPENERS,
                       quotes=True, dots=True, possessive=True, eos_words=True, **options)


DETOKENIZERS: dict[str, Detokenizer] = {
    "wikitext": _moses_style("wikitext", "WikiText-2/-103 (Merity et al. 2016): @-@ separators, Moses punctuation, "
                                         "= = headings, a space at both ends of every line",
                             edge_spaces=True, separators=WIKITEXT_SEPARATORS, headings=True, currency=CURRENCY),
    "ptb": Detokenizer("ptb", "Penn Treebank (Mikolov et al. 2010): n't and 's clitics, <unk> and N kept, "
                              "a space at both ends of every line",
                       edge_spaces=True, contractions=PTB_CONTRACTIONS, possessive=True, currency=("$",),
                       number_placeholder=PTB_NUMBER, escapes=PTB_ESCAPES, eos_words=True),
    "1bw": _moses_style("1bw", "One Billion Word (Chelba et al. 2013): Moses punctuation, hyphens and numbers whole",
                        currency=CURRENCY),
    "lambada": Detokenizer("lambada", "LAMBADA as GPT-2 used it (OpenAI's lambada_test.jsonl): already detokenized"),
    "none": Detokenizer("none", "no detokenization (enwik8, text8, plain text)"),
}


def detokenizer_for(benchmark_name: str) -> str:
    """The detokenizer kind of a benchmark: ``wikitext2``/``wikitext103`` -> ``wikitext``, ``ptb``,
    ``1bw``, ``lambada``; anything else -> ``none``."""
    name = benchmark_name.strip().lower()
    if name.startswith("wikitext"):
        return "wikitext"
    if name.startswith("lambada"):
        return "lambada"
    return name if name in ("ptb", "1bw") else "none"


def _detokenizer(kind: str, text: object = "") -> Detokenizer:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__} (decode bytes as UTF-8 first)")
    try:
        return DETOKENIZERS[kind]
    except KeyError:
        raise ValueError(f"unknown detokenizer {kind!r}; kinds: {', '.join(DETOKENIZERS)}") from None


def split_lines(text: str) -> list[tuple[str, str]]:
    """``(line, ending)`` pairs: the ending is ``"\\r\\n"``, ``"\\n"``, or ``""`` for a last line
    without one; a final line ending opens no further line (``"a\\n"`` is one line)."""
    parts = text.split("\n")
    out = []
    for part in parts[:-1]:
        out.append((part[:-1], "\r\n") if part.endswith("\r") else (part, "\n"))
    if parts[-1]:
        out.append((parts[-1], ""))
    return out


# ----------------------------------------------------------------------------- whole texts

@dataclass(frozen=True)
class DetokenizedText:
    """A detokenized text and where each original line went.

    ``original_starts[i]`` / ``starts[i]``: character offset of line ``i`` in the original /
    detokenized text, with one more entry at the end (the text's length), so line ``i`` is
    ``text[starts[i]:starts[i + 1]]``, line ending included.
    """

    kind: str
    text: str
    original_starts: tuple[int, ...]
    starts: tuple[int, ...]
    changed_lines: int  # lines whose text changed
    kept_groups: int  # token groups left as written because they would not retokenize exactly
    not_invertible: tuple[int, ...]  # 0-based numbers of lines retokenize cannot restore

    @property
    def lines(self) -> int:
        return len(self.starts) - 1

    def line_span(self, first: int, stop: int | None = None) -> tuple[int, int]:
        """``(start, end)`` in ``text`` of original lines ``first`` up to (not including) ``stop``
        (default: just line ``first``)."""
        stop = first + 1 if stop is None else stop
        if not 0 <= first <= stop <= self.lines:
            raise IndexError(f"line range [{first}, {stop}) is outside the text's {self.lines} lines")
        return self.starts[first], self.starts[stop]

    def original_line_span(self, first: int, stop: int | None = None) -> tuple[int, int]:
        """The same range of lines in the original text."""
        stop = first + 1 if stop is None else stop
        if not 0 <= first <= stop <= self.lines:
            raise IndexError(f"line range [{first}, {stop}) is outside the text's {self.lines} lines")
        return self.original_starts[first], self.original_starts[stop]

    def line_of(self, offset: int) -> int:
        """The line holding character ``offset`` of the detokenized text."""
        if not 0 <= offset < len(self.text):
            raise IndexError(f"offset {offset} is outside the detokenized text ({len(self.text)} characters)")
        return bisect_right(self.starts, offset) - 1


def detokenize_with_offsets(text: str, kind: str, *, newline: str | None = None,
                            strict: bool = False) -> DetokenizedText:
    """Detokenize ``text`` line by line (see the module docstring) and keep the line offsets.

    ``newline``: write every line ending as this string (e.g. ``"\\n"`` for a CRLF file);
    default: each line keeps its own. ``strict``: a line that ``retokenize`` could not
    restore raises ``ValueError`` instead of being counted with a warning.
    """
    detok = _detokenizer(kind, text)
    pieces: list[str] = []
    original_starts, starts = [0], [0]
    changed = kept = 0
    bad: list[int] = []
    lines = split_lines(text)
    for number, (line, ending) in enumerate(lines):
        out, kept_here, ok = detok.detokenize_line(line)
        if not ok:
            if strict:
                raise ValueError(f"{kind} detokenizer: line {number} cannot be restored by retokenize "
                                 f"({_why(detok, line)}): {line[:80]!r}")
            bad.append(number)
        changed += out != line
        kept += kept_here
        original_starts.append(original_starts[-1] + len(line) + len(ending))
        if newline is not None and ending:
            ending = newline
        pieces += [out, ending]
        starts.append(starts[-1] + len(out) + len(ending))
    if bad:
        warnings.warn(f"{kind} detokenizer: {len(bad)} line(s) cannot be restored exactly by retokenize, the first "
                      f"is line {bad[0]} ({_why(detok, lines[bad[0]][0])})", stacklevel=2)
    return DetokenizedText(kind, "".join(pieces), tuple(original_starts), tuple(starts), changed, kept, tuple(bad))


def _why(detok: Detokenizer, line: str) -> str:
    if detok.edge_spaces and line.strip() and not (line.startswith(" ") and line.endswith(" ")):
        return (f"{detok.name} files open and close every line with a space and this line lacks it; was the text "
                "stripped? detokenize the file as read (BenchmarkSet.full_text)")
    return "a token the tokenizer would split"


def detokenize(text: str, kind: str, *, newline: str | None = None, strict: bool = False) -> str:
    """``text`` (any number of lines) detokenized line by line; same lines, same line endings."""
    return detokenize_with_offsets(text, kind, newline=newline, strict=strict).text


def detokenize_line(line: str, kind: str) -> str:
    """One line (without its line ending) detokenized. Text with line breaks is detokenized
    line by line, as ``detokenize`` does."""
    detok = _detokenizer(kind, line)
    if "\n" in line:
        return detokenize(line, kind)
    return detok.detokenize_line(line)[0]


def retokenize(text: str, kind: str, *, newline: str | None = None) -> str:
    """The inverse of ``detokenize``: the benchmark's tokenized text, line by line."""
    detok = _detokenizer(kind, text)
    out = []
    for line, ending in split_lines(text):
        out += [detok.retokenize_line(line), ending if newline is None or not ending else newline]
    return "".join(out)


# ----------------------------------------------------------------------------- counts of the original

def count_words(text: str, kind: str, *, eos: bool | None = None) -> int:
    """Words of the ORIGINAL (tokenized) text, the denominator of word perplexity.

    A word is a whitespace-separated token of the text as written (``@-@``, ``,``, ``'s``,
    ``<unk>`` and ``N`` each count one). For ``wikitext``, ``ptb`` and ``1bw`` every line,
    blank ones included, adds one end-of-line word (``<eos>``), as these benchmarks are
    counted (PTB test: 82,430; WikiText-2 test: 245,569 on the 4,358-line file);
    ``lambada`` and ``none`` count tokens only. ``eos`` overrides the kind's convention.
    """
    detok = _detokenizer(kind, text)
    tokens = len(text.split())
    if detok.eos_words if eos is None else eos:
        tokens += len(split_lines(text))
    return tokens


def count_bytes(text: str) -> int:
    """UTF-8 bytes of the original text (line endings included), the denominator of bits per byte."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    return len(text.encode("utf-8"))


def count_chars(text: str) -> int:
    """Characters (code points) of the original text, the denominator of bits per character."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    return len(text)
