"""HTML -> main text with trafilatura, for C4 runs that start from WARC instead of WET.

``extract_main_text`` is the plain function: one HTML page in, its main text out, one
paragraph per line (C4's rules judge text line by line), ``""`` when nothing is found.
Lines are stripped and blank ones dropped; list items keep trafilatura's ``- `` marker.
Lone surrogates (replaced by U+FFFD) and C0 control characters (dropped) are cleaned
from the HTML first: libxml2 silently stops parsing at a lone surrogate.

``MainTextExtractor`` wraps it for a crawl, where a few pages in a million make lxml or
trafilatura run for minutes or crash. Each page gets a time limit and its own failure:
the outcome is ``extracted``, ``empty``, ``crashed`` or ``timed_out`` and the run goes on.

How the time limit works
------------------------
Extraction runs in one persistent child process per extractor. The parent sends
``(html, url)`` down a pipe and waits at most ``timeout_s`` for the answer (the clock
starts once the child has said it is ready, so start-up never eats a page's time). When the
time is up the child is killed (SIGKILL) and reaped, so it stops using CPU at once, and
a new child is started lazily for the next page. A page that raises inside the child is
reported as ``crashed``; a child that dies (segfault, OOM killer) is ``crashed`` too and is
replaced. Why not ``signal.setitimer``: SIGALRM is delivered to Python code only
between bytecodes, so a page stuck inside one long lxml call would not be stopped, and it
works only in the main thread, while Beam calls DoFns from worker threads. A child
process behaves the same in every thread and also survives crashes in C code.

Children start from multiprocessing's ``forkserver`` where the platform has it (Linux,
macOS): the server is a clean single-threaded process that has imported this module
(and so trafilatura) once, and each child is a cheap fork of it. Forking the caller
itself is avoided because Beam workers run gRPC threads, and forking a threaded
process can deadlock. Elsewhere (Windows) ``spawn`` is used. A restart after a timeout
costs a fork (about 15 ms here). Children are reaped on timeout and on ``close()``; they
are daemonic, and they exit by themselves when their pipe closes, so none outlive the
parent. As with any multiprocessing code, a script run as ``__main__`` is imported by
the fork server, so it must keep its work under ``if __name__ == "__main__":``.

Usage in Beam: build the extractor in ``DoFn.setup`` and ``close()`` it in
``DoFn.teardown`` (or use it as a context manager). It is picklable: the pickle holds
only the settings, and the child starts on first use in whichever process unpickles it.
Calls from several threads on one extractor are serialised by a lock. It cannot run
inside a daemonic ``multiprocessing`` worker (such processes may not have children).

Settings (decided by measurement on ``html_gold/trafilatura_eval_en``):
- ``include_comments=False``: reader comments are not the page's main text.
- ``include_tables=False``: trafilatura writes table rows as ``| a | b |`` lines, which never
  end in terminal punctuation, so C4's line rule drops them anyway; with tables on, a page
  laid out in one big table comes back as one long pipe-ended line and C4 loses all of it,
  while with tables off trafilatura's fallbacks still return its paragraphs as lines
  (not always all of them). Cost on the gold set: 6 of 261
  must-contain snippets live in data tables (240 found instead of 246).
- ``deduplicate=False``: trafilatura's duplicate cache is state shared across pages, which
  would make a page's text depend on which pages a worker saw before it.
- no formatting, links, images or metadata: plain text only.
"""

from __future__ import annotations

import multiprocessing
import re
import signal
import threading

try:
    import resource
except ImportError:  # pragma: no cover - Windows has no resource module; the child runs uncapped
    resource = None  # type: ignore[assignment]  # mypy cannot type a module that may be missing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trafilatura

if TYPE_CHECKING:  # corpus.records imports pyarrow, which the extraction child does not need
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

    from corpus.records import Document, HtmlPage

# Per-page wall-clock limit for extraction; trafilatura's own CLI uses 30 s, but a crawl
# page that needs more than 10 s is almost always pathological (giant or generated markup).
EXTRACTION_TIMEOUT_S = 10.0

EXTRACTOR_NAME = "trafilatura"  # the value of Document.meta["extractor"]

# Outcomes of one page.
EXTRACTED = "extracted"
EMPTY = "empty"
CRASHED = "crashed"
TIMED_OUT = "timed_out"
TOO_LARGE = "html_too_large"
OUTCOMES = (EXTRACTED, EMPTY, CRASHED, TIMED_OUT, TOO_LARGE)

