"""The corpusforge command as a user runs it: a real subprocess, stdout, stderr, exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from corpus.records import Document
from corpus.shards import write_shards


def corpusforge(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stderr[-3000:]}")
    return result


@pytest.mark.parametrize("command", ["inspect", "stats", "read", "tokenize", "train", "sample", "eval", "demo"])
def test_every_subcommand_has_help(command):
    out = corpusforge(command, "--help").stdout
    assert out.startswith("usage: corpusforge " + command)


def test_top_level_help_lists_only_working_commands():
    out = corpusforge("--help").stdout
    listed = set(re.findall(r"^    (\w+)", out.split("COMMAND")[-1], re.M))
    assert listed == {"inspect", "stats", "read", "c4", "webtext", "audit", "decontaminate", "tokenize", "train", "sample", "eval", "demo"}


def test_inspect_counts_records_mime_languages_and_errors(real_data):
    result = corpusforge(
        "inspect", "--json", "-q",
        str(real_data / "warc/resiliparse/warcfile.warc.gz"),
        str(real_data / "warc/whirlwind/whirlwind.warc.wet.gz"),
        str(real_data / "warc_malformed/ccscalatools/appended_zip_fragment_unexpected_eof.wet.gz"),
    )
    report = json.loads(result.stdout)
    assert report["files"] == 3
    assert report["records"] == {"request": 17, "response": 16, "metadata": 16, "warcinfo": 3, "conversion": 16}
    assert report["mime_types"]["response:text/html"] == 16
    assert report["languages"] == {"spa": 1}
    assert report["errors"] == {"truncated_gzip": 1}


def test_inspect_table_and_strict_exit_code(real_data):
    bad = str(real_data / "warc_malformed/ccscalatools/fragment1_incomplete_last.wet.gz")
    result = corpusforge("inspect", "-q", "--strict", bad, check=False)
    assert result.returncode == 1
    assert "clipped_record" in result.stdout and "errors by reason" in result.stdout
    assert "fragment1_incomplete_last.wet.gz @" in result.stderr or "fragment1_incomplete_last.wet.gz @" in result.stdout


def test_missing_input_is_a_clear_error(tmp_path):
    result = corpusforge("inspect", str(tmp_path / "no-such.warc.gz"), check=False)
    assert result.returncode == 2
    assert "no-such.warc.gz: no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_stats_prints_numbers_and_draws_a_histogram(tmp_path):
    docs = [Document("one two three", "https://www.example.com/a", "2019-04-25T12:57:54Z"), Document("é" * 10, "https://news.example.org/b", "2019-04-25T12:57:54Z")]
    write_shards(docs, tmp_path / "shards", fmt="parquet", num_shards=2)
    png = tmp_path / "lengths.png"
    result = corpusforge("stats", "--json", "-q", "--plot", str(png), str(tmp_path / "shards"))
    stats = json.loads(result.stdout)
    assert (stats["documents"], stats["characters"], stats["bytes"], stats["words"]) == (2, 23, 33, 4)
    assert {d["domain"] for d in stats["top_domains"]} == {"example.com", "news.example.org"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "histogram written" in result.stderr


def test_read_via_cli_passes_beam_options_through(real_data, tmp_path):
    out = tmp_path / "out"
    result = corpusforge("read", "--input", str(real_data / "warc/ccscalatools/filter_test_1.wet.gz"), "--output", str(out), "--direct_num_workers", "1")
    assert "25 documents" in result.stdout
    assert (out / "docs-train.00000-of-00001.json.gz").exists() and (out / "stats.json").exists()
