"""The WebText Beam pipeline on the DirectRunner: the Common Crawl join (offline) and the
live fetch against a real HTTP server on 127.0.0.1, dedup, metadata, resume."""

from __future__ import annotations

import http.server
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from common import memfs, storage
from corpus.reddit import LinkFilter, read_link_table, select_links
from corpus.shards import find_shards, read_documents
from corpus.urls import url_key
from dedup import minhash
from pipelines.jobs import STATS_FILE
from pipelines.webtext import job as webtext_pipeline

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


def paragraphs(real_data: Path, count: int) -> list[str]:
    """Long English paragraphs of WikiText-2 (real text, used here as ordinary articles)."""
    text = (real_data / "lm_benchmarks" / "wikitext2_raw" / "wiki.test.raw").read_text(encoding="utf-8")
    found = [p.strip() for p in text.splitlines() if len(p.split()) > 120 and not p.strip().startswith("=")]
    return found[:count]


def article(title: str, body: list[str]) -> str:
    paras = "".join(f"<p>{p}</p>" for p in body)
    return f"<html><head><title>{title}</title></head><body><nav>Home | News | About</nav><article><h1>{title}</h1>{paras}</article><footer>Contact us</footer></body></html>"


def submission(id_: str, url: str, score: int, created: int = 1_500_000_000, subreddit: str = "news") -> str:
    return json.dumps({"id": id_, "url": url, "score": score, "created_utc": created, "subreddit": subreddit, "over_18": False,
                       "is_self": False, "domain": url.split("/")[2], "title": f"Post {id_}", "permalink": f"/r/{subreddit}/{id_}"})


@pytest.fixture(scope="module")
def site(real_data):
    """Pages with an exact copy, a near copy, a Wikipedia page and an ordinary page."""
    p = paragraphs(real_data, 8)
    near = [p[0].replace(p[0].split(". ")[0], "An entirely different opening sentence replaces the first one here", 1), p[1]]
    return {
        "/story-a": article("Story A", [p[0], p[1]]),
        "/copy-of-a": article("Story A", [p[0], p[1]]),
        "/near-a": article("Story A, revised", near),
        "/story-d": article("Story D", [p[2], p[3]]),
        "/story-e": article("Story E", [p[4], p[5]]),
        "/story-low": article("Story F", [p[6], p[7]]),
    }


def dump_lines(base: str, wiki_url: str) -> list[str]:
    return [
        submission("a1", f"{base}/story-a", 10, subreddit="news"),
        submission("a2", f"{base}/story-a/?utm_source=reddit", 5, subreddit="worldnews"),  # the same link
        submission("b1", f"{base}/copy-of-a", 7),
        submission("c1", f"{base}/near-a", 9),
        submission("d1", f"{base}/story-d", 4),
        submission("e1", wiki_url, 50),
        submission("f1", f"{base}/story-low", 1),  # under 3 karma
        submission("s1", "https://www.reddit.com/r/news/comments/s1/", 99),
        "{not json",
    ]


def write_warc(path: Path, pages: dict[str, str], timestamp: str = "2019-04-20T10:00:00Z") -> None:
    with open(path, "wb") as raw:
        writer = WARCWriter(raw, gzip=True)
        for url, html in pages.items():
            body = html.encode("utf-8")
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            record = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                               warc_headers_dict={"WARC-Date": timestamp})
            writer.write_record(record)


def output_docs(out: Path):
    """The Parquet shards' documents: in ``parquet/`` when the job wrote several formats, else at the top."""
    folder = out / "parquet" if (out / "parquet").is_dir() else out
    return sorted(read_documents(find_shards(str(folder / "webtext-train.*.parquet"))), key=lambda d: d.url)


def expected_survivors(urls: list[str]) -> set[str]:
    """Of each duplicate pair the smaller keep_key of its link's URL key survives."""
    return {min(urls, key=lambda u: minhash.keep_key(url_key(u)))}


