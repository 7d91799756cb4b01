"""C4 at scale: wall time, CPU time and peak memory of the complete ``corpusforge c4`` job.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/c4_scale.py \\
        [--pages 5000 20000 80000] [--runner direct|multiprocess|portable] [--repeat 1] [--keep]

Builds a Common Crawl-shaped WET set (cached, keyed by size and seed) from real prose:
the shared LAMBADA passages and WikiText-2 articles, split into sentences and recombined
(seeded) into pages of several lines on ~4,000 sites with Zipf-like popularity. Like a
real crawl, the set gives every C4 step work: ~5% of pages are re-crawls of an earlier
URL with another WARC-Date (URL dedup), each site repeats a footer sentence and ~25% of
pages quote one of 300 widely shared lines (line dedup), most pages carry menus,
headings and "Share this:" lines (the line filter), ~2% carry a listed bad word, and a
few are too short to keep. Files hold 1,500 pages: a warcinfo record, then one WARC/1.0
``conversion`` record per page, one gzip member per record, as Common Crawl writes them.
The sets are prefixes of each other (5k pages = the first pages of the 80k set).

For each size it runs the job as a user would, as a child process:

    python -m pipelines.cli c4 --input <dir> --output <tmp> --badwords <data>/badwords/en \\
        --num_shards 4 --num_validation_shards 1 [runner options]

and samples, every 50 ms, the RSS of the job, of every process below it and (portable)
of the worker pool and its workers (psutil if installed, else /proc; per-process peaks
also read the kernel's VmHWM). CPU seconds are the kernel's rusage of the job with its
reaped descendants (or the sampled per-process sum if larger), plus the sampled CPU of
the pool and its workers; the sampler itself costs ~5-10% of one core. The baseline of
the ratios is the smallest size of the same invocation: peak RSS growth against input
growth (sub-linear is the target; 80k pages under 0.8 GB on one worker, each portable
worker under 1 GB).

Runners:
  direct        Beam's default DirectRunner: FnApiRunner in the job process, one worker
  multiprocess  --direct_num_workers 2 --direct_running_mode multi_processing
  portable      PortableRunner with an EXTERNAL environment. When the checkout under
                test has pipelines/portable.py: its job server and worker pool, started
                here as separate processes, and --direct_num_workers 2 (two SDK worker
                processes). Otherwise (older checkouts): --job_endpoint embed and Beam's
                worker_pool_main (it starts each SDK worker as a subprocess running plain
                `python`, so this interpreter's folder is put first on PATH); Beam 2.77's
                embedded job service runs every job with one SDK worker. Both are
                stopped with SIGINT.

``--stages`` runs the job in a child process that logs, for every bundle the FnApiRunner
executes (it runs in the job process with all three runners), the stage, its seconds,
the RSS and high-water mark of the job and of the SDK workers after it, and what the
runner still buffers for later stages: where the memory goes.

The code measured is the checkout in ``--repo`` (default: the current directory if it
holds ``pipelines/cli.py``, else this script's checkout); the job runs there with
PYTHONPATH pointing at it, and the script prints where ``corpus`` was imported from.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from base64 import b32encode
from bisect import bisect
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.jobs import STATS_FILE  # noqa: E402  (the job's counters file in its output folder)

GENERATOR_VERSION = 1  # bump when the generated set changes; part of the cache key
PAGES_PER_FILE = 1500
SITES = 4000
RECRAWL_SHARE = 0.05  # pages that re-crawl an earlier URL at another WARC-Date
SCHEME_VARIANT_SHARE = 0.01  # pages at the http/https twin of an earlier URL
SHARED_LINE_SHARE = 0.25  # pages quoting one of the widely shared lines
SHARED_LINES = 300
FOOTER_SHARE = 0.8  # pages ending with their site's footer sentence
BADWORD_SHARE = 0.02  # pages given one sentence with a listed bad word
SHORT_PAGE_SHARE = 0.03  # pages with only 1-2 short lines of prose (C4 drops them)
RAGGED_LINE_SHARE = 0.03  # prose lines ending without an end mark (C4's line filter drops them)
END_MARKS = (".", "?", "!", '"')  # C4 keeps only lines ending with one of these
CRAWL = "CC-MAIN-2019-18"
FETCH_START = datetime(2019, 4, 18, tzinfo=UTC)
FETCH_SECONDS = 9 * 24 * 3600
WET_EXTRACTED = "2019-04-27T03:12:45Z"
SAMPLE_SECONDS = 0.05

NAV_WORDS = ("Home", "About", "About us", "Contact", "Contact us", "Blog", "News", "Shop", "Login", "Sign up",
             "Search", "Menu", "Categories", "Archives", "Events", "Services", "FAQ", "Careers", "Subscribe")
TRAILERS = ("Share this:", "Like this:", "Leave a comment", "Related", "Tags:", "Read more", "Print", "Email",
            "Facebook", "Twitter", "Pinterest", "Back to top", "Previous post", "Next post", "Comments (0)")
TLDS = (".com", ".com", ".com", ".com", ".org", ".net", ".co.uk", ".info", ".blog", ".io", ".us", ".ca", ".com.au")
SECTIONS = ("news", "blog", "stories", "articles", "culture", "life", "books", "history", "travel", "opinion")


# --- the WET set --------------------------------------------------------------------------
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"\u201d']))\s+(?=[\"\u201c]?[A-Z])")
_WORD = re.compile(r"\w+")


def detokenize_wikitext(line: str) -> str:
    """WikiText-2's tokenised text back to ordinary spacing (`` @-@ `` -> ``-``, `` , `` -> ``,``)."""
    line = line.strip().replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    line = re.sub(r" ([.,;:!?)\]]|'s\b|n't\b|'re\b|'ve\b|'ll\b|'d\b|'m\b)", r"\1", line)
    return re.sub(r"([(\[]) ", r"\1", line)


