"""C4 chain throughput: corpusforge against the reference (TFDS c4_utils), same input, same run.

    .venv/bin/python benchmarks/c4_throughput.py [--pages 2000 | --input WET... | --scale PAGES] [--data ../shared/data]
        [--sides ours ...] [--baseline DIR] [--beam [--repeat 3] [--jobs_only] [--beam_jobs c4json ...] [--together]]
        [--peer datatrove]

Each side runs in its own fresh child process (so each gets its own peak RSS) on one
core: WET files -> length -> URL dedup -> clean_page -> line dedup -> langdetect -> bad
words, over the bundled sample crawl (``--pages`` pages, seeded) plus the real
``filter_test_1.wet.gz`` and whirlwind WET. The reference side calls the reference's own
functions (``split_wet_file``, ``is_valid_length``, ``select_newest_page``,
``clean_page``, ``_emit_url_to_lines`` / ``_remove_lines_from_text``, ``detect_english``,
the bad-words filter) wired in memory as its Beam pipeline wires them. The kept pages
of both sides must be identical or the script exits 1.

``--beam`` also times both complete Beam jobs on the DirectRunner as a user runs them:
each in a fresh process (``corpusforge c4`` from its command line; the reference pipeline
of ``tests/c4_reference.py``), imports, language profiles and graph construction included
on both sides, with the kernel's CPU time, wall time and peak RSS of each process.
A last line times an empty Beam job (Beam's import, a two-step graph, the runner): the floor
under any complete job, which bounds the ratio on small inputs.
``--baseline DIR`` (e.g. ``git archive`` of an earlier commit) also runs our chain over the
checkout in DIR (its kept pages must equal ours; stage CPU side by side) and, with ``--beam``,
``corpusforge c4 --format c4json`` from DIR in the same rounds, whose shards must be
byte-identical to ours: before and after a change, in one run; with ``--baseline`` the
chain's sides start together, so that on a loaded machine each sees the same load.
``--sides`` picks the chain's sides (``--sides ours --baseline DIR``: our chain before and
after, without the reference's). ``--beam_jobs`` picks the complete jobs (``reference``,
``c4json``, ``default``, ``floor``; ``--beam_jobs c4json --baseline DIR``: the c4json job
before and after), ``--together`` starts a round's jobs at the same time.
``--input`` takes any WET files instead of the sample crawl; ``--scale PAGES`` builds (once,
cached) ``benchmarks/c4_scale.py``'s Common Crawl-shaped set of that many pages from the
shared real prose; ``--jobs_only`` skips the in-memory chain.
``--peer datatrove`` also runs datatrove's closest offline chain (its WARC/WET reader,
``C4QualityFilter``, ``C4BadWordsFilter`` on the same local bad-words list, its JSONL writer)
on the same files in its own child process, and prints pages read per CPU-second for it and
for ours, with the steps each side ran (the chains differ: datatrove has no URL dedup, line
dedup or language id; with ``--jobs_only`` the reference chain is skipped).
Numbers: WET pages read per CPU-second, MB of compressed input per CPU-second, peak RSS, the
CPU ratio; a chain's stages are CPU seconds of its child process (one thread).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def stopwatch(timings: dict[str, float]):
    """``lap(name)`` records the CPU seconds of this process since the previous lap (or the
    start) under ``name``: each side runs alone in its child process, on one thread, so a
    stage's CPU is its own however loaded the machine is."""
    clock = [time.process_time()]

    def lap(name: str) -> None:
        now = time.process_time()
        timings[name] = now - clock[0]
        clock[0] = now

    return lap


