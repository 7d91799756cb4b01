"""WARC/WET reading: real Common Crawl files, the malformed set, and damage made on purpose."""

from __future__ import annotations

import gzip
import http.server
import io
import random
import re
import threading
from functools import partial

import pytest
import trafilatura
from warcio.statusandheaders import StatusAndHeadersParser

from corpus.c4 import c4_wet_text
from corpus.http_decode import decode_html, parse_http
from corpus.inputs import InputError, read_pinned
from corpus.records import Document, HtmlPage, ReadError, normalize_timestamp
from corpus.warc import ReadStats, iter_records, read_archive, warc_timestamp


def read_all(path, **kwargs):
    stats = ReadStats()
    items = list(read_archive(str(path), stats=stats, **kwargs))
    docs = [i for i in items if isinstance(i, Document)]
    pages = [i for i in items if isinstance(i, HtmlPage)]
    errors = [i for i in items if isinstance(i, ReadError)]
    return docs, pages, errors, stats


def warc_record(rec_type: str, block: bytes, uri: str | None = "http://example.com/", version: str = "WARC/1.0", extra: str = "") -> bytes:
    head = f"{version}\r\nWARC-Type: {rec_type}\r\nWARC-Date: 2019-04-18T12:41:33Z\r\nWARC-Record-ID: <urn:uuid:{rec_type}-{len(block)}>\r\n"
    if uri is not None:
        head += f"WARC-Target-URI: {uri}\r\n"
    head += extra + f"Content-Length: {len(block)}\r\n\r\n"
    return head.encode() + block + b"\r\n\r\n"


def conversion(uri: str, text: str) -> bytes:
    return warc_record("conversion", text.encode(), uri)


def html_response(uri: str, html: bytes, content_type: str = "text/html; charset=utf-8", extra_http: str = "") -> bytes:
    http_head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra_http}Content-Length: {len(html)}\r\n\r\n"
    return warc_record("response", http_head.encode() + html, uri, extra="Content-Type: application/http; msgtype=response\r\n")


def members(*records: bytes) -> bytes:
    return b"".join(gzip.compress(r, mtime=0) for r in records)


# -- real Common Crawl files ------------------------------------------------------------


def test_resiliparse_warc_has_16_html_responses_in_50_records(real_data):
    docs, pages, errors, stats = read_all(real_data / "warc/resiliparse/warcfile.warc.gz")
    assert len(pages) == 16 and not docs and not errors
    records = sum(v for k, v in stats.counts.items() if k.startswith("records:"))
    assert records == 50
    assert stats.counts["skipped:request"] == 17 and stats.counts["skipped:metadata"] == 16
    assert all(p.status == 200 and p.html.lstrip().lower().startswith(("<!doctype", "<html")) for p in pages)
    assert {p.charset for p in pages} >= {"utf-8", "cp1251"}  # real pages declare several charsets


def test_ccscalatools_wet_has_25_conversion_records_with_their_urls(real_data):
    path = real_data / "warc/ccscalatools/filter_test_1.wet.gz"
    docs, pages, errors, _ = read_all(path)
    raw = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
    expected = re.findall(r"WARC-Type: conversion\r\nWARC-Target-URI: (\S+)\r\n", raw)
    assert len(expected) == 25
    assert [d.url for d in docs] == expected
    assert not pages and not errors
    assert all(d.timestamp.startswith("2016-12-") and d.timestamp.endswith("Z") for d in docs)


def test_whirlwind_wet_language_header_and_warc_text_overlap(real_data):
    (doc,), _, _, _ = read_all(real_data / "warc/whirlwind/whirlwind.warc.wet.gz")
    assert doc.meta["language"] == "spa"
    assert doc.url == "https://an.wikipedia.org/wiki/Escopete"
    _, (page,), _, _ = read_all(real_data / "warc/whirlwind/whirlwind.warc.gz")
    assert page.url == doc.url and page.status == 200

    extracted = trafilatura.extract(page.html, include_comments=False) or ""
    wet_lines = {line.strip() for line in doc.text.splitlines() if len(line.strip()) > 30}
    html_lines = {line.strip() for line in extracted.splitlines() if len(line.strip()) > 30}
    shared = wet_lines & html_lines
    assert len(shared) >= 3, shared


