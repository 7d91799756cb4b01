"""Tests for samplecrawl.crawl: the seeded sample crawl that `make demo` and other tests read.

Each test reads the files back the way a later stage would (warcio, gzip, zstandard) and
checks them against truth.json, so a later test can trust what truth.json says.
"""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import zstandard
from warcio.archiveiterator import ArchiveIterator

from samplecrawl.crawl import PAGE_KINDS, SUBMISSION_KINDS, SampleCrawl, main, write_sample_crawl

END_MARKS = (".", "?", "!", '"')
# C4's policy phrases (c4_utils.py); lines holding them are boilerplate, not prose.
POLICY_PHRASES = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
# Kinds of page the sample must show "at least a few times".
REPEATED_KINDS = ("english", "article", "realnews", "menu", "ellipsis", "policy", "lorem_ipsum", "curly_brace",
                  "javascript", "citation", "long_word", "non_english", "de", "fr", "es", "exact_duplicate",
                  "same_url_recrawl", "url_variant", "near_duplicate", "shared_line", "badword", "wikipedia",
                  "too_few_sentences", "non_html")


@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> SampleCrawl:
    return write_sample_crawl(tmp_path_factory.mktemp("sample"), seed=0, pages=300)


@pytest.fixture(scope="module")
def truth(crawl) -> dict:
    return json.loads(Path(crawl.truth_path).read_text(encoding="utf-8"))


def read_records(path: str) -> list[tuple[str, object, bytes, object]]:
    with open(path, "rb") as stream:
        return [(record.rec_type, record.rec_headers, record.content_stream().read(), record.http_headers)
                for record in ArchiveIterator(stream)]


