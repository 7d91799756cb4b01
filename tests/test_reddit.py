"""WebText's link stage: URL normal form, dump reading, submission rules, merged links."""

from __future__ import annotations

import bz2
import datetime as dt
import gzip
import itertools
import json
import lzma
import os
import zlib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from common.decision import LINKS, SUBMISSIONS, Decision
from corpus import reddit
from corpus.inputs import SUBMISSION_DUMPS, InputError, expand_inputs
from corpus.reddit import (
    DEFAULT_DOMAIN_BLOCKLIST_PATH,
    DEFAULT_EXTENSION_BLOCKLIST_PATH,
    LINK_PROBLEMS,
    LINK_SCHEMA,
    PARSE_PROBLEMS,
    SUBMISSION_PROBLEMS,
    DumpReadError,
    Link,
    LinkFilter,
    LinkTableWriter,
    Submission,
    TooLongLine,
    _zstd_pieces,
    decode_lines,
    filter_submission,
    iter_dump_chunks,
    iter_dump_lines,
    link_problem,
    load_blocklist,
    merge_link,
    merge_submissions,
    parse_submission,
    read_link_table,
    select_links,
    submission_problem,
    write_link_table,
)
from corpus.urls import canonical_host, canonical_url, url_key
from samplecrawl.crawl import pushshift_zst

REAL_SUBMISSIONS = Path("reddit") / "pushshift_importer" / "test_submissions.json"


def utc(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=dt.UTC).timestamp())


def sub(url: str = "https://example.com/a", score: int = 5, created: int = utc(2016, 5, 1), **fields) -> Submission:
    return Submission(id=fields.pop("id", "abc"), url=url, score=score, created_utc=created,
                      subreddit=fields.pop("subreddit", "news"), **fields)


def record(**fields) -> str:
    base = {"id": "x1", "url": "https://example.com/a", "score": 5, "created_utc": utc(2016, 5, 1),
            "subreddit": "news", "over_18": False, "is_self": False, "domain": "example.com",
            "permalink": "/r/news/comments/x1/a/", "title": "A", "num_comments": 2}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}, ensure_ascii=False)


# --- canonical_url / url_key --------------------------------------------------------------

# Each row: spellings of one page that canonical_url writes as the same fetchable URL.
CANONICAL = [
    ("http://example.com/a/b", ["HTTP://EXAMPLE.COM/a/b", "http://Example.Com/a/b", "http://example.com/a/b/",
                                "http://example.com/a/b//", "http://example.com:80/a/b", "http://example.com./a/b",
                                "http://example.com/a/b#section-2", "http://example.com/a/b?",
                                "http://example.com/a/./b", "http://example.com/a/c/../b", "  http://example.com/a/b  ",
                                "http://example.com/a/b?utm_source=twitter&utm_medium=social",
                                "http://example.com/a/b?fbclid=IwAR0x&gclid=1&mc_cid=2&mc_eid=3&igshid=4",
                                "http://example.com/a/b?ref=hn&ref_src=twsrc&share=1&UTM_Campaign=x",
                                "http://example.com/%61/%62"]),
    ("https://example.com/", ["https://example.com", "https://example.com:443/", "https://EXAMPLE.com/#top",
                              "https://example.com/?utm_source=rss", "https://example.com//"]),
    ("https://example.com/x?a=1&b=2", ["https://example.com/x?b=2&a=1", "https://example.com/x?a=1&&b=2",
                                       "https://example.com/x?utm_source=a&b=2&a=1#frag",
                                       "https://example.com/x/?b=2&fbclid=z&a=1"]),
    ("https://example.com/~user/caf%C3%A9", ["https://example.com/%7Euser/caf%c3%a9", "https://example.com/~user/café",
                                              "https://example.com/%7euser/caf%C3%A9/"]),
    ("https://example.com/a%20b?q=a%20b", ["https://example.com/a b?q=a+b", "https://example.com/a%20b?q=a%20b",
                                           "https://example.com/a%20b/?q=a b"]),
    ("https://example.com/%2F%3F?k=%26%3D", ["https://example.com/%2f%3f?k=%26%3d"]),
    ("https://xn--bcher-kva.de/", ["https://Bücher.de", "https://BÜCHER.DE/", "https://xn--bcher-kva.de"]),
    ("http://example.com:8080/", ["http://example.com:8080", "HTTP://EXAMPLE.COM:8080/"]),
    ("http://[2001:db8::1]/", ["http://[2001:DB8:0:0:0:0:0:1]/", "http://[2001:db8::1]:80"]),
    ("https://twitter.com/#!/user/status/1", ["https://twitter.com/#!/user/status/1", "https://Twitter.com#!/user/status/1"]),
    ("https://example.com/p?a=%25zz", ["https://example.com/p?a=%zz"]),
]


@pytest.mark.parametrize("expected, spellings", CANONICAL)
def test_canonical_url_merges_every_spelling_of_a_page(expected, spellings):
    assert {canonical_url(spelling) for spelling in spellings} == {expected}
    assert canonical_url(expected) == expected  # idempotent


def test_url_key_also_merges_scheme_and_www():
    spellings = ["http://www.example.com/a/b/", "https://example.com/a/b", "HTTPS://WWW.EXAMPLE.COM:443/a/b#c",
                 "http://example.com/a/b?utm_campaign=x", "https://www.example.com/a/b/?ref=rss"]
    assert {url_key(spelling) for spelling in spellings} == {"example.com/a/b"}
    # canonical_url keeps what a fetcher needs: the scheme and the www. label.
    assert {canonical_url(spelling) for spelling in spellings} == {
        "http://www.example.com/a/b", "https://example.com/a/b", "https://www.example.com/a/b", "http://example.com/a/b"}
    assert url_key("https://www.com/x") == "www.com/x"  # "www" is the domain here, not a label to drop
    assert url_key("https://www2.example.com/x") == "www2.example.com/x"
    assert url_key("ftp://example.com/x") is None


# Pairs of different pages that must keep different keys.
DIFFERENT = [
    ("https://example.com/a", "https://example.com/A"),  # paths are case-sensitive
    ("https://example.com/a?id=1", "https://example.com/a?id=2"),
    ("https://example.com/a?id=1", "https://example.com/a"),  # a kept parameter counts
    ("https://example.com/a%2Fb", "https://example.com/a/b"),  # an escaped slash is not a slash
    ("https://example.com/a?x=1&x=2", "https://example.com/a?x=2&x=1"),  # a repeated name keeps its order
    ("https://example.com/a+b", "https://example.com/a%20b"),  # + is a plus in a path
    ("https://en.wikipedia.org/wiki/X", "https://en.m.wikipedia.org/wiki/X"),
    ("https://example.com/", "https://example.com:8443/"),
    ("https://twitter.com/#!/a", "https://twitter.com/#!/b"),
    ("https://example.com/page", "https://example.org/page"),
    ("https://blog.example.com/x", "https://example.com/x"),
    ("https://example.com/a?q", "https://example.com/a?q="),
]