# Extraction needs about 40 bytes of memory per character of HTML (lxml's tree, trafilatura's
# copies: a 45 MB page took the child to 1.77 GB), so a page is measured before it is sent:
# a longer one is ``html_too_large`` (trafilatura's own downloader stops at 20 MB; real
# article pages are under 2 MB).
MAX_EXTRACT_HTML_CHARS = 10 << 20
# The extraction child's data segment (heap and anonymous maps: what its RSS is made of),
# set with RLIMIT_DATA where the OS has it: past it, the page fails with MemoryError
# (``crashed``) and the next page gets a fresh child.
MAX_EXTRACTION_MEMORY_BYTES = 1 << 30

MAX_DETAIL_CHARS = 200
# How long a new child may take to say it is ready (the first one also starts the fork
# server, which imports trafilatura); not part of any page's time limit.
STARTUP_TIMEOUT_S = 60.0
_READY = "ready"

# Characters libxml2 cannot take: a lone surrogate stops its parser mid-page (the rest of
# the page is lost), and C0 controls other than tab/LF/CR are not allowed in XML text.
SURROGATES = re.compile("[\ud800-\udfff]")
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


# trafilatura settings (reasons in the module docstring): plain text of the main content only.
TRAFILATURA_OPTIONS = dict(
    output_format="txt",
    include_comments=False,
    include_tables=False,
    include_formatting=False,
    include_links=False,
    include_images=False,
    deduplicate=False,
    with_metadata=False,
)


def sanitize_markup(html: str) -> str:
    """HTML that libxml2 parses to the end: lone surrogates as U+FFFD, C0 controls dropped."""
    return _CONTROL_CHARS.sub("", SURROGATES.sub("\ufffd", html))


def extract_main_text(html: str, url: str | None = None, options: dict | None = None) -> str:
    """The main text of an HTML page, one paragraph per line; ``""`` when nothing is found.
    ``options`` are trafilatura's (default ``TRAFILATURA_OPTIONS``).

    Deterministic: the same page gives the same text whatever was extracted before it.
    """
    if not html or html.isspace():
        return ""
    html = sanitize_markup(html)
    text = trafilatura.extract(html, url=url, **(TRAFILATURA_OPTIONS if options is None else options))
    if not text:
        return ""
    lines = (line.strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class Extraction:
    """What happened to one page: its text (``""`` unless extracted), the outcome, why."""

    text: str
    outcome: str
    detail: str = ""


ExtractFn = Callable[[str, "str | None"], str]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MAX_DETAIL_CHARS]