def test_c4_text_mode_applies_reference_quirks(real_data):
    faithful, _, _, _ = read_all(real_data / "warc/ccscalatools/filter_test_1.wet.gz")
    c4, _, _, _ = read_all(real_data / "warc/ccscalatools/filter_test_1.wet.gz", text_mode="c4")
    assert [d.url for d in c4] == [d.url for d in faithful]
    for f, c in zip(faithful, c4, strict=True):
        assert c.text == c4_wet_text(f.text)
        assert all(line == line.strip() and line for line in c.text.split("\n"))
    assert any(f.text != c.text for f, c in zip(faithful, c4, strict=True))


def test_c4_wet_text_drops_warc_and_content_lines():
    text = "  Hello there.  \n\nWARC-ish line\nCONTENT-TYPE x\nContent-Length: 3\ncontent- kept\n\tEnd.\n"
    assert c4_wet_text(text) == "Hello there.\ncontent- kept\nEnd."


def test_valid_warcio_edge_cases(real_data):
    folder = real_data / "warc/warcio"
    _, pages, errors, stats = read_all(folder / "example.warc.gz")
    assert len(pages) == 1 and not errors and stats.counts["skipped:revisit"] == 1
    assert stats.counts["records:warcinfo"] == 2  # two leading warcinfo records are legal
    _, pages, errors, _ = read_all(folder / "example-iana.org-chunked.warc")
    assert not errors and "Internet Assigned Numbers Authority" in pages[0].html  # chunking undone
    _, pages, errors, stats = read_all(folder / "post-test.warc.gz")
    assert not pages and not errors and stats.counts["skipped:non_html:application/json"] == 3
    _, _, errors, stats = read_all(folder / "example-resource.warc.gz")
    assert not errors and stats.counts["skipped:resource"] == 1


# -- the malformed set: no exception escapes, errors by reason, complete records kept ---------

MALFORMED = {
    # file: (documents, html pages, {reason: count})
    "ccscalatools/appended_zip_fragment_unexpected_eof.wet.gz": (15, 0, {"truncated_gzip": 1}),
    "ccscalatools/corrupt_two_warcinfo.wet.gz": (5, 0, {"extra_warcinfo": 1}),
    "ccscalatools/corrupt_warcconversion_1.wet.gz": (4, 0, {"missing_target_uri": 1}),
    "ccscalatools/file_headers_only.wet.gz": (0, 0, {"clipped_record": 1}),
    "ccscalatools/fragment1_incomplete_last.wet.gz": (1, 0, {"clipped_record": 1}),
    "resiliparse/clipped.warc.gz": (0, 0, {"truncated_gzip": 1}),
    "warcio/example-bad-non-chunked.warc.gz": (0, 1, {}),
    "warcio/example-space-in-target-uri.warc.gz": (0, 0, {"space_in_target_uri": 1}),
    "warcio/example-trunc.warc": (0, 1, {"missing_terminator": 1}),
    "warcio/example-wrong-chunks.warc.gz": (0, 1, {"missing_terminator": 1}),
}


def test_every_malformed_file_is_covered(real_data):
    present = {
        str(p.relative_to(real_data / "warc_malformed"))
        for p in (real_data / "warc_malformed").rglob("*")
        if p.is_file() and not p.name.startswith("LICENSE")
    }
    assert present == set(MALFORMED)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_file(real_data, name, caplog):
    want_docs, want_pages, want_errors = MALFORMED[name]
    docs, pages, errors, stats = read_all(real_data / "warc_malformed" / name)
    assert len(docs) == want_docs
    assert len(pages) == want_pages
    assert stats.errors() == want_errors
    assert all(e.source.endswith(name) and e.offset >= 0 for e in errors)
    for error in errors:  # each is logged with its file and offset
        assert any(error.reason in r.getMessage() and f"@{error.offset}" in r.getMessage() for r in caplog.records)


