"""C4 on every engine: Beam's DirectRunner (1 worker; 2 multi-processing workers), Beam's
PortableRunner (job server + worker pool, 2 workers) and the native Spark engine
(``local[2]``), same input, same command otherwise; output checked identical.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/engines.py [--pages 5000 20000] [--engines ...]

The input is ``benchmarks/c4_scale.py``'s Common Crawl-shaped WET set (real prose, URL and
line duplicates, cached). Each run is ``python -m pipelines.cli c4 ... --num_shards 4
--num_validation_shards 1 [engine options]`` in a fresh child process, measured by
``c4_scale.run_job``: wall time of the job, CPU seconds of every process (the job and its
reaped descendants by the kernel's rusage, or the sampled per-process sum if larger, plus
the job server, pool and workers), the peak RSS of the job process, of the largest single
process and of the whole tree (sampled every 50 ms). Every engine's ``_SUCCESS`` shard
entries (names, sizes, sha256; _stats.json aside, whose ``write-shards`` tallies count each
engine's own work) must equal the DirectRunner's, or the script exits 1.
Ratios are against Beam's DirectRunner with 1 worker on the same input, same invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import c4_scale  # noqa: E402  (the WET set and the process-tree measurement)
from pipelines.jobs import STATS_FILE  # noqa: E402  (c4_scale put the checkout on the path)

REPO = HERE.parent
ENGINES = {  # name -> c4_scale runner
    "beam-direct-1": "direct",
    "beam-direct-2mp": "multiprocess",
    "beam-portable-2": "portable",
    "spark-local2": "spark",
}
BASELINE = "beam-direct-1"


def shard_entries(out_dir: Path) -> list[dict]:
    success = out_dir / "_SUCCESS"
    if not success.exists():
        return []
    return [entry for entry in json.loads(success.read_text())["files"] if entry["name"] != STATS_FILE]


def run_engine(name: str, args, wet_dir: Path, work: Path, env: dict, logs: Path, pages: int) -> dict:
    options = argparse.Namespace(runner=ENGINES[name], data=args.data, timeout=args.timeout)
    label = f"{name}-{pages}"
    out_dir = work / label
    run = c4_scale.run_job(options, wet_dir, out_dir, env, REPO, logs, label)
    run["entries"] = shard_entries(out_dir)
    run["single_peak"] = max((max(p["peak"], p["hwm"]) for p in run["processes"]), default=0)
    roles = {}
    for process in run["processes"]:
        roles.setdefault(process["role"], []).append(max(process["peak"], process["hwm"]))
    run["roles"] = {role: (len(peaks), max(peaks)) for role, peaks in sorted(roles.items())}
    if not args.keep:
        shutil.rmtree(out_dir, ignore_errors=True)
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, nargs="+", default=[5000, 20000], help="input sizes (default 5000 20000)")
    parser.add_argument("--engines", nargs="+", choices=list(ENGINES), default=list(ENGINES))
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("CORPUSFORGE_TEST_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "corpusforge-c4-scale")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep", action="store_true", help="keep outputs and logs")
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    engines = [BASELINE] + [e for e in args.engines if e != BASELINE]
    env = c4_scale.job_env(REPO, args.data)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    print(f"code under test: {c4_scale.code_under_test(REPO, env)}")
    print(c4_scale.load_line("before"))
    work = Path(tempfile.mkdtemp(prefix="engines-"))
    logs = work / "logs"
    logs.mkdir()
    failed = False
    header = (f"{'pages':>6} {'engine':16} {'wall s':>7} {'CPU s':>7} {'job RSS MB':>10} {'max proc MB':>11} {'tree MB':>8} "
              f"{'procs':>5} {'wall x':>7} {'CPU x':>6}  output")
    for pages in args.pages:
        manifest = c4_scale.build_wet_set(args.data, args.cache, pages, 0)
        wet_dir = c4_scale.wet_set_folder(args.cache, pages, 0) / "wet"
        print(f"\ninput {pages:,} pages: {len(manifest['files'])} WET files, {manifest['wet_bytes'] / 1e6:.1f} MB gzip")
        print(header)
        base = None
        for name in engines:
            run = run_engine(name, args, wet_dir, work, env, logs, pages)
            if base is None:
                base = run
            same = run["status"] == 0 and run["entries"] == base["entries"] and bool(run["entries"])
            failed |= not same
            print(f"{pages:>6} {name:16} {run['wall']:7.1f} {run['cpu']:7.1f} {run['main_peak'] / 1e6:10.0f} {run['single_peak'] / 1e6:11.0f} "
                  f"{run['tree_peak'] / 1e6:8.0f} {len(run['processes']):5d} {run['wall'] / base['wall']:7.2f} {run['cpu'] / base['cpu']:6.2f}  "
                  f"{'identical' if same else 'DIFFERENT (exit %s)' % run['status']}", flush=True)
            print("       peak RSS by process role: " + ", ".join(f"{role} x{n} {peak / 1e6:.0f} MB" for role, (n, peak) in run["roles"].items()))
            if run["status"] != 0:
                print(run.get("log_tail", ""))
    print(c4_scale.load_line("after"))
    if args.keep:
        print(f"outputs and logs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