def test_common_crawl_join_builds_deduplicated_webtext(real_data, site, tmp_path, caplog):
    base, wiki = "http://news.example.com", "https://en.m.wikipedia.org/wiki/Story_E"
    pages = {f"{base}{path}": html for path, html in site.items() if path != "/story-e"}
    pages[wiki] = site["/story-e"]
    pages["http://unlinked.example.org/other"] = site["/story-d"]  # captured, never submitted
    write_warc(tmp_path / "crawl-00000.warc.gz", pages)
    lines = dump_lines(base, wiki)
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")

    out = tmp_path / "out"
    with caplog.at_level(logging.INFO, logger="pipelines.progress"):
        stats = webtext_pipeline.run(["--submissions", str(dump), "--pages", "crawl", "--warc", str(tmp_path / "crawl-00000.warc.gz"),
                                      "--output", str(out), "--format", "parquet", "jsonl"])
    # The progress line says what it counts: dumps and their submission lines, crawl files, pages.
    # (a slow run also logs periodic lines, each ending in its elapsed "(N s)"; the final one does not)
    [final] = [m for m in (r.getMessage() for r in caplog.records if r.name == "pipelines.progress")
               if m.startswith("webtext: ") and not m.endswith(" s)")]
    assert final.startswith("webtext: 1/1 dumps, ") and f"{len(lines)} submissions read" in final
    assert "1 files" in final and "pages extracted" in final
    counters = stats["counters"]
    kept_links, link_counts = select_links(lines, LinkFilter())
    # The Beam link stage counts exactly what the in-memory reference of corpus/reddit.py counts.
    assert counters["webtext-submissions"]["passed"] == link_counts["kept_submissions"] == 7
    assert counters["webtext-submissions"]["malformed_json"] == 1 and counters["webtext-submissions"]["reddit_internal"] == 1
    assert counters["webtext-karma"] == {"passed": len(kept_links), "low_score": 1}
    assert counters["webtext-crawl-join"]["matched"] == 5
    assert counters["webtext-clean"]["wikipedia"] == 1
    assert counters["webtext-exact-dedup"]["filtered"] == 1
    assert counters["webtext-near-dedup"]["filtered"] == 1 and counters["webtext-near-dedup"]["verified_pairs"] >= 1

    docs = output_docs(out)
    first = expected_survivors([f"{base}/story-a", f"{base}/copy-of-a"]).pop()
    survivor = expected_survivors([first, f"{base}/near-a"]).pop()
    assert [d.url for d in docs] == sorted([survivor, f"{base}/story-d"])
    story = next(d for d in docs if d.url == survivor)
    if survivor == f"{base}/story-a":  # the merged link keeps both submissions' metadata
        assert story.meta["subreddits"] == "news,worldnews" and story.meta["score_max"] == "10" and story.meta["score_sum"] == "15"
    assert story.meta["extractor"] in ("trafilatura", "newspaper") and story.meta["crawled_at"] == "2019-04-20T10:00:00Z"
    assert "Home | News" not in story.text and len(story.text.split()) > 150

    table = read_link_table(str(out / "links" / "links-00000-of-00001.parquet"))
    assert [link.key for link in table] == [link.key for link in kept_links]
    written = json.loads((out / STATS_FILE).read_text())
    assert written["examples"]["webtext-karma"]["low_score"]
    # Every drop is sampled, the dedup stages' too: the losing copy's URL starts its example.
    [exact_loser] = written["examples"]["webtext-exact-dedup"]["filtered"]
    [near_loser] = written["examples"]["webtext-near-dedup"]["filtered"]
    assert {exact_loser.split()[0], near_loser.split()[0]} == {f"{base}/story-a", f"{base}/copy-of-a", f"{base}/near-a"} - {survivor}
    [wiki_example] = written["examples"]["webtext-clean"]["wikipedia"]
    assert wiki_example.startswith(f"{wiki} ")
    assert written["units"]["webtext-submissions"]["passed"] == "submissions" and written["units"]["webtext-near-dedup"]["verified_pairs"] == "other"

    # --span_dedup adds C4's 3-sentence span dedup after the MinHash stage.
    spans = webtext_pipeline.run(["--submissions", str(dump), "--pages", "crawl", "--warc", str(tmp_path / "crawl-00000.warc.gz"),
                                  "--output", str(tmp_path / "spans"), "--format", "parquet", "--span_dedup"])
    assert spans["counters"]["dedupe-spans"]["passed"] == 2
    assert [d.url for d in output_docs(tmp_path / "spans")] == [d.url for d in docs]