def test_truncated_member_keeps_every_earlier_record(real_data):
    docs, _, (error,), _ = read_all(real_data / "warc_malformed/ccscalatools/appended_zip_fragment_unexpected_eof.wet.gz")
    assert error.offset == 49258  # the compressed offset of the cut member
    offsets = [int(d.meta["offset"]) for d in docs]
    assert offsets == sorted(offsets) and offsets[0] == 389 and len(set(offsets)) == 15


def test_space_in_target_uri_is_percent_encoded(real_data):
    path = real_data / "warc_malformed/warcio/example-space-in-target-uri.warc.gz"
    with open(path, "rb") as raw:
        records = [r for r in iter_records(raw, str(path)) if not isinstance(r, ReadError)]
    assert records[1].get("WARC-Target-URI") == "file:///example%20with%20spaces.png"


# -- damage made on purpose -------------------------------------------------------------


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_corrupt_member_in_the_middle_keeps_records_on_both_sides(tmp_path):
    parts = [gzip.compress(conversion(f"http://site{i}.example/", f"Page {i} text.\n"), mtime=0) for i in range(5)]
    broken = bytearray(parts[2])
    broken[12:40] = b"\x00" * 28  # destroy the deflate data of the third member
    data = parts[0] + parts[1] + bytes(broken) + parts[3] + parts[4]
    docs, _, errors, stats = read_all(write(tmp_path, "mid.wet.gz", data))
    assert [d.url for d in docs] == [f"http://site{i}.example/" for i in (0, 1, 3, 4)]
    assert stats.errors() == {"corrupt_gzip": 1}
    assert errors[0].offset == len(parts[0]) + len(parts[1])
    assert int(docs[2].meta["offset"]) == len(parts[0]) + len(parts[1]) + len(parts[2])


def test_garbage_between_records_is_skipped_once(tmp_path):
    data = conversion("http://a.example/", "A.\n") + b"\x00\x01 not a record\r\nstill junk\r\n" + conversion("http://b.example/", "B.\n")
    docs, _, errors, stats = read_all(write(tmp_path, "junk.wet", data))
    assert [d.url for d in docs] == ["http://a.example/", "http://b.example/"]
    assert stats.errors() == {"garbage_between_records": 1}
    assert errors[0].offset == len(conversion("http://a.example/", "A.\n"))


def test_unknown_version_and_bad_header_are_skipped(tmp_path):
    data = (
        warc_record("conversion", b"old\n", "http://old.example/", version="WARC/0.9")
        + b"WARC/1.0\r\nWARC-Type: conversion\r\nContent-Length: many\r\n\r\nbody\r\n\r\n"
        + b"WARC/1.0\r\nWARC-Type: conversion\r\nno colon here\r\nContent-Length: 4\r\n\r\nbody\r\n\r\n"
        + conversion("http://good.example/", "Good.\n")
    )
    docs, _, _, stats = read_all(write(tmp_path, "versions.warc", members(data)))
    assert [d.url for d in docs] == ["http://good.example/"]
    assert stats.errors() == {"unknown_warc_version": 1, "bad_header": 2}


def test_draft_versions_0_17_and_0_18_are_read(tmp_path):
    """ClueWeb09 (WARC/0.18) and Heritrix drafts (WARC/0.17) frame records like 1.0."""
    page = b"<html><body><p>ClueWeb page.</p></body></html>"
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + page
    data = (warc_record("response", http, "http://clueweb.example/", version="WARC/0.18", extra="WARC-TREC-ID: clueweb09-en0000-00-00000\r\n")
            + warc_record("conversion", b"Draft text.\n", "http://heritrix.example/", version="WARC/0.17"))
    docs, pages, errors, _ = read_all(write(tmp_path, "drafts.warc.gz", members(data)))
    assert [p.url for p in pages] == ["http://clueweb.example/"] and pages[0].html.endswith("ClueWeb page.</p></body></html>")
    assert [d.url for d in docs] == ["http://heritrix.example/"] and not errors


