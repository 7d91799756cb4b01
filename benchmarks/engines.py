"""C4 on every engine: Beam's DirectRunner (1 worker; 2 multi-processing workers), Beam's
PortableRunner (job server + worker pool, 2 workers), the native Spark engine (``local[2]``)
and the native Spark engine on a standalone cluster (a Master and two one-core Workers on
127.0.0.1, each its own JVM with a clean environment, executors on a Python without the
project, which the job ships), same input, same command otherwise; output checked identical.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/engines.py [--pages 5000 20000] [--engines ...] [--breakdown] [--repeat 3]

The cluster row counts the job's processes (driver JVM included) and everything the Workers
ran for it (executor JVMs, their Python workers), plus what the Master and Workers spent while
the job ran; the daemons' own start, before the job, is not counted: a cluster is up before its
jobs. ``--breakdown`` prints where Spark's CPU goes: a session's start and stop (the JVM), the
Python workers' imports, the rules themselves (the engine-free chain over the same files,
``c4_throughput.ours``), and what is left (serialisation across the JVM boundary, shuffles,
the JVM's own work).

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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import c4_scale  # noqa: E402  (the WET set and the process-tree measurement)

from pipelines.jobs import STATS_FILE  # noqa: E402  (c4_scale put the checkout on the path)
from pipelines.spark import jvm  # noqa: E402

REPO = HERE.parent
ENGINES = {  # name -> c4_scale runner
    "beam-direct-1": "direct",
    "beam-direct-2mp": "multiprocess",
    "beam-portable-2": "portable",
    "spark-local2": "spark",
    "spark-cluster2": "spark-cluster",
}
SPARK_ENGINES = ("spark-local2", "spark-cluster2")
BASELINE = "beam-direct-1"
# The cluster row's executors run with the flags docs/spark.md gives for short jobs
# (``--spark_conf spark.executor.extraJavaOptions=...``): the C1 compiler, the serial collector.
EXECUTOR_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JVM_ROLE = "spark JVM (driver + executors)"
PYTHON_WORKER_ROLES = ("spark python daemon", "spark python worker")
EMPTY_SESSION = ("from pipelines.spark import engine\n"
                 "spark, _ = engine.session('local[2]')\n"
                 "spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).count()\n"
                 "spark.stop()\n")
WORKER_IMPORTS = "import pipelines.spark.plan, pipelines.spark.dedupe, pipelines.c4.pages, corpus.c4, corpus.langid, corpus.sentences, dedup.text"


def measured(argv: list[str], env: dict) -> dict:
    """CPU of a child process and everything below it (sampled tree, or the kernel's count of reaped children if larger)."""
    started = time.perf_counter()
    child = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sampler = c4_scale.TreeSampler({"job": child.pid})
    sampler.start()
    status, cpu, _ = c4_scale.wait_with_rusage(child)
    sampler.stop()
    roles: dict[str, float] = {}
    for process in sampler.per_pid.values():
        roles[process["role"]] = roles.get(process["role"], 0.0) + process["cpu"]
    return {"status": status, "wall": time.perf_counter() - started, "cpu": max(cpu, sum(roles.values())), "roles": roles}


def role_cpu(run: dict) -> dict[str, float]:
    """CPU seconds of a run by process role (a cluster's daemons less what they had spent before the job)."""
    before, daemons = run.get("daemons_before", {}), run.get("daemon_pids", {})
    roles: dict[str, float] = {}
    for process in run["processes"]:
        cpu = process["cpu"] - (before[process["tree"]] if daemons.get(process["tree"]) == process["pid"] else 0.0)
        role = JVM_ROLE if "spark" in process["cmd"] and process["role"] in ("bash", "shell") else process["role"]  # first seen before its exec of java
        roles[role] = roles.get(role, 0.0) + cpu
    return roles


def print_breakdown(name: str, run: dict, base: dict, env: dict, files: list[str], badwords: str) -> None:
    """Where a Spark run's CPU went, against the DirectRunner's total."""
    import c4_throughput  # noqa: PLC0415  (the engine-free chain)

    roles = role_cpu(run)
    python_roles = (*PYTHON_WORKER_ROLES, "job (pipelines.cli c4)")
    jvm = run["cpu"] - sum(cpu for role, cpu in roles.items() if role in python_roles)  # everything else is a JVM (or the C compiler)
    workers = [p for p in run["processes"] if p["role"] in PYTHON_WORKER_ROLES]
    python_workers = sum(roles.get(role, 0.0) for role in PYTHON_WORKER_ROLES)
    launcher = roles.get("job (pipelines.cli c4)", 0.0)
    session = measured([sys.executable, "-c", EMPTY_SESSION], env)
    imports = measured([sys.executable, "-c", WORKER_IMPORTS], env)["cpu"]
    rules = c4_throughput.run_side("ours", files, badwords)["cpu"]
    session_jvm = sum(cpu for role, cpu in session["roles"].items() if role in (JVM_ROLE, "bash", "shell"))
    print(f"       where {name}'s {run['cpu']:.1f} CPU-s went (the DirectRunner: {base['cpu']:.1f}):")
    print(f"         JVMs (driver, executors{', Master and Workers during the job' if 'daemons_before' in run else ''}) {jvm:7.1f}  "
          f"of which a local[2] session's start, one tiny job and stop: {session_jvm:.1f} (the whole empty job: {session['cpu']:.1f})")
    print(f"         Python workers ({len(workers)} processes)       {python_workers:7.1f}  of which imports {len(workers)} x {imports:.2f} = "
          f"{len(workers) * imports:.1f}, the rules (engine-free chain, one process) {rules:.1f}, "
          f"left for serialisation and PySpark's worker loop {python_workers - len(workers) * imports - rules:.1f}")
    print(f"         the launcher (driver's Python: plan, _SUCCESS) {launcher:5.1f}")


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.2f} / {statistics.median(ordered):.2f} / {ordered[-1]:.2f}"