@pytest.mark.parametrize("first, second", DIFFERENT)
def test_different_pages_keep_different_keys(first, second):
    assert url_key(first) is not None and url_key(second) is not None
    assert url_key(first) != url_key(second)


@pytest.mark.parametrize("url", [
    "", "   ", "ftp://example.com/file", "mailto:someone@example.com", "javascript:alert(1)",
    "/r/news/comments/abc/", "example.com/page", "//example.com/page", "http://", "http:///path",
    "http://localhost/", "http://intranet/page", "http://user:pass@example.com/", "http://example.com@evil.net/",
    "http://example.com:99999/", "http://example.com:port/", "http://exa mple.com/", "http://exa%6Dple.com/",
    "http://example..com/", "http://-" + "a" * 64 + ".com/", "http://[::1/", "http://01.02.03.004/",
    "http://example.com/a\nb", "http://example.com/\x00", "http://😀.com/", None, 42,
])
def test_canonical_url_rejects_what_is_no_web_link(url):
    assert canonical_url(url) is None


def test_canonical_host_rules():
    assert canonical_host("WWW.Example.COM.") == "www.example.com"
    assert canonical_host("пример.рф") == "xn--e1afmkfd.xn--p1ai"
    assert canonical_host("ｅｘａｍｐｌｅ.com") == "example.com"  # full-width letters map (UTS 46)
    assert canonical_host("[::FFFF:1.2.3.4]") == "[::ffff:102:304]"
    assert canonical_host("1.2.3.4") == "1.2.3.4"
    assert canonical_host("under_score.example.com") == "under_score.example.com"
    assert canonical_host("localhost") is None


# --- reading dumps ------------------------------------------------------------------------

# Lines full of 2-, 3- and 4-byte UTF-8 characters, and a raw U+2028 that must not split a line.
UNICODE_LINES = [
    record(id=f"u{i}", title=f"{i}: naïve café ☕ 日本語のタイトル 😀🚂 Größe – \u2028 Ende {'é' * i}")
    for i in range(40)
]


def _chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_decode_lines_rejoins_characters_split_between_chunks():
    data = "".join(line + "\n" for line in UNICODE_LINES).encode("utf-8")
    for size in (1, 2, 3, 5, 7, 64, 1001):
        chunks = _chunked(data, size)
        if size > 1:  # the test does split characters: some chunk starts with a continuation byte
            assert any(chunk[0] & 0xC0 == 0x80 for chunk in chunks[1:]), size
        assert list(decode_lines(chunks)) == UNICODE_LINES, size
    # Every single cut point of the first three lines.
    head = "".join(line + "\n" for line in UNICODE_LINES[:3]).encode("utf-8")
    for cut in range(len(head) + 1):
        assert list(decode_lines([head[:cut], head[cut:]])) == UNICODE_LINES[:3], cut


def test_zst_chunk_boundaries_lose_and_corrupt_nothing(tmp_path):
    data = "".join(line + "\n" for line in UNICODE_LINES).encode("utf-8")
    path = tmp_path / "RS_unicode.zst"
    path.write_bytes(pushshift_zst(data))
    for chunk_size in (1, 3, 7, 64, 4096, 1 << 20):
        assert list(iter_dump_lines(path, chunk_size=chunk_size)) == UNICODE_LINES, chunk_size
    pieces = list(iter_dump_chunks(path, chunk_size=7))
    assert b"".join(pieces) == data and {len(piece) for piece in pieces[:-1]} == {7}
    assert any(piece[0] & 0xC0 == 0x80 for piece in pieces[1:])  # decompressed pieces split characters
    assert all(isinstance(parse_submission(line), Submission) for line in iter_dump_lines(path, chunk_size=3))