def load_prose(data: Path) -> tuple[list[str], list[str]]:
    """Sentences and whole paragraphs from LAMBADA (5,153 passages) and WikiText-2 test."""
    paragraphs = []
    with open(data / "lm_benchmarks" / "lambada" / "lambada_test.jsonl", encoding="utf-8") as f:
        for row in f:
            paragraphs.extend(p.strip() for p in json.loads(row)["text"].split("\n") if p.strip())
    with open(data / "lm_benchmarks" / "wikitext2_raw" / "wiki.test.raw", encoding="utf-8") as f:
        for row in f:
            if row.strip() and not row.lstrip().startswith("="):
                paragraphs.append(detokenize_wikitext(row))
    sentences = [s for p in paragraphs for s in _SENTENCE_END.split(p) if 4 <= len(s.split()) <= 60]
    return sentences, paragraphs


def load_badwords(path: Path) -> tuple[frozenset, list[str]]:
    words = [w.strip().lower() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()]
    return frozenset(w for w in words if _WORD.fullmatch(w)), [w for w in words if not _WORD.fullmatch(w)]


def has_badword(text: str, tokens: frozenset, phrases: list[str]) -> bool:
    lowered = text.lower()
    return not tokens.isdisjoint(_WORD.findall(lowered)) or any(p in lowered for p in phrases)


class CrawlMaker:
    """Seeded pages, sites and URLs; ``page(i)`` depends only on the seed and earlier pages."""

    def __init__(self, data: Path, seed: int):
        self.rng = random.Random(seed)
        self.seed = seed
        sentences, paragraphs = load_prose(data)
        tokens, phrases = load_badwords(data / "badwords" / "en")
        flagged = [has_badword(s, tokens, phrases) for s in sentences]
        ending = [s.endswith(END_MARKS) for s in sentences]
        self.clean = [s for s, bad, end in zip(sentences, flagged, ending, strict=True) if end and not bad]
        self.ragged = [s for s, bad, end in zip(sentences, flagged, ending, strict=True) if not end and not bad]  # no end mark
        self.dirty = [s for s, bad in zip(sentences, flagged, strict=True) if bad] or self.clean
        shareable = [p for p in paragraphs if 8 <= len(p.split()) <= 60 and p.endswith((".", "!", "?", '"'))
                     and not has_badword(p, tokens, phrases)]
        self.shared = self.rng.sample(shareable, SHARED_LINES)
        vocabulary = sorted({w.lower() for s in self.clean[:20000] for w in _WORD.findall(s) if w.isalpha() and 4 <= len(w) <= 9})
        self.vocabulary = vocabulary
        self.sites = [self._site(i) for i in range(SITES)]
        self.site_weights = list(accumulate(1.0 / (rank + 10) for rank in range(SITES)))  # Zipf-like popularity
        self.urls: list[str] = []
        self.texts: list[str] = []

    def _site(self, index: int) -> dict:
        rng = self.rng
        name = rng.choice(self.vocabulary) + rng.choice(("", "-", "")) + rng.choice(self.vocabulary)
        host = rng.choice(("www.", "www.", "", "blog.", "news.")) + name + rng.choice(TLDS)
        return {"host": host, "scheme": rng.choice(("http", "https", "https")), "style": rng.randrange(4),
                "nav": rng.sample(NAV_WORDS, rng.randint(3, 8)), "footer": rng.choice(self.clean),
                "title": name.replace("-", " ").title(), "index": index}

    def _url(self, site: dict, number: int, title_words: list[str]) -> str:
        rng, slug = self.rng, "-".join(w.lower() for w in title_words if w.isalnum())[:80] or f"page-{number}"
        base = f"{site['scheme']}://{site['host']}"
        style = site["style"]
        if style == 0:
            day = FETCH_START - timedelta(days=rng.randrange(3000))
            path = f"/{day.year}/{day.month:02d}/{slug}/"
        elif style == 1:
            path = f"/{rng.choice(SECTIONS)}/{slug}-{number}.html"
        elif style == 2:
            path = f"/?p={number}"
        else:
            path = f"/{rng.choice(SECTIONS)}/{number}/{slug}"
        if rng.random() < 0.03:
            path += ("&" if "?" in path else "?") + "utm_source=feed&utm_medium=rss"
        return base + path

    def _body(self, short: bool) -> list[str]:
        rng = self.rng
        count = rng.randint(1, 2) if short else min(3 + int(rng.expovariate(1 / 5)), 30)
        lines = []
        for _ in range(count):
            k = 1 if short else rng.choice((1, 2, 2, 3, 3, 4))
            line = " ".join(rng.choice(self.clean) for _ in range(k))
            if rng.random() < RAGGED_LINE_SHARE:
                line += " " + rng.choice(self.ragged)
            lines.append(line)
        return lines

    def page(self, number: int) -> tuple[str, str, str]:
        """(url, WARC-Date, text) of page ``number``; call in order 0, 1, 2, ..."""
        rng = self.rng
        date = (FETCH_START + timedelta(seconds=rng.randrange(FETCH_SECONDS))).strftime("%Y-%m-%dT%H:%M:%SZ")
        roll = rng.random()
        if self.urls and roll < RECRAWL_SHARE:  # the same URL fetched again: same or edited text
            earlier = rng.randrange(len(self.urls))
            url, text = self.urls[earlier], self.texts[earlier]
            if rng.random() < 0.5:
                lines = text.split("\n")
                lines[rng.randrange(len(lines))] = rng.choice(self.clean)
                text = "\n".join(lines)
        elif self.urls and roll < RECRAWL_SHARE + SCHEME_VARIANT_SHARE:  # http <-> https twin
            earlier = rng.randrange(len(self.urls))
            url, text = self.urls[earlier], self.texts[earlier]
            url = url.replace("https://", "http://", 1) if url.startswith("https://") else url.replace("http://", "https://", 1)
        else:
            site = self.sites[bisect(self.site_weights, rng.random() * self.site_weights[-1])]
            title_words = rng.choice(self.clean).split()[: rng.randint(3, 9)]
            title = " ".join(title_words).rstrip(".,;:!?\"'")
            url = self._url(site, number, title_words)
            lines = [f"{title} | {site['title']}"]
            if rng.random() < 0.7:  # navigation, one item a line or in one line
                lines.extend(site["nav"] if rng.random() < 0.5 else [" | ".join(site["nav"])])
            if rng.random() < 0.3:
                lines.append(f"Posted on {date[:10]} by {rng.choice(self.vocabulary).title()}")
            lines.append(title)
            body = self._body(rng.random() < SHORT_PAGE_SHARE)
            if rng.random() < BADWORD_SHARE:
                body.insert(rng.randrange(len(body) + 1), rng.choice(self.dirty))
            if rng.random() < SHARED_LINE_SHARE:
                body.insert(rng.randrange(len(body) + 1), rng.choice(self.shared))
            lines.extend(body)
            if rng.random() < FOOTER_SHARE:
                lines.append(site["footer"])
            lines.extend(rng.sample(TRAILERS, rng.randint(0, 4)))
            lines.append(f"\u00a9 2019 {site['title']}")
            text = "\n".join(lines)
        self.urls.append(url)
        self.texts.append(text)
        return url, date, text

    def record_id(self, *parts) -> str:
        digest = hashlib.sha256(repr((self.seed, GENERATOR_VERSION) + parts).encode()).digest()
        return f"<urn:uuid:{uuid.UUID(bytes=digest[:16], version=4)}>"