def print_ranges(pages: int, rounds: list[dict], engines: list[str]) -> None:
    """Each engine's CPU over the rounds and its ratio to the baseline of the same round (the
    machine's speed drifts between rounds more than within one), min / median / max."""
    print(f"{pages:>6} over {len(rounds)} rounds: CPU s (min / median / max), CPU x of the same round's {BASELINE}")
    for name in engines:
        cpus = [runs[name]["cpu"] for runs in rounds if runs[name]["status"] == 0]
        ratios = [runs[name]["cpu"] / runs[BASELINE]["cpu"] for runs in rounds if runs[name]["status"] == 0]
        if cpus:
            print(f"       {name:16} CPU s {_spread(cpus):>22}   CPU x {_spread(ratios)}")


def shard_entries(out_dir: Path) -> list[dict]:
    success = out_dir / "_SUCCESS"
    if not success.exists():
        return []
    return [entry for entry in json.loads(success.read_text())["files"] if entry["name"] != STATS_FILE]


def settled(daemons: dict[str, int], quiet_cpu_s: float = 0.05, most_s: float = 60.0) -> dict[str, float]:
    """The daemons' CPU seconds once each is idle (under ``quiet_cpu_s`` of CPU in each of two
    consecutive seconds; at most ``most_s``): a cluster's Master and Workers are up and
    quiet long before its jobs, while a JVM just started keeps compiling and loading for
    a while, which would be charged to the job."""
    last = {name: c4_scale._cpu_seconds(pid) for name, pid in daemons.items()}
    quiet, deadline = 0, time.monotonic() + most_s
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(1.0)
        now = {name: c4_scale._cpu_seconds(pid) for name, pid in daemons.items()}
        quiet = quiet + 1 if all(now[name] - last[name] < quiet_cpu_s for name in daemons) else 0
        last = now
    return last