@pytest.fixture(scope="module")
def wet(crawl) -> dict[tuple[str, str], tuple[str, object, str]]:
    """(url, WARC-Date) -> (WET file name, WARC headers, text) for every conversion record."""
    texts = {}
    for path in crawl.wet_paths:
        for rec_type, headers, body, _ in read_records(path):
            if rec_type == "conversion":
                key = (headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"))
                texts[key] = (Path(path).name, headers, body.decode("utf-8"))
    return texts


@pytest.fixture(scope="module")
def responses(crawl) -> dict[tuple[str, str], tuple[str, object, bytes, object]]:
    """(url, WARC-Date) -> (WARC file name, WARC headers, HTTP body, HTTP headers) per response."""
    found = {}
    for path in crawl.warc_paths:
        for rec_type, headers, body, http in read_records(path):
            if rec_type == "response":
                key = (headers.get_header("WARC-Target-URI"), headers.get_header("WARC-Date"))
                found[key] = (Path(path).name, headers, body, http)
    return found


def text_of(page: dict, wet: dict) -> str:
    return wet[(page["url"], page["timestamp"])][2]


def full_sentences(text: str) -> list[str]:
    """Lines that C4's end-mark and five-word rules would keep, minus policy and JavaScript notices."""
    return [line for line in text.splitlines()
            if line.endswith(END_MARKS) and not line.endswith("...") and len(line.split()) >= 5
            and not any(phrase in line.lower() for phrase in POLICY_PHRASES) and "javascript" not in line.lower()]


def gzip_members(data: bytes) -> int:
    count = 0
    while data:
        member = zlib.decompressobj(zlib.MAX_WBITS | 16)
        member.decompress(data)
        data = member.unused_data
        count += 1
    return count


def test_same_seed_writes_identical_bytes_and_another_seed_does_not(tmp_path):
    first = write_sample_crawl(tmp_path / "a", seed=7, pages=120)
    second = write_sample_crawl(tmp_path / "b", seed=7, pages=120)
    other = write_sample_crawl(tmp_path / "c", seed=8, pages=120)
    names = sorted(path.name for path in (tmp_path / "a").iterdir())
    assert names == sorted(path.name for path in (tmp_path / "b").iterdir())
    assert not any(name.endswith(".tmp") for name in names)
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    for mine, theirs in zip(first.wet_paths + first.warc_paths, other.wet_paths + other.warc_paths, strict=True):
        assert Path(mine).read_bytes() != Path(theirs).read_bytes()
    assert Path(first.submissions_path).read_bytes() != Path(other.submissions_path).read_bytes()
    assert second.pages == first.pages == 120


def test_paths_of_the_api_exist_and_are_named_like_common_crawl(crawl):
    assert crawl.pages == 300
    assert 2 <= len(crawl.wet_paths) == len(crawl.warc_paths) <= 3
    assert all(Path(path).name.endswith(".warc.wet.gz") for path in crawl.wet_paths)
    assert all(Path(path).name.endswith(".warc.gz") and ".wet" not in path for path in crawl.warc_paths)
    for path in (*crawl.wet_paths, *crawl.warc_paths, crawl.manifest_path, crawl.warc_manifest_path,
                 crawl.submissions_path, crawl.submissions_zst_path, crawl.truth_path):
        assert Path(path).is_file(), path


def test_manifests_list_relative_paths_that_exist(crawl):
    out = Path(crawl.truth_path).parent
    for manifest, listed in ((crawl.manifest_path, crawl.wet_paths), (crawl.warc_manifest_path, crawl.warc_paths)):
        raw = Path(manifest).read_bytes()
        assert raw[4:8] == b"\0\0\0\0"  # gzip mtime 0
        lines = gzip.decompress(raw).decode("utf-8").splitlines()
        assert lines == [Path(path).name for path in listed]
        assert all(not Path(line).is_absolute() and (out / line).is_file() for line in lines)


def test_every_file_starts_with_warcinfo_and_holds_one_gzip_member_per_record(crawl):
    for path in (*crawl.wet_paths, *crawl.warc_paths):
        records = read_records(path)
        assert records[0][0] == "warcinfo"
        assert [record[0] for record in records].count("warcinfo") == 1
        assert records[0][1].get_header("WARC-Filename") == Path(path).name
        assert gzip_members(Path(path).read_bytes()) == len(records)


def test_wet_files_hold_one_conversion_per_text_page(crawl, truth, wet, responses):
    conversions = Counter()
    for path in crawl.wet_paths:
        types = Counter(record[0] for record in read_records(path))
        assert set(types) == {"warcinfo", "conversion"}
        conversions[Path(path).name] = types["conversion"]
    expected = Counter(page["wet_file"] for page in truth["pages"] if page["wet_file"])
    assert conversions == expected
    assert sum(conversions.values()) == len(wet) == sum(1 for page in truth["pages"] if page["wet_file"])
    for key, (_, headers, text) in wet.items():
        assert headers.get_header("Content-Type") == "text/plain"
        assert re.fullmatch(r"2019-04-\d\dT\d\d:\d\d:\d\dZ", headers.get_header("WARC-Date"))
        assert headers.get_header("WARC-Identified-Content-Language") in {"eng", "deu", "fra", "spa"}
        assert headers.get_header("WARC-Refers-To") == responses[key][1].get_header("WARC-Record-ID")
        assert text and "\r" not in text


def test_warc_files_hold_request_response_and_metadata_for_every_page(crawl, truth, responses):
    per_file = Counter(page["warc_file"] for page in truth["pages"])
    for path in crawl.warc_paths:
        types = Counter(record[0] for record in read_records(path))
        name = Path(path).name
        assert types["request"] == types["response"] == types["metadata"] == per_file[name]
    assert len(responses) == len(truth["pages"])
    for page in truth["pages"]:
        warc_name, headers, body, http = responses[(page["url"], page["timestamp"])]
        assert warc_name == page["warc_file"]
        assert headers.get_header("Content-Type") == "application/http; msgtype=response"
        assert http.get_statuscode() == str(page["status"])
        assert http.get_header("Content-Type") == page["content_type"]
        assert http.get_header("Content-Length") == str(len(body))
    statuses = Counter(page["status"] for page in truth["pages"])
    assert statuses[404] == 1 and statuses[301] == 1


def test_every_page_kind_is_present(truth):
    counts = Counter(kind for page in truth["pages"] for kind in page["kinds"])
    assert set(counts) == set(PAGE_KINDS)
    assert all(counts[kind] >= 2 for kind in REPEATED_KINDS), counts


CHECKS = {
    "lorem_ipsum": lambda text, page: "lorem ipsum" in text.lower(),
    "curly_brace": lambda text, page: any("{" in line for line in full_sentences(text)),
    "javascript": lambda text, page: "Please enable JavaScript to view this page." in text.splitlines(),
    "citation": lambda text, page: re.search(r"\[\d+\]|\[citation needed\]", text) is not None,
    "long_word": lambda text, page: max(len(word) for word in text.split()) > 1000,
    "too_long": lambda text, page: len(text) > 190_000,
    "menu": lambda text, page: any(len(line.split()) < 3 and not line.endswith(END_MARKS)
                                   for line in text.splitlines()[1:]),
    "ellipsis": lambda text, page: any(line.endswith("...") for line in text.splitlines()),
    "policy": lambda text, page: any(len(line.split()) >= 5 and any(p in line.lower() for p in POLICY_PHRASES)
                                     for line in text.splitlines()),
    "badword": lambda text, page: re.search(rf"\b{page['badword']}\b", text.lower()) is not None,
    "wikipedia": lambda text, page: urlsplit(page["url"]).netloc.endswith("wikipedia.org"),
    "too_few_sentences": lambda text, page: len(full_sentences(text)) == 2,
}


@pytest.mark.parametrize("kind", sorted(CHECKS))
def test_pages_of_a_kind_really_have_it_in_their_wet_text(kind, truth, wet):
    pages = [page for page in truth["pages"] if kind in page["kinds"]]
    assert pages
    for page in pages:
        assert CHECKS[kind](text_of(page, wet), page), page["url"]


def test_only_tagged_pages_have_lorem_ipsum_braces_javascript_or_long_words(truth, wet):
    for page in truth["pages"]:
        if page["wet_file"]:
            text = text_of(page, wet)
            for kind in ("lorem_ipsum", "curly_brace", "javascript", "long_word", "too_long"):
                assert CHECKS[kind](text, page) == (kind in page["kinds"]), (kind, page["url"])


def test_languages_match_the_wet_header_and_the_tags(truth, wet):
    iso = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa"}
    for page in truth["pages"]:
        if page["wet_file"]:
            _, headers, _ = wet[(page["url"], page["timestamp"])]
            assert headers.get_header("WARC-Identified-Content-Language") == iso[page["language"]]
            assert ("english" in page["kinds"]) == (page["language"] == "en")
            assert ("non_english" in page["kinds"]) == (page["language"] != "en")
            if page["language"] != "en":
                assert page["language"] in page["kinds"]


def test_non_english_pages_are_confidently_detected_by_langdetect(truth, wet):
    langdetect = pytest.importorskip("langdetect")
    for page in truth["pages"]:
        if "non_english" in page["kinds"] or "wikipedia" in page["kinds"]:
            langdetect.DetectorFactory.seed = 0
            best = langdetect.detect_langs("\n".join(full_sentences(text_of(page, wet))))[0]
            assert (best.lang, best.prob > 0.99) == (page["language"], True), page["url"]


def test_copies_have_the_text_of_their_original(truth, wet):
    pages = truth["pages"]
    copies = [page for page in pages if page["duplicate_of"] is not None]
    assert {kind for page in copies for kind in page["kinds"]} >= {"exact_duplicate", "same_url_recrawl", "url_variant"}
    for page in copies:
        original = pages[page["duplicate_of"]]
        assert text_of(page, wet) == text_of(original, wet)
        assert page["text_sha1"] == original["text_sha1"]
        assert page["timestamp"] != original["timestamp"]
        if "same_url_recrawl" in page["kinds"]:
            assert page["url"] == original["url"]
        else:
            assert page["url"] != original["url"]
        if "exact_duplicate" in page["kinds"]:
            assert urlsplit(page["url"]).netloc != urlsplit(original["url"]).netloc
    variants = {page["variant"]: (page["url"], pages[page["duplicate_of"]]["url"])
                for page in copies if "url_variant" in page["kinds"]}
    assert set(variants) == {"scheme", "www", "trailing_slash", "utm", "fragment"}
    assert urlsplit(variants["scheme"][0]).scheme != urlsplit(variants["scheme"][1]).scheme
    assert "?utm_" in variants["utm"][0] and "#" in variants["fragment"][0]


def test_near_duplicates_share_most_lines_with_their_original(truth, wet):
    near = [page for page in truth["pages"] if "near_duplicate" in page["kinds"]]
    assert {page["variant"] for page in near} == {"reworded", "extended"}
    for page in near:
        mine = text_of(page, wet).splitlines()
        theirs = text_of(truth["pages"][page["near_duplicate_of"]], wet).splitlines()
        assert mine != theirs
        assert len(set(mine) & set(theirs)) >= 0.6 * len(set(theirs))


def test_only_copies_and_shared_lines_repeat_a_sentence_across_pages(truth, wet):
    owners = defaultdict(set)
    for page in truth["pages"]:
        if page["wet_file"] and page["duplicate_of"] is None and page["near_duplicate_of"] is None:
            for line in full_sentences(text_of(page, wet)):
                owners[line].add(page["index"])
    repeated = {line for line, pages in owners.items() if len(pages) > 1}
    assert repeated == set(truth["shared_lines"])
    sites = {urlsplit(truth["pages"][index]["url"]).netloc for line in repeated for index in owners[line]}
    assert len(sites) >= 5


def test_realnews_pages_are_on_the_news_domains(truth):
    for page in truth["pages"]:
        registered = urlsplit(page["url"]).netloc.removeprefix("www.")
        assert ("realnews" in page["kinds"]) == (registered in truth["news_domains"] and "article" in page["kinds"])


def test_responses_outside_the_wet_files(truth, responses):
    for page in truth["pages"]:
        if {"non_html", "http_404", "redirect"} & set(page["kinds"]):
            assert page["wet_file"] is None
            _, _, body, http = responses[(page["url"], page["timestamp"])]
            if "redirect" in page["kinds"]:
                assert http.get_header("Location") == page["location"]
                assert any(other["url"] == page["location"] and other["wet_file"] for other in truth["pages"])
            if page["content_type"] == "image/png":
                assert body.startswith(b"\x89PNG\r\n\x1a\n")
            if page["content_type"] == "application/pdf":
                assert body.startswith(b"%PDF-") and body.rstrip().endswith(b"%%EOF")
    types = {page["content_type"] for page in truth["pages"] if "non_html" in page["kinds"]}
    assert types == {"image/png", "application/pdf"}


def test_latin1_and_xhtml_pages_are_served_as_declared(truth, wet, responses):
    (latin1,) = [page for page in truth["pages"] if "latin1" in page["kinds"]]
    _, _, body, _ = responses[(latin1["url"], latin1["timestamp"])]
    assert latin1["content_type"] == "text/html; charset=ISO-8859-1"
    assert b"caf\xe9" in body and "café" in body.decode("iso-8859-1")
    assert "café" in text_of(latin1, wet)
    (xhtml,) = [page for page in truth["pages"] if "xhtml" in page["kinds"]]
    _, _, body, _ = responses[(xhtml["url"], xhtml["timestamp"])]
    assert xhtml["content_type"].startswith("application/xhtml+xml")
    assert body.startswith(b"<?xml") and b'xmlns="http://www.w3.org/1999/xhtml"' in body


def visible(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_html_holds_the_main_text_in_an_article_and_boilerplate_around_it(truth, responses):
    for page in truth["pages"]:
        if page["wet_file"]:
            _, _, body, http = responses[(page["url"], page["timestamp"])]
            markup = body.decode(http.get_header("Content-Type").split("charset=")[1])
            article = visible(markup[markup.index("<article>"):markup.index("</article>")])
            assert page["main_snippet"] in article
            assert page["boilerplate_snippet"] not in article and page["boilerplate_snippet"] in visible(markup)
            assert "<nav" in markup and "<footer" in markup


def test_zst_needs_the_long_window_and_holds_the_ndjson_bytes(crawl):
    compressed = Path(crawl.submissions_zst_path).read_bytes()
    frame = zstandard.get_frame_parameters(compressed)
    assert frame.window_size == 2 ** 31
    assert frame.content_size == zstandard.CONTENTSIZE_UNKNOWN
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompressobj().decompress(compressed)
    with zstandard.ZstdDecompressor(max_window_size=2 ** 31).stream_reader(open(crawl.submissions_zst_path, "rb")) as reader:
        assert reader.read() == Path(crawl.submissions_path).read_bytes()


def test_submission_lines_are_what_truth_says(crawl, truth):
    text = Path(crawl.submissions_path).read_text(encoding="utf-8")
    assert any(ord(character) > 0xFFFF for character in text)  # 4-byte UTF-8 for chunked readers to split
    lines = text.splitlines()
    expected = truth["submissions"]
    assert len(lines) == len(expected) >= 100
    created_types = Counter()
    for line, want in zip(lines, expected, strict=True):
        if want["malformed"]:
            with pytest.raises(json.JSONDecodeError):
                json.loads(line)
            continue
        got = json.loads(line)
        assert (got["id"], got["url"], got.get("score"), got["created_utc"]) == (
            want["id"], want["url"], want["score"], want["created_utc"])
        assert not set(want["missing"]) & set(got)
        created_types[type(got["created_utc"]).__name__] += 1
        if want["links_to"] is not None and "url_variant" not in want["kinds"]:
            assert got["url"] == truth["pages"][want["links_to"]]["url"]
    assert set(created_types) == {"int", "float", "str"}
    assert Counter(kind for want in expected for kind in want["kinds"]).keys() == SUBMISSION_KINDS.keys()


def test_submissions_cover_what_a_webtext_reader_must_handle(truth):
    subs = [want for want in truth["submissions"] if not want["malformed"]]
    years = Counter(want["created"][:4] for want in subs)
    assert set(years) <= {"2015", "2016", "2017", "2018", "2019"} and len(years) == 5
    assert sum(1 for want in subs if "self" in want["kinds"] and want["is_self"] is True) >= 5
    assert {want["score"] for want in subs} >= {0, 1, 2, 3, 100}
    assert {urlsplit(want["url"]).path.rsplit(".", 1)[-1] for want in subs
            if "media_file" in want["kinds"]} >= {"jpg", "pdf", "zip"}
    repeats = defaultdict(list)
    for want in subs:
        if "repeat_url" in want["kinds"]:
            repeats[want["links_to"]].append(want)
    assert len(repeats) >= 3
    for group in repeats.values():
        assert len({want["subreddit"] for want in group}) == len(group) >= 2
        assert len({want["url"] for want in group}) >= 2  # URL variants of the same page
    # One page is only worth keeping if scores are summed (1 + 1 + 2), not if the best one counts.
    assert any(sorted(want["score"] for want in group) == [1, 1, 2] for group in repeats.values())


def test_main_writes_a_sample_and_logs_it(tmp_path, caplog):
    with caplog.at_level("INFO", logger="samplecrawl.crawl"):
        assert main(["--out", str(tmp_path), "--seed", "3", "--pages", "120"]) == 0
    assert len(json.loads((tmp_path / "truth.json").read_text(encoding="utf-8"))["pages"]) == 120
    assert any("120 pages" in message for message in caplog.messages)


def test_too_few_pages_are_refused(tmp_path):
    with pytest.raises(ValueError, match="at least"):
        write_sample_crawl(tmp_path, pages=20)


def test_only_the_badword_pages_match_c4s_bad_words_filter(truth, wet):
    data = os.environ.get("CORPUSFORGE_TEST_DATA")
    if not data:
        pytest.skip("CORPUSFORGE_TEST_DATA is not set; it names the folder holding badwords/en")
    words = [word.strip() for word in (Path(data) / "badwords" / "en").read_text(encoding="utf-8").splitlines()]
    pattern = re.compile(r"(?:\W|^)({})(?:\W|$)".format("|".join(re.escape(word) for word in words if word)))
    for page in truth["pages"]:
        if page["wet_file"]:
            assert bool(pattern.search(text_of(page, wet).lower())) == ("badword" in page["kinds"]), page["url"]
