"""C4's recipe (T5 paper, section 2.2), rule by rule, as pure functions.

Every constant comes from the reference implementation, the TensorFlow Datasets ``c4``
builder 3.1.0 (``c4_utils.py`` and ``c4.py``), whose output is the released ``c4/en``.
Each rule returns a ``common.decision.Decision`` in the reference's own counter names,
each counter with its unit (pages, lines, or ``other`` for a tally), and never changes
the page it was given (``C4Page`` is frozen), so the Beam pipeline (``pipelines/c4/job.py``)
only wires the steps and the in-memory chain (``benchmarks/c4_throughput.py``) calls the
same functions. Line and span dedup live in ``dedup/``; sentence counting in
``corpus.sentences``; language id in ``corpus.langid``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from common.decision import FILTERED, LINES, OTHER, PAGES, PASSED, Decision
from corpus.inputs import COMMON_CRAWL_BASE_URL, join_base
from corpus.records import MISSING_TARGET_URI, Document, ReadError
from corpus.urls import normalize_url, url_hash_int

# --- constants (TFDS c4 3.1.0 unless noted) ---------------------------------------------
DEFAULT_CRAWL = "CC-MAIN-2019-18"  # c4.py DEFAULT_CC_VERSION, the crawl of the released c4/en
CRAWL_MANIFEST_PATH = "crawl-data/{crawl}/{kind}.paths.gz"  # c4.py: <Common Crawl host>/crawl-data/CC-MAIN-<v>/wet.paths.gz
OPENWEBTEXT_CRAWLS = (  # c4.py OPENWEBTEXT_CC_VERSIONS, its order: the 12 crawls of August 2018 - July 2019
    "CC-MAIN-2019-18", "CC-MAIN-2019-30", "CC-MAIN-2019-26", "CC-MAIN-2019-22", "CC-MAIN-2019-13", "CC-MAIN-2019-09",
    "CC-MAIN-2019-04", "CC-MAIN-2018-51", "CC-MAIN-2018-47", "CC-MAIN-2018-43", "CC-MAIN-2018-39", "CC-MAIN-2018-34",
)  # read by `c4 --variant webtextlike` when neither --crawl nor --input is given
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
NO_URL = "filtered:no_url"
WET_FILE = "wet-file"  # a tally: WET files read
MISSING_PAGE = "missing-page"  # a tally: listed WebText-like URLs with no page in the crawl
EXAMPLES = "examples"  # a tally per split: documents written
SPLITS = ("train", "validation")


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


@dataclass(frozen=True)
class C4Page:
    """A page moving through the chain; ``order`` (file index, offset) decides "first seen".
    Frozen: a rule that changes the text returns a new page (``dataclasses.replace``)."""

    url: str
    text: str
    timestamp: str
    normalized_url: str = ""
    order: tuple = ()

    def __post_init__(self):
        if not self.normalized_url:
            object.__setattr__(self, "normalized_url", normalize_url(self.url))


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
        return NO_URL
    if not text:
        return "filtered:no_content"
    if not timestamp:
        return "filtered:no_timestamp"
    return None


NOTHING = Decision(None)  # nothing passed on, nothing counted
WET_FILE_READ = Decision.tally(WET_FILE)  # one WET file read (the reference's counter)


def wet_page(doc: Document, file_index: int) -> Decision:
    """A WET conversion record -> the ``C4Page`` the chain starts with, or the reference's
    reason it is unusable (the URL sampled). ``file_index`` and the record's offset make
    its ``order``."""
    reason = wet_page_problem(doc.url, doc.text, doc.timestamp)
    if reason:
        return Decision.drop(reason, doc.url)
    page = C4Page(url=doc.url, text=doc.text, timestamp=doc.timestamp, order=(file_index, int(doc.meta.get("stream_offset", 0))))
    return Decision.keep(page, PASSED)


def _file_name(source: str) -> str:
    """A crawl file's name without its folder or bucket: _stats.json reads the same wherever
    the input lives (_errors/errors.jsonl keeps the full location)."""
    return posixpath.basename(source)


def unreadable_record(error: ReadError) -> Decision:
    """A record the reader could not use: the reference counts one without a target URI
    as ``filtered:no_url``; any other read error is no C4 decision (the reader counts it)."""
    if error.reason == MISSING_TARGET_URI:
        return Decision.drop(NO_URL, f"{_file_name(error.source)} offset {error.offset}")
    return NOTHING


def warcinfo_records(source: str, n: int) -> Decision:
    """A file's ``n`` warcinfo records, which the reference counts as ``filtered:no_url``
    (reported even when ``n`` is 0, so every file read reports the counter)."""
    return Decision(None, ((NO_URL, n),), ((NO_URL, f"{_file_name(source)}: warcinfo record"),) if n else (), ((NO_URL, PAGES),))


def extracted_page(url: str, doc: Document | None, outcome: str, detail: str, order: tuple) -> Decision:
    """A WARC HTML page after main-text extraction -> a ``C4Page``, counted under the
    extraction's ``outcome``; a page with no text is dropped with the outcome's ``detail``."""
    if doc is None:
        return Decision.drop(outcome, f"{url} {detail}")
    return Decision.keep(C4Page(url=doc.url, text=doc.text, timestamp=doc.timestamp, order=order), outcome)


# --- 1. length ---------------------------------------------------------------------------
def is_valid_length(text: str) -> bool:
    """False iff the page has more than ``MAX_PAGE_LENGTH`` characters."""
    return len(text) <= MAX_PAGE_LENGTH


def length_filter(page: C4Page) -> Decision:
    """Drop a page longer than ``MAX_PAGE_LENGTH`` characters (its URL sampled)."""
    if is_valid_length(page.text):
        return Decision.keep(page, PASSED)
    return Decision.drop(FILTERED, page.url)


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


def realnews_filter(page: C4Page, domains: Mapping[str, list[str] | None], split_domain) -> Decision:
    """Keep a page whose domain (and subdomain) is on the RealNews list; drops sample the URL."""
    reason = realnews_domain_problem(page.normalized_url, domains, split_domain)
    if reason:
        return Decision.drop(reason, page.url)
    return Decision.keep(page, PASSED)


# --- 3. URL dedup ------------------------------------------------------------------------
def url_dedup_key(page: C4Page) -> tuple[str, str, tuple]:
    """What URL dedup needs of a page: ``(normalised URL, timestamp, order)``."""
    return page.normalized_url, page.timestamp, page.order


def capture(page: C4Page) -> tuple[str, tuple, C4Page]:
    """A page as ``newest_capture`` compares it: ``(timestamp, order, page)``."""
    return page.timestamp, page.order, page


def newest_capture(a: tuple, b: tuple) -> tuple:
    """The URL-dedup rule (c4_utils.select_newest_page): of two captures of one normalised
    URL, each ``(timestamp, order, ...)`` (``capture(page)``, or the staged reference the
    pipeline shuffles instead of the page), the larger timestamp; on a tie the first seen
    (smaller order). ``b`` if newer, else ``a``."""
    if b[0] > a[0] or (b[0] == a[0] and b[1] < a[1]):
        return b
    return a


_URL_DEDUP_UNITS = ((FILTERED, PAGES), (PASSED, PAGES))


def keep_newest(normalized_url: str, newest_and_count: tuple) -> Decision:
    """One normalised URL after URL dedup: ``(its newest capture, how many it had)`` ->
    the newest passes, the others are counted as filtered (0 too) and the URL sampled."""
    newest, n = newest_and_count
    dropped = ((FILTERED, normalized_url),) if n > 1 else ()
    return Decision(newest, ((FILTERED, n - 1), (PASSED, 1)), dropped, _URL_DEDUP_UNITS)


# --- 4. WebText-like URL list --------------------------------------------------------------
MISSING_LISTED_PAGE = Decision.tally(MISSING_PAGE)


def webtextlike_filter(normalized_url: str, joined: tuple) -> Decision:
    """One normalised URL joined with the WebText-like list: ``joined`` is (the URL's
    captures after URL dedup, its list entries). A page not on the list is dropped (the URL
    sampled); a listed URL with no page is a tally (``missing-page``)."""
    captures, listed = joined
    captures, listed = list(captures), list(listed)
    if not listed:
        return Decision.drop(FILTERED, normalized_url)
    if not captures:
        return MISSING_LISTED_PAGE
    return Decision.keep(captures[0], PASSED)


# --- 5. clean_page -----------------------------------------------------------------------
# What each clean_page counter counts (a line rule drops a line, a page rule the page).
CLEAN_PAGE_UNITS = tuple((name, LINES) for name in (
    "line-passed", "line-filtered:too_long_word", "line-filtered:no_endmark", "line-filtered:too_short",
    "line-filtered:javascript", "line-filtered:policy")) + tuple((name, PAGES) for name in (
    PASSED, "filtered:loremipsum", "filtered:squigglybracket", "filtered:too_few_sentences"))


def clean_page(page: C4Page, count_line_sentences: Callable[[str], int]) -> Decision:
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
            dropped.append((reason, line))
            return Decision(None, tuple(counts.items()), tuple(dropped), CLEAN_PAGE_UNITS)
        else:
            counts[reason] += 1
            dropped.append((reason, line))
    if sentences < MIN_NUM_SENTENCES:
        counts["filtered:too_few_sentences"] += 1
        dropped.append(("filtered:too_few_sentences", page.text))
        return Decision(None, tuple(counts.items()), tuple(dropped), CLEAN_PAGE_UNITS)
    counts[PASSED] += 1
    return Decision(replace(page, text=LINE_DELIMITER.join(kept).strip()), tuple(counts.items()), tuple(dropped), CLEAN_PAGE_UNITS)


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
def detect_english(page: C4Page, detect_langs, detection_error: type[Exception]) -> Decision:
    """Keep iff langdetect's top prediction is ``en`` with probability >= 0.99.

    ``detect_langs(text) -> [(lang, prob), ...]`` is seeded langdetect or its exact fast
    equivalent (``corpus.langid``); ``detection_error`` is what it raises for text with
    no features (the reference counts that as ``langdetect_exception``).
    """
    try:
        predictions = detect_langs(page.text)
    except detection_error:
        return Decision.drop("filtered:langdetect_exception", page.text)
    if not predictions:
        return Decision.drop("filtered:no_predictions", page.text)
    lang, prob = predictions[0]
    if prob < MIN_ENGLISH_PROBABILITY:
        return Decision.drop("filtered:low_confidence", page.text)
    if lang != "en":
        ignored, per_language = "filtered:ignored_language", f"filtered:ignored_language-{lang}"  # the latter a tally by language
        return Decision(None, ((ignored, 1), (per_language, 1)), ((ignored, page.text),), ((ignored, PAGES), (per_language, OTHER)))
    return Decision.keep(page, PASSED)


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


def badwords_filter(page: C4Page, matcher: BadwordsMatcher) -> Decision:
    """Drop the page if its lower-cased text contains a listed word (whole-word match)."""
    if matcher.search(page.text.lower()):
        return Decision.drop(FILTERED, page.text)
    return Decision.keep(page, PASSED)


# --- 10. split ---------------------------------------------------------------------------
def split_of(normalized_url: str) -> str:
    """``validation`` for md5(normalised url) % 1000 == 0, else ``train``."""
    return "validation" if url_hash_int(normalized_url) % VALIDATION_MODULUS == 0 else "train"


def split_index(page: C4Page, num_splits: int = len(SPLITS)) -> int:
    """The page's split as an index into ``SPLITS`` (a ``beam.Partition`` function)."""
    return SPLITS.index(split_of(page.normalized_url))


