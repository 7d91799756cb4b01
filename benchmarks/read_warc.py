"""How fast corpusforge reads WET and WARC files, against plain gzip decompression.

Builds Common Crawl-shaped test files (one gzip member per record) from real records —
the real-data folder when CORPUSFORGE_TEST_DATA is set, else the bundled sample crawl —
repeated to a size worth timing, then times in one process, each best of --repeat:

  baseline   gzip decompression of the whole file (gzip module, 1 MiB reads)
  warcio     warcio's ArchiveIterator reading every record's content (for reference)
  ours       corpus.warc.read_archive producing Documents / HtmlPages

and prints MB/s of compressed input and the ratio to the baseline. Target: ours costs
at most 2x the baseline (ratio <= 2.0).

    python benchmarks/read_warc.py [--mb 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.warc import ReadStats, WarcRecord, iter_records, read_archive  # noqa: E402


def source_records(kind: str, scratch: Path) -> list[bytes]:
    """Raw records (header + block) of real files of this kind ('wet' or 'warc')."""
    data_dir = os.environ.get("CORPUSFORGE_TEST_DATA")
    if data_dir:
        root = Path(data_dir) / "warc"
        files = sorted(root.glob("*/*.wet.gz")) if kind == "wet" else [root / "resiliparse/warcfile.warc.gz", root / "whirlwind/whirlwind.warc.gz"]
    else:
        from corpus.sample import write_sample_crawl

        crawl = write_sample_crawl(scratch / "sample", seed=0)
        files = [Path(p) for p in (crawl.wet_paths if kind == "wet" else crawl.warc_paths)]
    records = []
    for path in files:
        with open(path, "rb") as raw:
            for record in iter_records(raw, str(path)):
                if isinstance(record, WarcRecord) and record.rec_type != "warcinfo":
                    records.append(serialize(record))
    return records


def serialize(record: WarcRecord) -> bytes:
    head = record.version + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in record.headers.items())
    return head.encode() + b"\r\n" + record.block + b"\r\n\r\n"


def build_file(records: list[bytes], path: Path, target_bytes: int) -> int:
    """Write a warcinfo record, then records as one gzip member each, repeated to ``target_bytes``."""
    members = [gzip.compress(r, compresslevel=6, mtime=0) for r in records]
    info = b"WARC/1.0\r\nWARC-Type: warcinfo\r\nContent-Length: 0\r\n\r\n\r\n\r\n"
    per_round = sum(len(r) for r in records)
    rounds = max(1, target_bytes // per_round)
    with open(path, "wb") as out:
        out.write(gzip.compress(info, mtime=0))
        for _ in range(rounds):
            for m in members:
                out.write(m)
    return rounds * per_round


def time_best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def gunzip_all(path: Path) -> None:
    with gzip.open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def warcio_all(path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            record.content_stream().read()


def ours(path: Path, **kwargs) -> None:
    stats = ReadStats()
    for _ in read_archive(str(path), stats=stats, **kwargs):
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64, help="uncompressed size of each test file (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per line; the best is kept")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        rows = []
        for kind in ("wet", "warc"):
            path = scratch / f"bench.{kind}.gz"
            raw_bytes = build_file(source_records(kind, scratch), path, args.mb << 20)
            size_mb = path.stat().st_size / 1e6
            base = time_best(lambda: gunzip_all(path), args.repeat)
            lines = [("gzip decompression (baseline)", base), ("warcio ArchiveIterator", time_best(lambda: warcio_all(path), args.repeat))]
            lines.append(("corpusforge read_archive", time_best(lambda: ours(path), args.repeat)))
            if kind == "wet":
                lines.append(("corpusforge read_archive, c4 mode", time_best(lambda: ours(path, text_mode="c4"), args.repeat)))
            for name, seconds in lines:
                rows.append((kind, f"{size_mb:.1f} MB gz / {raw_bytes / 1e6:.0f} MB", name, size_mb / seconds, seconds / base))
    print(f"{'input':5} {'size':22} {'reader':36} {'MB/s (gz)':>10} {'x baseline':>11}")
    for kind, size, name, rate, ratio in rows:
        print(f"{kind:5} {size:22} {name:36} {rate:10.1f} {ratio:11.2f}")
    worst = max(r[4] for r in rows if r[2].startswith("corpusforge"))
    print(f"\nworst corpusforge ratio: {worst:.2f}x plain decompression (target <= 2.00x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
