"""Every job on an object store, each in a fresh process, and stores that fail fast.

A moto S3 API server runs on 127.0.0.1 (started here, a separate process). Each job is a new
``python -m pipelines.cli ...`` process given only the S3 options on its command line, so
nothing another job configured in the test process can help it (the audit once listed its
corpus before the store was configured, which a test in one process never saw). Then a
listener that accepts and never answers, a closed port and a silent HDFS namenode: the
command ends with one line naming the store and what to check, and no traceback.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from test_object_store import MOTO_BOUND, bound_port, closed_port, lambada, start, stop, wait_for

pytestmark = pytest.mark.pipeline  # runs every job in a fresh subprocess on a moto S3 server: not in `make test-fast`

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "corpusforge-jobs"
WET = "warc/ccscalatools/filter_test_1.wet.gz"
HANG_GUARD_S = 300  # a subprocess still running after this is a hang, not a slow run
TINY_GPT = ["--model", "gpt2", "--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--block_size", "32",
            "--batch_tokens", "256", "--micro_batch", "8", "--max_steps", "4", "--ckpt_interval", "2",
            "--eval_interval", "2", "--eval_windows", "2", "--device", "cpu", "-q"]


def corpusforge(*args: str) -> subprocess.CompletedProcess:
    """``corpusforge ARGS`` in a new process, with this checkout first on the path, run in an
    empty working folder that must stay empty: a job whose paths are all absolute or on a
    store writes nothing where it is started (the eval report's folders once appeared there as
    ``./s3:/<bucket>/eval/scores``)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), AWS_EC2_METADATA_DISABLED="true")
    for name in [k for k in env if k.startswith("AWS_") and k != "AWS_EC2_METADATA_DISABLED"]:
        del env[name]  # the store settings come from the command line only
    with tempfile.TemporaryDirectory(prefix="job-cwd-") as workdir:
        result = subprocess.run([sys.executable, "-m", "pipelines.cli", *args], cwd=workdir, env=env, capture_output=True,
                                text=True, timeout=HANG_GUARD_S)
        left = sorted(os.listdir(workdir))
    assert not left, f"corpusforge {args[0]} left {left} in its working folder"
    return result


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