def test_zst_reads_every_frame_and_reports_a_truncated_file(tmp_path, monkeypatch):
    first, second = UNICODE_LINES[:10], UNICODE_LINES[10:]
    frames = [zstandard.ZstdCompressor().compress("".join(line + "\n" for line in part).encode("utf-8"))
              for part in (first, second)]
    multi = tmp_path / "multi.zst"
    multi.write_bytes(frames[0] + frames[1])
    for read_bytes in (1 << 20, 5):  # the frame boundary inside one read, or between reads
        monkeypatch.setattr(reddit, "ZSTD_READ_BYTES", read_bytes)
        assert list(iter_dump_lines(multi, chunk_size=5)) == UNICODE_LINES
    monkeypatch.undo()

    # zstandard's stream reader ends quietly at the end of a cut file; the dump reader must not.
    cut = tmp_path / "cut.zst"
    cut.write_bytes(frames[0] + frames[1][: len(frames[1]) // 2])
    read = []
    with pytest.raises(DumpReadError, match="inside a zstd frame"):
        for line in iter_dump_lines(cut, chunk_size=64):
            read.append(line)
    assert read[:10] == first  # everything before the damage comes through
    assert len(read) <= len(UNICODE_LINES)


@pytest.mark.parametrize("suffix, compress", [
    (".bz2", bz2.compress), (".xz", lzma.compress), (".gz", lambda data: gzip.compress(data, mtime=0)),
    (".ndjson", lambda data: data), (".json", lambda data: data), (".jsonl", lambda data: data), ("", lambda data: data),
])
def test_dump_formats_round_trip(tmp_path, suffix, compress):
    data = "".join(line + "\n" for line in UNICODE_LINES).encode("utf-8")
    path = tmp_path / f"RS_2017-12{suffix}"
    path.write_bytes(compress(data))
    for chunk_size in (5, 1 << 20):
        assert list(iter_dump_lines(path, chunk_size=chunk_size)) == UNICODE_LINES


def test_multistream_bz2_and_truncated_bz2(tmp_path):
    half = len(UNICODE_LINES) // 2
    parts = ["".join(line + "\n" for line in part).encode("utf-8") for part in (UNICODE_LINES[:half], UNICODE_LINES[half:])]
    path = tmp_path / "RS_2011-01.bz2"
    path.write_bytes(bz2.compress(parts[0]) + bz2.compress(parts[1]))
    assert list(iter_dump_lines(path)) == UNICODE_LINES
    whole = bz2.compress(parts[0] + parts[1])
    path.write_bytes(whole[: len(whole) - 20])
    with pytest.raises(DumpReadError):
        list(iter_dump_lines(path))


def test_plain_dump_line_ends(tmp_path):
    path = tmp_path / "RS_plain"
    path.write_bytes("\ufeff{\"a\": 1}\r\n\n{\"b\": \"\u2028\"}\r\n{\"c\": 3}".encode("utf-8"))
    assert list(iter_dump_lines(path, chunk_size=2)) == ['{"a": 1}', "", '{"b": "\u2028"}', '{"c": 3}']
    path.write_bytes(b"")
    assert list(iter_dump_lines(path)) == []
    path.write_bytes(b'{"a": 1}\n\xff\xfe{"b": 2}\n')  # invalid UTF-8 is replaced, not fatal
    assert list(iter_dump_lines(path)) == ['{"a": 1}', '\ufffd\ufffd{"b": 2}']


# --- parsing ------------------------------------------------------------------------------

def test_parse_submission_reads_every_created_utc_spelling():
    for value in (1409529600, 1409529600.0, "1409529600", "1409529600.0", 1409529600.9, " 1409529600 "):
        parsed = parse_submission(record(created_utc=value))
        assert isinstance(parsed, Submission) and parsed.created_utc == 1409529600, value
    for value in ("yesterday", "", None, True, [], {}, float("nan")):
        assert parse_submission(record(created_utc=value)) == "bad_created_utc", value
    assert parse_submission(record(created_utc=...)) == "bad_created_utc"  # absent


def test_parse_submission_problems_and_defaults():
    assert PARSE_PROBLEMS == ("line_too_long", "malformed_json", "json_too_deep", "not_an_object", "missing_url", "bad_created_utc", "bad_score")
    assert parse_submission('{"url": "https://a.com/", "created_utc": 1') == "malformed_json"
    assert parse_submission("") == "malformed_json"
    assert parse_submission("[1, 2]") == "not_an_object"
    assert parse_submission('"just a string"') == "not_an_object"
    for url in (..., None, "", "  ", 17):
        assert parse_submission(record(url=url)) == "missing_url", url
    for score in ("many", 2.5, True, [3]):
        assert parse_submission(record(score=score)) == "bad_score", score
    for score, expected in ((7, 7), (7.0, 7), ("7", 7), (-3, -3), (None, 0), (..., 0)):
        assert parse_submission(record(score=score)).score == expected, score

    bare = parse_submission(json.dumps({"url": "http://www.Example.com/x?a=1&amp;b=2", "created_utc": "1500000000"}))
    assert bare == Submission(id="", url="http://www.Example.com/x?a=1&b=2", score=0, created_utc=1500000000,
                              subreddit="", over_18=False, is_self=False, domain="example.com", permalink="",
                              title="", num_comments=0)
    # is_self absent: a "self.<subreddit>" domain says it is a self post.
    assert parse_submission(record(is_self=..., domain="self.AskReddit")).is_self is True
    assert parse_submission(record(is_self=..., domain="example.com")).is_self is False
    assert parse_submission(record(over_18=None)).over_18 is False
    # Reddit's HTML escapes in titles are undone; a lone surrogate becomes U+FFFD.
    assert parse_submission(record(title="Q&amp;A &lt;3")).title == "Q&A <3"
    assert parse_submission('{"url": "https://a.com/", "created_utc": 1, "title": "x\\ud83d"}').title == "x\ufffd"
    assert parse_submission(record(num_comments="12")).num_comments == 12


def test_malformed_lines_are_counted_not_fatal():
    lines = [record(id="a1", score=5), "{broken", "[]", record(url=None), record(created_utc="soon"),
             record(score="lots"), "", record(id="a2", url="https://example.com/b", score=1)]
    links, counts = select_links(lines, LinkFilter())
    assert counts == Counter(lines=8, malformed_json=2, not_an_object=1, missing_url=1, bad_created_utc=1, bad_score=1,
                             kept_submissions=2, links=2, low_score=1, kept_links=1)
    assert [link.ids for link in links] == [("a1",)]


# --- the filter ---------------------------------------------------------------------------

def test_submission_problems_come_in_their_documented_order():
    assert SUBMISSION_PROBLEMS == ("self_post", "bad_url", "reddit_internal", "over_18", "blocked_subreddit",
                                   "before_range", "after_range", "blocked_domain", "blocked_extension")
    assert LINK_PROBLEMS == ("low_score",)
    filt = LinkFilter(since="2015-01-01", until="2017-12-31", subreddit_blocklist=frozenset({"gonewild"}))
    # A self post that is also everything else; fix one problem at a time, in order.
    broken = sub(url="https://www.reddit.com/r/x/comments/1/", is_self=True, over_18=True, subreddit="GoneWild",
                 created=utc(2014, 6, 1))
    fixes = [
        {"is_self": False, "url": "not a url"},
        {"url": "https://i.redd.it/abc.jpg"},
        {"url": "https://i.imgur.com/abc.jpg"},
        {"over_18": False},
        {"subreddit": "pics"},
        {"created_utc": utc(2018, 6, 1)},
        {"created_utc": utc(2016, 6, 1)},
        {"url": "https://example.com/abc.jpg"},
        {"url": "https://example.com/abc.html"},
    ]
    seen = []
    for fix in fixes:
        seen.append(submission_problem(broken, filt))
        broken = replace(broken, **fix)
    assert seen == list(SUBMISSION_PROBLEMS)
    assert submission_problem(broken, filt) is None


def test_reddit_internal_hosts():
    filt = LinkFilter()
    for url in ("https://www.reddit.com/r/CASA", "https://old.reddit.com/r/x/comments/1/", "https://redd.it/abc",
                "https://i.redd.it/x.jpeg", "https://v.redd.it/74ah6jubbvec1", "https://preview.redd.it/x.png?w=1",
                "https://i.redditmedia.com/x.jpg", "https://i.reddituploads.com/abc"):
        assert submission_problem(sub(url=url), filt) == "reddit_internal", url
    assert submission_problem(sub(url="https://notreddit.com/r/x"), filt) is None
    assert submission_problem(sub(url="https://www.redditinc.com/blog/post"), filt) is None


def test_default_blocklists_block_media_not_text_sites():
    filt = LinkFilter()
    assert filt.domain_blocklist == LinkFilter.from_files().domain_blocklist
    blocked = ["https://imgur.com/a/xyz", "https://i.imgur.com/x.gifv", "https://m.imgur.com/x", "https://youtu.be/abc",
               "https://www.youtube.com/watch?v=abc", "https://gfycat.com/x", "https://media.giphy.com/x",
               "https://vimeo.com/1", "https://www.twitch.tv/x", "https://streamable.com/x",
               "https://www.instagram.com/p/x/", "https://www.tiktok.com/@x/video/1", "https://www.flickr.com/photos/x",
               "https://soundcloud.com/x", "https://open.spotify.com/track/x", "https://drive.google.com/file/d/x"]
    for url in blocked:
        assert submission_problem(sub(url=url), filt) == "blocked_domain", url
    text_sites = ["https://github.com/openai/gpt-2", "https://www.google.com/search?q=x", "https://www.ebay.com/itm/1",
                  "https://www.nytimes.com/2017/01/01/x.html", "https://www.bbc.co.uk/news/x", "https://www.bbc.com/news/x",
                  "https://en.wikipedia.org/wiki/X", "https://notimgur.com/x", "https://imgur.com.example.net/x",
                  "https://docs.google.com/document/d/x"]
    for url in text_sites:
        assert submission_problem(sub(url=url), filt) is None, url


def test_extension_blocklist_matches_the_path_case_insensitively():
    filt = LinkFilter()
    for url in ("https://example.com/a.JPG", "https://example.com/report.pdf?download=1", "https://example.com/a.tar.gz",
                "https://example.com/font.woff2", "https://example.com/setup.exe", "https://example.com/disk.iso",
                "https://example.com/slides.PPTX#p2", "https://example.com/clip.mp4/"):
        assert submission_problem(sub(url=url), filt) == "blocked_extension", url
    for url in ("https://example.com/download.php?file=a.pdf", "https://example.com/story.html", "https://example.com/a.php",
                "https://example.com/pdf", "https://example.com/v1.2/notes", "https://example.com/.gif",
                "https://example.com/readme.txt", "https://example.com/0,1284,67982,00.html?tw=x"):
        assert submission_problem(sub(url=url), filt) is None, url


def test_blocklist_files_and_entry_normalisation(tmp_path):
    domains = tmp_path / "domains.txt"
    domains.write_text("# media hosts\n\nWWW.Example-Media.com  # trailing comment\n*.clips.example.org\n.Bücher.de\n")
    extensions = tmp_path / "ext.txt"
    extensions.write_text("# files\n.PDF\nmp4\n")
    subreddits = tmp_path / "subs.txt"
    subreddits.write_text("r/GoneWild\n/r/NSFW/\nspam\n")
    assert load_blocklist(domains) == {"WWW.Example-Media.com", "*.clips.example.org", ".Bücher.de"}
    filt = LinkFilter.from_files(domains, extensions, subreddits, min_score=5, until="2017-12-31")
    assert filt.domain_blocklist == {"example-media.com", "clips.example.org", "xn--bcher-kva.de"}
    assert filt.extension_blocklist == {"pdf", "mp4"}
    assert filt.subreddit_blocklist == {"gonewild", "nsfw", "spam"}
    assert (filt.min_score, filt.until) == (5, dt.date(2017, 12, 31))
    assert submission_problem(sub(url="https://cdn.example-media.com/x"), filt) == "blocked_domain"
    assert submission_problem(sub(url="https://xn--bcher-kva.de/x"), filt) == "blocked_domain"
    assert submission_problem(sub(subreddit="nsfw"), filt) == "blocked_subreddit"
    assert submission_problem(sub(url="https://example.com/x.jpg"), filt) is None  # not in this list
    empty = LinkFilter.from_files(None, None)
    assert (empty.domain_blocklist, empty.extension_blocklist) == (frozenset(), frozenset())
    with pytest.raises(ValueError, match="not a host name"):
        LinkFilter(domain_blocklist=frozenset({"bad host"}))
    with pytest.raises(ValueError):
        LinkFilter(score_mode="mean")
    with pytest.raises(ValueError):
        LinkFilter(since="2018-01-01", until="2017-12-31")


def test_default_blocklist_files_are_found_and_commented():
    for path in (DEFAULT_DOMAIN_BLOCKLIST_PATH, DEFAULT_EXTENSION_BLOCKLIST_PATH):
        assert path.is_file() and path.read_text(encoding="utf-8").startswith("# WebText link stage")  # package resources
    domains = LinkFilter().domain_blocklist
    assert {"imgur.com", "youtube.com", "youtu.be", "gfycat.com", "giphy.com"} <= domains
    assert not {"github.com", "google.com", "ebay.com", "nytimes.com", "wikipedia.org", "reddit.com"} & domains
    assert {"jpg", "png", "gif", "mp4", "zip", "exe", "pdf", "doc", "ppt", "xls", "ttf", "iso"} <= LinkFilter().extension_blocklist
    assert not {"html", "htm", "php", "asp", "shtml", "txt"} & LinkFilter().extension_blocklist


def test_date_range_is_inclusive_of_whole_utc_days():
    filt = LinkFilter(since=dt.date(2015, 1, 1), until="2017-12-31")
    assert filt.window == (utc(2015, 1, 1), utc(2018, 1, 1))
    cases = {
        utc(2014, 12, 31, 23, 59, 59): "before_range",
        utc(2015, 1, 1): None,
        utc(2017, 12, 31): None,
        utc(2017, 12, 31, 23, 59, 59): None,
        utc(2018, 1, 1): "after_range",
    }
    for created, expected in cases.items():
        assert submission_problem(sub(created=created), filt) == expected, created
    # A float or string created_utc inside the last second is still 2017-12-31.
    last = parse_submission(record(created_utc=str(utc(2017, 12, 31, 23, 59, 59) + 0.5)))
    assert submission_problem(last, filt) is None
    one_day = LinkFilter(since="2017-12-31", until="2017-12-31")
    assert [submission_problem(sub(created=c), one_day) for c in cases] == [
        "before_range", "before_range", None, None, "after_range"]
    assert LinkFilter().window == (None, None)


# --- merging ------------------------------------------------------------------------------

def repeated_page() -> list[Submission]:
    return [
        sub("http://www.example.com/story/?utm_source=twitter", score=1, created=utc(2016, 3, 2), id="b2",
            subreddit="news", title="Second"),
        sub("https://example.com/story", score=1, created=utc(2016, 3, 1), id="a1", subreddit="worldnews",
            title="First"),
        sub("https://example.com/story#comments", score=2, created=utc(2016, 3, 5), id="c3", subreddit="news",
            title="Third"),
        sub("http://example.com/story/", score=0, created=utc(2016, 4, 1), id="d4", subreddit="bestof", title="Late"),
    ]


def test_merge_submissions_is_order_independent():
    subs = repeated_page()
    links = {merge_submissions(order) for order in itertools.permutations(subs)}
    assert len(links) == 1
    (link,) = links
    assert link == Link(
        url="https://example.com/story", key="example.com/story", domain="example.com",
        submission_urls=("http://example.com/story/", "http://www.example.com/story/?utm_source=twitter",
                         "https://example.com/story", "https://example.com/story#comments"),
        subreddits=("bestof", "news", "worldnews"), ids=("a1", "b2", "c3", "d4"), max_score=2, sum_score=4,
        first_created_utc=utc(2016, 3, 1), title="First", num_submissions=4)


def test_merge_counts_a_submission_read_twice_once():
    subs = repeated_page()
    again = replace(subs[2], score=7)  # the same post, captured later with more karma
    for order in itertools.permutations([*subs, again]):
        link = merge_submissions(order)
        assert (link.num_submissions, link.max_score, link.sum_score) == (4, 7, 9)


def test_merge_picks_the_https_spelling_then_the_most_submitted():
    http_only = [sub("http://www.example.com/x", id="1"), sub("http://example.com/x/", id="2"),
                 sub("http://example.com/x", id="3")]
    assert merge_submissions(http_only).url == "http://example.com/x"
    assert merge_submissions(http_only).domain == "example.com"
    with_www = [sub("https://www.example.com/x", id="1"), sub("https://www.example.com/x", id="2"),
                sub("http://example.com/x", id="3")]
    assert merge_submissions(with_www).url == "https://www.example.com/x"
    assert merge_submissions(with_www).domain == "example.com"
    with pytest.raises(ValueError):
        merge_submissions([])
    with pytest.raises(ValueError):
        merge_submissions([sub("https://a.com/x"), sub("https://b.com/x", id="z")])
    with pytest.raises(ValueError):
        merge_submissions([sub("not a url")])


def test_max_and_sum_score_modes():
    link = merge_submissions(repeated_page())  # scores 1, 1, 2, 0
    assert link_problem(link, LinkFilter()) == "low_score"  # max 2 < 3: the paper's per-link karma
    assert link_problem(link, LinkFilter(score_mode="sum")) is None  # sum 4 >= 3: OpenWebText2's rule
    assert link_problem(link, LinkFilter(score_mode="sum", min_score=5)) == "low_score"
    assert link_problem(link, LinkFilter(min_score=2)) is None  # the threshold itself passes
    lines = [record(id=s.id, url=s.url, score=s.score, created_utc=s.created_utc) for s in repeated_page()]
    kept_max, counts_max = select_links(lines, LinkFilter())
    kept_sum, counts_sum = select_links(lines, LinkFilter(score_mode="sum"))
    assert (kept_max, counts_max["low_score"]) == ([], 1)
    assert [link.sum_score for link in kept_sum] == [4] and counts_sum["kept_links"] == 1


# --- the link table -----------------------------------------------------------------------

def test_link_table_round_trip_sorted_by_key(tmp_path):
    links = [
        merge_submissions([sub("https://zeta.example.com/p", id="z1", title="Zeta ☕ \ud83d")]),
        merge_submissions(repeated_page()),
        merge_submissions([sub("https://alpha.example.com/", id="a9", subreddit="")]),
    ]
    path = tmp_path / "links.parquet"
    assert write_link_table(links, path) == str(path)
    assert sorted(os.listdir(tmp_path)) == ["links.parquet"]  # no temporary left behind
    back = read_link_table(path)
    assert [link.key for link in back] == ["alpha.example.com/", "example.com/story", "zeta.example.com/p"]
    assert back[1] == links[1] and back[0] == links[2]
    assert back[2].title == "Zeta ☕ \ufffd"  # Parquet holds UTF-8: a lone surrogate is stored as U+FFFD
    parquet = pq.ParquetFile(path)
    assert parquet.schema_arrow == LINK_SCHEMA
    assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
    write_link_table([], tmp_path / "empty.parquet")
    assert read_link_table(tmp_path / "empty.parquet") == []



def test_link_table_is_streamed_in_row_groups_with_the_rows_of_one_table(tmp_path):
    links = [merge_submissions([sub(f"https://site{n % 7}.example.com/story/{n}", id=f"s{n}", score=n)]) for n in range(23)]
    links.sort(key=lambda link: (link.key, link.url))
    path = tmp_path / "streamed.parquet"
    writer = LinkTableWriter(path, row_group_rows=5)
    for link in links[:12]:
        writer.add(link)
    assert not path.exists()  # two row groups written so far, under a temporary name
    for link in links[12:]:
        writer.add(link)
    assert writer.commit() == str(path)
    assert sorted(os.listdir(tmp_path)) == ["streamed.parquet"]
    parquet = pq.ParquetFile(path)
    assert [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)] == [5, 5, 5, 5, 3]
    assert parquet.schema_arrow == LINK_SCHEMA
    assert read_link_table(path) == links  # the rows, in order, of the one-row-group table
    one_group = tmp_path / "one.parquet"
    write_link_table(links, one_group)
    assert pq.ParquetFile(one_group).metadata.num_row_groups == 1
    assert pq.read_table(path).equals(pq.read_table(one_group))


def test_a_link_table_of_one_row_group_has_the_bytes_of_the_whole_table_written_at_once(tmp_path):
    links = [merge_submissions([sub(f"https://news{n}.example.org/a", id=f"n{n}")]) for n in range(6)]
    for rows in (6, 50):  # exactly one full row group, and one partial
        writer = LinkTableWriter(tmp_path / f"streamed-{rows}.parquet", row_group_rows=rows)
        for link in links:
            writer.add(link)
        writer.commit()
        table = pa.Table.from_pylist([reddit._link_row(link) for link in links], schema=LINK_SCHEMA)
        pq.write_table(table, tmp_path / f"whole-{rows}.parquet", compression="zstd")
        assert (tmp_path / f"streamed-{rows}.parquet").read_bytes() == (tmp_path / f"whole-{rows}.parquet").read_bytes()


def test_a_discarded_link_table_leaves_nothing(tmp_path):
    writer = LinkTableWriter(tmp_path / "links.parquet", row_group_rows=2)
    for n in range(5):
        writer.add(merge_submissions([sub(f"https://x.example/{n}", id=f"x{n}")]))
    writer.discard()
    assert os.listdir(tmp_path) == []


# --- real Pushshift lines -----------------------------------------------------------------

# The 31 lines of Pushshift-Importer's test_submissions.json, line by line (0-based):
#  0, 3, 5, 6, 9, 22, 25-30  is_self true                          -> self_post (12)
#  1 v.redd.it, 2 and 4 i.redd.it, 7 a reddit.com thread (a crosspost), 24 www.reddit.com/r/CASA
#                                                                   -> reddit_internal (5)
#     (2, 4 and 7 are also over_18; reddit_internal comes first)
#  8  redgifs.com, over_18 (also a blocked gif host; over_18 comes first) -> over_18 (1)
#  10-14 (June 2005, the first reddit posts), 15-19 (May 2007), 20, 21, 23 (Sept 2014):
#     13 outbound links, all distinct pages -> 13 links. Karma: 10: 183, 11: 8, 12: 26, 14: 10
#     reach 3; 13: 2, 15: 0, 16: 0, 17: 1, 18: 1, 19: 0, 20: 1, 21: 2, 23: 1 do not -> low_score (9).
#  Nothing is created after 2017 except self posts (25-30, 0, 3, 5, 6, 9), reddit media
#  (1, 2, 4, 7) and line 8, so a 2017-12-31 cut-off changes no count: every later line
#  already has an earlier reason.
REAL_DEFAULT = Counter(lines=31, self_post=12, reddit_internal=5, over_18=1, kept_submissions=13, links=13,
                       low_score=9, kept_links=4)
REAL_KEPT_URLS = [
    "http://www.downingstreetmemo.com/",
    "http://online.wsj.com/public/article/0,,SB111948406207267049-_s5eff_5SbJW3B_RdxwYLvU3s6c_20050723,00.html?mod=blogs",
    "http://www.paulgraham.com/nerds.html",
    "http://www.wired.com/news/culture/0,1284,67982,00.html?tw=wn_tophead_4",
]


def real_lines(real_data: Path) -> list[str]:
    return list(iter_dump_lines(real_data / REAL_SUBMISSIONS))


def test_real_submissions_parse(real_data):
    lines = real_lines(real_data)
    parsed = [parse_submission(line) for line in lines]
    assert len(parsed) == 31 and all(isinstance(p, Submission) for p in parsed)
    # created_utc is a float in lines 0-9 (2024), an int in 10-19 and 25-30, a string in 20-24.
    assert parsed[0].created_utc == 1706745600 and parsed[20].created_utc == 1409529600
    assert parsed[10] == Submission(id="87", url="http://www.downingstreetmemo.com", score=183, created_utc=1119552233,
                                    subreddit="reddit.com", over_18=False, is_self=False, domain="downingstreetmemo.com",
                                    permalink="/r/reddit.com/comments/87/the_downing_street_memo/",
                                    title="The Downing Street Memo", num_comments=390)
    # Line 15: the 2007 dump HTML-escaped '&' in the URL and the title.
    assert parsed[15].url == "http://www.nola.com/hurricane/t-p/index.ssf?/base/news-3/118042089721740.xml&coll=1&thispage=23"
    assert parsed[15].title == "NUMBERS & WEB SITES"
    # Line 20: an upper-case host.
    assert canonical_url(parsed[20].url) == "http://madelined.cbfeed.com/brandnew99/cbfeed/09011401/jewish-recipes.php"


def test_real_submissions_default_filter(real_data):
    links, counts = select_links(real_lines(real_data), LinkFilter())
    assert counts == REAL_DEFAULT
    assert [link.url for link in links] == sorted(REAL_KEPT_URLS, key=url_key)
    assert sorted(link.max_score for link in links) == [8, 10, 26, 183]


def test_real_submissions_webtext_cutoff(real_data):
    lines = real_lines(real_data)
    # --until 2017-12-31 (the preliminary release): the same counts, see the table above.
    assert select_links(lines, LinkFilter(until="2017-12-31"))[1] == REAL_DEFAULT
    # Summing scores changes nothing here either: every page was submitted once.
    assert select_links(lines, LinkFilter(score_mode="sum"))[1] == REAL_DEFAULT
    # Without the over_18 rule line 8 (2024) meets the date window next, then the gif-host list.
    assert select_links(lines, LinkFilter(until="2017-12-31", drop_over_18=False))[1] == REAL_DEFAULT - Counter(
        over_18=1) + Counter(after_range=1)
    assert select_links(lines, LinkFilter(drop_over_18=False))[1] == REAL_DEFAULT - Counter(over_18=1) + Counter(
        blocked_domain=1)
    # --since 2010-01-01: the ten 2005 and 2007 links (10-19) go; the three 2014 ones stay, all under 3 karma.
    assert select_links(lines, LinkFilter(since="2010-01-01"))[1] == Counter(
        lines=31, self_post=12, reddit_internal=5, over_18=1, before_range=10, kept_submissions=3, links=3,
        low_score=3)


# --- the bundled sample dump --------------------------------------------------------------

def expected_problem(entry: dict, until_2017: bool) -> str | None:
    """What submission_problem should say for a dump line, from its truth.json tags."""
    kinds = entry["kinds"]
    if entry["malformed"]:
        return "malformed_json"
    if "self" in kinds:
        # Without is_self (and domain) a self post is known only by its reddit.com URL.
        return "reddit_internal" if "is_self" in entry["missing"] else "self_post"
    host = urlsplit(entry["url"]).hostname
    if "media_file" in kinds and host.endswith("redd.it"):
        return "reddit_internal"
    if "over_18" in kinds:
        return "over_18"
    if until_2017 and "after_2017" in kinds:
        return "after_range"
    if "media_host" in kinds or ("media_file" in kinds and host.endswith("imgur.com")):
        return "blocked_domain"
    if "media_file" in kinds:  # .pdf, .zip, .png files
        return "blocked_extension"
    return None


def page_identity(entry: dict, pages: list[dict]) -> tuple:
    """The page a line links to, a URL variant or re-crawl counted as its original."""
    if entry["links_to"] is None:
        return ("url", entry["url"])
    index = entry["links_to"]
    while {"url_variant", "same_url_recrawl"} & set(pages[index]["kinds"]):
        index = pages[index]["duplicate_of"]
    return ("page", index)


def test_sample_zst_and_ndjson_hold_the_same_lines(sample_crawl):
    expected = Path(sample_crawl.submissions_path).read_bytes().decode("utf-8").split("\n")[:-1]
    assert list(iter_dump_lines(sample_crawl.submissions_path)) == expected
    assert list(iter_dump_lines(sample_crawl.submissions_zst_path)) == expected
    assert list(iter_dump_lines(sample_crawl.submissions_zst_path, chunk_size=11)) == expected
    # The dump needs the 2**31 window: zstd's default limit refuses it.
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompressobj().decompress(Path(sample_crawl.submissions_zst_path).read_bytes())


@pytest.mark.parametrize("until_2017", [False, True])
def test_sample_filter_outcomes_match_the_truth(sample_crawl, until_2017):
    truth = json.loads(Path(sample_crawl.truth_path).read_text())
    entries, pages = truth["submissions"], truth["pages"]
    lines = list(iter_dump_lines(sample_crawl.submissions_zst_path))
    assert len(lines) == len(entries)
    filt = LinkFilter(until="2017-12-31" if until_2017 else None)
    groups: dict[str, list[Submission]] = {}
    identities: dict[tuple, set] = {}
    expected_scores: dict[tuple, list[int]] = {}
    for line, entry in zip(lines, entries, strict=True):
        parsed = parse_submission(line)
        got = parsed if isinstance(parsed, str) else submission_problem(parsed, filt)
        assert got == expected_problem(entry, until_2017), (entry["line"], entry["kinds"], entry["url"])
        if got is None:
            assert parsed.id == entry["id"] and parsed.score == (entry["score"] or 0)
            key = url_key(parsed.url)
            groups.setdefault(key, []).append(parsed)
            identity = page_identity(entry, pages)
            identities.setdefault(identity, set()).add(key)
            expected_scores.setdefault(identity, []).append(entry["score"] or 0)
    # Every variant spelling of a page (scheme, www., slash, utm_*, fragment) shares one key,
    # and different pages never do.
    assert all(len(keys) == 1 for keys in identities.values())
    assert len(groups) == len(identities)
    links = [merge_submissions(subs) for subs in groups.values()]
    for mode, score in (("max", max), ("sum", sum)):
        kept = [link for link in links if link_problem(link, replace(filt, score_mode=mode)) is None]
        assert len(kept) == sum(score(scores) >= 3 for scores in expected_scores.values()), mode
        assert select_links(lines, replace(filt, score_mode=mode))[1]["kept_links"] == len(kept)
    # The sample has pages whose karma only adds up to 3: the two modes differ.
    assert any(max(s) < 3 <= sum(s) for s in expected_scores.values())
    counts = select_links(lines, filt)[1]
    expected = Counter(expected_problem(entry, until_2017) for entry in entries)
    assert {reason: counts[reason] for reason in expected if reason} == {r: n for r, n in expected.items() if r}
    assert counts["kept_submissions"] == expected[None]


# -- hostile dumps ----------------------------------------------------------------------


def test_hostile_lines_are_counted_by_reason_never_raised():
    assert parse_submission("[" * 100_000) == "json_too_deep"
    assert parse_submission('{"url": "https://a.com/", "created_utc": ' + "9" * 5000 + "}") == "malformed_json"
    assert parse_submission(record(score=1e30)) == "bad_score"
    assert parse_submission(record(score=-(10**12))) == "bad_score"
    assert parse_submission(record(created_utc=9223372036854775808)) == "bad_created_utc"
    assert parse_submission(record(created_utc=-5)) == "bad_created_utc"
    assert parse_submission(record(num_comments=10**30)).num_comments == 10**9  # clamped, not an int64 overflow


def test_huge_numbers_never_reach_the_link_table(tmp_path):
    lines = [json.dumps({"url": "https://ok.example/a", "score": 5, "created_utc": utc(2016, 5, 1), "subreddit": "x"}),
             json.dumps({"url": "https://big.example/a", "score": 1e30, "created_utc": utc(2016, 5, 1)}),
             json.dumps({"url": "https://late.example/a", "score": 5, "created_utc": 9223372036854775808})]
    links, counts = select_links(lines, LinkFilter())
    assert [link.url for link in links] == ["https://ok.example/a"]
    assert counts["bad_score"] == 1 and counts["bad_created_utc"] == 1
    write_link_table(links, tmp_path / "links.parquet")  # no OverflowError
    assert [link.url for link in read_link_table(tmp_path / "links.parquet")] == ["https://ok.example/a"]


def test_a_line_over_the_limit_is_skipped_without_being_held_whole():
    good = b'{"url": "https://a.com/", "created_utc": 1500000000}'
    pieces = [good + b"\n", b"x" * 3000, b"y" * 3000, b"z\n", good]  # the long line spans three pieces
    lines = list(decode_lines(pieces, max_line_chars=4000))
    assert lines[0] == good.decode() and lines[2] == good.decode()
    assert isinstance(lines[1], TooLongLine) and parse_submission(lines[1]) == "line_too_long"
    last = list(decode_lines([good + b"\n", b"x" * 5000], max_line_chars=4000))  # unterminated at the end
    assert isinstance(last[1], TooLongLine)


def test_a_zstd_bomb_is_read_in_bounded_pieces(tmp_path):
    path = tmp_path / "RS_bomb.zst"
    line = b'{"url": "https://a.com/", "created_utc": 1500000000}\n'
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(line * (2_000_000)))  # ~106 MB of lines
    assert path.stat().st_size < 200_000
    pieces = list(_zstd_pieces(open(path, "rb"), str(path)))
    assert sum(map(len, pieces)) == len(line) * 2_000_000
    assert max(map(len, pieces)) <= 64 << 20  # what 2 KiB of input can decode to at most