def test_lf_only_records_are_read(tmp_path):
    text = "Line one.\nLine two.\n"
    data = f"WARC/1.0\nWARC-Type: conversion\nWARC-Target-URI: http://lf.example/\nWARC-Date: 2019-04-18T12:41:33Z\nContent-Length: {len(text)}\n\n{text}\n\n"
    docs, _, errors, _ = read_all(write(tmp_path, "lf.wet", data.encode()))
    assert not errors and docs[0].text == text and docs[0].url == "http://lf.example/"


def test_stream_that_fails_midway_keeps_what_was_read(tmp_path):
    rng = random.Random(7)  # incompressible text, so the file spans many reads
    data = members(*(conversion(f"http://s{i}.example/", rng.randbytes(20000).hex()) for i in range(40)))

    class Flaky(io.BytesIO):
        def read(self, n=-1):
            if self.tell() > len(data) // 2:
                raise ConnectionResetError("peer reset")
            return super().read(n)

    items = list(read_archive("remote.wet.gz", fileobj=Flaky(data)))
    docs = [i for i in items if isinstance(i, Document)]
    errors = [i for i in items if isinstance(i, ReadError)]
    assert 5 < len(docs) < 40
    assert [e.reason for e in errors] == ["read_failed"]


def test_missing_file_is_an_error_not_an_exception(tmp_path):
    _, _, errors, stats = read_all(tmp_path / "nope.warc.gz")
    assert stats.errors() == {"read_failed": 1} and "nope.warc.gz" in errors[0].source


def test_second_warcinfo_only_after_other_records(tmp_path):
    info = warc_record("warcinfo", b"software: x\r\n", uri=None)
    data = members(info, info, conversion("http://a.example/", "A.\n"), info, conversion("http://b.example/", "B.\n"))
    docs, _, _, stats = read_all(write(tmp_path, "cat.wet.gz", data))
    assert len(docs) == 2 and stats.errors() == {"extra_warcinfo": 1}


def test_response_charsets_and_content_types(tmp_path):
    latin = "Café déjà vu.".encode("latin-1")
    data = members(
        html_response("http://latin.example/", b"<html><p>" + latin + b"</p></html>", "text/html; charset=ISO-8859-1"),
        html_response("http://meta.example/", b'<html><head><meta charset="windows-1251"></head><p>\xcf\xf0\xe8</p></html>', "text/html"),
        html_response("http://x.example/", b"<html xmlns='http://www.w3.org/1999/xhtml'><p>x</p></html>", "application/xhtml+xml"),
        html_response("http://img.example/a.png", b"\x89PNG\r\n", "image/png"),
        html_response("http://gz.example/", gzip.compress(b"<html><p>zipped</p></html>"), extra_http="Content-Encoding: gzip\r\n"),
        html_response("http://badgz.example/", b"not gzip at all", extra_http="Content-Encoding: gzip\r\n"),
    )
    _, pages, errors, stats = read_all(write(tmp_path, "mixed.warc.gz", data))
    by_url = {p.url: p for p in pages}
    assert "Café déjà vu." in by_url["http://latin.example/"].html
    assert "При" in by_url["http://meta.example/"].html and by_url["http://meta.example/"].charset == "cp1251"
    assert "http://x.example/" in by_url and "zipped" in by_url["http://gz.example/"].html
    assert stats.counts["skipped:non_html:image/png"] == 1
    assert [e.reason for e in errors] == ["bad_content_encoding"]


def test_decode_html_falls_back_to_cp1252():
    assert decode_html(b"caf\xe9") == ("café", "cp1252")
    assert decode_html("naïve".encode()) == ("naïve", "utf-8")
    assert decode_html(b"x", "text/html; charset=no-such-charset") == ("x", "utf-8")
    assert decode_html(b"\xef\xbb\xbf<p>\xc3\xa9</p>", "text/html; charset=iso-8859-1") == ("<p>é</p>", "utf-8")