class _Handler(http.server.BaseHTTPRequestHandler):
    """A site on 127.0.0.1: ``answer(path) -> (status, body, content type)``; every path asked goes to ``hits``."""

    hits: list[str] = []

    def answer(self, path: str) -> tuple[int, bytes, str]:
        raise NotImplementedError

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).hits.append(self.path)
        status, body, ctype = self.answer(self.path)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Site(_Handler):
    pages: dict[str, str] = {}
    hits: list[str] = []

    def answer(self, path):
        if path == "/robots.txt":
            return 200, b"User-agent: *\nDisallow: /private\n", "text/plain"
        if path in self.pages:
            return 200, self.pages[path].encode("utf-8"), "text/html; charset=utf-8"
        return 404, b"not here", "text/plain"


@pytest.fixture()
def server(site):
    _Site.pages = dict(site, **{"/private/story": site["/story-d"]})
    _Site.hits = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_live_fetch_writes_warc_and_log_dedups_and_resumes(server, tmp_path):
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    lines = [line for line in dump_lines(base, "https://en.wikipedia.org/wiki/Story_E") if '"e1"' not in line] + [
        submission("p1", f"{base}/private/story", 30),  # robots.txt disallows it
        submission("m1", "http://169.254.169.254/latest/meta-data/", 30),  # cloud metadata: refused
        submission("x1", f"{base}/missing", 30),  # 404
    ]
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--submissions", str(dump), "--pages", "fetch", "--allow-hosts", f"127.0.0.1:{port}", "--per_host_delay", "0",
            "--fetch_shards", "2", "--output", str(out), "--format", "parquet"]
    stats = webtext_pipeline.run(argv)
    fetch = stats["counters"]["webtext-fetch"]
    # story-a (two submissions, one link), copy-of-a, near-a, story-d; story-low has 1 karma.
    assert fetch == {"ok": 4, "robots_disallowed": 1, "refused_address": 1, "http_error": 1}
    assert "/story-low" not in _Site.hits and "/private/story" not in _Site.hits
    assert _Site.hits.count("/robots.txt") == 1
    docs = output_docs(out)
    first = expected_survivors([f"{base}/story-a", f"{base}/copy-of-a"]).pop()
    assert [d.url for d in docs] == sorted(expected_survivors([first, f"{base}/near-a"]) | {f"{base}/story-d"})
    assert all(d.meta["fetched_at"].endswith("Z") and d.meta["subreddits"] for d in docs)
    warcs = sorted((out / "fetch").glob("shard-*/*.warc.gz"))
    logs = sorted((out / "fetch").glob("shard-*/fetch-log-*.jsonl"))
    assert warcs and logs
    logged = [json.loads(line) for path in logs for line in path.read_text().splitlines()]
    assert {row["outcome"] for row in logged} >= {"ok", "robots_disallowed", "refused_address", "http_error"}

    hits_before = len(_Site.hits)
    again = webtext_pipeline.run(argv)  # resume: nothing is fetched twice
    assert len(_Site.hits) == hits_before
    assert again["counters"]["webtext-fetch"] == stats["counters"]["webtext-fetch"]
    assert [(d.url, d.text) for d in output_docs(out)] == [(d.url, d.text) for d in docs]