# --- the rules the pipeline runs: Decisions, inputs left as they were ---------------------------

def test_filter_submission_keeps_a_link_and_samples_each_problem():
    kept = filter_submission(record(), LinkFilter())
    assert isinstance(kept, Decision) and kept.record == parse_submission(record())
    assert kept.counts == (("passed", 1),) and kept.units == (("passed", SUBMISSIONS),) and kept.dropped == ()
    bad = filter_submission("{not json", LinkFilter())
    assert bad.record is None and bad.counts == (("malformed_json", 1),) and bad.dropped == (("malformed_json", "{not json"),)
    self_post = filter_submission(record(is_self=True), LinkFilter())
    assert self_post.dropped == (("self_post", "https://example.com/a"),) and self_post.units == (("self_post", SUBMISSIONS),)


def test_merge_link_merges_then_judges_the_karma():
    subs = [sub(id="a", score=2), sub(id="b", score=2, url="http://example.com/a/")]
    before = list(subs)
    kept = merge_link(url_key(subs[0].url), iter(subs), LinkFilter(score_mode="sum"))
    assert kept.record == merge_submissions(subs) and kept.counts == (("passed", 1),) and subs == before
    low = merge_link(url_key(subs[0].url), subs, LinkFilter())
    assert low.record is None and low.counts == (("low_score", 1),) and low.units == (("low_score", LINKS),)
    assert low.dropped == (("low_score", "https://example.com/a karma max 2 sum 4"),)