class Bucket:
    def __init__(self, endpoint: str):
        import boto3

        self.options = ["--s3_endpoint_url", endpoint, "--s3_access_key_id", "testing", "--s3_secret_access_key", "testing",
                        "--s3_region_name", "us-east-1"]
        self.client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                                   region_name="us-east-1")

    def keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix.rstrip("/") + "/")
        return sorted(o["Key"][len(prefix.rstrip("/")) + 1:] for page in pages for o in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def s3(tmp_path_factory, real_data):
    pytest.importorskip("boto3")
    pytest.importorskip("moto")
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    server = start([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"], log_path)
    try:
        import urllib.request

        endpoint = f"http://127.0.0.1:{bound_port(server, log_path, MOTO_BOUND)}"
        wait_for(lambda: urllib.request.urlopen(endpoint + "/", timeout=2).status == 200, "moto server")
        bucket = Bucket(endpoint)
        bucket.client.create_bucket(Bucket=BUCKET)
        bucket.client.upload_file(str(real_data / WET), BUCKET, "wet/" + Path(WET).name)
        yield bucket
    finally:
        stop(server)


@pytest.fixture(scope="module")
def c4_on_s3(s3, real_data):
    ok(corpusforge("-q", "c4", "--input", f"s3://{BUCKET}/wet/", "--output", f"s3://{BUCKET}/c4",
                   "--badwords", str(real_data / "badwords" / "en"), "--num_shards", "2", *s3.options))
    return f"s3://{BUCKET}/c4"


def test_c4_reads_its_crawl_from_s3_and_writes_its_set_there(s3, c4_on_s3):
    names = s3.keys("c4")
    manifest = json.loads(s3.read("c4/_SUCCESS"))
    assert sorted(entry["name"] for entry in manifest["files"]) == [n for n in names if n != "_SUCCESS"]
    assert any(n.endswith(".json.gz") for n in names) and not any(n.startswith("_temporary/") for n in names)


def test_audit_lists_an_s3_corpus_in_a_fresh_process(s3, c4_on_s3, real_data):
    result = ok(corpusforge("-q", "audit", "--corpus", c4_on_s3, "--benchmark", lambada(real_data),
                            "--output", f"s3://{BUCKET}/audit", "--fp_queries", "1000", *s3.options))
    assert "lambada" in result.stdout
    assert {"_SUCCESS", "audit.json", "report.json"} <= set(s3.keys("audit"))
    assert json.loads(s3.read("audit/audit.json"))["files"] >= 2


def test_decontaminate_reads_and_writes_s3_in_a_fresh_process(s3, c4_on_s3, real_data):
    ok(corpusforge("-q", "decontaminate", "--corpus", c4_on_s3, "--benchmark", lambada(real_data),
                   "--output", f"s3://{BUCKET}/clean", *s3.options))
    assert any(n.endswith(".parquet") for n in s3.keys("clean")) and "_SUCCESS" in s3.keys("clean")


@pytest.fixture(scope="module")
def run_on_s3(s3, c4_on_s3):
    """tokenize into S3, then train from S3 into an S3 run folder: stopped at step 2, resumed to 4."""
    ok(corpusforge("-q", "tokenize", "--input", c4_on_s3, "--output", f"s3://{BUCKET}/tokens", "--vocab_size", "300",
                   "--val_docs", "2", "--shard_tokens", "5000", *s3.options))
    run = f"s3://{BUCKET}/run"
    stopped = ok(corpusforge("train", "--data", f"s3://{BUCKET}/tokens", "--out", run, *TINY_GPT, "--stop_at", "2", *s3.options))
    resumed = ok(corpusforge("train", "--data", f"s3://{BUCKET}/tokens", "--out", run, *TINY_GPT, "--resume", *s3.options))
    return run, stopped, resumed


def test_train_reads_s3_tokens_and_checkpoints_into_an_s3_run_folder(s3, run_on_s3):
    run, stopped, resumed = run_on_s3
    assert "stopped after step 2" in stopped.stdout and f"run folder   {run}" in stopped.stdout
    assert "status       finished" in resumed.stdout and f"{run}/hf" in resumed.stdout
    names = s3.keys("run")
    assert {"ckpt.pt", "ckpt.pt.sha256", "config.json", "metrics.jsonl", "hf/model.safetensors", "tokenizer/vocab.json"} <= set(names)
    assert not any(n.startswith(".") or "/." in n for n in names)  # no temporary left behind
    steps = [json.loads(line)["step"] for line in s3.read("run/metrics.jsonl").decode().splitlines()]
    assert max(steps) == 4 and json.loads(s3.read("run/ckpt.pt.sha256"))["step"] == 4


def test_a_new_run_over_an_s3_run_folder_is_refused_without_resume(s3, run_on_s3):
    run, _, _ = run_on_s3
    result = corpusforge("train", "--data", f"s3://{BUCKET}/tokens", "--out", run, *TINY_GPT, *s3.options)
    assert result.returncode == 2 and "already exists: pass --resume" in result.stderr


def test_sample_and_eval_take_an_s3_model_and_an_s3_training_corpus(s3, run_on_s3, c4_on_s3, real_data):
    run, _, _ = run_on_s3
    sample = ok(corpusforge("sample", "--model", run, "--prompt", "The", "--max_new_tokens", "4", "--device", "cpu", *s3.options))
    assert sample.stdout.startswith("The")
    ok(corpusforge("eval", "--model", run, "--benchmark", lambada(real_data), "--training", c4_on_s3, "--limit", "3",
                   "--bootstrap", "0", "--report", f"s3://{BUCKET}/eval", "-q", *s3.options))
    report = json.loads(s3.read("eval/report.json"))
    assert len(report["benchmarks"]) == 1 and "lambada" in json.dumps(report["benchmarks"][0])
    assert {"report.json", "report.md", "report.html", "scores/lambada.json"} <= set(s3.keys("eval"))
    assert json.loads(s3.read("eval/scores/lambada.json"))["name"] == "lambada"


def test_finetune_from_an_s3_model_with_s3_task_files_into_an_s3_run_folder(s3, run_on_s3):
    run, _, _ = run_on_s3
    s3.client.upload_file(str(ROOT / "tests" / "fixtures" / "finetune" / "sst2.tsv"), BUCKET, "tasks/sst2.tsv")
    task = f"s3://{BUCKET}/tasks/sst2.tsv"
    ok(corpusforge("finetune", "--model", run, "--train", task, "--eval", task, "--format", "sst2",
                   "--out", f"s3://{BUCKET}/ft", "--batch_size", "2", "--max_steps", "2", "--quiet", *s3.options))
    assert {"ckpt.pt", "ckpt.pt.sha256", "metrics.jsonl"} <= set(s3.keys("ft"))


# --------------------------------------------------------------------------------- failing fast
class SilentServer:
    """Accepts connections and never answers."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.port = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.socket.accept()[0])
            except OSError:
                return

    def close(self):
        self.socket.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "ERROR" in line or "error:" in line]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_a_silent_s3_endpoint_ends_the_job_in_one_line(silent, real_data, tmp_path):
    endpoint = f"http://127.0.0.1:{silent.port}"
    options = ["--s3_endpoint_url", endpoint, "--s3_access_key_id", "x", "--s3_secret_access_key", "y",
               "--s3_region_name", "us-east-1", "--store_timeout_s", "2"]
    line = one_error_line(corpusforge("-q", "c4", "--input", "s3://bucket-x/wet/", "--output", str(tmp_path / "c4"),
                                      "--badwords", str(real_data / "badwords" / "en"), *options))
    assert "s3://bucket-x" in line and endpoint in line and "did not answer within 2 s" in line and "--s3_endpoint_url" in line
    assert not (tmp_path / "c4").exists()  # nothing started
    line = one_error_line(corpusforge("train", "--data", "s3://bucket-x/tokens", "--out", str(tmp_path / "run"), *TINY_GPT, *options))
    assert "did not answer within 2 s" in line


class RefusingS3:
    """An S3 endpoint that answers every request at once with 403 InvalidAccessKeyId, as S3 does
    for an unknown key (moto accepts any key, so it cannot play this part); counts the requests."""

    BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access '
            b'Key Id you provided does not exist in our records.</Message></Error>')

    def __init__(self):
        refusing = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _refuse(self):
                refusing.requests.append(f"{self.command} {self.path}")
                self.send_response(403)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(refusing.BODY)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(refusing.BODY)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _refuse

            def log_message(self, *args):
                pass

        self.requests: list[str] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def refusing():
    server = RefusingS3()
    yield server
    server.close()


def test_refused_credentials_end_the_job_in_one_line_on_the_first_answer(refusing, real_data, tmp_path):
    options = ["--s3_endpoint_url", refusing.endpoint, "--s3_access_key_id", "wrong", "--s3_secret_access_key", "wrong",
               "--s3_region_name", "us-east-1", "--store_timeout_s", "5"]
    # reading from the store: c4 with its input there
    line = one_error_line(corpusforge("-q", "c4", "--input", "s3://bucket-x/wet/", "--output", str(tmp_path / "c4"),
                                      "--badwords", str(real_data / "badwords" / "en"), *options))
    assert "s3://bucket-x" in line and refusing.endpoint in line and "refused the credentials" in line
    assert "--s3_access_key_id" in line and "--s3_secret_access_key" in line
    assert "did not answer" not in line  # it ended on the store's answer, not on --store_timeout_s
    assert not (tmp_path / "c4").exists()  # nothing started
    assert refusing.requests == ["HEAD /bucket-x"]  # one probe, no retries
    # writing to the store: read with a local input and its output there
    line = one_error_line(corpusforge("-q", "read", "--input", str(real_data / WET), "--output", "s3://bucket-y/docs", *options))
    assert "s3://bucket-y" in line and "refused the credentials" in line and "did not answer" not in line
    assert refusing.requests[1:] == ["HEAD /bucket-y"]


def test_a_closed_port_ends_the_job_in_one_line(real_data, tmp_path):
    with closed_port() as port:  # nothing listens there while the job runs
        endpoint = f"http://127.0.0.1:{port}"
        line = one_error_line(corpusforge("-q", "audit", "--corpus", "s3://bucket-x/c4", "--benchmark", lambada(real_data),
                                          "--output", str(tmp_path / "audit"), "--s3_endpoint_url", endpoint,
                                          "--s3_access_key_id", "x", "--s3_secret_access_key", "y", "--s3_region_name", "us-east-1"))
    assert "s3://bucket-x" in line and "cannot connect to" in line and endpoint in line


def test_a_silent_hdfs_namenode_and_gcs_without_its_library_end_in_one_line(silent, tmp_path):
    line = one_error_line(corpusforge("stats", "hdfs://namenode/c4", "--hdfs_host", "127.0.0.1", "--hdfs_port", str(silent.port),
                                      "--store_timeout_s", "2", "-q"))
    assert "hdfs://namenode" in line and "did not answer within 2 s" in line and "--hdfs_host" in line
    try:
        import apache_beam.io.gcp.gcsfilesystem  # noqa: F401
        import google.auth  # noqa: F401
    except ImportError:
        line = one_error_line(corpusforge("stats", "gs://bucket-x/c4", "-q"))
        assert "gs://bucket-x" in line and "apache-beam[gcp]" in line
    else:
        line = one_error_line(corpusforge("stats", "gs://bucket-x/c4", "-q"))
        assert "gs://bucket-x" in line