def test_reads_over_http_from_a_local_server(tmp_path):
    data = members(conversion("http://a.example/", "Over the wire.\n"), conversion("http://b.example/", "Twice.\n"))
    write(tmp_path, "served.wet.gz", data)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        docs, _, errors, _ = read_all(f"http://127.0.0.1:{server.server_port}/served.wet.gz")
    finally:
        server.shutdown()
    assert not errors and [d.text for d in docs] == ["Over the wire.\n", "Twice.\n"]


def test_bytes_after_the_last_member_are_reported(tmp_path):
    data = members(conversion("http://a.example/", "A.\n")) + b"trailing junk that is not gzip"
    docs, _, errors, stats = read_all(write(tmp_path, "tail.wet.gz", data))
    assert [d.url for d in docs] == ["http://a.example/"]
    assert stats.errors() == {"corrupt_gzip": 1} and errors[0].offset == len(data) - 30


def test_decode_html_reads_gb2312_label_as_gbk():
    # U+9555 is in GBK but not in GB2312; browsers decode the gb2312 label as GBK.
    body = "<p>\u4e2d\u6587 \u9555</p>".encode("gbk")
    assert decode_html(body, "text/html; charset=gb2312") == ("<p>\u4e2d\u6587 \u9555</p>", "gbk")


def test_a_pinned_download_is_cached_and_then_read_offline(tmp_path, real_data):
    # The C4 default --badwords is a pinned URL: the first run downloads it, later ones need no network.

    served = tmp_path / "served"
    served.mkdir()
    (served / "en").write_bytes((real_data / "badwords" / "en").read_bytes())
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/en"
    try:
        first = read_pinned(url, "--badwords", folder=str(tmp_path / "cache"))
    finally:
        server.shutdown()
        server.server_close()
    assert first == (real_data / "badwords" / "en").read_bytes()
    assert read_pinned(url, "--badwords", folder=str(tmp_path / "cache")) == first  # the server is gone
    with pytest.raises(InputError, match=r"--badwords: cannot download .*Offline, pass a local copy with --badwords FILE"):
        read_pinned(url, "--badwords", folder=str(tmp_path / "empty-cache"))


# -- the fast paths give what the general code gives -------------------------------------

_SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace()]  # str.strip's whitespace


def test_c4_mode_equals_c4_wet_text_on_every_kind_of_line_edge(tmp_path):
    """c4 mode skips splitting a body into lines when nothing would change; bodies with
    every whitespace character at line edges, empty lines, dropped prefixes and bad
    UTF-8 must come out exactly as c4_wet_text makes them from the faithful text."""
    rng = random.Random(7)
    pieces = _SPACES + ["WARC", "CONTENT-", "Content-", "content-", "WAR", "Cont", "word", "é", "。", "\u2022", "\u2030", "\u3001", "\ufffd"]
    bodies = []
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 14)))
        body = text.encode()
        if rng.random() < 0.1:
            body += rng.choice([b"\xff", b"\xc2", b"\xe3\x80"])  # invalid UTF-8: decoded with U+FFFD
        bodies.append(body)
    path = tmp_path / "edges.wet"
    path.write_bytes(b"".join(warc_record("conversion", b, f"http://example.com/{i}") for i, b in enumerate(bodies)))
    faithful, _, errors, _ = read_all(path)
    c4, _, _, _ = read_all(path, text_mode="c4")
    assert len(faithful) == len(c4) == len(bodies) and not errors
    assert [d.text for d in c4] == [c4_wet_text(d.text) for d in faithful]
    assert sum(d.text != c4_wet_text(d.text) for d in faithful) > 1000  # the edges were there