def test_live_fetch_into_an_object_store_keeps_its_log_there_and_resumes(server, tmp_path):
    memfs.clear()
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text("\n".join(dump_lines(base, "https://en.wikipedia.org/wiki/Story_E")) + "\n", encoding="utf-8")
    common = ["--submissions", str(dump), "--pages", "fetch", "--allow-hosts", f"127.0.0.1:{port}", "--per_host_delay", "0",
              "--fetch_shards", "2", "--format", "parquet"]
    local = webtext_pipeline.run(common + ["--output", str(tmp_path / "local")])
    hits = len(_Site.hits)
    remote = webtext_pipeline.run(common + ["--output", "memory://webtext/out"])
    assert len(_Site.hits) > hits  # fetched again: the memory store started empty
    assert remote["counters"]["webtext-fetch"] == local["counters"]["webtext-fetch"]
    assert sorted((d.url, d.text) for d in read_documents("memory://webtext/out")) == [(d.url, d.text) for d in output_docs(tmp_path / "local")]
    fetched = storage.glob("memory://webtext/out/fetch/**")
    assert any(p.endswith(".warc.gz") for p in fetched) and any("fetch-log-" in p for p in fetched)
    assert not any(storage.basename(p).startswith(".") for p in fetched)  # no temporary left behind
    assert storage.read_success("memory://webtext/out")["job"] == "webtext"
    hits = len(_Site.hits)
    webtext_pipeline.run(common + ["--output", "memory://webtext/out"])  # resume from the log in the store
    assert len(_Site.hits) == hits
    memfs.clear()


class _SlowSite(_Handler):
    """Many small articles, each answered after 0.1 s; robots.txt answers 503 while ``down``.
    Past ``hold_after`` articles, answers wait for ``released``: a job cannot finish before
    the test has interrupted it, however slow the machine."""

    body = ""
    down = False
    hits: list[str] = []
    hold_after: int | None = None
    released = threading.Event()

    def answer(self, path):
        if path == "/robots.txt":
            return (503, b"busy", "text/plain") if type(self).down else (200, b"User-agent: *\n", "text/plain")
        site = type(self)
        arrived = [p for p in site.hits if p.startswith("/story-")].index(path) if path.startswith("/story-") else 0
        time.sleep(0.1)
        if site.hold_after is not None and arrived >= site.hold_after:
            site.released.wait(timeout=120)
        return 200, article(path, [type(self).body]).encode("utf-8"), "text/html; charset=utf-8"


@pytest.fixture()
def slow_server(real_data):
    _SlowSite.body, _SlowSite.down, _SlowSite.hits = paragraphs(real_data, 1)[0], False, []
    _SlowSite.hold_after, _SlowSite.released = None, threading.Event()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowSite)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _fetch_argv(dump, port, out):
    return ["--submissions", str(dump), "--pages", "fetch", "--allow-hosts", f"127.0.0.1:{port}", "--per_host_delay", "0",
            "--fetch_shards", "1", "--output", str(out), "--format", "jsonl"]


