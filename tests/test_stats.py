"""Corpus statistics: exact counts on a hand-made corpus, domain order, the PNG, the empty corpus."""

import json
import os

import pytest

from corpus.records import Document
from corpus.stats import (
    LengthBin,
    compute_stats,
    domain_of,
    format_stats,
    length_histogram_figure,
    plot_length_histogram,
    quantile_key,
)

T = "2019-04-25T12:57:54Z"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def small_corpus():
    """Lengths 11, 3, 0, 7, 1, 20 characters; 52 UTF-8 bytes; 9 words; 1 empty."""
    return [
        Document("héllo world", "https://www.Example.com/a", T),  # é is 2 bytes
        Document("日本語", "http://example.com/b", T),  # 3 characters, 9 bytes
        Document("", "https://blog.example.com:8080/x", T),
        Document("a b\tc\nd", "http://other.org", T),  # 4 whitespace-split words
        Document("😀", "http://other.org/2", T),  # 1 character, 4 bytes
        Document("x" * 20, "not a url", T),  # no host: not a domain
    ]


def test_totals_are_exact():
    stats = compute_stats(iter(small_corpus()))  # a one-pass iterator is enough
    assert (stats.documents, stats.bytes, stats.characters, stats.words, stats.empty_documents) == (6, 52, 42, 9, 1)


def test_bytes_count_utf8_and_characters_count_code_points():
    stats = compute_stats([Document("日", "http://a.org/", T)])
    assert (stats.bytes, stats.characters, stats.words) == (3, 1, 1)


def test_top_domains_by_count_then_name():
    stats = compute_stats(small_corpus())
    assert stats.top_domains == (("example.com", 2), ("other.org", 2), ("blog.example.com", 1))
    assert compute_stats(small_corpus(), top_domains=1).top_domains == (("example.com", 2),)


def test_domain_of():
    assert domain_of("https://www.Example.COM:443/path?q=1") == "example.com"
    assert domain_of("http://www2.example.com/") == "www2.example.com"
    assert domain_of("no scheme/path") == ""
    assert domain_of("http://[broken/") == ""


def test_length_histogram_and_quantiles():
    stats = compute_stats(small_corpus())
    assert stats.length_histogram == (
        LengthBin(0, 1, 1),
        LengthBin(1, 2, 1),
        LengthBin(2, 4, 1),
        LengthBin(4, 8, 1),
        LengthBin(8, 16, 1),
        LengthBin(16, 32, 1),
    )
    assert stats.length_quantiles == {"p50": 3, "p90": 20, "p99": 20, "max": 20}


def test_long_lengths_are_kept_to_four_digits_but_max_is_exact():
    assert quantile_key(9_999) == 9_999
    assert quantile_key(123_456) == 123_400
    stats = compute_stats([Document("a" * 123_456, "http://a.org/", T)])
    assert stats.length_quantiles == {"p50": 123_400, "p90": 123_400, "p99": 123_400, "max": 123_456}


def test_to_dict_is_json_serialisable():
    data = json.loads(json.dumps(compute_stats(small_corpus()).to_dict()))
    assert data["documents"] == 6 and data["bytes"] == 52
    assert data["top_domains"][0] == {"domain": "example.com", "documents": 2}
    assert data["length_histogram"][0] == {"min_characters": 0, "max_characters": 1, "documents": 1}
    assert data["length_quantiles"]["max"] == 20


def test_format_stats_fits_one_screen():
    corpus = [Document("word " * n, f"http://site{n % 30}.org/{n}", T) for n in range(1, 5000)]
    table = format_stats(compute_stats(corpus))
    assert "documents" in table and "site1.org" in table and "p99" in table
    assert len(table.splitlines()) <= 60 and max(map(len, table.splitlines())) <= 100


def test_plot_writes_a_png_atomically(tmp_path):
    path = tmp_path / "lengths.png"
    plot_length_histogram(compute_stats(small_corpus()), path, title="small corpus")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5_000
    assert os.listdir(tmp_path) == ["lengths.png"]


def test_empty_corpus_gives_zeros_and_a_no_documents_plot(tmp_path):
    stats = compute_stats([])
    assert (stats.documents, stats.bytes, stats.characters, stats.words, stats.empty_documents) == (0, 0, 0, 0, 0)
    assert stats.top_domains == () and stats.length_histogram == ()
    assert stats.length_quantiles == {"p50": 0, "p90": 0, "p99": 0, "max": 0}
    assert "documents" in format_stats(stats)
    figure = length_histogram_figure(stats)
    assert [t.get_text() for t in figure.axes[0].texts] == ["no documents"]
    path = tmp_path / "empty.png"
    plot_length_histogram(stats, path)
    assert path.read_bytes().startswith(PNG_SIGNATURE) and path.stat().st_size > 1_000


def test_corpus_of_empty_documents_says_so():
    figure = length_histogram_figure(compute_stats([Document("", "http://a.org/", T)] * 3))
    assert [t.get_text() for t in figure.axes[0].texts] == ["all 3 documents are empty"]


@pytest.mark.pipeline  # the corpusforge command in a subprocess
def test_stats_plot_on_a_full_disk_is_one_line_exit_1_and_no_png(tmp_path):
    import sys
    from pathlib import Path

    from full_disk import error_lines, small_disk

    from corpus.shards import write_shard

    shard = tmp_path / "docs-train.00000-of-00001.jsonl"
    write_shard(small_corpus() * 50, shard, "jsonl")
    with small_disk(tmp_path / "disk", 8 << 10) as disk:
        png = disk.folder / "lengths.png"
        done = disk.run([sys.executable, "-m", "pipelines.cli", "stats", str(shard), "--plot", str(png)],
                        cwd=Path(__file__).resolve().parents[1], env=dict(os.environ, MPLBACKEND="Agg"))
        assert done.returncode == 1, done.stderr[-3000:]
        (line,) = error_lines(done.stderr)
        assert f"{png}: {disk.reason} (" in line and "Traceback" not in done.stderr
        assert os.listdir(disk.folder) == []  # neither the PNG nor its temporary
