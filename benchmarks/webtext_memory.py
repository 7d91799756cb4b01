"""WebText's memory against the size of the Reddit dump: peak RSS, wall and CPU of the
complete ``corpusforge webtext`` job on generated Pushshift dumps of growing size.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/webtext_memory.py \\
        [--submissions 150000 300000 1000000] [--baseline-ref HEAD~1] [--repo CHECKOUT] [--keep]

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
with the code of ``--baseline-ref`` (default ``HEAD~1``), checked out in a temporary git
worktree, on the same dumps in the same invocation. Each size prints both side by side
with ratios, and the table ends with each approach's peak at the largest size over its
peak at the smallest (target for ours: within 1.3x). The links and counters of the two
runs are compared: the script says whether the link tables and ``stats.json`` counters
are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import c4_scale  # noqa: E402  (the process-tree sampler, the child's environment, load lines)

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