def test_select_links_counts_what_the_rules_decide():
    lines = [record(id="a", score=1), record(id="b", score=1, url="https://example.com/a?utm_source=x"), record(id="c", is_self=True), "[1]"]
    links, counts = select_links(lines, LinkFilter())
    assert links == [] and counts == Counter({"lines": 4, "kept_submissions": 2, "self_post": 1, "not_an_object": 1,
                                              "links": 1, "low_score": 1})


def test_submission_dumps_expand_like_the_webtext_cli(tmp_path):
    folder = tmp_path / "dumps"
    folder.mkdir()
    for name in ("RS_2017-02.zst", "RS_2017-01.zst", "RC_2017-01.zst", "notes.txt"):
        (folder / name).write_bytes(b"")
    assert expand_inputs([str(folder)], kind=SUBMISSION_DUMPS) == [str(folder / "RS_2017-01.zst"), str(folder / "RS_2017-02.zst")]
    assert expand_inputs([str(folder / "R?_2017-01.*")], kind=SUBMISSION_DUMPS) == [str(folder / "RC_2017-01.zst"),
                                                                                     str(folder / "RS_2017-01.zst")]
    remote = "https://files.example.org/RS_2017-03.zst"  # taken as named: it is opened when read
    assert expand_inputs([str(folder / "notes.txt"), remote], kind=SUBMISSION_DUMPS) == [str(folder / "notes.txt"), remote]
    with pytest.raises(InputError, match=r"no submission dump found for \['.*RS_missing.zst'\]"):
        expand_inputs([str(folder), str(folder / "RS_missing.zst")], kind=SUBMISSION_DUMPS)
    with pytest.raises(InputError, match=r"no submission dump found for \['.*nothing-\*'\]"):
        expand_inputs([str(folder / "nothing-*")], kind=SUBMISSION_DUMPS)
    (tmp_path / "empty").mkdir()  # a folder without RS_ files
    with pytest.raises(InputError, match=r"no submission dump found for \['.*empty'\]"):
        expand_inputs([str(tmp_path / "empty")], kind=SUBMISSION_DUMPS)


