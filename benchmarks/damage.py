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

Then what a job writes and later reads back (``--outputs N`` variants each, 0 skips):

  filter      a Bloom filter folder (2 parts + bloom.json): bits flipped, parts cut,
              missing, extra, a folder, swapped from another build, deep manifest JSON,
              m up to 2^52, no manifest; read by dedup.partitioned.PartitionedBloom.load
  checkpoint  a real training checkpoint rewritten with a matching .sha256: NaN / Inf /
              3e38 weights, wrong shape, missing, int dtype, block_size 1e7..2^40,
              n_layer 1e4..2^20, a short RNG state, scheduler/step of the wrong type, an
              AdamW moment of the wrong shape; resumed by model.train.main in-process
  claim       six processes claiming one output folder at once (common.storage)

Reported: variants, refused in one line, accepted, exceptions other than the refusal,
seconds, the growth of this process's peak RSS during the family, and the baseline: how
many variants the reads before these checks accepted (filter: every part file found,
each loaded with its own checksum, as PartitionedBloom.load did; checkpoint: the
checksum-and-entries checks of load_checkpoint, i.e. torch.load and the format mark and
entries, without building the model, which a 2^40 block_size or a short AdamW moment
would not survive in-process).
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


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def output_families(count: int, seed: int) -> bool:
    """The families of what a job writes and reads back; True when every variant was refused."""
    import logging
    import subprocess
    import tempfile

    from damage import build_filter_folder, checkpoint_variants, filter_variants, tiny_training_run, write_folder
    from dedup.bloom import BloomFileError, ngram_meta
    from dedup.partitioned import PartitionedBloom

    logging.disable(logging.ERROR)  # the refusals' own lines
    ok = True
    print(f"\n{'family':11} {'variants':>8} {'refused':>8} {'accepted':>9} {'other exc':>10} {'seconds':>8} {'peak RSS +MB':>13} "
          f"{'before: accepted':>17}")

    def report(family, variants, refused, accepted, other, seconds, before, baseline):
        nonlocal ok
        ok = ok and accepted == 0 and other == 0
        print(f"{family:11} {variants:>8} {refused:>8} {accepted:>9} {other:>10} {seconds:>8.2f} {_peak_mb() - before:>13.0f} "
              f"{baseline:>17}")

    def old_filter_load(folder: Path) -> bool:
        import glob as globbing

        from dedup.bloom import BloomFilter

        paths = sorted(globbing.glob(str(folder / "bloom-part-*-of-*.bin")))
        try:
            return bool(paths) and all(BloomFilter.load(p) is not None for p in paths)
        except Exception:  # noqa: BLE001
            return False

    def old_checkpoint_load(path: str) -> bool:
        import torch

        try:
            state = torch.load(path, weights_only=True)
        except Exception:  # noqa: BLE001
            return False
        return isinstance(state, dict) and "model" in state and isinstance(state.get("model_config"), dict)

    with tempfile.TemporaryDirectory(prefix="damage-outputs-") as root:
        root = Path(root)
        files = build_filter_folder(root / "one", seed=seed + 1, keys=200_000)
        other = build_filter_folder(root / "two", seed=seed + 2, keys=200_000)
        corpus = f"sha256:{seed + 1:064x}"
        before, start, refused, baseline = _peak_mb(), time.perf_counter(), [0, 0, 0], 0
        for number, (name, damaged) in enumerate(filter_variants(files, other, seed, count)):
            folder = root / f"f{number}"
            write_folder(folder, damaged)
            baseline += old_filter_load(folder)
            try:
                PartitionedBloom.load(str(folder), meta=ngram_meta(), corpus=corpus)
                refused[1] += 1
                print(f"  filter {name}: accepted")
            except BloomFileError:
                refused[0] += 1
            except Exception as exc:  # noqa: BLE001  (counted: the target is none)
                refused[2] += 1
                print(f"  filter {name}: {type(exc).__name__}: {exc}"[:200])
        report("filter", count, *refused, time.perf_counter() - start, before, baseline)

        from model.checkpoint import load_checkpoint, save_checkpoint
        from model.train import main as train_main

        with contextlib.redirect_stdout(io.StringIO()):  # its summary table
            path = tiny_training_run(root / "train")
        state = load_checkpoint(path)
        for kept in (root / "train" / "run").glob("ckpt-*.pt"):
            kept.unlink()
        before, start, refused, baseline = _peak_mb(), time.perf_counter(), [0, 0, 0], 0
        for name, crafted in checkpoint_variants(state, seed, count):
            save_checkpoint(path, crafted)
            baseline += old_checkpoint_load(path)
            try:
                code = train_main(["--out", str(root / "train" / "run"), "--resume", "--max_steps", "3", "-q"])
            except Exception as exc:  # noqa: BLE001
                refused[2] += 1
                print(f"  checkpoint {name}: {type(exc).__name__}: {exc}"[:200])
                continue
            refused[0 if code == 2 else 1] += 1
            if code != 2:
                print(f"  checkpoint {name}: exit {code}")
        report("checkpoint", count, *refused, time.perf_counter() - start, before, baseline)

        script = ("import sys, time; from common import storage\n"
                  "try:\n    storage.begin_output(sys.argv[1], 'c4'); print('claimed', flush=True); time.sleep(3)\n"
                  "except storage.OutputClaimError:\n    print('refused')\n")
        before, start, refused = _peak_mb(), time.perf_counter(), [0, 0, 0]
        trials = max(1, count // 6)
        for trial in range(trials):
            runs = [subprocess.Popen([sys.executable, "-c", script, str(root / f"out{trial}")], stdout=subprocess.PIPE, text=True,
                                     cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO))) for _ in range(6)]
            said = [run.communicate(timeout=120)[0].strip() for run in runs]
            refused[0] += said.count("refused")
            refused[1] += max(said.count("claimed") - 1, 0)  # a second winner is an accepted writer
            refused[2] += len([s for s in said if s not in ("claimed", "refused")])
        report("claim", trials * 6, *refused, time.perf_counter() - start, before, "-")
    logging.disable(logging.NOTSET)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=50, help="variants per kind (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--outputs", type=int, default=36, help="variants per family of written outputs (default 36; 0 skips)")
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
    if args.outputs:
        refused = output_families(args.outputs, args.seed)
        print(f"peak RSS of this process: {_peak_mb():.0f} MB")
        print("target: every damaged output refused in one line, none accepted, no other exception:", "met" if refused else "NOT MET")
        failed = failed or not refused
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