def wet_member(headers: list[tuple[str, str]], block: bytes) -> bytes:
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + f"Content-Length: {len(block)}\r\n\r\n"
    return gzip.compress(head.encode("utf-8") + block + b"\r\n\r\n", compresslevel=6, mtime=0)


def warcinfo_member(maker: CrawlMaker, name: str) -> bytes:
    fields = ("Software-Info: ia-web-commons.1.1.9-SNAPSHOT-20190418084023\r\n"
              "Extracted-Date: Sat, 27 Apr 2019 03:12:45 GMT\r\n"
              "robots: checked via crawler-commons 1.1-SNAPSHOT (https://github.com/crawler-commons/crawler-commons)\r\n"
              f"isPartOf: {CRAWL}\r\noperator: Common Crawl Admin (info@commoncrawl.org)\r\n"
              "description: Wide crawl of the web for April 2019\r\npublisher: Common Crawl\r\n")
    return wet_member([("WARC-Type", "warcinfo"), ("WARC-Date", WET_EXTRACTED), ("WARC-Filename", name),
                       ("WARC-Record-ID", maker.record_id(name, "warcinfo")), ("Content-Type", "application/warc-fields")],
                      fields.encode())


def conversion_member(maker: CrawlMaker, number: int, url: str, date: str, text: str, warcinfo_id: str) -> bytes:
    block = text.encode("utf-8")
    digest = "sha1:" + b32encode(hashlib.sha1(block).digest()).decode()
    return wet_member([("WARC-Type", "conversion"), ("WARC-Target-URI", url), ("WARC-Date", date),
                       ("WARC-Record-ID", maker.record_id(number, "conversion")),
                       ("WARC-Refers-To", maker.record_id(number, "response")), ("WARC-Block-Digest", digest),
                       ("WARC-Identified-Content-Language", "eng"), ("Content-Type", "text/plain"),
                       ("WARC-Warcinfo-ID", warcinfo_id)], block)


def wet_set_folder(cache: Path, pages: int, seed: int) -> Path:
    """Where ``build_wet_set`` keeps the set (its WET files are in ``wet/`` below it)."""
    return cache / f"c4scale-v{GENERATOR_VERSION}-seed{seed}-pages{pages}"


