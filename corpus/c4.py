"""C4's recipe (T5 paper, section 2.2), rule by rule, as pure functions.

Every constant comes from the reference implementation, the TensorFlow Datasets ``c4``
builder 3.1.0 (``c4_utils.py`` and ``c4.py``), whose output is the released ``c4/en``.
Each rule returns what it decided in the reference's own counter names, so the Beam
pipeline (``pipelines/c4.py``) only wires the steps and counts. Line and span dedup keys
live in ``dedup/``; sentence counting in ``corpus.sentences``; language id in
``corpus.langid``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from corpus.inputs import COMMON_CRAWL_BASE_URL, join_base
from corpus.urls import normalize_url, url_hash_int

# --- constants (TFDS c4 3.1.0 unless noted) ---------------------------------------------
DEFAULT_CRAWL = "CC-MAIN-2019-18"  # c4.py DEFAULT_CC_VERSION, the crawl of the released c4/en
CRAWL_MANIFEST_PATH = "crawl-data/{crawl}/{kind}.paths.gz"  # c4.py: <Common Crawl host>/crawl-data/CC-MAIN-<v>/wet.paths.gz
OPENWEBTEXT_CRAWLS = ("CC-MAIN-2019-18", "CC-MAIN-2019-30", "CC-MAIN-2019-35", "CC-MAIN-2019-39",
                      "CC-MAIN-2019-43", "CC-MAIN-2019-47", "CC-MAIN-2019-51")  # c4.py OPENWEBTEXT_CC_VERSIONS
KNOWN_CORRUPT_WET_FILES = frozenset({  # c4.py _KNOWN_CORRUPT_WET_FILES (raise UnicodeDecodeError)
    "crawl-data/CC-MAIN-2017-13/segments/1490218203536.73/wet/"
    "CC-MAIN-20170322213003-00052-ip-10-233-31-227.ec2.internal.warc.wet.gz",
})
BADWORDS_URL = ("https://raw.githubusercontent.com/LDNOOBW/List-of-Dirty-Naughty-Obscene-and-Otherwise-Bad-Words/"
                "25e679f03d96baa721cde20db9944649e8d0a844/en")  # c4.py _EN_BADWORDS_URL (pinned commit)
REALNEWS_DOMAINS_URL = ("https://raw.githubusercontent.com/rowanz/grover/38f7184bd87237ae2d3bc330b99f1e2e246f6d51/"
                        "realnews/domain_to_allowed_subdomains.json")  # c4.py _REALNEWS_DOMAINS_URL
MAX_PAGE_LENGTH = 1.9e5  # c4_utils.is_valid_length: drop a page with more characters than this
MIN_WORDS_PER_LINE = 5  # c4_utils._MIN_WORDS_PER_LINE
MIN_NUM_SENTENCES = 3  # c4_utils._MIN_NUM_SENTENCES (per page, punkt sentences)
MAX_WORD_LENGTH = 1000  # c4_utils._MAX_WORD_LENGTH
END_MARKS = (".", "?", "!", '"')  # c4_utils._END_MARKS
ELLIPSIS = "..."  # c4_utils._ELLIPSIS
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                     "use of cookies", "use cookies")  # c4_utils._POLICY_SUBSTRINGS
CITATION_RE = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")  # c4_utils.get_clean_page_fn
MIN_ENGLISH_PROBABILITY = 0.99  # c4_utils.detect_english min_probability
VALIDATION_MODULUS = 1000  # c4.py: md5(normalised url) % 1000 == 0 -> validation (0.1%)
LINE_DELIMITER = "\n"

# --- counter namespaces (the reference's stage names) -----------------------------------
SPLIT_WET_FILE = "split-wet-file"
TOO_LONG_FILTER = "too-long-filter"
REALNEWS_FILTER = "realnews-domain-filter"
DUPLICATE_URL_FILTER = "duplicate-url-filter"
WEBTEXTLIKE_FILTER = "webtextlike-filter"
CLEAN_PAGE = "clean-page"
DEDUPE_LINES = "dedupe-lines"
ENGLISH_FILTER = "english-filter"
BADWORDS_FILTER = "badwords-filter"
PASSED = "passed"
FILTERED = "filtered"


@dataclass(frozen=True)
class C4Variant:
    """Which steps of the chain a TFDS ``c4`` config runs (spec table "Variants")."""

    name: str
    clean: bool = True
    dedupe: bool = True
    badwords: bool = True
    realnewslike: bool = False
    webtextlike: bool = False


VARIANTS = {v.name: v for v in (
    C4Variant("en"),
    C4Variant("en.noclean", clean=False, dedupe=False, badwords=False),
    C4Variant("en.noblocklist", badwords=False),
    C4Variant("realnewslike", realnewslike=True),
    C4Variant("webtextlike", webtextlike=True),
)}


@dataclass
class C4Page:
    """A page moving through the chain; ``order`` (file index, offset) decides "first seen"."""

    url: str
    text: str
    timestamp: str
    normalized_url: str = ""
    order: tuple = ()

    def __post_init__(self):
        if not self.normalized_url:
            self.normalized_url = normalize_url(self.url)


@dataclass
class Verdict:
    """What one rule did to one page: the page it keeps (or None), counters, dropped examples."""

    page: C4Page | None
    counts: Counter = field(default_factory=Counter)
    dropped: list = field(default_factory=list)  # (counter name, example text)


def crawl_manifest_url(crawl: str, kind: str = "wet", base: str = COMMON_CRAWL_BASE_URL) -> str:
    """``CC-MAIN-2019-18`` (or ``2019-18``) -> its ``wet.paths.gz`` / ``warc.paths.gz`` under ``base``
    (Common Crawl's host, or a mirror: a URL or a local folder)."""
    crawl = crawl if crawl.startswith("CC-MAIN-") else f"CC-MAIN-{crawl}"
    if not re.fullmatch(r"CC-MAIN-\d{4}-\d{2}", crawl):
        raise ValueError(f"not a Common Crawl crawl id: {crawl!r} (expected e.g. {DEFAULT_CRAWL})")
    return join_base(base, CRAWL_MANIFEST_PATH.format(crawl=crawl, kind=kind))


# --- 0. WET page validity (c4_utils.split_wet_file) --------------------------------------
def wet_page_problem(url: str, text: str, timestamp: str) -> str | None:
    """The reference's reason a parsed WET page is unusable, checked in its order, or None."""
    if not url:
        return "filtered:no_url"
    if not text:
        return "filtered:no_content"
    if not timestamp:
        return "filtered:no_timestamp"
    return None


# --- 1. length ---------------------------------------------------------------------------
def is_valid_length(text: str) -> bool:
    """False iff the page has more than ``MAX_PAGE_LENGTH`` characters."""
    return len(text) <= MAX_PAGE_LENGTH


# --- 2. RealNews domains -----------------------------------------------------------------
def load_realnews_domains(text: str) -> dict[str, list[str] | None]:
    """Allowed domains: Grover's JSON (domain -> allowed subdomains or null) or one domain a line."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return json.loads(stripped)
    return {line.strip(): None for line in text.splitlines() if line.strip() and not line.startswith("#")}


def realnews_domain_problem(normalized_url: str, domains: Mapping[str, list[str] | None], split_domain) -> str | None:
    """Reference reason a page is outside the RealNews list, or None (kept).

    ``split_domain(url) -> (subdomain, domain, suffix)`` is a public-suffix splitter
    (tldextract in the pipeline): the registered domain is ``domain.suffix``.
    """
    subdomain, domain, suffix = split_domain(normalized_url)
    main_domain = domain + "." + suffix
    if main_domain not in domains:
        return "filtered:bad_domain"
    allowed = domains[main_domain]
    if isinstance(allowed, list) and subdomain not in allowed:
        return "filtered:bad_subdomain"
    return None


# --- 3. URL dedup ------------------------------------------------------------------------
def newest_page(a: C4Page, b: C4Page) -> C4Page:
    """Of two pages with one normalised URL: the larger timestamp, on a tie the first seen."""
    return newer_of(a, b, a.timestamp, a.order, b.timestamp, b.order)


def newer_of(a, b, a_timestamp: str, a_order: tuple, b_timestamp: str, b_order: tuple):
    """The URL-dedup rule on anything that carries a page's timestamp and order (a page, or
    the staged reference the pipeline shuffles instead): ``b`` if newer, else ``a``."""
    if b_timestamp > a_timestamp or (b_timestamp == a_timestamp and b_order < a_order):
        return b
    return a


# --- 5. clean_page -----------------------------------------------------------------------
def clean_page(page: C4Page, count_line_sentences: Callable[[str], int]) -> Verdict:
    """C4's nine line/page rules, in the reference's order, then the 3-sentence page floor."""
    counts: Counter = Counter()
    dropped: list = []
    kept: list[str] = []
    sentences = 0
    for line in page.text.splitlines():
        line = line.strip()
        reason = _line_problem(line)
        if reason is None:
            if "[" in line:
                line = CITATION_RE.sub("", line)
            reason = _line_problem_after_citations(line)
        if reason is None:
            if sentences < MIN_NUM_SENTENCES:  # only the floor is ever asked of the count
                sentences += count_line_sentences(line)
            kept.append(line)
            counts["line-passed"] += 1
        elif reason.startswith("filtered:"):  # a page rule: the whole page goes
            counts[reason] += 1
            return Verdict(None, counts, dropped + [(reason, line)])
        else:
            counts[reason] += 1
            dropped.append((reason, line))
    if sentences < MIN_NUM_SENTENCES:
        counts["filtered:too_few_sentences"] += 1
        return Verdict(None, counts, dropped + [("filtered:too_few_sentences", page.text)])
    counts[PASSED] += 1
    page.text = LINE_DELIMITER.join(kept).strip()
    return Verdict(page, counts, dropped)


def _line_problem(line: str) -> str | None:
    if len(line) <= MAX_WORD_LENGTH:  # no word can be longer than its line
        return None
    for word in line.split():
        if len(word) > MAX_WORD_LENGTH:
            return "line-filtered:too_long_word"
    return None


def _line_problem_after_citations(line: str) -> str | None:
    if not line.endswith(END_MARKS) or line.endswith(ELLIPSIS):
        return "line-filtered:no_endmark"
    if len(line.split()) < MIN_WORDS_PER_LINE:
        return "line-filtered:too_short"
    lower = line.lower()
    if "lorem ipsum" in lower:
        return "filtered:loremipsum"
    if "javascript" in lower:
        return "line-filtered:javascript"
    if "{" in line:
        return "filtered:squigglybracket"
    if any(p in lower for p in POLICY_SUBSTRINGS):
        return "line-filtered:policy"
    return None


# --- 8. language -------------------------------------------------------------------------
def detect_english(page: C4Page, detect_langs, detection_error: type[Exception]) -> Verdict:
    """Keep iff langdetect's top prediction is ``en`` with probability >= 0.99.

    ``detect_langs(text) -> [(lang, prob), ...]`` is seeded langdetect or its exact fast
    equivalent (``corpus.langid``); ``detection_error`` is what it raises for text with
    no features (the reference counts that as ``langdetect_exception``).
    """
    try:
        predictions = detect_langs(page.text)
    except detection_error:
        return _drop(page, "filtered:langdetect_exception")
    if not predictions:
        return _drop(page, "filtered:no_predictions")
    lang, prob = predictions[0]
    if prob < MIN_ENGLISH_PROBABILITY:
        return _drop(page, "filtered:low_confidence")
    if lang != "en":
        verdict = _drop(page, "filtered:ignored_language")
        verdict.counts[f"filtered:ignored_language-{lang}"] += 1
        return verdict
    return Verdict(page, Counter({PASSED: 1}))


# --- 9. bad words ------------------------------------------------------------------------
def parse_badwords(text: str) -> list[str]:
    """One word or phrase a line, stripped; empty entries ignored (spec: c4.md step 9)."""
    return sorted({line.strip() for line in text.splitlines()} - {""})


def compile_badwords(words: Iterable[str]) -> re.Pattern:
    """``(?:\\W|^)(w1|w2|...)(?:\\W|$)`` with every word ``re.escape``d, as the reference builds it."""
    escaped = [re.escape(w) for w in words if w]
    if not escaped:
        raise ValueError("the bad-words list is empty")
    return re.compile(r"(?:\W|^)({})(?:\W|$)".format("|".join(escaped)))


_WORD_RUN_RE = re.compile(r"\w+")


class BadwordsMatcher:
    r"""``compile_badwords(words).search(text)`` answered without the 400-way alternation.

    Exactly equivalent: a listed word made only of word characters matches iff it is a
    whole ``\w+`` run of the text (its flanks must be ``\W`` or an end), so one
    tokenisation and a set lookup decide it. A phrase that starts with a word character
    can only match where its first ``\w+`` run is a whole run of the text, so only phrases
    whose first run occurs are tried. Every other entry (a phrase, or one that starts with
    a non-word character) is tried with the reference's own pattern only when the entry
    occurs in the text as a plain substring, which any match of its pattern requires.
    """

    def __init__(self, words: Iterable[str]):
        words = [w for w in words if w]
        self.regex = compile_badwords(words)  # the definition; kept for reference and tests
        self.tokens = frozenset(w for w in words if _WORD_RUN_RE.fullmatch(w))
        self.phrases: dict[str, list[tuple[str, re.Pattern]]] = {}
        self.others: list[tuple[str, re.Pattern]] = []
        for word in words:
            if word in self.tokens:
                continue
            first = _WORD_RUN_RE.match(word)
            entry = (word, compile_badwords([word]))
            if first:
                self.phrases.setdefault(first.group(), []).append(entry)
            else:
                self.others.append(entry)

    def search(self, lowered: str) -> bool:
        """True iff the reference pattern finds a listed word in ``lowered``."""
        runs = set(_WORD_RUN_RE.findall(lowered))
        if not self.tokens.isdisjoint(runs):
            return True
        for run in runs.intersection(self.phrases):
            if any(word in lowered and pattern.search(lowered) for word, pattern in self.phrases[run]):
                return True
        return any(word in lowered and pattern.search(lowered) for word, pattern in self.others)


def badwords_filter(page: C4Page, matcher: BadwordsMatcher) -> Verdict:
    """Drop the page if its lower-cased text contains a listed word (whole-word match)."""
    if matcher.search(page.text.lower()):
        return _drop(page, FILTERED)
    return Verdict(page, Counter({PASSED: 1}))


# --- 10. split ---------------------------------------------------------------------------
def split_of(normalized_url: str) -> str:
    """``validation`` for md5(normalised url) % 1000 == 0, else ``train``."""
    return "validation" if url_hash_int(normalized_url) % VALIDATION_MODULUS == 0 else "train"


def _drop(page: C4Page, reason: str) -> Verdict:
    return Verdict(None, Counter({reason: 1}), [(reason, page.text)])