def ours(paths: list[str], badwords: list[str], implementation: str = "fast") -> tuple[list[dict], dict]:
    from corpus import c4, langid
    from corpus.records import Document
    from corpus.sentences import count_line_sentences, has_sentences
    from corpus.urls import url_digest
    from corpus.warc import read_archive
    from dedup.lines import page_line_keys, remove_duplicate_lines

    timings: dict[str, float] = {}
    lap = stopwatch(timings)

    pages, read = [], 0
    for index, path in enumerate(paths):
        for doc in read_archive(path, text_mode="c4"):
            if isinstance(doc, Document) and not c4.wet_page_problem(doc.url, doc.text, doc.timestamp):
                read += 1
                pages.append(c4.C4Page(doc.url, doc.text, doc.timestamp, order=(index, int(doc.meta["stream_offset"]))))
    lap("read")
    newest: dict[str, tuple] = {}
    for page in pages:
        if c4.is_valid_length(page.text):
            key = page.normalized_url
            newest[key] = c4.newest_capture(newest[key], c4.capture(page)) if key in newest else c4.capture(page)
    lap("length+url dedup")
    cleaned = [d.record for d in (c4.clean_page(p, count_line_sentences) for _, _, p in newest.values()) if d.record is not None]
    lap("clean_page")
    owner: dict[bytes, tuple] = {}
    for page in cleaned:
        claim = (url_digest(page.url), page.url)
        for key in page_line_keys(page.text):
            if key not in owner or claim < owner[key]:
                owner[key] = claim
    owned: dict[str, list] = {}
    for key, (_, url) in owner.items():
        owned.setdefault(url, []).append(key)
    deduped = [d.record for d in (remove_duplicate_lines((page, owned.get(page.url, [])), min_num_sentences=c4.MIN_NUM_SENTENCES,
                                                         has_sentences=has_sentences) for page in cleaned) if d.record is not None]
    lap("line dedup")
    detect = langid.detect_langs if implementation == "fast" else langid.reference_detect_langs
    english = [d.record for d in (c4.detect_english(p, detect, langid.LanguageDetectionError) for p in deduped) if d.record]
    lap("langdetect")
    matcher = c4.BadwordsMatcher(badwords)
    kept = [p for p in english if c4.badwords_filter(p, matcher).record]
    lap("bad words")
    return [{"url": p.url, "text": p.text, "timestamp": p.timestamp} for p in kept], {"docs": read, "stages": timings}


def reference(paths: list[str], badwords: list[str]) -> tuple[list[dict], dict]:
    from c4_reference import load_c4_utils

    c4_utils = load_c4_utils()
    timings: dict[str, float] = {}
    lap = stopwatch(timings)

    pages = [p for path in paths for p in c4_utils.split_wet_file(path)]
    read = len(pages)
    lap("read")
    groups: dict[str, list] = {}
    for page in pages:
        if c4_utils.is_valid_length(page):
            groups.setdefault(page.normalized_url, []).append(page)
    newest = [c4_utils.select_newest_page(group) for group in groups.values()]
    lap("length+url dedup")
    clean = c4_utils.get_clean_page_fn()
    cleaned = [q for p in newest for q in clean(p)]
    lap("clean_page")
    best: dict[str, str] = {}
    for page in cleaned:
        for line_hash, url in c4_utils._emit_url_to_lines(page):
            if line_hash not in best or c4_utils._hash_text(url) < c4_utils._hash_text(best[line_hash]):
                best[line_hash] = url
    keep: dict[str, list] = {}
    for line_hash, url in best.items():
        keep.setdefault(url, []).append(line_hash)
    counter = c4_utils.get_counter_inc_fn("dedupe-lines")
    deduped = [q for p in cleaned for q in c4_utils._remove_lines_from_text((p.url, {"pages": [p], "lines": keep.get(p.url, [])}), counter, 3)]
    lap("line dedup")
    english = [q for p in deduped for q in c4_utils.detect_english(p)]
    lap("langdetect")
    badwords_fn = c4_utils.get_badwords_filter_fn({"en": set(badwords)}, filter_fraction=1.0)
    kept = [p for p in english if badwords_fn(p)]
    lap("bad words")
    return [{"url": p.url, "text": p.text, "timestamp": p.timestamp} for p in kept], {"docs": read, "stages": timings}


DATATROVE_STEPS = ("WarcReader (WET records)", "C4QualityFilter (defaults)", "C4BadWordsFilter (en, the local list)",
                   "JsonlWriter (gzip)")
OURS_STEPS = ("WET reader", "length", "URL dedup (newest capture)", "clean_page", "line dedup + 3-sentence floor",
              "langdetect (en >= 0.99)", "bad words")