def run_on_cluster(args, wet_dir: Path, out_dir: Path, env: dict, logs: Path, label: str) -> dict:
    """The C4 job with ``--spark_master spark://...`` on a fresh standalone cluster (two Workers)."""
    sys.path.insert(0, str(REPO / "tests"))
    from spark_cluster import Cluster, hidden_project_python  # noqa: PLC0415  (the test bed: tests/spark_cluster.py)

    folder = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=logs))
    bed = Cluster(folder)
    try:
        bed.start()
        bed.add_worker()
        bed.add_worker()
        python = hidden_project_python(folder / "executor-venv")
        archive = jvm.class_archive()  # this machine's (built once, before any run): the driver's and the executors' classes
        if archive:  # the job's own cache (it ships a fresh zip) gets the same archive
            os.makedirs(folder / "cache" / "spark" / "jvm")
            os.link(archive, folder / "cache" / "spark" / "jvm" / os.path.basename(archive))
        daemons = {"master": bed.master.pid, **{f"worker{i}": worker.pid for i, worker in enumerate(bed.workers)}}
        before = settled(daemons)
        command = [sys.executable, "-m", "pipelines.cli", "c4", "--input", str(wet_dir), "--output", str(out_dir),
                   "--badwords", str(args.data / "badwords" / "en"), "--num_shards", "4", "--num_validation_shards", "1",
                   "--engine", "spark", "--spark_master", bed.master_url, "--spark_conf", "spark.executor.memory=1g"]
        executor_jvm = EXECUTOR_JVM + (f" -XX:SharedArchiveFile={archive}" if archive else "")
        command += ["--spark_conf", f"spark.executor.extraJavaOptions={executor_jvm}"]  # the cluster's choice, docs/spark.md
        job_env = {**env, "PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1", "CORPUSFORGE_CACHE": str(folder / "cache")}
        log_path = logs / f"{label}-job.log"
        with open(log_path, "wb") as log:
            started = time.perf_counter()
            job = subprocess.Popen(command, cwd=REPO, env=job_env, stdout=log, stderr=subprocess.STDOUT)
            sampler = c4_scale.TreeSampler({"job": job.pid, **daemons})
            sampler.start()
            status, cpu, _ = c4_scale.wait_with_rusage(job, timeout=args.timeout)
            wall = time.perf_counter() - started
            time.sleep(1.0)  # the Workers stop the job's executors after the driver leaves
            sampler.stop()
        sampled = {tree: sum(p["cpu"] for p in sampler.per_pid.values() if p["tree"] == tree) for tree in ("job", *daemons)}
        cpu = max(cpu, sampled["job"]) + sum(sampled[name] - before[name] for name in daemons)
        main = sampler.per_pid.get(job.pid, {"peak": 0, "hwm": 0})
        single = max((max(p["peak"], p["hwm"]) for p in sampler.per_pid.values()), default=0)
        run = {"command": command, "status": status, "wall": wall, "cpu": cpu, "main_peak": max(main["peak"], main["hwm"]),
               "tree_peak": max(sampler.peak_sum, single), "processes": sorted(sampler.per_pid.values(), key=lambda p: (p["tree"], p["pid"])),
               "log": str(log_path), "daemons_before": before, "daemon_pids": daemons}
        if status != 0:
            run["log_tail"] = log_path.read_text(errors="replace")[-3000:]
        return run
    finally:
        bed.stop()


def run_engine(name: str, args, wet_dir: Path, work: Path, env: dict, logs: Path, pages: int) -> dict:
    options = argparse.Namespace(runner=ENGINES[name], data=args.data, timeout=args.timeout)
    label = f"{name}-{pages}"
    out_dir = work / label
    if ENGINES[name] == "spark-cluster":
        run = run_on_cluster(options, wet_dir, out_dir, env, logs, label)
    else:
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
    parser.add_argument("--breakdown", action="store_true", help="after each Spark row of the first round, where its CPU went")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds, each running every engine once, the baseline first; with more than one the table ends with "
                             "each engine's CPU over the rounds and its ratio to the same round's baseline (min / median / max)")
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
        rounds = []
        for number in range(args.repeat):
            base, runs = None, {}
            for name in engines:
                run = run_engine(name, args, wet_dir, work, env, logs, pages)
                if base is None:
                    base = run
                runs[name] = run
                same = run["status"] == 0 and run["entries"] == base["entries"] and bool(run["entries"])
                failed |= not same
                label = name if args.repeat == 1 else f"{name} #{number + 1}"
                print(f"{pages:>6} {label:16} {run['wall']:7.1f} {run['cpu']:7.1f} {run['main_peak'] / 1e6:10.0f} {run['single_peak'] / 1e6:11.0f} "
                      f"{run['tree_peak'] / 1e6:8.0f} {len(run['processes']):5d} {run['wall'] / base['wall']:7.2f} {run['cpu'] / base['cpu']:6.2f}  "
                      f"{'identical' if same else 'DIFFERENT (exit {})'.format(run['status'])}", flush=True)
                print("       peak RSS by process role: " + ", ".join(f"{role} x{n} {peak / 1e6:.0f} MB" for role, (n, peak) in run["roles"].items()))
                if run["status"] != 0:
                    print(run.get("log_tail", ""))
                elif args.breakdown and name in SPARK_ENGINES and number == 0:
                    print_breakdown(name, run, base, env, sorted(str(p) for p in wet_dir.iterdir()), str(args.data / "badwords" / "en"))
            rounds.append(runs)
        if args.repeat > 1:
            print_ranges(pages, rounds, engines)
    print(c4_scale.load_line("after"))
    if args.keep:
        print(f"outputs and logs: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