def build_wet_set(data: Path, cache: Path, pages: int, seed: int) -> dict:
    """The WET set of ``pages`` pages under ``cache`` (built once); returns its manifest."""
    folder = wet_set_folder(cache, pages, seed)
    cache.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        return json.loads(manifest_path.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    started = time.perf_counter()
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=cache))
    maker = CrawlMaker(data, seed)
    (staging / "wet").mkdir()
    files, raw_bytes = [], 0
    for first in range(0, pages, PAGES_PER_FILE):
        name = f"{CRAWL}-c4scale-{first // PAGES_PER_FILE:05d}.warc.wet.gz"
        warcinfo_id = maker.record_id(name, "warcinfo")
        with open(staging / "wet" / name, "wb") as out:
            out.write(warcinfo_member(maker, name))
            for number in range(first, min(first + PAGES_PER_FILE, pages)):
                url, date, text = maker.page(number)
                raw_bytes += len(text.encode("utf-8"))
                out.write(conversion_member(maker, number, url, date, text, warcinfo_id))
        files.append(name)
    wet_bytes = sum((staging / "wet" / f).stat().st_size for f in files)
    manifest = {"pages": pages, "seed": seed, "generator": GENERATOR_VERSION, "files": files, "wet_bytes": wet_bytes,
                "text_bytes": raw_bytes, "distinct_urls": len(set(maker.urls)), "build_seconds": round(time.perf_counter() - started, 1)}
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
    staging.rename(folder)
    return manifest


# --- measuring a process tree -------------------------------------------------------------
try:
    import psutil
except ImportError:  # /proc fallback below
    psutil = None

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (bytes) from /proc/<pid>/status; {} off Linux or once the process is gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return out


def _proc_children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    return children


def _children_map() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process (one scan of the process table)."""
    if psutil is None:
        return _proc_children()
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        if proc.info["ppid"] is not None:
            children.setdefault(proc.info["ppid"], []).append(proc.pid)
    return children


def _descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    children, out, todo = children if children is not None else _children_map(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _rss(pid: int) -> tuple[int, int]:
    """(RSS, kernel high-water mark) in bytes; (0, 0) once gone."""
    status = _proc_status(pid)
    if status:
        return status.get("VmRSS", 0), status.get("VmHWM", 0)
    if psutil is not None:
        try:
            return psutil.Process(pid).memory_info().rss, 0
        except psutil.NoSuchProcess:
            pass
    return 0, 0


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process itself so far (0 once gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        if psutil is not None:
            try:
                times = psutil.Process(pid).cpu_times()
                return times.user + times.system
            except psutil.Error:
                pass
    return 0.0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        if psutil is not None:
            try:
                return " ".join(psutil.Process(pid).cmdline())
            except psutil.Error:
                pass
    return ""


def role_of(cmdline: str) -> str:
    if cmdline.startswith(("/bin/sh ", "sh ")):
        return "shell"
    if "SdkHarness" in cmdline or "--corpusforge_pool_worker" in cmdline or "worker_boot.py" in cmdline:
        return "sdk worker (pool)"  # pipelines/worker_boot.py, then the sdk_worker_main it becomes
    if "sdk_worker_main" in cmdline:
        return "sdk worker (multi_processing)"
    if "worker_pool_main" in cmdline or "pipelines.portable worker-pool" in cmdline:
        return "worker pool"
    if "pipelines.portable job-server" in cmdline:
        return "job server (FnApiRunner)"
    if "pip freeze" in cmdline:
        return "pip freeze (Beam's stager)"
    if "pyspark.daemon" in cmdline:
        return "spark python daemon"
    if "pyspark.worker" in cmdline:
        return "spark python worker"
    if "org.apache.spark" in cmdline:
        return "spark JVM (driver + executors)"
    if "pipelines.cli" in cmdline:
        return "job (pipelines.cli c4)"
    return (cmdline.split() or ["?"])[0].rsplit("/", 1)[-1]


class TreeSampler(threading.Thread):
    """Every ``interval`` s: RSS of each root and all its descendants; per-process and summed peaks."""

    def __init__(self, roots: dict[str, int], interval: float = SAMPLE_SECONDS):
        super().__init__(daemon=True)
        self.roots, self.interval = roots, interval
        self.done = threading.Event()
        self.per_pid: dict[int, dict] = {}
        self.peak_sum = 0
        self.peak_sum_at = 0.0
        self.samples = 0
        self.started = time.perf_counter()

    def run(self):
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)
        self.sample()

    def sample(self):
        total, children = 0, _children_map()
        for root_label, root in self.roots.items():
            for pid in [root, *_descendants(root, children)]:
                rss, hwm = _rss(pid)
                if not rss and not hwm:
                    continue
                info = self.per_pid.get(pid)
                if info is None:
                    cmd = _cmdline(pid)
                    info = self.per_pid[pid] = {"pid": pid, "tree": root_label, "role": role_of(cmd), "cmd": cmd[:160],
                                                "peak": 0, "hwm": 0, "cpu": 0.0}
                info["cpu"] = max(info["cpu"], _cpu_seconds(pid))
                info["peak"] = max(info["peak"], rss)
                info["hwm"] = max(info["hwm"], hwm)
                total += rss
        self.samples += 1
        if total > self.peak_sum:
            self.peak_sum, self.peak_sum_at = total, time.perf_counter() - self.started

    def stop(self):
        self.done.set()
        self.join()


def wait_with_rusage(proc: subprocess.Popen, timeout: float | None = None) -> tuple[int, float, int]:
    """Reap ``proc``: (exit status, user+system CPU s of it and its reaped descendants, their max RSS bytes)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
        if pid:
            break
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