def test_timestamps_equal_normalize_timestamp():
    values = ["2019-04-18T12:41:33Z", "0999-01-01T00:00:00Z", "1000-01-01T00:00:00Z", "2019-13-01T00:00:00Z", "2019-02-29T10:00:00Z",
              "2020-02-29T23:59:59Z", "2019-04-18T24:00:00Z", "2019-04-18 12:41:33Z", "2019-04-18T12:41:33+02:00", "2019-04-18T12:41:33.5Z",
              "2019-W16-4T12:41:3Z", "\u0662019-04-18T12:41:33Z", "", "  2019-04-18T12:41:33Z ", "garbage"]
    assert [warc_timestamp(v) for v in values] == [normalize_timestamp(v) for v in values]
    assert warc_timestamp("2019-04-18T12:41:33Z") == "2019-04-18T12:41:33Z"


def test_http_heads_are_read_as_warcio_reads_them(tmp_path):
    """Usual HTTP heads are split without warcio; status, headers and body must be what
    warcio's parser gives for any head: folded, bare-LF, blank-ish, non-ASCII, no colon."""
    def warcio_reads(block):
        stream = io.BytesIO(block)
        try:
            http = StatusAndHeadersParser(["HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/2.0"], verify=False).parse(stream)
        except EOFError:
            return "EOFError"
        return http.get_statuscode(), http.headers, stream.read()

    def ours(block):
        try:
            return parse_http(block)
        except EOFError:
            return "EOFError"

    lines = [b"HTTP/1.1 200 OK", b"HTTP/1.0 404", b"HTTP/2 301 Moved", b"", b" ", b"\t", b"\x0b", b"\x85", b"\xc3\xa9",
             b"Content-Type: text/html", b"Server:nginx ", b"X-A :  b ", b"\x0bX-B\x0b: \x0bc", b"noColon", b":", b"  folded", b"\tfold", b"a\rb"]
    rng = random.Random(3)
    blocks = [b"", b"\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n<html>"]
    for _ in range(5000):
        head = [rng.choice(lines) for _ in range(rng.randrange(1, 7))]
        sep = [rng.choice([b"\r\n", b"\r\n", b"\n", b"\r\r\n"]) for _ in head]
        blocks.append(b"".join(h + s for h, s in zip(head, sep, strict=True)) + b"\r\n" + rng.choice([b"<html>\r\n\r\nx", b"", b"\r\n"]))
    assert [ours(b) for b in blocks] == [warcio_reads(b) for b in blocks]


def test_records_read_alike_from_members_one_stream_and_plain(tmp_path):
    """A record that is a whole gzip member is framed on a fast path; the same records in
    one gzip stream or uncompressed take the general one. Same records either way."""
    records = [conversion(f"http://example.com/{i}", f"line {i}\n" * i) for i in range(40)]
    records.insert(7, warc_record("resource", b"WARC/1.0\r\nWARC-Type: conversion\r\n\r\n"))  # a record inside a block
    forms = {"members": members(*records), "stream": gzip.compress(b"".join(records), mtime=0), "plain": b"".join(records)}
    read = {}
    for name, data in forms.items():
        items = list(iter_records(io.BytesIO(data), name))
        assert not [i for i in items if isinstance(i, ReadError)]
        read[name] = [(r.version, r.headers, r.block, r.stream_offset) for r in items]
    assert len(read["members"]) == 41
    assert read["members"] == read["stream"] == read["plain"]


def test_a_warc_header_given_twice_keeps_its_first_value(tmp_path):
    record = warc_record("conversion", b"text", "http://first.example/", extra="WARC-Target-URI: http://second.example/\r\n")
    for data in (members(record), record):  # the fast path and the general one
        (item,) = iter_records(io.BytesIO(data), "twice")
        assert item.get("warc-target-uri") == "http://first.example/"
        assert item.get("warc-date") == "2019-04-18T12:41:33Z"


# -- decoders capped (issue 25, item 3) ---------------------------------------------------


