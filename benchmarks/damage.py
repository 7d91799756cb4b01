"""Damaged archives: how many of the records that must survive come out, ours against warcio.

    CORPUSFORGE_TEST_DATA=../shared/data .venv/bin/python benchmarks/damage.py [--variants 50] [--seed 0]

Seeded damage (the generator of the tests, tests/damage.py) on the real shared archives:

  zeroed     4 KiB zeroed in resiliparse/warcfile.warc.gz (50 records, one gzip member each)
  flipped    one byte inverted in the same file
  length     one record's Content-Length huge / +1000, or its blank line removed
  one-stream one byte inverted in ccscalatools/filter_test_1.wet.gz (one gzip stream)
  stream     the zeroed variants again through a stream that cannot seek (as over HTTP)

For every variant the records that must come out are computed from the intact file
(every record wholly outside the damaged bytes). Each reader runs over every variant:

  ours    corpus.warc.iter_records
  warcio  warcio's ArchiveIterator (what a user would pick instead), reading each
          record's content; an exception ends its file, and what it read before counts

and the table shows records required, kept (of the required), exceptions, and seconds.
Peak RSS of the whole process is printed at the end (target: under 300 MB); target for
ours: 100% of required records, 0 exceptions.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from corpus.records import ReadError  # noqa: E402
from corpus.warc import iter_records  # noqa: E402
from damage import Unseekable, damaged_variants, intact_records_before, length_variants  # noqa: E402


def ours(data: bytes, seekable: bool = True) -> tuple[set, int]:
    raw = io.BytesIO(data) if seekable else Unseekable(data)
    try:
        return {r.get("warc-record-id") for r in iter_records(raw, "damaged") if not isinstance(r, ReadError)}, 0
    except Exception:  # counted: the target is none
        return set(), 1


def warcio_ids(data: bytes, seekable: bool = True) -> tuple[set, int]:
    from warcio.archiveiterator import ArchiveIterator

    ids, failed = set(), 0
    raw = io.BytesIO(data) if seekable else Unseekable(data)
    quiet = io.StringIO()  # warcio prints each decompression error
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        try:
            for record in ArchiveIterator(raw):
                record.content_stream().read()
                ids.add(record.rec_headers.get_header("WARC-Record-ID"))
        except Exception:
            failed = 1
    return ids, failed


def one_stream_variants(data: bytes, seed: int, count: int):
    import random

    rng = random.Random(seed)
    for _ in range(count):
        at = rng.randrange(1000, len(data))
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        yield f"flipped@{at}", bytes(damaged), intact_records_before(data, at)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=50, help="variants per kind (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data_dir = Path(os.environ.get("CORPUSFORGE_TEST_DATA", REPO.parent / "shared" / "data"))
    warc = (data_dir / "warc/resiliparse/warcfile.warc.gz").read_bytes()
    wet = (data_dir / "warc/ccscalatools/filter_test_1.wet.gz").read_bytes()
    n = args.variants
    variants = {name: list(gen) for name, gen in (
        ("zeroed", (v for v in damaged_variants(warc, args.seed, n) if v[0].startswith("zeroed"))),
        ("flipped", (v for v in damaged_variants(warc, args.seed + 1, n) if v[0].startswith("flipped"))),
        ("length", length_variants(warc, args.seed, n)),
        ("one-stream", one_stream_variants(wet, args.seed, n)),
    )}
    variants["stream"] = variants["zeroed"]
    print(f"python {sys.version.split()[0]}, {n} variants per kind, seed {args.seed}, data {data_dir}")
    print(f"{'damage':11} {'variants':>8} {'required':>9} {'ours kept':>10} {'ours exc':>9} {'ours s':>7} "
          f"{'warcio kept':>12} {'warcio exc':>11} {'warcio s':>9}")
    failed = False
    for kind, rows in variants.items():
        seekable = kind != "stream"
        required = kept = kept_w = exc = exc_w = 0
        t_ours = t_w = 0.0
        for name, damaged, must in rows:
            start = time.perf_counter()
            got, e = ours(damaged, seekable)
            t_ours += time.perf_counter() - start
            start = time.perf_counter()
            got_w, e_w = warcio_ids(damaged, seekable)
            t_w += time.perf_counter() - start
            required += len(must)
            kept += len(set(must) & got)
            kept_w += len(set(must) & got_w)
            exc += e
            exc_w += e_w
            if set(must) - got or e:
                failed = True
                print(f"  {kind} {name}: lost {len(set(must) - got)} of {len(must)}" + (", raised" if e else ""))
        print(f"{kind:11} {len(rows):>8} {required:>9} {kept:>6} {100 * kept / max(required, 1):5.1f}% {exc:>6} {t_ours:>7.2f} "
              f"{kept_w:>6} {100 * kept_w / max(required, 1):5.1f}% {exc_w:>8} {t_w:>9.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB (target < 300 MB)")
    print("target: ours keeps 100% of required records with 0 exceptions:", "NOT MET" if failed else "met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