# --- the runs ---------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def job_env(repo: Path, data: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["NLTK_DATA"] = str(data / "nltk_data")
    # The worker pool starts each worker as plain `python`: make that this interpreter.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


JOB_SERVERS: dict[int, tuple[subprocess.Popen, int]] = {}  # pool pid -> (job server, its port)


def wait_for_port(process: subprocess.Popen, port: int, log_path: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("localhost", port)) == 0:
                return
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{what} did not open its port within 60 s")


def start_worker_pool(env: dict, repo: Path, log_path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    ours = (repo / "pipelines" / "portable.py").exists()
    command = ([sys.executable, "-m", "pipelines.portable", "worker-pool", "--port", str(port)] if ours
               else [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main", f"--service_port={port}"])
    pool = subprocess.Popen(command, cwd=repo, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    wait_for_port(pool, port, log_path, "worker pool")
    if ours:
        job_port, job_log = free_port(), log_path.with_name(log_path.name.replace("pool", "jobserver"))
        jobs = subprocess.Popen([sys.executable, "-m", "pipelines.portable", "job-server", "--port", str(job_port)],
                                cwd=repo, env=env, stdout=open(job_log, "wb"), stderr=subprocess.STDOUT)
        wait_for_port(jobs, job_port, job_log, "job server")
        JOB_SERVERS[pool.pid] = (jobs, job_port)
    return pool, port


def stop_worker_pool(pool: subprocess.Popen) -> tuple[float, int]:
    """SIGINT (the pool stops its server and, at exit, its workers), SIGKILL after 30 s."""
    if pool.pid in JOB_SERVERS:
        jobs, _ = JOB_SERVERS.pop(pool.pid)
        jobs.send_signal(signal.SIGINT)
        try:
            jobs.wait(timeout=30)
        except subprocess.TimeoutExpired:
            jobs.kill()
    if pool.poll() is None:
        pool.send_signal(signal.SIGINT)
    try:
        _, cpu, maxrss = wait_with_rusage(pool, timeout=30)
    except subprocess.TimeoutExpired:
        pool.kill()
        _, cpu, maxrss = wait_with_rusage(pool)
    return cpu, maxrss


def runner_args(runner: str, port: int | None, pool: subprocess.Popen | None = None) -> list[str]:
    if runner == "spark":  # the native Spark engine, not a Beam runner
        return ["--engine", "spark", "--spark_master", "local[2]"]
    if runner == "multiprocess":
        return ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    if runner == "portable" and pool is not None and pool.pid in JOB_SERVERS:
        return ["--runner", "PortableRunner", "--job_endpoint", f"localhost:{JOB_SERVERS[pool.pid][1]}",
                "--environment_type", "EXTERNAL", "--environment_config", f"localhost:{port}", "--direct_num_workers", "2"]
    if runner == "portable":
        return ["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "EXTERNAL",
                "--environment_config", f"localhost:{port}", "--sdk_worker_parallelism", "2"]
    return []


def run_job(args, wet_dir: Path, out_dir: Path, env: dict, repo: Path, logs: Path, label: str) -> dict:
    pool = port = None
    if args.runner == "portable":
        pool, port = start_worker_pool(env, repo, logs / f"{label}-pool.log")
    command = [sys.executable, "-m", "pipelines.cli", "c4", "--input", str(wet_dir), "--output", str(out_dir),
               "--badwords", str(args.data / "badwords" / "en"), "--num_shards", "4", "--num_validation_shards", "1",
               *runner_args(args.runner, port, pool)]
    log_path = logs / f"{label}-job.log"
    result = {"command": command}
    try:
        with open(log_path, "wb") as log:
            started = time.perf_counter()
            job = subprocess.Popen(command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
            roots = {"job": job.pid, **({"pool": pool.pid} if pool else {})}
            if pool is not None and pool.pid in JOB_SERVERS:
                roots["jobserver"] = JOB_SERVERS[pool.pid][0].pid
            sampler = TreeSampler(roots)
            sampler.start()
            status, cpu, job_maxrss = wait_with_rusage(job, timeout=args.timeout)
            wall = time.perf_counter() - started
            sampler.stop()
    except subprocess.TimeoutExpired:
        job.kill()
        wait_with_rusage(job)
        sampler.stop()
        status, wall, cpu, job_maxrss = "timeout", float(args.timeout), float("nan"), 0
    finally:
        if pool is not None:
            stop_worker_pool(pool)
    # CPU: the kernel's count for the job and the descendants it reaped, or the sampled sum over
    # its tree if larger; plus the sampled CPU of the pool and its workers (the runner never
    # stops an EXTERNAL worker: it exits on its own and the pool does not reap it).
    sampled = {tree: sum(p["cpu"] for p in sampler.per_pid.values() if p["tree"] == tree) for tree in ("job", "pool", "jobserver")}
    cpu = max(cpu, sampled["job"]) + sampled["pool"] + sampled["jobserver"]
    main = sampler.per_pid.get(job.pid, {"peak": 0, "hwm": 0})
    # the summed peak is sampled; it is at least the highest single process's exact peak
    single = max((max(p["peak"], p["hwm"]) for p in sampler.per_pid.values()), default=0)
    result.update(status=status, wall=wall, cpu=cpu, main_peak=max(main["peak"], main["hwm"], job_maxrss if args.runner == "direct" else 0),
                  tree_peak=max(sampler.peak_sum, single), tree_peak_at=sampler.peak_sum_at, samples=sampler.samples,
                  processes=sorted(sampler.per_pid.values(), key=lambda p: (p["tree"], p["pid"])), log=str(log_path))
    if status != 0:
        result["log_tail"] = log_path.read_text(errors="replace")[-3000:]
    stats_path = out_dir / STATS_FILE
    if stats_path.exists():
        counters = json.loads(stats_path.read_text())["counters"]
        result["kept"] = {split: counters.get(split, {}).get("examples", 0) for split in ("train", "validation")}
        result["counters"] = counters
    result["shards"] = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("c4-*")) if out_dir.exists() else []
    return result


def code_under_test(repo: Path, env: dict) -> str:
    probe = ("import corpus, pipelines, apache_beam, sys; "
             "print(corpus.__file__, pipelines.__file__, apache_beam.__version__, sys.version.split()[0], sep='\\n')")
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo, env=env, capture_output=True, text=True, check=True)
    corpus_file, pipelines_file, beam_version, python_version = done.stdout.split()
    for path in (corpus_file, pipelines_file):
        if not Path(path).resolve().is_relative_to(repo.resolve()):
            raise SystemExit(f"the job would import {path}, not the checkout under test {repo}")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    return f"corpus from {corpus_file} (git {head or '?'}{', with uncommitted changes' if dirty else ''}); python {python_version}, apache-beam {beam_version}"


def load_line(label: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {label}: {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} CPUs"


# --- where the memory goes (--stages) ----------------------------------------------------------
STAGE_PROBE = r'''
import itertools, json, os, pickle, sys, time
from apache_beam.runners.portability.fn_api_runner import fn_runner, execution

def rss():
    with open("/proc/self/status") as f:
        return {k: int(v.split()[0]) // 1024 for k, v in (l.split(":", 1) for l in f) if k in ("VmRSS", "VmHWM")}

def buffered(ctx):
    """Bytes and values the runner holds between stages (queued inputs), by buffer kind."""
    seen, out = set(), {"list_bytes": 0, "grouped_bytes": 0, "table_values": 0, "table_bytes_est": 0}
    queues = ctx.queues
    pending = list(queues.ready_inputs._q) + list(queues.watermark_pending_inputs._q) + list(queues.time_pending_inputs._q)
    for _, data_input in pending:
        for buf in list(data_input.data.values()):
            if id(buf) in seen:
                continue
            seen.add(id(buf))
            if isinstance(buf, execution.ListBuffer):
                out["list_bytes"] += sum(len(b) for b in buf._inputs)
            elif isinstance(buf, execution.GroupingBuffer):
                if buf._grouped_output:
                    out["grouped_bytes"] += sum(len(b) for part in buf._grouped_output for b in part)
                values = sum(len(v) for v in buf._table.values())
                out["table_values"] += values
                if values:  # decoded objects: estimate their size from the pickles of a sample
                    sample = [v for vs in itertools.islice(buf._table.values(), 64) for v in vs[:4]]
                    per_value = sum(len(pickle.dumps(v, protocol=5)) for v in sample) / len(sample)
                    out["table_bytes_est"] += int(per_value * values) + sum(len(k) for k in buf._table)
    return out

log = open(os.environ["C4SCALE_STAGE_LOG"], "w")
TRACE = os.environ.get("C4SCALE_TRACEMALLOC") == "1"
if TRACE:
    import tracemalloc
    tracemalloc.start(1)
most = [0]
original = fn_runner.FnApiRunner._execute_bundle
t0 = time.perf_counter()

def workers():
    """(RSS MB, VmHWM MB) summed over the SDK worker processes below this job and the pool."""
    try:
        import psutil
    except ImportError:
        return 0, 0
    roots = [os.getpid()] + [int(p) for p in os.environ.get("C4SCALE_POOL_PID", "").split() if p]
    rss = hwm = 0
    for root in roots:
        try:
            procs = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            continue
        for proc in procs:
            try:
                cmd = " ".join(proc.cmdline())
                if "sdk_worker_main" in cmd and not cmd.startswith("/bin/sh") or "SdkHarness" in cmd:
                    with open(f"/proc/{proc.pid}/status") as f:
                        status = {k: int(v.split()[0]) // 1024 for k, v in (l.split(":", 1) for l in f) if k in ("VmRSS", "VmHWM")}
                    rss += status.get("VmRSS", 0)
                    hwm += status.get("VmHWM", 0)
            except (psutil.Error, OSError):
                pass
    return rss, hwm

def traced(self, ctx, bundle_context_manager, bundle_input):
    start = time.perf_counter()
    result = original(self, ctx, bundle_context_manager, bundle_input)
    stage = bundle_context_manager.stage
    labels = list(dict.fromkeys(t.unique_name.split("/")[0] for t in stage.transforms if t.unique_name))
    row = {"stage": " + ".join(labels) or stage.name, "seconds": round(time.perf_counter() - start, 3),
           "t": round(time.perf_counter() - t0, 2), **rss(), **buffered(ctx)}
    row["workers_rss"], row["workers_hwm"] = workers()
    if TRACE:  # Python heap now and at its highest during this bundle; where it lives when it is highest
        current, peak = tracemalloc.get_traced_memory()
        row["py_current"], row["py_peak"] = current // 2**20, peak // 2**20
        tracemalloc.reset_peak()
        if current > most[0]:
            most[0] = current
            top = tracemalloc.take_snapshot().statistics("lineno")[:15]
            row["top"] = [f"{st.size / 2**20:8.1f} MB {st.count:>9,} blocks  {st.traceback[0].filename.rsplit('site-packages/', 1)[-1]}:{st.traceback[0].lineno}" for st in top]
    log.write(json.dumps(row) + "\n"); log.flush()
    return result

fn_runner.FnApiRunner._execute_bundle = traced
from pipelines.cli import main
sys.exit(main(sys.argv[1:]))
'''


def run_stage_probe(args, wet_dir: Path, out_dir: Path, env: dict, repo: Path, logs: Path, label: str) -> list[dict]:
    """The job with the FnApiRunner traced (it runs in the job process for every runner here)."""
    stage_log = logs / f"{label}-stages.jsonl"
    pool = port = None
    if args.runner == "portable":
        pool, port = start_worker_pool(env, repo, logs / f"{label}-pool.log")
    env = {**env, "C4SCALE_STAGE_LOG": str(stage_log), "C4SCALE_POOL_PID": str(pool.pid) if pool else "",
           "C4SCALE_TRACEMALLOC": "1" if args.tracemalloc else ""}
    command = [sys.executable, "-c", STAGE_PROBE, "c4", "--input", str(wet_dir), "--output", str(out_dir),
               "--badwords", str(args.data / "badwords" / "en"), "--num_shards", "4", "--num_validation_shards", "1",
               *runner_args(args.runner, port, pool)]
    try:
        with open(logs / f"{label}-job.log", "wb") as log:
            subprocess.run(command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=args.timeout)
    finally:
        if pool is not None:
            stop_worker_pool(pool)
    return [json.loads(line) for line in stage_log.read_text().splitlines()]


def print_stages(rows: list[dict]) -> None:
    print(f"\n{'stage (one FnApiRunner bundle each)':64} {'s':>6} {'job RSS':>7} {'job HWM':>7} {'wrk RSS':>7} {'wrk HWM':>7} "
          f"{'queued MB':>9} {'grouping values':>15}")
    for row in rows:
        queued = (row["list_bytes"] + row["grouped_bytes"] + row["table_bytes_est"]) / 1e6
        name = row["stage"] if len(row["stage"]) <= 64 else row["stage"][:61] + "..."
        print(f"{name:64} {row['seconds']:>6.1f} {row['VmRSS']:>7} {row['VmHWM']:>7} {row['workers_rss'] or '-':>7} "
              f"{row['workers_hwm'] or '-':>7} {queued:>9.1f} {row['table_values']:>15,}"
              + (f"  py heap {row['py_current']} MB, {row['py_peak']} MB at most in the bundle" if "py_peak" in row else ""))
    tops = [row for row in rows if "top" in row]
    if tops:
        print(f"\nPython heap (tracemalloc) when it was largest after a bundle, after '{tops[-1]['stage'][:60]}':")
        print("\n".join(tops[-1]["top"]))
    print("MB after each bundle: job = the process running the FnApiRunner (and, direct, the DoFns); wrk = SDK worker "
          "processes (portable, multiprocess); queued = what the runner holds for stages still to run (encoded bytes, "
          "plus decoded GroupByKey tables estimated from pickles of a sample).")


# --- main -------------------------------------------------------------------------------------
def default_repo() -> Path:
    here = Path.cwd()
    return here if (here / "pipelines" / "cli.py").exists() else REPO


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, nargs="+", default=[5000, 20000, 80000], help="input sizes in pages (default 5000 20000 80000)")
    parser.add_argument("--runner", choices=("direct", "multiprocess", "portable", "spark"), default="direct")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size: best wall and CPU, highest peaks (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("CORPUSFORGE_TEST_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "corpusforge-c4-scale", help="where generated WET sets are kept")
    parser.add_argument("--repo", type=Path, default=None, help="checkout whose code runs (default: cwd if it is one, else this script's)")
    parser.add_argument("--keep", action="store_true", help="keep the job outputs and logs (printed at the end)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is killed (default 1800)")
    parser.add_argument("--stages", action="store_true", help="log the job's and workers' RSS and the runner's buffers after every bundle")
    parser.add_argument("--tracemalloc", action="store_true", help="with --stages: also trace the job's Python heap (slow)")
    parser.add_argument("--json", type=Path, help="also write all results here")
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    repo = (args.repo or default_repo()).resolve()
    env = job_env(repo, args.data)
    args.cache.mkdir(parents=True, exist_ok=True)

    print(f"{platform.node()}: {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"memory sampler: {'psutil ' + psutil.__version__ if psutil else '/proc'} + /proc VmHWM, every {SAMPLE_SECONDS * 1000:.0f} ms")
    print(f"code under test: {code_under_test(repo, env)}")
    flags = runner_args(args.runner, 0)
    if args.runner == "portable" and (repo / "pipelines" / "portable.py").exists():
        flags = ["--runner", "PortableRunner", "--job_endpoint", "localhost:<job server port>", "--environment_type", "EXTERNAL",
                 "--environment_config", "localhost:<pool port>", "--direct_num_workers", "2",
                 "(python -m pipelines.portable job-server / worker-pool)"]
    print(f"runner: {args.runner} {' '.join(flags).replace('localhost:0', 'localhost:<port>')}".rstrip())
    print(load_line("before"))

    sets = {}
    for pages in sorted(set(args.pages)):
        manifest = build_wet_set(args.data, args.cache, pages, args.seed)
        folder = wet_set_folder(args.cache, pages, args.seed)
        sets[pages] = (manifest, folder / "wet")
        print(f"input {pages:>6,} pages: {len(manifest['files'])} WET files, {manifest['wet_bytes'] / 1e6:.1f} MB gzip, "
              f"{manifest['text_bytes'] / 1e6:.1f} MB text, {manifest['distinct_urls']:,} distinct URLs "
              f"({folder}{', built in {:.0f} s'.format(manifest['build_seconds'])})")

    work = Path(tempfile.mkdtemp(prefix="c4scale-runs-"))
    logs = work / "logs"
    logs.mkdir()
    results = {}
    try:
        for pages, (manifest, wet_dir) in sets.items():
            runs = []
            for attempt in range(args.repeat):
                label = f"{args.runner}-{pages}-{attempt}"
                out_dir = work / label
                if args.stages:
                    rows = run_stage_probe(args, wet_dir, out_dir, env, repo, logs, label)
                    print_stages(rows)
                    continue
                run = run_job(args, wet_dir, out_dir, env, repo, logs, label)
                runs.append(run)
                print(f"  {label}: exit {run['status']}, {run['wall']:.1f} s wall, {run['cpu']:.1f} s CPU, "
                      f"peak RSS main {run['main_peak'] / 1e6:.0f} MB, tree {run['tree_peak'] / 1e6:.0f} MB "
                      f"(at {run['tree_peak_at']:.0f} s), kept {run.get('kept')}, {len(run['shards'])} shard files; {load_line('now')}",
                      flush=True)
                if run["status"] != 0:
                    print(run.get("log_tail", ""))
                if not args.keep:
                    shutil.rmtree(out_dir, ignore_errors=True)
            if runs:
                best = min(runs, key=lambda r: r["wall"])
                results[pages] = {**best, "manifest": manifest, "wall": best["wall"], "cpu": min(r["cpu"] for r in runs),
                                  "main_peak": max(r["main_peak"] for r in runs), "tree_peak": max(r["tree_peak"] for r in runs)}
        if results:
            print_table(args.runner, results)
        print(load_line("after"))
        if args.json:
            args.json.write_text(json.dumps({"runner": args.runner, "results": results}, indent=1, default=str))
    finally:
        if args.keep:
            print(f"outputs and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["status"] == 0 for r in results.values()) else 1


def print_table(runner: str, results: dict) -> None:
    base_pages = min(results)
    base = results[base_pages]
    print(f"\nC4 job ({runner}), ratios against the {base_pages:,}-page run of this invocation")
    print(f"{'pages':>7} {'WET MB':>7} {'kept':>7} {'wall s':>7} {'CPU s':>7} {'pages/s':>8} {'main MB':>8} {'tree MB':>8} "
          f"{'workers MB':>11} {'input x':>8} {'RSS x':>6} {'MB/1k pages':>12}")
    previous = None
    for pages, r in results.items():
        marginal = f"{(r['tree_peak'] - previous[1]) / 1e6 / (pages - previous[0]) * 1000:>12.1f}" if previous else f"{'-':>12}"
        previous = (pages, r["tree_peak"])
        workers = [p for p in r["processes"] if p["role"].startswith("sdk worker")]
        worker_text = "/".join(f"{max(p['peak'], p['hwm']) / 1e6:.0f}" for p in workers) or "-"
        kept = sum(r.get("kept", {}).values())
        print(f"{pages:>7,} {r['manifest']['wet_bytes'] / 1e6:>7.1f} {kept:>7,} {r['wall']:>7.1f} {r['cpu']:>7.1f} "
              f"{pages / r['wall']:>8.1f} {r['main_peak'] / 1e6:>8.0f} {r['tree_peak'] / 1e6:>8.0f} {worker_text:>11} "
              f"{pages / base_pages:>7.1f}x {r['tree_peak'] / base['tree_peak']:>5.2f}x {marginal}")
    print("main MB: peak RSS of the job process (max of 50 ms samples and the kernel's VmHWM); tree MB: highest sampled sum "
          "over the job, its descendants and (portable) the worker pool and its workers; workers MB: each SDK worker "
          "process's peak. RSS x: tree peak over the baseline's; sub-linear means RSS x < input x; MB/1k pages: tree peak growth "
          "per 1,000 more pages since the previous size (constant = linear growth above a fixed base).")
    for pages, r in results.items():
        procs = ", ".join(f"{p['role']} pid {p['pid']} {max(p['peak'], p['hwm']) / 1e6:.0f} MB" for p in r["processes"])
        print(f"  {pages:,} pages, per process: {procs}")


if __name__ == "__main__":
    sys.exit(main())
