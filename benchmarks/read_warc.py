"""How fast corpusforge reads WET and WARC files, against the cost of decompression alone.

Builds Common Crawl-shaped test files (one gzip member per record) from real records —
the real-data folder when CORPUSFORGE_TEST_DATA is set, else the bundled sample crawl —
repeated to a size worth timing, then times, in one process, rounds in which every
reader runs once (the order rotating from round to round):

  zlib floor   a bare loop: zlib.decompressobj(wbits=31) over the same bytes, member by
               member, from 1 MiB reads fed to zlib 64 KiB at a time (whole 1 MiB pieces
               cost more: zlib copies what follows each member into unused_data). No
               reader that inflates with zlib can be faster; this is the baseline.
  gzip module  gzip.open(...).read(1 MiB) to the end
  warcio       warcio's ArchiveIterator reading every record's content
  FastWARC     FastWARC's ArchiveIterator (the fast library users pick instead) reading
               every record's content; for WET also decoding it as UTF-8, as ours does;
               for WARC with HTTP heads parsed
  corpusforge  corpus.warc.read_archive producing Documents (faithful and c4 text mode)
               or HtmlPages (HTTP head parsed, chunking and content-encoding undone,
               charset decoded)

and prints, per reader, seconds min-max over the rounds, MB/s of compressed input at the
best round, and its time over the floor's in the same round (min-max). Targets for
corpusforge: WET <= 1.5x the floor (both text modes), WARC <= 2x.

    python benchmarks/read_warc.py [--mb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus.warc import ReadStats, WarcRecord, iter_records, read_archive  # noqa: E402

TARGETS = {"wet": 1.5, "warc": 2.0}


def source_records(kind: str, scratch: Path) -> list[bytes]:
    """Raw records (header + block) of real files of this kind ('wet' or 'warc')."""
    data_dir = os.environ.get("CORPUSFORGE_TEST_DATA")
    if data_dir:
        root = Path(data_dir) / "warc"
        files = sorted(root.glob("*/*.wet.gz")) if kind == "wet" else [root / "resiliparse/warcfile.warc.gz", root / "whirlwind/whirlwind.warc.gz"]
    else:
        from samplecrawl.crawl import write_sample_crawl

        crawl = write_sample_crawl(scratch / "sample", seed=0)
        files = [Path(p) for p in (crawl.wet_paths if kind == "wet" else crawl.warc_paths)]
    records = []
    for path in files:
        with open(path, "rb") as raw:
            found = [r for r in iter_records(raw, str(path)) if isinstance(r, WarcRecord)]
        stream = gzip.decompress(path.read_bytes())
        ends = [r.stream_offset for r in found[1:]] + [len(stream)]
        for record, end in zip(found, ends, strict=True):  # each record's bytes as the file has them
            if record.rec_type != "warcinfo":
                records.append(stream[record.stream_offset : end])
    return records


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


def zlib_floor(path: Path) -> int:
    """Decompress every gzip member with zlib and nothing else: the floor."""
    total = 0
    inflater = zlib.decompressobj(31)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return total
            view = memoryview(chunk)
            pos = 0
            while pos < len(chunk):
                piece = view[pos : pos + (1 << 16)]
                total += len(inflater.decompress(piece))
                if inflater.eof:
                    pos += len(piece) - len(inflater.unused_data)
                    inflater = zlib.decompressobj(31)
                else:
                    pos += len(piece)


def gunzip_all(path: Path) -> None:
    with gzip.open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def warcio_all(path: Path) -> None:
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            record.content_stream().read()


def fastwarc_all(path: Path, kind: str) -> None:
    from fastwarc import ArchiveIterator

    with open(path, "rb") as f:
        for record in ArchiveIterator(f, parse_http=(kind == "warc")):
            content = record.reader.read()
            if kind == "wet":
                content.decode("utf-8", "replace")


def ours(path: Path, **kwargs) -> None:
    stats = ReadStats()
    for _ in read_archive(str(path), stats=stats, **kwargs):
        pass


def readers(kind: str, path: Path) -> list[tuple[str, object]]:
    lines = [
        ("zlib floor (baseline)", lambda: zlib_floor(path)),
        ("gzip module", lambda: gunzip_all(path)),
        ("warcio ArchiveIterator", lambda: warcio_all(path)),
    ]
    try:
        import fastwarc  # noqa: F401

        lines.append(("FastWARC ArchiveIterator", lambda: fastwarc_all(path, kind)))
    except ImportError:
        print("(FastWARC is not installed: pip install fastwarc to compare with it)", file=sys.stderr)
    lines.append(("corpusforge read_archive", lambda: ours(path)))
    if kind == "wet":
        lines.append(("corpusforge read_archive, c4 mode", lambda: ours(path, text_mode="c4")))
    return lines


def time_rounds(lines: list[tuple[str, object]], repeat: int) -> dict[str, list[float]]:
    """Every reader once per round, the starting reader rotating, so no reader always
    runs right after the same one; seconds per round."""
    times: dict[str, list[float]] = {name: [] for name, _ in lines}
    for round_ in range(repeat):
        shift = round_ % len(lines)
        for name, fn in lines[shift:] + lines[:shift]:
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64, help="uncompressed size of each test file (default 64)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (every reader once per round)")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows, verdicts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for kind in ("wet", "warc"):
            path = scratch / f"bench.{kind}.gz"
            raw_bytes = build_file(source_records(kind, scratch), path, args.mb << 20)
            size_mb = path.stat().st_size / 1e6
            lines = readers(kind, path)
            times = time_rounds(lines, args.repeat)
            floor = times[lines[0][0]]
            for name, _ in lines:
                ratios = [t / f for t, f in zip(times[name], floor, strict=True)]
                rows.append((kind, f"{size_mb:.1f} MB gz / {raw_bytes / 1e6:.0f} MB", name, min(times[name]), max(times[name]),
                             size_mb / min(times[name]), min(ratios), max(ratios)))
                if name.startswith("corpusforge"):
                    verdicts.append((kind, name, max(ratios)))
    print(f"{'input':5} {'size':22} {'reader':34} {'seconds':>13} {'MB/s (gz)':>10} {'x zlib floor':>13}")
    for kind, size, name, lo, hi, rate, rlo, rhi in rows:
        print(f"{kind:5} {size:22} {name:34} {lo:6.3f}-{hi:6.3f} {rate:10.1f} {rlo:6.2f}-{rhi:5.2f}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for kind, name, worst in verdicts:
        status = "meets" if worst <= TARGETS[kind] else "misses"
        print(f"{name} ({kind}): worst round {worst:.2f}x the zlib floor, {status} the target of {TARGETS[kind]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