def test_ctrl_c_keeps_what_was_fetched_and_a_rerun_resumes(slow_server, tmp_path):
    # The case: Ctrl-C mid-shard wrote no fetch-log line and left a hidden .tmp WARC forever.
    port = slow_server.server_address[1]
    dump = tmp_path / "RS_2017-06.ndjson"
    # 30 links: more than the 14 the interrupt waits for (the server holds every answer past the 12th
    # until then, so the job cannot finish first), and each page the rerun fetches costs 0.1 s.
    links = 30
    dump.write_text("".join(submission(f"s{i}", f"http://127.0.0.1:{port}/story-{i}", 10) + "\n" for i in range(links)), encoding="utf-8")
    out = tmp_path / "out"
    shard = out / "fetch" / "shard-00000"
    shard.mkdir(parents=True)
    (shard / ".webtext-old.warc.gz.tmp-999999-0badc0de").write_bytes(b"left by a killed run")  # no such process
    _SlowSite.hold_after = 12
    # A process started in the background by a non-interactive shell (`cmd &`, `nohup`) ignores
    # Ctrl-C, and a child inherits that: the job is started with Ctrl-C heard, as in a terminal.
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        job = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "webtext", *_fetch_argv(dump, port, out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    deadline = time.monotonic() + 120
    while sum(p.startswith("/story-") for p in _SlowSite.hits) < 14 and time.monotonic() < deadline:  # 12 answered, 2 held
        time.sleep(0.05)
    job.send_signal(signal.SIGINT)
    _SlowSite.hold_after = None
    _SlowSite.released.set()
    _, stderr = job.communicate(timeout=120)
    assert job.returncode == 130, stderr
    assert "interrupted: no output was committed" in stderr and "Traceback" not in stderr
    names = os.listdir(shard)
    assert not [n for n in names if n.startswith(".")]  # the killed run's temporary and this run's are gone
    logged = [json.loads(line) for path in shard.glob("fetch-log-*.jsonl") for line in path.read_text().splitlines()]
    assert len(logged) >= 5 and {e["outcome"] for e in logged} == {"ok"}  # pages still in flight are not logged
    fetched_before = sum(p.startswith("/story-") for p in _SlowSite.hits)

    stats = webtext_pipeline.run(_fetch_argv(dump, port, out))
    assert stats["counters"]["webtext-fetch"] == {"ok": links}
    refetched = sum(p.startswith("/story-") for p in _SlowSite.hits) - fetched_before
    assert refetched == links - len(logged)  # what the interrupted run logged is not fetched again
    assert len({d.url for d in read_documents(str(out / "webtext-train.00000-of-00001.jsonl"))}) >= 1


def test_a_rerun_retries_transient_failures_only(slow_server, tmp_path):
    # The case: with the server down, robots.txt was unreachable and the link was logged
    # as robots_disallowed, never retried. Now it is robots_unreachable, retried on the next run.
    port = slow_server.server_address[1]
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text("".join(submission(f"s{i}", f"http://127.0.0.1:{port}/story-{i}", 10) + "\n" for i in range(3)), encoding="utf-8")
    _SlowSite.down = True
    first = webtext_pipeline.run(_fetch_argv(dump, port, tmp_path / "out"))
    assert first["counters"]["webtext-fetch"] == {"robots_unreachable": 3}
    _SlowSite.down = False
    second = webtext_pipeline.run(_fetch_argv(dump, port, tmp_path / "out"))
    assert second["counters"]["webtext-fetch"] == {"ok": 3}  # (an ok page is never fetched twice: the resume tests)


@pytest.mark.parametrize("extractor, whose", [("trafilatura", {"extractor:trafilatura": 1})])
def test_extractor_option_chooses_whose_text_a_page_gets(real_data, tmp_path, extractor, whose):
    """The real example.com capture: trafilatura finds 28 words (under the 50-word floor)."""
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text(submission("x1", "http://example.com/", 12) + "\n", encoding="utf-8")
    stats = webtext_pipeline.run(["--submissions", str(dump), "--pages", "crawl", "--warc", str(real_data / "warc/warcio/example.warc.gz"),
                                  "--output", str(tmp_path / "out"), "--format", "parquet", "--extractor", extractor])
    counters = stats["counters"]
    assert counters["webtext-crawl-join"]["matched"] == 1
    assert {k: v for k, v in counters["webtext-extract"].items() if k.startswith("extractor:")} == whose
    assert counters["webtext-clean"]["too_short"] == 1  # 28 or 30 words: under 50 either way


def test_the_retired_combined_extractor_is_refused_in_one_line_before_work(tmp_path):
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text(submission("x1", "http://example.com/", 12) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "webtext", "--submissions", str(dump), "--output", str(out),
                           "--extractor", "combined"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and not out.exists()
    assert "combined' was retired" in done.stderr and "docs/webtext.md" in done.stderr