def datatrove_side(paths: list[str], badwords_path: str) -> Callable[[], tuple[list[dict], dict]]:
    """datatrove's closest offline C4 chain, its own pipeline steps chained the way its executor
    chains them (each step a generator over the previous one), one task on this core:
    WarcReader -> C4QualityFilter -> C4BadWordsFilter -> JsonlWriter. Its bad-words filter
    downloads the LDNOOBW list on first use; here its asset download is pointed at the same
    local list our side reads. It has no URL dedup, line dedup or language id step. Returns the
    chain to time, its filters built and warmed up (spaCy's English tokenizer, the bad-words
    regular expression) as our side warms its language profiles up before the clock starts."""
    from datatrove.data import Document
    from datatrove.pipeline.filters import C4BadWordsFilter, C4QualityFilter, c4_filters
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    c4_filters.cached_asset_path_or_download = lambda *args, **kwargs: badwords_path  # the local list, no network
    quality, badwords = C4QualityFilter(), C4BadWordsFilter()
    warm = "This is a warm-up line of text. It has two sentences in it.\n" * 3
    quality.filter(Document(text=warm, id="warm-up"))
    badwords.filter(Document(text=warm, id="warm-up"))
    return lambda: _datatrove_chain(paths, quality, badwords, WarcReader, JsonlWriter)


def _datatrove_chain(paths, quality, badwords, WarcReader, JsonlWriter) -> tuple[list[dict], dict]:
    timings: dict[str, float] = {}
    lap = stopwatch(timings)
    with tempfile.TemporaryDirectory() as work:
        inputs = Path(work, "in")
        inputs.mkdir()
        for index, path in enumerate(paths):  # one folder for its reader: links named after the inputs
            (inputs / f"{index:04d}_{Path(path).name}").symlink_to(path)
        read, kept = [0], []

        def counted(docs):
            for doc in docs:
                read[0] += 1
                yield doc

        def collected(docs):
            for doc in docs:
                kept.append({"url": doc.metadata.get("url"), "text": doc.text})
                yield doc

        pipe = counted(WarcReader(str(inputs))(None, 0, 1))
        pipe = quality(pipe, 0, 1)
        pipe = collected(badwords(pipe, 0, 1))
        for _ in JsonlWriter(str(Path(work, "out")))(pipe, 0, 1):
            pass
        lap("whole chain")
    return kept, {"docs": read[0], "stages": timings}


def child(side: str, paths: list[str], badwords_path: str) -> None:
    """Run one side and print one JSON line: seconds, docs, stage times, peak RSS, output hash."""
    from corpus.c4 import parse_badwords
    from corpus.sentences import require_punkt

    require_punkt()
    from corpus import langid

    langid.detect_langs("warm the language profiles up before the clock starts")
    badwords = parse_badwords(Path(badwords_path).read_text(encoding="utf-8"))
    peer = datatrove_side(paths, badwords_path) if side == "datatrove" else None
    started, cpu_started = time.perf_counter(), time.process_time()
    if side == "reference":
        kept, info = reference(paths, badwords)
    elif peer is not None:
        kept, info = peer()
    else:
        kept, info = ours(paths, badwords, "fast" if side == "ours" else "reference")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    kept = sorted(kept, key=lambda r: r["url"] or "")
    digest = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "cpu": cpu, "docs": info["docs"], "kept": len(kept), "stages": info["stages"], "peak_mb": peak, "digest": digest}))


CHAIN_SIDES = ("reference", "ours", "ours-reference-langdetect")
BASELINE_SIDE = "ours, baseline checkout"