# --- truncation, bombs and floods (issue 25, items 3 and 4) -------------------------------------

def _numbered_lines(count: int) -> list[str]:
    return [json.dumps({"url": f"https://site{i % 97}.example/page/{i}", "created_utc": 1500000000 + i,
                        "score": i % 50, "title": f"line {i} " + "w" * (i % 300)}) for i in range(count)]


def _xz_two_streams(data: bytes) -> bytes:
    return lzma.compress(data[: len(data) // 2]) + lzma.compress(data[len(data) // 2:])


@pytest.mark.parametrize("suffix, compress", [
    (".gz", lambda data: gzip.compress(data, mtime=0)),
    (".xz", lzma.compress),
    (".xz", _xz_two_streams),
    (".zst", lambda data: zstandard.ZstdCompressor().compress(data)),
])
@pytest.mark.parametrize("cut_fraction", [0.6, 0.97])
def test_a_cut_dump_keeps_every_complete_line_before_the_cut(tmp_path, suffix, compress, cut_fraction):
    lines = _numbered_lines(4_000)  # about 1 MB, every title length (i % 300) many times: xz at preset 6 takes a second per MB
    data = "".join(line + "\n" for line in lines).encode()
    whole = compress(data)
    cut = whole[: int(len(whole) * cut_fraction)]
    # What any decoder can get out of the cut bytes: everything the streaming library decodes.
    if suffix == ".gz":
        readable = zlib.decompressobj(31).decompress(cut)
    elif suffix == ".xz":
        readable, rest = b"", cut
        while rest:
            inflater = lzma.LZMADecompressor()
            readable += inflater.decompress(rest)
            rest = inflater.unused_data if inflater.eof else b""
    else:
        readable = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    complete = readable.count(b"\n")
    assert 0 < complete < len(lines)
    path = tmp_path / f"RS_cut{suffix}"
    path.write_bytes(cut)
    read = []
    with pytest.raises(DumpReadError, match="truncated"):
        for line in iter_dump_lines(path):
            read.append(line)
    assert read[:complete] == lines[:complete]


def test_a_cut_bz2_dump_keeps_every_block_before_the_cut(tmp_path):
    lines = _numbered_lines(30_000)
    data = "".join(line + "\n" for line in lines).encode()
    whole = bz2.compress(data, compresslevel=1)  # 100 kB blocks: several of them
    cut = whole[: int(len(whole) * 0.8)]
    readable = bz2.BZ2Decompressor().decompress(cut)
    complete = readable.count(b"\n")
    assert 0 < complete < len(lines)
    path = tmp_path / "RS_cut.bz2"
    path.write_bytes(cut)
    read = []
    with pytest.raises(DumpReadError):
        for line in iter_dump_lines(path):
            read.append(line)
    assert read[:complete] == lines[:complete]


def test_a_gzip_dump_corrupted_mid_stream_keeps_the_lines_before_the_damage(tmp_path):
    lines = _numbered_lines(20_000)
    data = "".join(line + "\n" for line in lines).encode()
    damaged = bytearray(gzip.compress(data, mtime=0))
    at = len(damaged) // 2
    damaged[at:at + 64] = bytes(64)
    readable = b""
    inflater = zlib.decompressobj(31)
    try:
        for start in range(0, at, 256):
            readable += inflater.decompress(bytes(damaged[start:min(start + 256, at)]))
    except zlib.error:
        pass
    complete = readable.count(b"\n")
    path = tmp_path / "RS_flip.gz"
    path.write_bytes(bytes(damaged))
    read = []
    with pytest.raises(DumpReadError):
        for line in iter_dump_lines(path):
            read.append(line)
    assert complete > 1000 and read[:complete] == lines[:complete]


@pytest.mark.parametrize("suffix", [".zst", ".gz", ".bz2", ".xz"])
def test_a_decompression_bomb_stops_at_the_ratio_cap(tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(reddit, "DECOMPRESSED_FLOOR_BYTES", 1 << 18)  # 256 KiB: the cap acts past the floor, as at 1 MiB
    monkeypatch.setattr(reddit, "MAX_DECOMPRESSION_RATIO", 200)  # gzip cannot pass 1032x; 200x is plenty here
    line = b'{"url": "https://a.com/", "created_utc": 1500000000}\n'
    data = line * 25_000  # 1.3 MB (5x the floor) that compress far more than 200x (zstd: window_log 31, no size)
    compress = {".zst": pushshift_zst, ".gz": lambda d: gzip.compress(d, mtime=0), ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    path = tmp_path / f"RS_bomb{suffix}"
    path.write_bytes(compress(data))
    assert len(data) > reddit.MAX_DECOMPRESSION_RATIO * path.stat().st_size
    read = 0
    with pytest.raises(DumpReadError, match="decompression bomb"):
        for chunk in iter_dump_chunks(path):
            read += len(chunk)
    assert reddit.DECOMPRESSED_FLOOR_BYTES <= read < len(data)


def test_an_empty_line_flood_ends_the_dump_quickly(tmp_path):
    good = json.dumps({"url": "https://a.com/", "created_utc": 1500000000})
    path = tmp_path / "RS_flood.zst"
    path.write_bytes(pushshift_zst((good + "\n" + "\n" * 50_000 + good + "\n").encode()
                                   + b"\n" * (reddit.MAX_EMPTY_LINE_RUN + 10) + good.encode() + b"\n"))
    read = []
    with pytest.raises(DumpReadError, match="empty-line flood"):
        for line in iter_dump_lines(path):
            read.append(line)
    # A run under the cap passes (each empty line counted by the parser); the flood ends the file.
    assert read.count(good) == 2 and len(read) == 2 + 50_000 + reddit.MAX_EMPTY_LINE_RUN
    assert parse_submission("") == "malformed_json"