def test_a_brotli_bomb_body_stops_at_the_limit_without_decoding_it_whole(tmp_path):
    import tracemalloc

    brotli = pytest.importorskip("brotli")
    from corpus.http_decode import DecodedTooLarge, decode_content

    body = brotli.compress(b"\0" * (64 << 20), quality=5)  # about 100 bytes
    assert len(body) < 2000
    tracemalloc.start()
    try:
        with pytest.raises(DecodedTooLarge):
            decode_content(body, "br", max_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the limit and one step past it, never the 64 MiB
    assert decode_content(brotli.compress(b"<p>small page</p>"), "br") == b"<p>small page</p>"

    # In a WARC record: the page is an error (decoded_too_large); the next record comes out.
    bomb = html_response("http://bomb.example/", body, extra_http="Content-Encoding: br\r\n")
    good = html_response("http://good.example/", b"<html><p>Fine.</p></html>")
    _, pages, errors, stats = read_all(write(tmp_path, "br.warc.gz", members(bomb, good)), max_record_bytes=1 << 20)
    assert [p.url for p in pages] == ["http://good.example/"]
    assert stats.errors() == {"decoded_too_large": 1}


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_gzip_and_deflate_bodies_stop_at_the_limit(encoding):
    import zlib

    from corpus.http_decode import DecodedTooLarge, decode_content

    raw = b"<p>" + b"a" * (8 << 20)
    body = gzip.compress(raw, mtime=0) if encoding == "gzip" else zlib.compress(raw)
    with pytest.raises(DecodedTooLarge):
        decode_content(body, encoding, max_bytes=1 << 20)
    assert decode_content(body, encoding) == raw


# -- resync after junk with no line end (issue 25, item 6) --------------------------------


def test_a_record_after_junk_members_with_no_line_end_is_kept(tmp_path):
    first, last = conversion("http://first.example/", "First.\n"), conversion("http://last.example/", "Last.\n")
    junk = [b"\x00\x01binary junk", b"no newline at all", b"x" * 70_000]
    data = members(first) + b"".join(gzip.compress(j, mtime=0) for j in junk) + members(last)
    docs, _, errors, stats = read_all(write(tmp_path, "junk-members.wet.gz", data))
    assert [d.url for d in docs] == ["http://first.example/", "http://last.example/"]
    assert stats.errors() == {"garbage_between_records": 1} and len(errors) == 1


def test_a_record_straight_after_junk_in_a_plain_file_is_kept(tmp_path):
    first, last = conversion("http://first.example/", "First.\n"), conversion("http://last.example/", "Last.\n")
    data = first + b"junk without a line end" + last + b"tail junk" + conversion("http://tail.example/", "Tail.\n")
    docs, _, _, stats = read_all(write(tmp_path, "junk.wet", data))
    assert [d.url for d in docs] == ["http://first.example/", "http://last.example/", "http://tail.example/"]
    assert stats.errors() == {"garbage_between_records": 2}


def test_a_record_after_a_long_single_junk_line_is_kept(tmp_path):
    line = b"y" * (9 << 20)  # one line of 9 MiB, over several reads and pieces, no newline
    data = members(conversion("http://a.example/", "A.\n")) + gzip.compress(line, mtime=0) + members(conversion("http://b.example/", "B.\n"))
    docs, _, _, stats = read_all(write(tmp_path, "long-line.wet.gz", data))
    assert [d.url for d in docs] == ["http://a.example/", "http://b.example/"]
    assert stats.errors() == {"garbage_between_records": 1}


@pytest.mark.parametrize("compressed", [True, False])
def test_a_record_after_an_empty_block_that_declares_more_bytes_is_kept(tmp_path, compressed):
    empty = b"WARC/1.0\r\nWARC-Type: conversion\r\nWARC-Target-URI: http://empty.example/\r\nContent-Length: 5000\r\n\r\n"
    last = conversion("http://last.example/", "Last.\n")
    data = members(conversion("http://a.example/", "A.\n"), empty, last) if compressed else conversion("http://a.example/", "A.\n") + empty + last
    docs, _, _, stats = read_all(write(tmp_path, "empty-block.wet" + (".gz" if compressed else ""), data))
    assert [d.url for d in docs] == ["http://a.example/", "http://last.example/"]
    assert stats.errors() == {"clipped_record": 1}
