"""Loading a trained model as ``corpusforge sample`` and ``eval`` do: a fresh process that
imports the loader, reads the weights and runs one forward pass, against transformers'
``GPT2LMHeadModel.from_pretrained`` on the Hugging Face export of the same weights.

    .venv/bin/python benchmarks/checkpoint_load.py [--model gpt2] [--rounds 3] \\
        [--baseline CHECKOUT] [--work DIR]

The model (GPT-2 124M by default, random weights: only their size matters) is saved once
under ``--work`` as a run's ``ckpt.pt`` and as its ``hf/`` export. Each side then runs in a
child process of its own, imports included; CPU is the kernel's user + system time of that
process, peak its maximum RSS, min-max over the rounds (the sides alternate within a round):

    corpusforge ckpt.pt    model.checkpoint.load_model(<run>/ckpt.pt) (this checkout)
    corpusforge hf/        model.checkpoint.load_model(<run>/hf) (this checkout)
    baseline ckpt.pt       the same call in ``--baseline`` (another checkout, e.g. a commit before a change)
    transformers hf/       GPT2LMHeadModel.from_pretrained(<run>/hf)

Every side runs the same token ids through the model it loaded; the logits are compared
with the first side's (exactly between our own loaders, to float32 rounding for transformers').
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from c4_scale import wait_with_rusage  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
IDS = [[464, 3290, 373, 257, 1310, 286, 262, 2184, 11, 290, 340, 318]]  # any ids below the vocabulary

# One side, in a child process: load, one forward pass, the logits' summary as one JSON line.
OURS = """
import json, sys, time
started = time.perf_counter()
import torch
from model.checkpoint import load_model
model = load_model(sys.argv[1])
with torch.no_grad():
    logits = model(torch.tensor(json.loads(sys.argv[2])))[0]
print(json.dumps({"seconds": time.perf_counter() - started, "logits": logits[0, -1, :64].tolist(),
                  "sum": float(logits.double().sum())}))
"""
THEIRS = """
import json, sys, time
started = time.perf_counter()
import torch
from transformers import GPT2LMHeadModel
model = GPT2LMHeadModel.from_pretrained(sys.argv[1]).eval()
with torch.no_grad():
    logits = model(torch.tensor(json.loads(sys.argv[2]))).logits
print(json.dumps({"seconds": time.perf_counter() - started, "logits": logits[0, -1, :64].tolist(),
                  "sum": float(logits.double().sum())}))
"""


# Writes the model once, in a child process: a parent that had built it would hand its own peak
# memory to every child it starts (Linux counts the forked copy in the child's maximum RSS).
WRITE = """
import sys, torch
from pathlib import Path
from model.checkpoint import CHECKPOINT_FILE, save_checkpoint
from model.gpt import GPT, GPTConfig
from model.hf import save_hf_dir
run = Path(sys.argv[1])
torch.manual_seed(0)
model = GPT(GPTConfig.named(sys.argv[2]))
save_checkpoint(run / CHECKPOINT_FILE, {"model": model.state_dict(), "model_config": model.config.to_dict(), "step": 0})
save_hf_dir(model, run / "hf")
"""


def write_run(work: Path, model_name: str) -> Path:
    """``work/<model>/ckpt.pt`` and ``work/<model>/hf``, written once and reused."""
    run = work / model_name
    if not ((run / "ckpt.pt").is_file() and (run / "hf" / "config.json").is_file()):
        subprocess.run([sys.executable, "-c", WRITE, str(run), model_name], cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2", help="a named size (gpt2, gpt2-medium, ...; default gpt2, 124M)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to time the same load_model call in")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "corpusforge-checkpoint-load")
    args = parser.parse_args(argv)
    run = write_run(args.work, args.model)
    size = (run / "ckpt.pt").stat().st_size
    sides = [("corpusforge ckpt.pt", OURS, ROOT, run / "ckpt.pt"), ("corpusforge hf/", OURS, ROOT, run / "hf")]
    if args.baseline:
        sides.append(("baseline ckpt.pt", OURS, args.baseline.resolve(), run / "ckpt.pt"))
    sides.append(("transformers hf/", THEIRS, ROOT, run / "hf"))
    results: dict[str, list[dict]] = {name: [] for name, *_ in sides}
    for _ in range(args.rounds):
        for name, script, repo, path in sides:
            results[name].append(run_side_rusage(script, repo, path))
    print(f"{args.model}: ckpt.pt {size / 2**20:,.0f} MB; {args.rounds} round(s), min-max; each side a fresh process, imports included")
    header = f"{'side':22} {'CPU s':>12} {'wall s':>12} {'load s':>12} {'peak MB':>14} {'CPU vs transformers':>20}  logits vs first side"
    print(header)
    print("-" * len(header))
    reference = results[sides[0][0]][0]
    theirs_cpu = [r["cpu"] for r in results["transformers hf/"]]

    def span(values, fmt="{:.2f}"):
        lo, hi = min(values), max(values)
        return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"

    for name, *_ in sides:
        rows = results[name]
        cpu = [r["cpu"] for r in rows]
        ratios = [t / c for t, c in zip(theirs_cpu, cpu, strict=True)]
        diff = max(abs(a - b) for a, b in zip(rows[0]["logits"], reference["logits"], strict=True))
        same = "identical" if rows[0]["logits"] == reference["logits"] and rows[0]["sum"] == reference["sum"] else f"max |diff| {diff:.2e}"
        print(f"{name:22} {span(cpu):>12} {span([r['wall'] for r in rows]):>12} {span([r['seconds'] for r in rows]):>12} "
              f"{span([r['peak_mb'] for r in rows], '{:,.0f}'):>14} {span(ratios) + 'x':>20}  {same}")
    return 0


def run_side_rusage(script: str, repo: Path, path: Path) -> dict:
    """One side in a child process: its JSON line, with wall, CPU (rusage of the child) and peak RSS."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", script, str(path), json.dumps(IDS)], cwd=repo, stdout=out, stderr=err,
                                env={**os.environ, "PYTHONPATH": str(repo)})
        code, cpu, peak = wait_with_rusage(proc)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        if code:
            raise SystemExit(f"side failed ({code}):\n{err.read().decode(errors='replace')[-3000:]}")
        result = json.loads(out.read().decode().strip().splitlines()[-1])
    result.update(wall=wall, cpu=cpu, peak_mb=peak / 2**20)
    return result


if __name__ == "__main__":
    sys.exit(main())
