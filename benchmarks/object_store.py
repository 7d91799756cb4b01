"""What an object store costs a job: C4 and tokenize on S3 (a moto server on 127.0.0.1)
against the same job on local disk, CPU seconds of the job process and its children.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/object_store.py \\
        [--pages 2000] [--repo CHECKOUT] [--keep]

The input is ``benchmarks/c4_scale.py``'s generated WET set (cached). Each job runs as a
user would, a fresh ``python -m pipelines.cli`` child process (DirectRunner, one worker):

    local  c4 --input <dir> --output <tmp>/c4 ...;  tokenize --input <tmp>/c4 --output <tmp>/tokens
    s3     c4 --input s3://bench/wet/ --output s3://bench/c4 --s3_endpoint_url ...;  tokenize likewise

CPU is the kernel's rusage of the job and its reaped children (the moto server, which
stands in for the store, is not counted). The baseline is the local-disk run of the same
job; the target is S3 within 1.5x of it. ``--repo`` measures another checkout (e.g. one
before the shared S3 client) with the same input.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c4_scale import build_wet_set, free_port, job_env, wait_with_rusage, wet_set_folder  # noqa: E402

TARGET_RATIO = 1.5
BUCKET = "bench"


def run_job(repo: Path, env: dict, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``corpusforge ARGS`` in a child process."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "-q", *args], cwd=repo, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read()
    code, cpu, _ = wait_with_rusage(proc)
    if code:
        raise SystemExit(f"corpusforge {' '.join(args[:1])} failed ({code}):\n{stderr.decode(errors='replace')[-3000:]}")
    return cpu, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=2000, help="pages in the generated WET set (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to measure")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "corpusforge-c4-scale")
    parser.add_argument("--keep", action="store_true", help="keep the outputs")
    args = parser.parse_args(argv)
    data = Path(os.environ.get("CORPUSFORGE_TEST_DATA", ""))
    if not (data / "badwords").is_dir():
        parser.error("set CORPUSFORGE_TEST_DATA to the shared real-data folder")
    import boto3  # apache-beam[aws]

    manifest = build_wet_set(data, args.cache, args.pages, args.seed)
    wet = wet_set_folder(args.cache, args.pages, args.seed) / "wet"
    env = job_env(args.repo, data)
    env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    work = Path(tempfile.mkdtemp(prefix="corpusforge-object-store-"))
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(endpoint + "/", timeout=2)
                break
            except OSError:
                time.sleep(0.1)
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
                              region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for path in sorted(wet.iterdir()):
            client.upload_file(str(path), BUCKET, f"wet/{path.name}")
        s3 = ["--s3_endpoint_url", endpoint, "--s3_access_key_id", "bench", "--s3_secret_access_key", "bench",
              "--s3_region_name", "us-east-1"]
        badwords = ["--badwords", str(data / "badwords" / "en"), "--num_shards", "4"]
        tokens = ["--vocab_size", "1000", "--val_docs", "10"]
        jobs = [
            ("c4", ["c4", "--input", str(wet), "--output", str(work / "c4"), *badwords],
             ["c4", "--input", f"s3://{BUCKET}/wet/", "--output", f"s3://{BUCKET}/c4", *badwords, *s3]),
            ("tokenize", ["tokenize", "--input", str(work / "c4"), "--output", str(work / "tokens"), *tokens],
             ["tokenize", "--input", f"s3://{BUCKET}/c4", "--output", f"s3://{BUCKET}/tokens", *tokens, *s3]),
        ]
        print(f"code: {args.repo}; {manifest['pages']:,} pages in {len(manifest['files'])} WET file(s), "
              f"{manifest['wet_bytes'] / 1e6:.1f} MB; moto S3 on {endpoint}; DirectRunner, one worker")
        print(f"{'job':10} {'local CPU s':>12} {'S3 CPU s':>10} {'S3/local':>9} {'local wall s':>13} {'S3 wall s':>10}  target")
        worst = 0.0
        for name, local_args, s3_args in jobs:
            local_cpu, local_wall = run_job(args.repo, env, local_args)
            s3_cpu, s3_wall = run_job(args.repo, env, s3_args)
            ratio = s3_cpu / local_cpu
            worst = max(worst, ratio)
            print(f"{name:10} {local_cpu:>12.1f} {s3_cpu:>10.1f} {ratio:>8.2f}x {local_wall:>13.1f} {s3_wall:>10.1f}  "
                  f"<= {TARGET_RATIO}x {'met' if ratio <= TARGET_RATIO else 'MISSED'}")
        print(f"worst S3/local CPU ratio {worst:.2f}x (target {TARGET_RATIO}x)")
    finally:
        moto.terminate()
        moto.wait(timeout=10)
        if args.keep:
            print(f"outputs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