def run_side(side: str, paths: list[str], badwords: str, library: Path | None = None) -> dict:
    """One side of the chain in a fresh child process; with ``library``, our chain over the
    checkout there (its ``corpus/`` and ``dedup/`` first on the path) instead of this one."""
    extra = ["--library", str(library)] if library is not None else []
    done = subprocess.run([sys.executable, __file__, "--child", side, "--badwords", badwords, *extra, *paths], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


REFERENCE_JOB = """
import sys
sys.path[:0] = {paths!r}
from c4_reference import run_reference
from corpus.c4 import parse_badwords
badwords = set(parse_badwords(open({badwords!r}, encoding="utf-8").read()))
run_reference({inputs!r}, {out!r}, badwords=badwords)
"""


# What any Beam job on the DirectRunner costs before it reads a byte: Beam's import, a
# two-step graph, the runner's start and stop. No complete job, ours or the reference's, is
# cheaper, so on small inputs it bounds every ratio of complete jobs.
FLOOR_JOB = "floor: empty Beam job (Create -> Map)"
EMPTY_BEAM_JOB = """
import apache_beam as beam
pipeline = beam.Pipeline(runner="DirectRunner")
pipeline | beam.Create([1]) | beam.Map(str)
pipeline.run().wait_until_finish()
"""


def start_process(argv: list[str], cwd: Path = REPO) -> tuple:
    """Start ``argv`` in ``cwd``, importing the checkout there first; its stderr goes to a
    temporary file (read by ``finish_process``)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    stderr = tempfile.TemporaryFile(mode="w+")
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, cwd=cwd, env=env), time.perf_counter(), argv, stderr


def finish_process(started: tuple, waited: tuple | None = None) -> dict:
    """Wait for a started process (``waited``: what ``os.wait4`` already gave for it); its wall
    seconds, CPU seconds (user + system, children of the child included) and peak RSS, as
    the kernel reports them for that process."""
    child, clock, argv, stderr_file = started
    _, status, usage = waited or os.wait4(child.pid, 0)
    wall = time.perf_counter() - clock
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr_file.seek(0)
    stderr = stderr_file.read()
    stderr_file.close()
    if child.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {stderr[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024}


def timed_process(argv: list[str], cwd: Path = REPO) -> dict:
    """Run ``argv`` to the end (in ``cwd``, importing the checkout there first); its wall
    seconds, CPU seconds and peak RSS (``finish_process``)."""
    return finish_process(start_process(argv, cwd))


def timed_together(jobs: dict[str, tuple[list[str], Path]]) -> dict[str, dict]:
    """``timed_process`` of every job, all started at once, each timed when it ends."""
    started = {name: start_process(argv, cwd) for name, (argv, cwd) in jobs.items()}
    by_pid = {process[0].pid: name for name, process in started.items()}
    timed = {}
    while by_pid:
        waited = os.wait4(-1, 0)
        name = by_pid.pop(waited[0], None)
        if name is not None:
            timed[name] = finish_process(started[name], waited)
    return {name: timed[name] for name in jobs}


BASELINE_JOB = "baseline checkout: c4 --format c4json"
REFERENCE_JOB_NAME, C4JSON_JOB, DEFAULT_JOB = "reference (TFDS c4_utils)", "corpusforge c4 --format c4json", "corpusforge c4 (default: + Parquet)"
# --beam_jobs: the short names of the complete jobs
BEAM_JOBS = {"reference": REFERENCE_JOB_NAME, "c4json": C4JSON_JOB, "default": DEFAULT_JOB, "floor": FLOOR_JOB}


def beam_jobs(paths: list[str], badwords_path: str, work: str, baseline: Path | None = None, only: list[str] | None = None,
              together: bool = False) -> dict[str, dict]:
    """Both complete C4 jobs as a user runs them, each in a fresh process, imports, language
    profiles and Beam's graph included on both sides: ``corpusforge c4`` (released c4/en JSON,
    and the default JSON + Parquet) and the reference pipeline (tests/c4_reference.py); with
    ``baseline``, also ``corpusforge c4 --format c4json`` of the checkout there. ``only``: the
    jobs to run (``BEAM_JOBS``' short names; default all); ``together``: start them all at
    once rather than one after the other, so that on a loaded machine each sees the same load."""
    jobs = {
        REFERENCE_JOB_NAME: ([sys.executable, "-c", REFERENCE_JOB.format(paths=[str(REPO), str(REPO / "tests")], badwords=badwords_path,
                                                                          inputs=paths, out=os.path.join(work, "ref"))], REPO),
        C4JSON_JOB: ([sys.executable, "-m", "pipelines.cli", "-q", "c4", "--input", *paths, "--output",
                      os.path.join(work, "ours"), "--badwords", badwords_path, "--format", "c4json", "--overwrite"], REPO),
        DEFAULT_JOB: ([sys.executable, "-m", "pipelines.cli", "-q", "c4", "--input", *paths, "--output",
                       os.path.join(work, "ours-default"), "--badwords", badwords_path, "--overwrite"], REPO),
        FLOOR_JOB: ([sys.executable, "-c", EMPTY_BEAM_JOB], REPO),
    }
    if only is not None:
        jobs = {BEAM_JOBS[name]: jobs[BEAM_JOBS[name]] for name in only}
    if baseline is not None:
        jobs[BASELINE_JOB] = ([sys.executable, "-m", "pipelines.cli", "-q", "c4", "--input", *paths, "--output", os.path.join(work, "baseline"),
                               "--badwords", badwords_path, "--format", "c4json", "--overwrite"], baseline)
    if together:
        return timed_together(jobs)
    return {name: timed_process(argv, cwd) for name, (argv, cwd) in jobs.items()}


def shards_identical(work: str, other: str) -> bool:
    """The c4json shards of ``ours`` and of ``other`` (same names), byte for byte."""
    ours, theirs = sorted(Path(work, "ours").glob("c4-*.json.gz")), sorted(Path(work, other).glob("c4-*.json.gz"))
    return bool(ours) and [p.name for p in ours] == [p.name for p in theirs] and all(
        gzip_text(a) == gzip_text(b) for a, b in zip(ours, theirs, strict=True))


def gzip_text(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def beam_outputs_agree(work: str) -> bool:
    from corpus.shards import read_documents

    ours = sorted((d.url, d.text) for d in read_documents(sorted(Path(work, "ours").glob("c4-*.json.gz"))))
    theirs = sorted((r["url"], r["text"]) for split in ("train", "validation")
                    for r in json.loads(Path(work, "ref", f"{split}.json").read_text(encoding="utf-8")))
    return ours == theirs and len(ours) > 0


def _span(values: list[float], digits: int = 1) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f}-{high:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000, help="sample crawl pages (default 2000)")
    parser.add_argument("--data", default=os.environ.get("CORPUSFORGE_TEST_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--beam", action="store_true",
                        help="also time both complete Beam jobs (DirectRunner), each in a fresh process with its imports")
    parser.add_argument("--input", nargs="+", metavar="WET", help="these WET files instead of the sample crawl and the shared files")
    parser.add_argument("--scale", type=int, metavar="PAGES",
                        help="instead: benchmarks/c4_scale.py's Common Crawl-shaped WET set of PAGES pages from the shared real prose")
    parser.add_argument("--jobs_only", action="store_true", help="skip the in-memory chain against the reference (with --beam: time the complete jobs only)")
    parser.add_argument("--repeat", type=int, default=1, help="--beam: runs of each job (min-max reported)")
    parser.add_argument("--beam_jobs", nargs="+", choices=sorted(BEAM_JOBS), metavar="JOB",
                        help=f"--beam: only these complete jobs ({', '.join(BEAM_JOBS)}; default all), and the baseline's with --baseline")
    parser.add_argument("--together", action="store_true",
                        help="--beam: start a round's jobs at the same time (on a loaded machine, before and after see the same load)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also run our chain (and with --beam, `corpusforge c4 --format c4json`) over the checkout in DIR; "
                             "kept pages and shards must be identical")
    parser.add_argument("--sides", nargs="+", choices=CHAIN_SIDES, default=list(CHAIN_SIDES),
                        help="the chain's sides to run (default all three; the first is the ratios' base); with --baseline, "
                             "our chain over that checkout runs too, and its stage CPU is printed beside ours")
    parser.add_argument("--peer", choices=["datatrove"],
                        help="also run a peer library's C4 chain on the same input: pages/s per CPU-second, both sides")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--badwords", help=argparse.SUPPRESS)
    parser.add_argument("--library", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.library:  # the baseline checkout's modules in front of this one's
            sys.path[:0] = [args.library, str(Path(args.library) / "tests")]
        child(args.child, args.paths, args.badwords)
        return 0

    from samplecrawl.crawl import write_sample_crawl

    with tempfile.TemporaryDirectory() as work:
        data = Path(args.data)
        if args.input:
            paths = [os.path.abspath(p) for p in args.input]
            badwords = str(data / "badwords" / "en")
        elif args.scale:
            import c4_scale

            cache = Path(tempfile.gettempdir()) / "corpusforge-c4-scale"  # c4_scale.py's default --cache
            manifest = c4_scale.build_wet_set(data, cache, args.scale, 0)
            paths = [str(c4_scale.wet_set_folder(cache, args.scale, 0) / "wet" / name) for name in manifest["files"]]
            badwords = str(data / "badwords" / "en")
        else:
            crawl = write_sample_crawl(os.path.join(work, "sample"), seed=0, pages=args.pages)
            paths = list(crawl.wet_paths)
            for relative in ("warc/ccscalatools/filter_test_1.wet.gz", "warc/whirlwind/whirlwind.warc.wet.gz"):
                if (data / relative).exists():
                    paths.append(str(data / relative))
            badwords = str(data / "badwords" / "en") if (data / "badwords" / "en").exists() else crawl.badwords_path
        megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
        print(f"input: {len(paths)} WET files, {megabytes:.2f} MB compressed; bad words: {badwords}")
        same = True
        if not args.jobs_only:
            if args.baseline:  # every side started together: on a loaded machine each sees the same load
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(len(args.sides) + 1) as pool:
                    futures = {side: pool.submit(run_side, side, paths, badwords) for side in args.sides}
                    futures[BASELINE_SIDE] = pool.submit(run_side, "ours", paths, badwords, args.baseline.resolve())
                    results = {side: future.result() for side, future in futures.items()}
            else:
                results = {side: run_side(side, paths, badwords) for side in args.sides}
            base = results[args.sides[0]]
            print(f"\n{'chain (1 core)':28} {'docs':>7} {'kept':>6} {'seconds':>8} {'CPU s':>8} {'docs/CPU-s':>10} {'MB/CPU-s':>8} "
                  f"{'peak MB':>8} {'CPU vs ' + args.sides[0]:>16}")
            for side, r in results.items():
                print(f"{side:28} {r['docs']:>7} {r['kept']:>6} {r['seconds']:>8.2f} {r['cpu']:>8.2f} {r['docs'] / r['cpu']:>10.1f} "
                      f"{megabytes / r['cpu']:>8.3f} {r['peak_mb']:>8.0f} {base['cpu'] / r['cpu']:>15.2f}x")
            print(f"\n{'stage CPU seconds':28} " + " ".join(f"{s:>26}" for s in results))
            for stage in base["stages"]:
                print(f"{stage:28} " + " ".join(f"{results[s]['stages'][stage]:>26.3f}" for s in results))
            print(f"{'sum of stages':28} " + " ".join(f"{sum(results[s]['stages'].values()):>26.3f}" for s in results))
            same = len({r["digest"] for r in results.values()}) == 1
            print(f"\nkept pages identical on every side: {same}")
        if args.peer:
            ours_run = results["ours"] if not args.jobs_only and "ours" in results else run_side("ours", paths, badwords)
            peer = run_side(args.peer, paths, badwords)
            print(f"\npeer: {args.peer}, same input, one process each on one core (not identical chains: see 'did')")
            print(f"{'side':12} {'pages read':>10} {'kept':>7} {'CPU s':>8} {'pages/CPU-s':>12} {'ours vs it':>11}  did")
            for name, r, steps in (("ours", ours_run, OURS_STEPS), (args.peer, peer, DATATROVE_STEPS)):
                print(f"{name:12} {r['docs']:>10} {r['kept']:>7} {r['cpu']:>8.2f} {r['docs'] / r['cpu']:>12.1f} "
                      f"{(ours_run['docs'] / ours_run['cpu']) / (r['docs'] / r['cpu']):>10.2f}x  {' -> '.join(steps)}")
            print("ours, seconds by stage: " + ", ".join(f"{k} {v:.2f}" for k, v in ours_run["stages"].items()))
        if args.beam:
            from corpus.sentences import require_punkt

            require_punkt()
            rounds = [beam_jobs(paths, badwords, work, args.baseline, args.beam_jobs, args.together) for _ in range(args.repeat)]
            print(f"\nComplete Beam jobs, DirectRunner, one process each, imports included ({args.repeat} run(s), min-max"
                  f"{'; the jobs of a round started together' if args.together else ''}):")
            print(f"{'job':38} {'CPU s':>13} {'wall s':>13} {'peak MB':>11} {'CPU vs ref':>12}")
            with_reference = REFERENCE_JOB_NAME in rounds[0]
            for name in rounds[0]:
                runs = [r[name] for r in rounds]
                ratio = _span([r[REFERENCE_JOB_NAME]["cpu"] / run["cpu"] for r, run in zip(rounds, runs, strict=True)], 2) + "x" if with_reference else "-"
                print(f"{name:38} {_span([r['cpu'] for r in runs]):>13} {_span([r['wall'] for r in runs]):>13} "
                      f"{_span([r['peak_mb'] for r in runs], 0):>11} {ratio:>12}")
            if with_reference and C4JSON_JOB in rounds[0]:
                agree = beam_outputs_agree(work)
                print(f"kept pages identical to the reference's: {agree}")
                same = same and agree
            if args.baseline and C4JSON_JOB in rounds[0]:
                identical = shards_identical(work, "baseline")
                speedup = [r[BASELINE_JOB]["cpu"] / r[C4JSON_JOB]["cpu"] for r in rounds]
                print(f"c4json job CPU, baseline checkout / this checkout: {_span(speedup, 2)}x; "
                      f"shards byte-identical to the baseline checkout's ({args.baseline}): {identical}")
                same = same and identical
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
