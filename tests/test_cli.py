"""The corpusforge command as a user runs it: a real subprocess, stdout, stderr, exit codes."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from corpus.fetch import FetchConfig
from corpus.records import Document
from corpus.shards import write_shards
from pipelines import cli, fetch_links
from pipelines.audit import options as audit_options
from pipelines.jobs import STATS_FILE
from pipelines.steps import ERRORS_FILE

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


def corpusforge(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stderr[-3000:]}")
    return result


@pytest.mark.parametrize("command", ["inspect", "stats", "fetch", "read", "tokenize", "train", "sample", "eval", "demo"])
def test_every_subcommand_has_help(command):
    out = corpusforge(command, "--help").stdout
    assert out.startswith("usage: corpusforge " + command)


def test_top_level_help_lists_only_working_commands():
    out = corpusforge("--help").stdout
    listed = set(re.findall(r"^    ([\w-]+)", out.split("COMMAND")[-1], re.M))
    assert listed == {"inspect", "stats", "fetch", "read", "c4", "webtext", "audit", "decontaminate", "tokenize", "train", "finetune",
                      "sample", "eval", "demo", "spark-package"}


def test_fetch_takes_underscore_options_and_the_old_dashed_spellings():
    parser = cli.command_parser("fetch", fetch_links)
    underscores = parser.parse_args(["links.txt", "--out", "o", "--allow_hosts", "127.0.0.1:8080", "--per_host_concurrency", "3",
                                     "--per_host_delay", "0", "--ignore_robots", "--no_resume"])
    dashes = parser.parse_args(["links.txt", "--out", "o", "--allow-hosts", "127.0.0.1:8080", "--per-host-concurrency", "3",
                                "--per-host-delay", "0", "--ignore-robots", "--no-resume"])
    assert underscores == dashes
    assert (underscores.per_host_concurrency, underscores.per_host_delay, underscores.ignore_robots) == (3, 0.0, True)
    assert parser.parse_args(["links.txt", "--out", "o"]).deadline == FetchConfig().deadline_s


def test_fetch_options_out_of_range_are_a_usage_error(tmp_path):
    (tmp_path / "links.txt").write_text("http://example.com/\n")
    result = corpusforge("fetch", str(tmp_path / "links.txt"), "--out", str(tmp_path / "out"), "--concurrency", "0", check=False)
    assert result.returncode == 2 and "concurrency must be >= 1" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["inspect", "{wet}", "--json", "-q"], ["fetch", "{tmp}/none.txt", "--out", "{tmp}/out"]])
def test_commands_without_a_pipeline_never_import_beam(real_data, tmp_path, argv):
    (tmp_path / "none.txt").write_text("")
    argv = [a.format(wet=real_data / WET, tmp=tmp_path) for a in argv]
    code = ("import sys; from pipelines import cli\n"
            f"status = cli.main({argv!r})\n"
            "print('exit', status, 'beam' if 'apache_beam' in sys.modules else 'no beam')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "exit 0 no beam"


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
    assert (out / "docs-train.00000-of-00001.json.gz").exists() and (out / STATS_FILE).exists()


# -- mistakes are refused before any work, in one line, with exit 2 ------------------------

WET = "warc/ccscalatools/filter_test_1.wet.gz"


@pytest.mark.parametrize("job, args, message", [
    ("c4", ["--varient", "realnewslike"], "--varient (did you mean --variant?)"),
    ("read", ["--num_shards", "0"], "argument --num_shards: must be at least 1, not 0"),
    ("read", ["--num_shards", "-1"], "argument --num_shards: must be at least 1, not -1"),
    ("read", ["--num_shards", "-3"], "argument --num_shards: must be at least 1, not -3"),
    ("read", ["--max_files", "-1"], "argument --max_files: must be at least 1, not -1"),
    ("c4", ["--extract_timeout", "-1"], "argument --extract_timeout: must be a positive number, not -1"),
    ("c4", ["--num_shards", "two"], "argument --num_shards: not an integer: 'two'"),
])
def test_a_mistaken_option_is_a_one_line_usage_error_before_anything_runs(real_data, tmp_path, job, args, message):
    out = tmp_path / "out"
    extra = ["--badwords", str(real_data / "badwords/en")] if job == "c4" else []
    result = corpusforge(job, "--input", str(real_data / WET), "--output", str(out), *extra, *args, check=False)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("job, args, message", [
    ("audit", ["--n", "0"], "argument --n: must be at least 1, not 0"),
    ("audit", ["--error_rate", "2"], "argument --error_rate: must be between 0 and 1 (exclusive), not 2"),
    ("audit", ["--filter_parts", "3"], "argument --filter_parts: must be a power of two (1, 2, 4, ...), not 3"),
    ("decontaminate", ["--margin", "-5"], "argument --margin: must not be negative, not -5"),
])
def test_audit_options_out_of_range_are_refused(real_data, tmp_path, job, args, message):
    benchmark = f"lambada:{real_data / 'lm_benchmarks/lambada/lambada_test.jsonl'}"
    result = corpusforge(job, "--corpus", str(tmp_path), "--benchmark", benchmark, "--output", str(tmp_path / "out"), *args, check=False)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--near_dup_threshold", "2"], "argument --near_dup_threshold: must be between 0 and 1, not 2"),
    (["--fetch_shards", "0"], "argument --fetch_shards: must be at least 1, not 0"),
])
def test_webtext_options_out_of_range_are_refused(tmp_path, args, message):
    result = corpusforge("webtext", "--submissions", str(tmp_path / "RS.zst"), "--pages", "crawl", "--output", str(tmp_path / "out"),
                         *args, check=False)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_webtext_never_fetches_the_internet_unless_asked(tmp_path):
    # The case: `webtext` without --pages started live fetching, and --help did not say so.
    result = corpusforge("webtext", "--submissions", str(tmp_path / "RS.zst"), "--output", str(tmp_path / "out"), check=False)
    assert result.returncode == 2 and "the following arguments are required: --pages" in result.stderr
    assert not (tmp_path / "out").exists()
    help_text = " ".join(corpusforge("webtext", "--help").stdout.split())
    assert "fetch = live from the internet" in help_text


def test_repeated_benchmark_options_add_up():
    parser = __import__("argparse").ArgumentParser()
    audit_options.add_common_arguments(parser)
    args = parser.parse_args(["--corpus", "c", "--output", "o", "--benchmark", "a:x", "--benchmark", "b:y", "c:z"])
    assert args.benchmark == ["a:x", "b:y", "c:z"]


def test_help_is_quiet_and_a_closed_pipe_is_not_an_error(real_data):
    result = corpusforge("c4", "--help")
    assert "apitools" not in result.stderr
    pipe = subprocess.run(f"{sys.executable} -m pipelines.cli inspect --json -q {real_data / WET} {real_data / WET} | head -c 10",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert len(pipe.stdout) == 10 and "BrokenPipe" not in pipe.stderr and "Traceback" not in pipe.stderr


@pytest.mark.parametrize("command", [
    ["stats", "{missing}"],
    ["audit", "--corpus", "{missing}", "--benchmark", "lambada:{data}/lm_benchmarks/lambada/lambada_test.jsonl", "--output", "{tmp}/a"],
    ["decontaminate", "--corpus", "{missing}", "--benchmark", "lambada:{data}/lm_benchmarks/lambada/lambada_test.jsonl", "--output", "{tmp}/d"],
    ["tokenize", "--input", "{missing}", "--output", "{tmp}/t"],
])
def test_missing_shard_inputs_are_one_line_errors(real_data, tmp_path, command):
    args = [a.format(missing=tmp_path / "nothing", data=real_data, tmp=tmp_path) for a in command]
    result = corpusforge(*args, check=False)
    assert result.returncode == 2 and "no such shard file or directory" in result.stderr and "Traceback" not in result.stderr


def test_a_rerun_into_a_full_output_is_refused_until_overwrite_and_never_mixes_sets(real_data, tmp_path):
    out = tmp_path / "out"
    corpusforge("read", "--input", str(real_data / WET), "--output", str(out), "--num_shards", "2", "--format", "jsonl")
    again = corpusforge("read", "--input", str(real_data / WET), "--output", str(out), "--num_shards", "1", "--format", "jsonl", check=False)
    assert again.returncode == 2 and "already holds 5 file(s)" in again.stderr and "--overwrite" in again.stderr
    assert "Traceback" not in again.stderr
    corpusforge("read", "--input", str(real_data / WET), "--output", str(out), "--num_shards", "1", "--format", "jsonl", "--overwrite")
    assert sorted(p.name for p in out.glob("docs-*")) == ["docs-train.00000-of-00001.jsonl"]
    stats = json.loads(corpusforge("stats", str(out), "--json").stdout)
    assert stats["documents"] == 25  # one set, not 25 + 25
    (tmp_path / "a-file").write_text("x")
    result = corpusforge("read", "--input", str(real_data / WET), "--output", str(tmp_path / "a-file"), check=False)
    assert result.returncode == 2 and "is a file, not a folder" in result.stderr


def test_inspect_strict_finds_the_missing_target_uri_that_read_finds(real_data, tmp_path):
    # The case: `inspect --strict` passed a file in which `read` reports missing_target_uri.
    bad = str(real_data / "warc_malformed/ccscalatools/corrupt_warcconversion_1.wet.gz")
    result = corpusforge("inspect", "-q", "--strict", "--json", bad, check=False)
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"] == {"missing_target_uri": 1}
    read = corpusforge("read", "--input", bad, "--output", str(tmp_path / "read"))
    assert "missing_target_uri': 1" in read.stdout


def test_a_wet_gz_that_is_not_gzip_is_an_error_row_and_a_failing_exit(real_data, tmp_path):
    # The case: a non-gzip .wet.gz gave exit 0, empty shards and no error row.
    fake = tmp_path / "CC-MAIN-x.warc.wet.gz"
    fake.write_bytes(b"this is a text file, not gzip\n" * 10)
    for job in ("read", "c4"):
        extra = ["--badwords", str(real_data / "badwords" / "en")] if job == "c4" else []
        result = corpusforge(job, "--input", str(fake), "--output", str(tmp_path / job), *extra, check=False)
        assert result.returncode == 1, result.stderr
        assert "no WARC record could be read" in result.stderr
        assert "garbage_between_records" in result.stdout
        assert (tmp_path / job / ERRORS_FILE).read_text().count("garbage_between_records") == 1


def test_a_beam_job_shows_progress_and_keeps_stderr_quiet(real_data, tmp_path):
    # The issue's case: 38 s of silence, then noise ("apitools not found", "Missing pipeline
    # option (runner)", one INFO line per shard). Off a terminal, progress is a periodic log line.

    wet = [str(real_data / "warc/ccscalatools/filter_test_1.wet.gz"), str(real_data / "warc/whirlwind/whirlwind.warc.wet.gz")]
    env = {**os.environ, "CORPUSFORGE_PROGRESS_SECONDS": "0.2"}
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "read", "--input", *wet, "--output", str(tmp_path / "out"),
                             "--num_shards", "16"], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert "read: 2/2 files, 26 records, 26 documents written" in result.stderr
    for noise in ("apitools not found", "Missing pipeline option", "00015-of-00016"):
        assert noise not in result.stderr
    # Progress lines come every 0.2 s, as many as the job takes (more on a busy machine); any
    # other line is counted: one a shard (16 here) would be the noise this test is about.
    lines = result.stderr.splitlines()
    progress = [line for line in lines if " pipelines.progress: " in line]
    assert progress and len(lines) - len(progress) < 16, lines[:40]
    quiet = subprocess.run([sys.executable, "-m", "pipelines.cli", "-q", "read", "--input", *wet, "--output", str(tmp_path / "q")],
                           capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == 0 and "files" not in quiet.stderr.replace("file(s)", "")


def test_worker_processes_do_not_flood_stderr(real_data, tmp_path):
    # The case: ~45 lines of worker chatter with --direct_running_mode multi_processing.
    wet = str(real_data / "warc/ccscalatools/filter_test_1.wet.gz")
    args = ["read", "--input", wet, "--output", str(tmp_path / "out"), "--direct_num_workers", "2",
            "--direct_running_mode", "multi_processing"]
    result = corpusforge(*args)
    assert "25 documents" in result.stdout
    for chatter in ("sdk_worker", "semi_persistent_directory", "Discarding unparseable args", "Pipeline_options", "apitools"):
        assert chatter not in result.stderr, chatter
    assert len(result.stderr.splitlines()) <= 5, result.stderr


def test_a_folder_in_two_formats_is_counted_and_tokenized_once(real_data, tmp_path):
    # The cases: `stats demo-out/c4/` counted 524 documents where the job wrote 262 (json.gz
    # and Parquet both read); `tokenize --input docs/` read 644 documents from 322.
    docs = tmp_path / "docs"
    corpusforge("read", "--input", str(real_data / WET), "--output", str(docs), "--format", "c4json", "parquet", "--num_shards", "2")
    assert len(list(docs.glob("c4json/*.json.gz"))) == len(list(docs.glob("parquet/*.parquet"))) == 2
    assert json.loads(corpusforge("stats", str(docs), "--json", "-q").stdout)["documents"] == 25
    result = corpusforge("tokenize", "--input", str(docs), "--output", str(tmp_path / "tokens"), "--vocab_size", "300",
                         "--val_docs", "0", "--prefix", "t")
    assert json.loads((tmp_path / "tokens" / "meta.json").read_text())["splits"]["train"]["documents"] == 25, result.stdout


def test_the_readme_inspect_example_joins_the_manifest_to_base_url(real_data, tmp_path, monkeypatch):
    # The case: `inspect crawl-data/CC-MAIN-2019-18/wet.paths.gz --base_url ...` crashed: the
    # manifest was never looked for under --base_url. A local mirror of the host stands in for it.

    mirror = tmp_path / "mirror"
    (mirror / "crawl-data/CC-MAIN-2019-18/segments/x/wet").mkdir(parents=True)
    entry = "crawl-data/CC-MAIN-2019-18/segments/x/wet/filter_test_1.wet.gz"
    shutil.copy(real_data / WET, mirror / entry)
    with gzip.open(mirror / "crawl-data/CC-MAIN-2019-18/wet.paths.gz", "wt") as f:
        f.write(entry + "\n")
    monkeypatch.chdir(tmp_path)  # no crawl-data/ here: the manifest is found under --base_url
    result = corpusforge("inspect", "--json", "-q", "crawl-data/CC-MAIN-2019-18/wet.paths.gz", "--base_url", f"{mirror}/")
    report = json.loads(result.stdout)
    assert report["files"] == 1 and report["records"] == {"warcinfo": 1, "conversion": 25}


def test_stats_plot_into_a_folder_that_does_not_exist_yet(tmp_path):
    # The case: `stats --plot nodir/x.png` gave a traceback.
    write_shards([Document("one two three", "https://a.example/", "")], tmp_path / "shards", fmt="jsonl")
    result = corpusforge("stats", "-q", "--plot", str(tmp_path / "nodir" / "x.png"), str(tmp_path / "shards"))
    assert (tmp_path / "nodir" / "x.png").read_bytes()[:4] == b"\x89PNG" and "Traceback" not in result.stderr


def test_cuda_on_a_cpu_only_torch_is_one_line(tmp_path):
    # The case: `--device cuda` on a CPU-only torch gave a traceback.

    if torch.cuda.is_available():
        pytest.skip("checks the message on a machine without a GPU")
    result = corpusforge("train", "--data", str(tmp_path / "none"), "--out", str(tmp_path / "run"), "--device", "cuda", check=False)
    assert result.returncode == 2 and "--device cuda: this torch" in result.stderr and "Traceback" not in result.stderr


def test_audit_takes_benchmark_repeated_on_the_command_line(real_data, tmp_path):
    # The case: `audit --benchmark A --benchmark B` silently audited only B.
    write_shards([Document("plain words " * 20, "https://a.example/", "")], tmp_path / "corpus", fmt="jsonl")
    bench = real_data / "lm_benchmarks"
    corpusforge("audit", "--corpus", str(tmp_path / "corpus"), "--benchmark", f"lambada:{bench / 'lambada/lambada_test.jsonl'}",
                "--benchmark", f"ptb:{bench / 'ptb/ptb.test.txt'}", "--output", str(tmp_path / "audit"), "--mode", "exact")
    rows = json.loads((tmp_path / "audit" / "report.json").read_text())["reports"]
    assert sorted(row["name"] for row in rows) == ["lambada", "ptb"]


def test_the_punkt_message_names_this_python(tmp_path):
    # The case: the hint said `python -c ...`, which is not the venv's python.

    env = {k: v for k, v in os.environ.items() if k != "NLTK_DATA"}
    env["HOME"] = str(tmp_path)  # no ~/nltk_data either
    result = subprocess.run([sys.executable, "-c", "from corpus.sentences import PUNKT_INSTALL_HINT; print(PUNKT_INSTALL_HINT)"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert f"{sys.executable} -c 'import nltk; nltk.download(\"punkt_tab\")'" in result.stdout


def test_c4_offline_without_a_cached_list_stops_before_any_work(real_data, tmp_path):
    # The case: the default --badwords is a URL, which failed offline after the job began.
    # A proxy nobody listens on stands in for "no network".

    env = {**os.environ, "CORPUSFORGE_CACHE": str(tmp_path / "cache"), "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    result = subprocess.run([sys.executable, "-m", "pipelines.cli", "c4", "--input", str(real_data / WET), "--output", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--badwords: cannot download https://raw.githubusercontent.com/LDNOOBW/" in result.stderr
    assert "Offline, pass a local copy with --badwords FILE, or put the file at " + str(tmp_path / "cache") in result.stderr
    assert not (tmp_path / "out").exists()
    # With the list where the message says, the same command runs offline.
    cached = result.stderr.split("or put the file at ")[1].split()[0]
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    with open(cached, "wb") as f:
        f.write((real_data / "badwords" / "en").read_bytes())
    again = subprocess.run([sys.executable, "-m", "pipelines.cli", "c4", "--input", str(real_data / WET), "--output", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-2000:]


# A thread that never ends, as Beam's client threads can be after their job's worker died;
# the command then fails with a lost worker (argv "lost") or ends normally (argv "plain").
_STUCK_JOB_THREAD = """
import sys, threading
from pipelines import cli
from pipelines.progress import WorkerLostError

threading.Thread(target=threading.Event().wait, name="stuck-job-client").start()  # not a daemon


def command(argv):
    if argv == ["lost"]:
        raise WorkerLostError("a worker of the job died while it ran")
    return 0


cli._main = command
cli.EXIT_GRACE_S = 1.0
cli.program()
"""


def test_the_command_ends_after_a_lost_worker_even_when_a_thread_of_the_job_never_does():
    result = subprocess.run([sys.executable, "-c", _STUCK_JOB_THREAD, "lost"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "a worker of the job died" in result.stderr
    assert "threads of the failed job still waited after 1 s; exiting with status 1" in result.stderr
    # Without the lost worker, the interpreter's own exit waits for the thread: the grace is only for a dead job.
    waiting = subprocess.Popen([sys.executable, "-c", _STUCK_JOB_THREAD, "plain"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.communicate(timeout=5)
    finally:
        waiting.kill()
        waiting.communicate()
