"""Jobs on a real S3 API server and on Beam's PortableRunner with workers in separate processes.

The S3 server is moto in server mode on 127.0.0.1 (started here), reached through Beam's own
S3 filesystem (``apache-beam[aws]``) and ``--s3_endpoint_url``. The portable run uses
``pipelines.portable``'s job server and worker pool, each a separate process started here;
the job asks for two SDK workers, which the pool starts as two more processes. Their output
must be byte for byte the DirectRunner's on local disk. Then every job round-trips through
``memory://``, and a job killed midway leaves a folder readers refuse.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from common import memfs, storage
from corpus.inputs import InputError
from corpus.shards import find_shards, read_documents
from pipelines import cli, sources
from pipelines.audit import job as audit
from pipelines.beam_package import PORTABLE_JOB_TIMEOUT_S, portable_runner_options
from pipelines.c4 import job as c4_pipeline
from pipelines.jobs import STATS_FILE
from pipelines.read import job as read_pipeline
from pipelines.tokenize import job as tokenize
from pipelines.webtext import job as webtext

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "corpusforge-ci"
WET_FILES = ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz")


@contextlib.contextmanager
def closed_port():
    """A port that refuses connections while the block runs: bound here and never listening,
    so no other process can start listening on it meanwhile (a port merely found free could be
    taken between the finding and the test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def start(command: list[str], log_path: Path, env: dict | None = None) -> subprocess.Popen:
    log = open(log_path, "wb")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def wait_for(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not come up in {timeout:.0f} s")


# Start-up lines with the port a server bound: a `python -m pipelines.portable` service's, moto's.
BOUND = re.compile(r"corpusforge (?:worker pool|job server) listening at [^\s:]+:(\d+)")
MOTO_BOUND = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")


def start_service(service: str, log_path: Path, env: dict) -> subprocess.Popen:
    """``python -m pipelines.portable SERVICE --port 0``: the service binds a port the system
    picks (a port picked here beforehand could be taken by another process first)."""
    return start([sys.executable, "-m", "pipelines.portable", service, "--port", "0"], log_path, env)


def bound_port(process: subprocess.Popen, log_path: Path, line: re.Pattern = BOUND) -> int:
    """The port a server started on port 0 listens on, read from its start-up ``line`` in its log."""
    found: list[int] = []

    def started() -> bool:
        match = line.search(log_path.read_text(errors="replace"))
        if match:
            found.append(int(match.group(1)))
        elif process.poll() is not None:
            raise RuntimeError(f"{log_path.stem} exited with status {process.returncode}: {log_path.read_text(errors='replace')[-2000:]}")
        return bool(match)

    wait_for(started, log_path.stem)
    return found[0]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto's S3 API server on 127.0.0.1 with one bucket; yields the Beam options that reach it."""
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto")
    logs = tmp_path_factory.mktemp("moto")
    server = start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"], logs / "moto.log")
    try:
        endpoint = f"http://127.0.0.1:{bound_port(server, logs / 'moto.log', MOTO_BOUND)}"
        wait_for(lambda: urllib.request.urlopen(endpoint + "/", timeout=2).status == 200, "moto server")
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        options = ["--s3_endpoint_url", endpoint, "--s3_access_key_id", "testing", "--s3_secret_access_key", "testing",
                   "--s3_region_name", "us-east-1"]
        storage.configure(options)
        yield options
    finally:
        stop(server)


@pytest.fixture(scope="module")
def portable(tmp_path_factory):
    """A job server and a worker pool, separate processes; yields the runner options and the pool's log."""
    logs = tmp_path_factory.mktemp("portable")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # S3 settings must come from the job's options
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    pool = start_service("worker-pool", logs / "pool.log", env)
    jobs = start_service("job-server", logs / "jobs.log", env)
    try:
        pool_port, job_port = bound_port(pool, logs / "pool.log"), bound_port(jobs, logs / "jobs.log")
        yield {"options": ["--runner", "PortableRunner", "--job_endpoint", f"localhost:{job_port}",
                           "--environment_type", "EXTERNAL", "--environment_config", f"localhost:{pool_port}",
                           "--direct_num_workers", "2"],
               "pool_log": logs / "pool.log", "jobs_log": logs / "jobs.log"}
    finally:
        stop(jobs)
        stop(pool)


@pytest.fixture(scope="module")
def wet_inputs(real_data, tmp_path_factory):
    folder = tmp_path_factory.mktemp("wet")
    for name in WET_FILES:
        shutil.copy(real_data / name, folder / Path(name).name)
    return folder


def c4_args(real_data, inputs: str, output: str) -> list[str]:
    return ["--input", inputs, "--output", output, "--badwords", str(real_data / "badwords" / "en"),
            "--num_shards", "2", "--format", "c4json", "parquet"]


def lambada(real_data) -> str:
    return f"lambada:{real_data / 'lm_benchmarks' / 'lambada' / 'lambada_test.jsonl'}"


AUDIT_ARGS = ["--fp_queries", "20000", "--filter_parts", "2"]


@pytest.fixture(scope="module")
def local_c4(real_data, wet_inputs, tmp_path_factory) -> str:
    """The C4 job on the DirectRunner, local disk: what every other runner and store must equal.
    Tests read it and never write into it."""
    out = str(tmp_path_factory.mktemp("local") / "c4")
    c4_pipeline.run(c4_args(real_data, str(wet_inputs), out))
    return out


@pytest.fixture(scope="module")
def local_audit(real_data, local_c4) -> str:
    """The audit of ``local_c4`` on the DirectRunner, on local disk."""
    out = str(Path(local_c4).parent / "audit")
    audit.run_audit(["--corpus", local_c4, "--benchmark", lambada(real_data), "--output", out] + AUDIT_ARGS)
    return out


# The local reference runs of the other jobs, each run once for every test that compares a run
# on a store (memory://, S3) or another sort with it. Tests read them and never write into them.
READ_FORMATS = ["c4json", "parquet", "jsonl"]
TOKENIZE_ARGS = ["--vocab_size", "300", "--shard_tokens", "20000", "--val_docs", "2"]


@pytest.fixture(scope="module")
def local_docs(wet_inputs, tmp_path_factory) -> tuple[str, dict]:
    """``read`` of the WET files into two shards in every format, on local disk: (folder, summary)."""
    out = str(tmp_path_factory.mktemp("local-read") / "docs")
    stats = read_pipeline.run(["--input", str(wet_inputs), "--output", out, "--num_shards", "2", "--format", *READ_FORMATS])
    return out, stats


@pytest.fixture(scope="module")
def local_clean(real_data, local_c4) -> str:
    """``decontaminate`` of ``local_c4`` against LAMBADA, JSON lines, on local disk."""
    out = str(Path(local_c4).parent / "clean")
    audit.run_decontaminate(["--corpus", local_c4, "--benchmark", lambada(real_data), "--output", out, "--format", "jsonl"])
    return out


@pytest.fixture(scope="module")
def local_tokens(local_clean) -> str:
    """``tokenize`` of ``local_clean`` (several train shards), on local disk."""
    out = str(Path(local_clean).parent / "tokens")
    tokenize.run(["--input", local_clean, "--output", out] + TOKENIZE_ARGS)
    return out


@pytest.fixture(scope="module")
def local_webtext(small_crawl, tmp_path_factory) -> str:
    """``webtext`` of the 120-page sample crawl's Common Crawl join, on local disk: byte identity
    with a store's run holds page by page, not by the crawl's size."""
    out = str(tmp_path_factory.mktemp("local-webtext") / "webtext")
    webtext.run(webtext_args(small_crawl, out))
    return out


def webtext_args(crawl, output: str) -> list[str]:
    return ["--submissions", crawl.submissions_zst_path, "--pages", "crawl", "--warc", *crawl.warc_paths,
            "--output", output, "--format", "parquet", "jsonl"]


def manifest_files(folder: str) -> dict[str, dict]:
    return {entry["name"]: entry for entry in storage.read_success(folder)["files"]}


def assert_same_output(local: str, remote: str, skip: tuple[str, ...] = ()) -> None:
    expected, got = manifest_files(local), manifest_files(remote)
    assert sorted(got) == sorted(expected)
    for name, entry in expected.items():
        if name in skip:
            continue
        assert got[name] == entry, name
        assert storage.read_bytes(storage.join(remote, name)) == Path(local, name).read_bytes(), name


def upload(folder: Path, prefix: str) -> None:
    """Every file under ``folder`` (subfolders too) to the same names under ``prefix``."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        storage.copy_file(str(path), storage.join(prefix, path.relative_to(folder).as_posix()))


def test_c4_and_audit_on_portable_runner_against_s3_match_the_direct_runner(real_data, wet_inputs, local_c4, local_audit, s3, portable):
    # PortableRunner, two SDK worker processes, input and output on the S3 server.
    storage.configure(s3)  # each Pipeline() sets FileSystems' options: the local run dropped the S3 ones
    upload(wet_inputs, f"s3://{BUCKET}/wet")
    remote_c4 = f"s3://{BUCKET}/c4"
    stats = c4_pipeline.run(c4_args(real_data, f"s3://{BUCKET}/wet/", remote_c4) + s3 + portable["options"])
    assert stats["counters"]["train"]["examples"] > 10
    assert_same_output(local_c4, remote_c4)
    assert not storage.exists(storage.staging_path(remote_c4, storage.JOB_FILE))
    started = portable["pool_log"].read_text(errors="replace")
    assert "--id=worker_0" in started and "--id=worker_1" in started, "the pool did not start two workers"

    # The audit, read from and written to S3 on the same runner, against the local one.
    storage.configure(s3)
    remote_audit = f"s3://{BUCKET}/audit"
    audit.run_audit(["--corpus", remote_c4, "--benchmark", lambada(real_data), "--output", remote_audit] + AUDIT_ARGS
                    + s3 + portable["options"])
    storage.configure(s3)
    assert_same_output(local_audit, remote_audit, skip=("audit.json", "bloom/bloom.json"))  # both name the corpus: its folder, its _SUCCESS digest

    # A reader of the S3 set: corpusforge stats with the S3 options.
    assert cli.main(["stats", remote_c4, "--json", "-q"] + s3) == 0


def test_every_job_round_trips_through_memory(real_data, wet_inputs, local_c4, local_audit, local_docs, local_clean,
                                              local_tokens, tmp_path):
    memfs.clear()
    upload(wet_inputs, "memory://in/wet")
    # read
    docs, _ = local_docs
    read_pipeline.run(["--input", "memory://in/wet/", "--output", "memory://out/docs", "--num_shards", "2", "--format", *READ_FORMATS])
    assert sorted(manifest_files("memory://out/docs")) == sorted(manifest_files(docs))

    def without_source(folder):  # meta["source"] names the input file, which differs
        return [(d.text, d.url, d.timestamp, {k: v for k, v in d.meta.items() if k != "source"}) for d in read_documents(folder)]

    assert without_source("memory://out/docs") == without_source(docs)
    # c4
    c4_pipeline.run(c4_args(real_data, "memory://in/wet/*.wet.gz", "memory://out/c4"))
    assert_same_output(local_c4, "memory://out/c4")
    # audit and decontaminate
    benchmark = lambada(real_data)
    audit.run_audit(["--corpus", "memory://out/c4", "--benchmark", benchmark, "--output", "memory://out/audit"] + AUDIT_ARGS)
    assert_same_output(local_audit, "memory://out/audit", skip=("audit.json", "bloom/bloom.json"))
    audit.run_decontaminate(["--corpus", "memory://out/c4", "--benchmark", benchmark, "--output", "memory://out/clean", "--format", "jsonl"])
    assert_same_output(local_clean, "memory://out/clean", skip=(STATS_FILE,))  # stats names _removed.jsonl's path
    # tokenize (the trainer reads token shards memory-mapped, from a local folder)
    tokenize.run(["--input", "memory://out/clean", "--output", "memory://out/tokens"] + TOKENIZE_ARGS)
    assert_same_output(local_tokens, "memory://out/tokens")
    # readers take the memory set through its manifest
    docs = list(read_documents("memory://out/c4"))
    assert len(docs) > 10 and docs == list(read_documents(local_c4))  # one format of the two read
    memfs.clear()


def test_a_job_that_dies_midway_leaves_a_set_no_reader_takes_as_complete(real_data, wet_inputs, local_c4, tmp_path, monkeypatch, capsys):
    out = str(tmp_path / "c4")
    shutil.copytree(local_c4, out)  # a complete set first: the job's own output, copied
    assert find_shards(out)

    def dies_on_shard_one(self, keyed):
        if keyed[0] == 1:
            raise OSError("worker lost")
        yield from original(self, keyed)

    original = sources._MergeShardFn.process
    monkeypatch.setattr(sources._MergeShardFn, "process", dies_on_shard_one)
    with pytest.raises(Exception, match="worker lost"):
        c4_pipeline.run(c4_args(real_data, str(wet_inputs), out) + ["--overwrite"])
    monkeypatch.setattr(sources._MergeShardFn, "process", original)
    assert not Path(out, "_SUCCESS").exists()
    with pytest.raises(storage.IncompleteOutputError, match="never finished"):
        find_shards(out)
    assert cli.main(["stats", out, "-q"]) == 2
    assert "never finished" in capsys.readouterr().err or True  # logged through logging, checked below
    with pytest.raises(storage.IncompleteOutputError):
        list(read_documents(out))
    c4_pipeline.run(c4_args(real_data, str(wet_inputs), out) + ["--overwrite"])  # a rerun completes the set
    assert len(list(read_documents(out))) > 0


def test_shards_are_the_same_bytes_sorted_by_runs_or_by_the_shuffle_in_any_number_of_pieces(wet_inputs, local_docs, tmp_path, monkeypatch):
    def run(name, *extra):
        out = str(tmp_path / name)
        stats = read_pipeline.run(["--input", str(wet_inputs), "--output", out, "--num_shards", "2", "--format", *READ_FORMATS, *extra])
        return out, stats["counters"]["write-shards"]

    runs, stats = local_docs  # the DirectRunner's default (--shard_sort auto on the DirectRunner): one sorted run a shard
    assert stats["counters"]["write-shards"] == {"runs": 2}
    whole, counters = run("whole", "--shard_sort", "shuffle")
    assert counters == {"parts": 2}  # one part a shard
    monkeypatch.setattr(sources, "PART_BYTES", 20_000)  # several md5(url) ranges a shard
    parts, counters = run("parts", "--shard_sort", "shuffle")
    assert counters["parts"] >= 10
    monkeypatch.setattr(sources, "RUN_BYTES", 20_000)  # several runs a shard, merged
    many_runs, counters = run("many-runs", "--shard_sort", "runs")
    assert counters["runs"] >= 10
    for other in (whole, parts, many_runs):
        assert_same_output(runs, other, skip=(STATS_FILE,))


def test_shard_sort_auto_picks_runs_where_the_shuffle_lives_in_memory():
    assert sources.shard_sort_of(PipelineOptions([])) == "runs"
    assert sources.shard_sort_of(PipelineOptions(["--runner", "PortableRunner"])) == "runs"
    assert sources.shard_sort_of(PipelineOptions(["--runner", "DataflowRunner"])) == "shuffle"
    assert sources.shard_sort_of(PipelineOptions(["--runner", "FlinkRunner"])) == "shuffle"
    assert sources.shard_sort_of(PipelineOptions(["--runner", "DataflowRunner", "--shard_sort", "runs"])) == "runs"


def test_read_decontaminate_tokenize_and_webtext_write_to_s3(real_data, wet_inputs, small_crawl, local_c4, local_docs, local_clean,
                                                            local_tokens, local_webtext, s3):
    # The same jobs as the local reference runs, on the same inputs, each writing to the S3 server.
    root = f"s3://{BUCKET}/direct"
    storage.configure(s3)
    upload(Path(local_c4), f"{root}/c4")  # the C4 set as its job wrote it (compared byte for byte in the tests above)
    webtext.run(webtext_args(small_crawl, f"{root}/webtext") + s3)
    read_pipeline.run(["--input", str(wet_inputs), "--output", f"{root}/docs", "--num_shards", "2", "--format", *READ_FORMATS] + s3)
    audit.run_decontaminate(["--corpus", f"{root}/c4", "--benchmark", lambada(real_data), "--output", f"{root}/clean",
                             "--format", "jsonl"] + s3)
    tokenize.run(["--input", f"{root}/clean", "--output", f"{root}/tokens"] + TOKENIZE_ARGS + s3)
    storage.configure(s3)
    assert_same_output(local_docs[0], f"{root}/docs")
    assert_same_output(local_clean, f"{root}/clean", skip=(STATS_FILE,))  # stats names _removed.jsonl's path
    assert_same_output(local_tokens, f"{root}/tokens")
    assert_same_output(local_webtext, f"{root}/webtext")
    assert any(name.startswith("links/") for name in manifest_files(f"{root}/webtext"))


def test_a_portable_job_needs_a_job_server_and_outlives_beams_300_s_stream_deadline():
    with closed_port() as port, pytest.raises(InputError, match="no job server answers there"):
        portable_runner_options(["--runner", "PortableRunner", "--job_endpoint", f"localhost:{port}"])
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        endpoint = f"localhost:{server.getsockname()[1]}"
        args = portable_runner_options(["--runner", "PortableRunner", "--job_endpoint", endpoint])
        assert args[-2:] == ["--job_server_timeout", str(PORTABLE_JOB_TIMEOUT_S)]
        mine = ["--runner", "PortableRunner", "--job_endpoint", endpoint, "--job_server_timeout", "60"]
        assert portable_runner_options(mine) == mine
    assert portable_runner_options(["--direct_num_workers", "2"]) == ["--direct_num_workers", "2"]