def _limit_memory(max_bytes: int | None) -> None:
    """Cap this process's data segment at ``max_bytes`` (never above a lower cap already set)."""
    if not max_bytes or resource is None or not hasattr(resource, "RLIMIT_DATA"):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _serve(conn, extract_fn: ExtractFn, max_memory_bytes: int | None = None) -> None:
    """The child's loop: answer ``(html, url)`` requests until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    _limit_memory(max_memory_bytes)
    try:
        conn.send(_READY)
    except (OSError, ValueError):
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        html, url = request
        try:
            text = extract_fn(html, url)
            if not isinstance(text, str):
                raise TypeError(f"extraction returned {type(text).__name__}, not str")
            reply = (EXTRACTED if text else EMPTY, text, "")
        except Exception as exc:  # any failure of one page is that page's outcome
            reply = (CRASHED, "", _describe(exc))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _default_start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def _preload_in_forkserver(context) -> None:
    """Have the fork server import this module (and trafilatura) once, so children start warm.

    Only takes effect if the process's fork server is not running yet; keeps any modules
    someone else asked it to preload.
    """
    try:
        from multiprocessing import forkserver  # POSIX only: elsewhere there is no fork server to preload

        current = list(getattr(forkserver._forkserver, "_preload_modules", None) or ["__main__"])
    except (ImportError, AttributeError):
        current = ["__main__"]
    if __name__ not in current:
        context.set_forkserver_preload(current + [__name__])


class MainTextExtractor:
    """``extract_main_text`` with a per-page time limit and crash isolation (see module doc)."""

    def __init__(
        self,
        timeout_s: float = EXTRACTION_TIMEOUT_S,
        *,
        extract_fn: ExtractFn = extract_main_text,
        start_method: str | None = None,
        max_html_chars: int = MAX_EXTRACT_HTML_CHARS,
        max_memory_bytes: int | None = MAX_EXTRACTION_MEMORY_BYTES,
    ) -> None:
        """``extract_fn`` must be picklable (a module-level function) unless ``start_method`` is ``fork``.
        A page over ``max_html_chars`` is ``html_too_large`` without reaching the child; the
        child's data segment is capped at ``max_memory_bytes`` (None: no cap)."""
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s!r}")
        methods = multiprocessing.get_all_start_methods()
        if start_method is not None and start_method not in methods:
            raise ValueError(f"start_method must be one of {methods}, not {start_method!r}")
        self.timeout_s = float(timeout_s)
        self.extract_fn = extract_fn
        self.start_method = start_method or _default_start_method()
        self.max_html_chars, self.max_memory_bytes = int(max_html_chars), max_memory_bytes
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None

    # -- pickling: settings only; the child is started again where the copy is used --

    def __getstate__(self) -> dict:
        return {"timeout_s": self.timeout_s, "extract_fn": self.extract_fn, "start_method": self.start_method,
                "max_html_chars": self.max_html_chars, "max_memory_bytes": self.max_memory_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- lifetime --

    def __enter__(self) -> MainTextExtractor:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._stop_child(kill=True)
        except Exception:  # interpreter shutdown: multiprocessing may be half torn down
            pass

    def close(self) -> None:
        """Stop the child process; the extractor can still be used (a new child starts)."""
        with self._lock:
            self._stop_child(kill=False)

    @property
    def worker_pid(self) -> int | None:
        """The pid of the current child process, or None when none is running."""
        process = self._process
        return process.pid if process is not None else None

    def _start_child(self) -> None:
        if multiprocessing.current_process().daemon:
            raise RuntimeError(
                "MainTextExtractor needs a child process, which a daemonic multiprocessing worker may not have"
            )
        context = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":
            _preload_in_forkserver(context)
        parent_conn, child_conn = context.Pipe(duplex=True)
        process = context.Process(  # type: ignore[attr-defined]  # every real context has it; typeshed's BaseContext not
            target=_serve, args=(child_conn, self.extract_fn, self.max_memory_bytes), name="trafilatura-extractor", daemon=True
        )
        process.start()
        child_conn.close()  # the child holds its own copy; EOF now reaches us when it dies
        self._process, self._conn = process, parent_conn
        # wait for the child to be up, so that a page's time limit counts extraction only
        try:
            ready = parent_conn.poll(STARTUP_TIMEOUT_S) and parent_conn.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            code = self._stop_child(kill=True)
            raise RuntimeError(f"the extraction process did not start (exit code {code})")

    def _stop_child(self, kill: bool) -> int | None:
        """Stop and reap the child (kill it at once if ``kill``); returns its exit code."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            conn.close()  # an idle child reads EOF and exits
        if process is None:
            return None
        if not kill:
            process.join(timeout=2.0)
        if process.is_alive():
            process.kill()
        process.join()  # reaps it: no zombie is left behind
        code = process.exitcode
        process.close()
        return code

    # -- work --

    def extract(self, html: str, url: str | None = None) -> Extraction:
        """Extract one page within the time limit; never raises for anything about the page."""
        if len(html or "") > self.max_html_chars:
            return Extraction("", TOO_LARGE, f"{len(html):,} characters of HTML, over the {self.max_html_chars:,} limit")
        with self._lock:
            return self._extract_locked(html or "", url)

    def _extract_locked(self, html: str, url: str | None) -> Extraction:
        for attempt in (1, 2):
            if self._process is None:
                self._start_child()
            conn = self._conn
            assert conn is not None  # set together with self._process
            try:
                conn.send((html, url))
                break
            except (OSError, ValueError) as exc:
                # the child died while idle (e.g. the OOM killer): not this page's fault, so
                # start a new one and send the page again, once
                self._stop_child(kill=True)
                if attempt == 2:
                    return Extraction("", CRASHED, _describe(exc))
        assert conn is not None  # the loop either sent the page on conn or returned
        try:
            ready = conn.poll(self.timeout_s)
        except (OSError, EOFError):
            ready = True  # let recv report how the child ended
        if not ready:
            self._stop_child(kill=True)
            return Extraction("", TIMED_OUT, f"no result after {self.timeout_s:g} s; extraction process killed")
        try:
            outcome, text, detail = conn.recv()
        except (EOFError, OSError) as exc:
            code = self._stop_child(kill=True)
            return Extraction("", CRASHED, f"extraction process died (exit code {code}): {_describe(exc)}"[:MAX_DETAIL_CHARS])
        return Extraction(text, outcome, detail)


def extract_text_from_page(page: HtmlPage, extractor: MainTextExtractor, name_of=None) -> tuple[Document | None, Extraction]:
    """A WARC page as a ``Document`` of its main text, or None when nothing was extracted.

    ``meta["extractor"]`` is ``name_of(text)`` when given (for extract functions that
    choose between extractors), else trafilatura's name.
    """
    from corpus.records import Document  # pyarrow: never in the extraction child (see the TYPE_CHECKING note)

    result = extractor.extract(page.html, page.url)
    if result.outcome != EXTRACTED:
        return None, result
    meta = {
        "source": page.source,
        "offset": str(page.offset),
        "record_id": page.record_id,
        "extractor": name_of(result.text) if name_of else EXTRACTOR_NAME,
    }
    return Document(text=str(result.text), url=page.url, timestamp=page.timestamp, meta=meta), result