def to_document(page: C4Page) -> Decision:
    """A page of the finished chain -> the ``Document`` its split's shards hold, counted as
    the reference counts written pages (``examples``, a tally in the split's namespace)."""
    return Decision.keep(Document(text=page.text, url=page.url, timestamp=page.timestamp), EXAMPLES, OTHER)


# --- The WET-line rule: the C4 reference's view of a WET body (the c4 text mode of corpus/warc.py)

# The C4 reference drops every WET line that starts with these (spec: c4.md, record parsing).
C4_DROPPED_LINE_PREFIXES = ("WARC", "CONTENT-", "Content-")


_C4_DROPPED_AFTER_NEWLINE = tuple("\n" + prefix for prefix in C4_DROPPED_LINE_PREFIXES)


def c4_wet_text(text: str) -> str:
    """The C4 reference's view of a WET body: stripped, non-empty lines, no WARC/Content lines."""
    # Strip and drop empty lines at C speed; only a text where a kept line starts with a
    # dropped prefix (rare: a line start, after the join, is the start or after "\n")
    # needs a pass in Python.
    joined = "\n".join(filter(None, map(str.strip, text.split("\n"))))
    if joined.startswith(C4_DROPPED_LINE_PREFIXES) or any(p in joined for p in _C4_DROPPED_AFTER_NEWLINE):
        return "\n".join([line for line in joined.split("\n") if not line.startswith(C4_DROPPED_LINE_PREFIXES)])
    return joined


