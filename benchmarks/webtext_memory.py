"""WebText's memory against the size of the Reddit dump: peak RSS, wall and CPU of the
complete ``corpusforge webtext`` job on generated Pushshift dumps of growing size.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/webtext_memory.py \\
        [--submissions 150000 300000 1000000] [--baseline-ref COMMIT] [--repo CHECKOUT] [--keep]

The dumps are Pushshift-shaped: every line is one of the 31 real submission lines of
``$CORPUSFORGE_TEST_DATA/reddit/pushshift_importer/test_submissions.json`` (all their
fields, 0.9-9.5 KB a line) with its link fields replaced, seeded: ~25% self posts, ~4%
Reddit's own media, ~7% image hosts and files, ~2% over_18, 0.1% malformed lines, 1%
copies of an earlier line (dumps overlap), and ~30% of outbound links re-posting an
earlier URL in another spelling (http/https, ``www.``, a tracking parameter, a trailing
slash), so the link stage's dedup and karma merge have work; scores are mostly 0-2 with
a long tail (the ``>= 3`` cut keeps about a third of the links). Files hold
``SUBMISSIONS_PER_FILE`` lines each, zstd-compressed, and the sets are prefixes of one
another (150k = the first 3 files of the 1M set); they are cached, keyed by the seed.

Each size runs the job as a user would, in a child process:

    python -m pipelines.cli webtext --submissions <dumps> --pages crawl --warc <real WARC> --output <tmp>

(``--pages crawl`` against the small real WARC of the test data: no network; the link
stage does all the work). The process tree is sampled every 50 ms with
``benchmarks/c4_scale.py``'s sampler (RSS of every process and the kernel's VmHWM); CPU
is the kernel's rusage of the job and its reaped children. The baseline is the same job
with the code of ``--baseline-ref`` (default: the parent of the commit that replaced the
GroupByKey of submissions), exported with ``git archive`` into a temporary folder, on the same dumps in the same invocation. Each size prints both side by side
with ratios, and the table ends with each approach's peak at the largest size over its
peak at the smallest (target for ours: flat, within 1.1x). The links and counters of the
two runs are compared: the script says whether the link tables hold the same rows (in
order, same schema; their bytes differ where a shard has more than
``corpus.reddit.LINK_ROW_GROUP_ROWS`` links, now written in row groups of that size) and the ``stats.json`` counters are identical.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import c4_scale  # noqa: E402  (the process-tree sampler, the child's environment, load lines)

from pipelines.jobs import OLD_LAYOUT_FILES, STATS_FILE  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GENERATOR_VERSION = 1  # part of the cache key: bump when the generated dumps change
SUBMISSIONS_PER_FILE = 50_000
SELF_SHARE, REDDIT_MEDIA_SHARE, IMAGE_SHARE, OVER_18_SHARE = 0.25, 0.04, 0.07, 0.02
MALFORMED_SHARE, COPY_SHARE, REPOST_SHARE = 0.001, 0.01, 0.30
SITES = 20_000
TLDS = (".com", ".com", ".com", ".org", ".net", ".co.uk", ".io", ".info")
SECTIONS = ("news", "politics", "science", "tech", "world", "opinion", "sports", "culture", "health", "business")
SUBREDDITS = ("news", "worldnews", "politics", "science", "technology", "programming", "sports", "books",
              "history", "space", "economics", "askscience", "dataisbeautiful", "futurology", "movies")
START_UTC = 1_483_228_800  # 2017-01-01
SPAN_SECONDS = 3 * 365 * 86400


def article_url(n: int) -> str:
    """The n-th distinct article URL of the generated world (a pure function of n)."""
    rng = random.Random(n * 7919 + 17)
    site = int(rng.paretovariate(1.1)) % SITES
    return f"https://site{site}{TLDS[site % len(TLDS)]}/{SECTIONS[n % len(SECTIONS)]}/story-{n}-{rng.randrange(10**6)}"


def respelled(url: str, rng: random.Random) -> str:
    """Another spelling of ``url`` that keeps its URL key (scheme, www, tracking, slash)."""
    choice = rng.randrange(4)
    if choice == 0:
        return "http://" + url.removeprefix("https://")
    if choice == 1:
        return url.replace("https://", "https://www.", 1)
    if choice == 2:
        return url + "?utm_source=reddit&utm_medium=social"
    return url + "/"


def score_of(rng: random.Random) -> int:
    if rng.random() < 0.62:
        return rng.choice((0, 1, 1, 2, 2))  # most posts never reach 3 karma
    return 2 + int(rng.paretovariate(0.9))


def submission_line(templates: list[dict], index: int, rng: random.Random) -> str:
    record = dict(templates[index % len(templates)])
    subreddit = rng.choice(SUBREDDITS)
    sid = f"g{index:x}"
    roll = rng.random()
    if roll < SELF_SHARE:
        url, domain, is_self = f"https://www.reddit.com/r/{subreddit}/comments/{sid}/post/", f"self.{subreddit}", True
    else:
        is_self = False
        roll -= SELF_SHARE
        if roll < REDDIT_MEDIA_SHARE:
            url = f"https://i.redd.it/{sid}.jpg"
        elif roll < REDDIT_MEDIA_SHARE + IMAGE_SHARE:
            url = f"https://i.imgur.com/{sid}.png" if rng.random() < 0.5 else f"{article_url(index)}/photo.jpg"
        elif index and rng.random() < REPOST_SHARE:
            earlier = index - 1 - min(int(rng.expovariate(1 / 20_000)), index - 1)
            url = respelled(article_url(earlier), rng)
        else:
            url = article_url(index)
        domain = url.split("/")[2].removeprefix("www.")
    created = START_UTC + rng.randrange(SPAN_SECONDS)
    record.update(id=sid, url=url, domain=domain, is_self=is_self, over_18=rng.random() < OVER_18_SHARE,
                  subreddit=subreddit, score=score_of(rng), num_comments=rng.randrange(200),
                  permalink=f"/r/{subreddit}/comments/{sid}/post/", title=f"Story {index} in r/{subreddit}",
                  created_utc=(created, float(created), str(created))[index % 3])
    return json.dumps(record, separators=(",", ":"))


def dump_folder(cache: Path, seed: int) -> Path:
    return cache / f"v{GENERATOR_VERSION}-seed{seed}"


def build_dumps(data: Path, cache: Path, submissions: int, seed: int) -> list[Path]:
    """The dump files holding the first ``submissions`` lines (built once, then cached)."""
    templates = [json.loads(line) for line in
                 (data / "reddit" / "pushshift_importer" / "test_submissions.json").read_text().splitlines() if line.strip()]
    folder = dump_folder(cache, seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for number in range(-(-submissions // SUBMISSIONS_PER_FILE)):
        path = folder / f"RS_gen_{number:03d}.zst"
        files.append(path)
        if path.exists():
            continue
        rng = random.Random(f"{seed}-{number}")
        written, lines = [], []
        first = number * SUBMISSIONS_PER_FILE
        for index in range(first, first + SUBMISSIONS_PER_FILE):
            if lines and rng.random() < COPY_SHARE:
                lines.append(rng.choice(lines[-5000:]))  # the same post read twice
            elif rng.random() < MALFORMED_SHARE:
                lines.append(submission_line(templates, index, rng)[:-40])
            else:
                lines.append(submission_line(templates, index, rng))
            written.append(index)
        partial = path.with_suffix(".partial")
        with open(partial, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
            for line in lines:
                out.write(line.encode() + b"\n")
        partial.replace(path)
    if submissions % SUBMISSIONS_PER_FILE:
        raise SystemExit(f"--submissions must be multiples of {SUBMISSIONS_PER_FILE:,}")
    return files


# --- the runs -------------------------------------------------------------------------------
def baseline_commit(repo: Path, ref: str | None) -> str:
    """``ref``, or the parent of the commit that replaced the link stage's GroupByKey of
    submissions (the last code that held every submission in memory)."""
    if ref is None:
        found = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H", "-S", '"Group by URL key"', "--",
                                "pipelines/webtext/job.py"], capture_output=True, text=True, check=True).stdout.strip()
        if not found:
            raise SystemExit("no commit replaced the GroupByKey of submissions here: pass --baseline-ref")
        ref = f"{found}~1"
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", ref], capture_output=True, text=True,
                          check=True).stdout.strip()


def run_webtext(repo: Path, env: dict, dumps: list[Path], warc: Path, out_dir: Path, log_path: Path, timeout: float) -> dict:
    """One ``corpusforge webtext`` child process of ``repo``: wall, CPU, peaks, counters."""
    command = [sys.executable, "-m", "pipelines.cli", "webtext", "--submissions", *map(str, dumps), "--pages", "crawl",
               "--warc", str(warc), "--output", str(out_dir)]
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        job = subprocess.Popen(command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
        sampler = c4_scale.TreeSampler({"job": job.pid})
        sampler.start()
        try:
            status, cpu, job_maxrss = c4_scale.wait_with_rusage(job, timeout=timeout)
        except subprocess.TimeoutExpired:
            job.kill()
            c4_scale.wait_with_rusage(job)
            status, cpu, job_maxrss = "timeout", float("nan"), 0
        wall = time.perf_counter() - started
        sampler.stop()
    procs = sorted(sampler.per_pid.values(), key=lambda p: p["pid"])
    for proc in procs:  # c4_scale names every pipelines.cli process after its own job
        proc["role"] = "job (pipelines.cli webtext)" if "pipelines.cli" in proc["cmd"] else proc["role"]
    single = max((max(p["peak"], p["hwm"]) for p in procs), default=0)
    main = sampler.per_pid.get(job.pid, {"peak": 0, "hwm": 0})
    result = {"status": status, "wall": wall, "cpu": max(cpu, sum(p["cpu"] for p in procs)),
              "main_peak": max(main["peak"], main["hwm"], job_maxrss), "tree_peak": max(sampler.peak_sum, single, job_maxrss),
              "processes": procs}
    # this checkout writes _stats.json; a baseline from before the "_" layout, stats.json
    stats = next((out_dir / name for name in (STATS_FILE, OLD_LAYOUT_FILES[0]) if (out_dir / name).exists()), None)
    if stats is not None:
        result["counters"] = json.loads(stats.read_text())["counters"]
        # rows, not bytes: a link shard of more than LINK_ROW_GROUP_ROWS links is written in several row groups
        result["links"] = {p.name: pq.read_table(p) for p in sorted((out_dir / "links").iterdir())}
    else:
        result["log_tail"] = log_path.read_text(errors="replace")[-2000:]
    return result


def same_link_rows(base: dict | None, ours: dict | None) -> bool:
    """Whether two runs wrote the same link table files with the same rows, in order, and schema."""
    return base is not None and ours is not None and base.keys() == ours.keys() and all(
        base[name].equals(ours[name]) for name in base)


def link_counts(result: dict) -> str:
    counters = result.get("counters", {})
    return (f"{counters.get('webtext-submissions', {}).get('passed', 0):,} eligible submissions -> "
            f"{counters.get('webtext-karma', {}).get('passed', 0):,} links")


def cell(value: float, width: int, spec: str, suffix: str = "") -> str:
    """``value`` formatted to ``width`` (with ``suffix``), or ``-`` where a side did not run (NaN)."""
    return f"{'-' if math.isnan(value) else format(value, spec) + suffix:>{width}}"


def print_table(results: dict, base_label: str) -> None:
    sizes = sorted(results)
    missing = {"tree_peak": float("nan"), "wall": float("nan"), "cpu": float("nan"), "processes": []}
    print(f"\nWebText job (DirectRunner, --pages crawl), ours against {base_label} on the same dumps; "
          "MB = highest sampled RSS sum of the job's process tree (and the kernel's VmHWM)")
    print(f"{'submissions':>12} {'links':>8} {'base MB':>8} {'ours MB':>8} {'ours/base':>9} {'base wall s':>11} "
          f"{'ours wall s':>11} {'base CPU s':>10} {'ours CPU s':>10} {'CPU ours/base':>13} {'same link rows+counters':>23}")
    for size in sizes:
        base, ours = results[size].get("baseline", missing), results[size].get("ours", missing)
        same = same_link_rows(base.get("links"), ours.get("links")) and base.get("counters") == ours.get("counters")
        links = (ours.get("counters") or base.get("counters") or {}).get("webtext-karma", {}).get("passed", 0)
        print(f"{size:>12,} {links:>8,} {cell(base['tree_peak'] / 1e6, 8, '.0f')} {cell(ours['tree_peak'] / 1e6, 8, '.0f')} "
              f"{cell(ours['tree_peak'] / base['tree_peak'], 9, '.2f', 'x')} {cell(base['wall'], 11, '.1f')} "
              f"{cell(ours['wall'], 11, '.1f')} {cell(base['cpu'], 10, '.1f')} {cell(ours['cpu'], 10, '.1f')} "
              f"{cell(ours['cpu'] / base['cpu'], 13, '.2f', 'x')} "
              f"{('yes' if same else 'NO') if base is not missing and ours is not missing else '-':>23}")
    for label in ("baseline", "ours"):
        ran = [size for size in sizes if label in results[size]]
        if len(ran) > 1:
            growth = results[ran[-1]][label]["tree_peak"] / results[ran[0]][label]["tree_peak"]
            print(f"{label}: peak at {ran[-1]:,} over peak at {ran[0]:,} submissions: {growth:.2f}x (input {ran[-1] / ran[0]:.1f}x)")
    for size in sizes:
        for label, run in results[size].items():
            procs = ", ".join(f"{p['role']} pid {p['pid']} {max(p['peak'], p['hwm']) / 1e6:.0f} MB" for p in run["processes"])
            print(f"  {size:,} {label}, per process: {procs}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, nargs="+", default=[150_000, 300_000, 1_000_000],
                        help=f"dump sizes, multiples of {SUBMISSIONS_PER_FILE:,} (default 150000 300000 1000000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("CORPUSFORGE_TEST_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "corpusforge-webtext-memory")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose code is 'ours' (default: this script's)")
    parser.add_argument("--baseline-ref", default=None,
                        help="commit of the baseline (default: the parent of the commit that replaced the GroupByKey of submissions)")
    parser.add_argument("--approaches", nargs="+", choices=("baseline", "ours"), default=["baseline", "ours"],
                        help="which to run (default both; the table shows both only where both ran)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds before a run is killed")
    parser.add_argument("--keep", action="store_true", help="keep outputs and logs")
    args = parser.parse_args(argv)
    data, repo = args.data.resolve(), args.repo.resolve()
    warc = data / "warc" / "warcio" / "example.warc.gz"
    work = Path(tempfile.mkdtemp(prefix="webtext-memory-"))
    base_ref = baseline_commit(repo, args.baseline_ref)
    base_repo = work / "baseline"  # the baseline's files, exported (git archive): no worktree to clean up
    base_repo.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", base_ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base_repo)], input=archive, check=True)
    checkouts = {label: path for label, path in (("baseline", base_repo), ("ours", repo)) if label in args.approaches}
    envs = {label: c4_scale.job_env(path, data) for label, path in checkouts.items()}
    try:
        for label, path in checkouts.items():
            print(f"{label}: {c4_scale.code_under_test(path, envs[label])}")
        print(c4_scale.load_line("before"))
        results = {}
        for size in dict.fromkeys(args.submissions):  # in the order given; the table sorts them
            dumps = build_dumps(data, args.cache, size, args.seed)
            megabytes = sum(p.stat().st_size for p in dumps) / 1e6
            print(f"input {size:,} submissions: {len(dumps)} zstd dumps, {megabytes:.0f} MB ({dump_folder(args.cache, args.seed)})", flush=True)
            results[size] = {}
            for label, path in checkouts.items():
                out_dir = work / f"{label}-{size}"
                run = run_webtext(path, envs[label], dumps, warc, out_dir, work / f"{label}-{size}.log", args.timeout)
                results[size][label] = run
                print(f"  {label}: exit {run['status']}, {run['wall']:.1f} s wall, {run['cpu']:.1f} s CPU, peak "
                      f"{run['tree_peak'] / 1e6:.0f} MB, {link_counts(run)}; {c4_scale.load_line('now')}", flush=True)
                if run["status"] != 0:
                    print(run.get("log_tail", ""))
                if not args.keep:
                    shutil.rmtree(out_dir, ignore_errors=True)
        print_table(results, f"the baseline (git {base_ref})")
        print(c4_scale.load_line("after"))
    finally:
        if args.keep:
            print(f"outputs and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r[label]["status"] == 0 for r in results.values() for label in r) else 1


if __name__ == "__main__":
    sys.exit(main())