# Where c4_wet_text would change a WET body, seen in its UTF-8 bytes: a line that starts
# or ends with whitespace (str.isspace: ASCII \t-\r, \x1c-\x1f, space; U+0085, U+00A0,
# U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), an empty line, or a line
# starting with a dropped prefix. Every hit is at a "\n", which the search skips to at C
# speed; valid UTF-8 cannot fake these sequences (a lead byte never ends a character).
_ASCII_SPACE = rb"\t\x0b\x0c\r\x1c-\x1f "


_ASCII_SPACE_BYTES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "


_WIDE_SPACE = rb"\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80"


_C4_LINE_EDGE = re.compile(
    rb"\n(?:[\n" + _ASCII_SPACE + rb"]|W(?=ARC)|C(?=ONTENT-|ontent-)|" + _WIDE_SPACE
    # a line ending in whitespace; a one-byte look back first screens most lines out
    + rb"|(?<=[" + _ASCII_SPACE + rb"\x80-\x8a\x9f\xa0\xa8\xa9\xaf]\n)(?:(?<=[" + _ASCII_SPACE + rb"]\n)|(?<=\xc2[\x85\xa0]\n)"
    + rb"|(?<=(?:\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80)\n)))"
)


def c4_text_of_block(block: bytes, text: str, valid_utf8: bool) -> str:
    """``c4_wet_text(text)`` for ``text`` decoded from ``block``, without splitting the
    text into lines when nothing inside it would change (the usual Common Crawl body).
    Whitespace around the whole text only makes lines that c4_wet_text strips or drops, so
    c4_wet_text(text) == c4_wet_text(text.strip()); the search covers the bytes left once
    ASCII whitespace is stripped from both ends (a superset of text.strip()'s)."""
    if valid_utf8:
        stripped = text.strip()
        if not stripped.startswith(C4_DROPPED_LINE_PREFIXES):
            start = len(block) - len(block.lstrip(_ASCII_SPACE_BYTES))
            end = len(block.rstrip(_ASCII_SPACE_BYTES))
            if _C4_LINE_EDGE.search(block, start, end) is None:
                return stripped
    return c4_wet_text(text)
