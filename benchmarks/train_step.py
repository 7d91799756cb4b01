"""Training-step throughput: model.gpt.GPT against transformers' GPT2LMHeadModel, same run.

    baseline   transformers.GPT2LMHeadModel built from the same config (hf_config_dict), loaded
               with the same weights (to_hf_state_dict), tied input/output embeddings, dropout 0,
               ``attn_implementation="sdpa"`` (asserted: the same
               ``F.scaled_dot_product_attention`` kernel as ours, causal, no mask tensor), GPT-2's
               own ``gelu_new`` activation (``--baseline-activation gelu_pytorch_tanh`` gives it
               the one-kernel tanh GELU that ours uses; ``both`` times the two baselines in the
               same rounds, so the table shows the ratio with and without the activation's
               share), called the documented way for training:
               ``model(input_ids=x, labels=..., use_cache=False).loss`` with the targets passed as
               ``shift_labels`` so both sides score exactly the same tokens (mean cross-entropy)
    ours       model.gpt.GPT: ``model(x, y, return_logits=False)``, the fused chunked output
               projection + cross-entropy (no [B*T, vocab] logits tensor)

A step is forward + backward + optimizer step + ``zero_grad(set_to_none=True)``, on the same
batch of random tokens. Both sides use the same optimizer: ``torch.optim.AdamW`` (betas
0.9/0.95, weight decay 0.1, nanoGPT's settings) with ``fused=True`` where this torch has
a fused AdamW for the device, else ``foreach``. ``--baseline-optimizer default`` gives the
baseline plain ``AdamW(params, lr)`` instead. Parameter counts are asserted equal and the
first-step losses are printed (same weights, same tokens: they must agree).

Timing: ``--warmup`` steps per side, then ``--rounds`` rounds of ``--steps`` steps that
alternate between the sides, the side that goes first alternating too (so load from other
processes hits both alike); the table gives the median round's tokens/s and the min-max
over rounds, and the ratio of the medians with the min-max of the per-round ratios (each
round's sides ran back to back). The load averages before and after are printed: on a
shared machine compare only runs taken at a low load. On CUDA it also gives MFU: FLOPs/token
``6 N + 12 L C T`` (nanoGPT; N without position embeddings) x tokens/s / peak, with the
peak dense bf16 rate of the GPU found by ``torch.cuda.get_device_name``. ``--profile N``
then profiles N steps of each side (torch.profiler) and prints its top operators.
``--inductor KEY=VALUE`` (repeatable) sets a torch._inductor.config attribute before compiling.

    python benchmarks/train_step.py                              # CPU, fp32, 6 x 384, T=256, B=8
    python benchmarks/train_step.py --model gpt2 --block-size 1024 --batch 1 --threads 2 \
        --baseline-activation both                               # CPU, the 124M shape, both baselines
    python benchmarks/train_step.py --device cuda                # bf16, the 124M model at T=1024
    python benchmarks/train_step.py --model gpt2 --block-size 1024 --batch 16 --device cuda --compile
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from model.gpt import GPT, LOSS_IMPLS, GPTConfig  # noqa: E402
from model.hf import hf_config_dict, to_hf_state_dict  # noqa: E402
from model.train import COMPILE_MODES  # noqa: E402

# Peak dense bf16 tensor-core FLOP/s (vendor datasheets; the spec's table)
PEAK_BF16 = (
    ("H200", 989e12),  # NVIDIA H200 SXM
    ("H100", 989e12),  # NVIDIA H100 SXM
    ("A100", 312e12),  # NVIDIA A100
)
BETAS = (0.9, 0.95)  # nanoGPT train.py
WEIGHT_DECAY = 0.1  # nanoGPT train.py
LR = 6e-4  # nanoGPT train.py
# transformers' names: GPT-2's own tanh GELU written out in eight elementwise operations, and
# torch's one-kernel tanh GELU (the activation ours runs)
BASELINE_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")
OURS = "corpusforge model.gpt.GPT"


def peak_flops(device_name: str) -> float | None:
    for key, flops in PEAK_BF16:
        if key in device_name.upper():
            return flops
    return None


def make_optimizer(params, device: torch.device, plain: bool = False) -> torch.optim.Optimizer:
    if plain:
        return torch.optim.AdamW(params, lr=LR)
    params = list(params)
    if "fused" in inspect.signature(torch.optim.AdamW).parameters:
        try:
            return torch.optim.AdamW(params, lr=LR, betas=BETAS, weight_decay=WEIGHT_DECAY, fused=True)
        except (RuntimeError, ValueError):  # no fused kernel for this device / dtype
            pass
    return torch.optim.AdamW(params, lr=LR, betas=BETAS, weight_decay=WEIGHT_DECAY, foreach=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def profile_steps(run_step, n: int, device: torch.device, rows: int = 25, name: str = "ours") -> None:
    """``n`` steps under torch.profiler; the top kernels by device time, with their share of it."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sync(device)
    with profile(activities=activities) as prof:
        for _ in range(n):
            run_step()
        sync(device)
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA" or device.type == "cpu"]
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    total = sum(getattr(e, key) for e in events) or 1
    print(f"profile: {n} steps of {name}, top {rows} kernels by {'device' if device.type == 'cuda' else 'CPU'} time "
          f"(total {total / 1e3 / n:.1f} ms/step)")
    for e in sorted(events, key=lambda e: -getattr(e, key))[:rows]:
        print(f"  {100 * getattr(e, key) / total:5.1f}%  {getattr(e, key) / 1e3 / n:8.2f} ms/step  {e.count // n:>4}x  "
              f"{e.key[:110]}")


def parse_value(text: str):
    """``--inductor`` VALUE: int, float, True / False, else the string itself."""
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def apply_inductor(settings, p: argparse.ArgumentParser) -> list[str]:
    """Set each ``KEY=VALUE`` (dotted keys walk attributes: ``triton.multi_kernel=1``) on
    torch._inductor.config; returns the applied ``key=value`` strings."""
    if not settings:
        return []  # torch._inductor is imported only when something is set
    import torch._inductor.config as inductor_config

    applied = []
    for item in settings:
        key, sep, text = item.partition("=")
        if not sep or not key:
            p.error(f"--inductor {item!r}: expected KEY=VALUE")
        *parents, leaf = key.split(".")
        obj = inductor_config
        for part in parents:
            if not hasattr(obj, part):
                p.error(f"--inductor {item!r}: torch._inductor.config has no {part!r}")
            obj = getattr(obj, part)
        if not hasattr(obj, leaf):
            p.error(f"--inductor {item!r}: torch._inductor.config has no {key!r}")
        value = parse_value(text)
        setattr(obj, leaf, value)
        applied.append(f"{key}={value!r}")
    return applied


def build_config(args) -> GPTConfig:
    overrides = dict(vocab_size=args.vocab, dropout=0.0, pad_vocab_multiple=args.pad_vocab_multiple)
    if args.block_size:
        overrides["block_size"] = args.block_size
    if args.model != "small":
        return GPTConfig.named(args.model, **overrides)
    overrides.setdefault("block_size", 256)
    return GPTConfig(n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd, **overrides)


class TwoNodeGPT(GPT):
    """``--tied-grad two-nodes``: the token lookup through nn.Embedding's own backward (a dense
    zero-filled gradient, then autograd's add), the lever ``GPT.sums_tied_gradients`` replaces."""

    def sums_tied_gradients(self, idx: torch.Tensor) -> bool:
        return False


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--dtype", choices=["fp32", "bf16"], help="default: fp32 on CPU, bf16 (autocast) on CUDA")
    p.add_argument("--model", help="'small' (--n-layer/--n-head/--n-embd) or a named size such as gpt2 / 124M; "
                                    "default: small on CPU, gpt2 on CUDA")
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--n-embd", type=int, default=384)
    p.add_argument("--block-size", type=int, help="context T (default 256 small, the named model's context otherwise)")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--batch", type=int, help="sequences per step (default 8 on CPU, 16 on CUDA)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, help="torch.set_num_threads (CPU)")
    p.add_argument("--compile", action="store_true", help="torch.compile both models")
    p.add_argument("--compile-mode", default="default", choices=COMPILE_MODES + ("reduce-overhead",), help="torch.compile mode (ours and baseline)")
    p.add_argument("--loss", default=LOSS_IMPLS[0], choices=LOSS_IMPLS, help="our training loss path (GPT.loss_impl)")
    p.add_argument("--tied-grad", choices=["in-place", "two-nodes"], default="in-place",
                   help="our tied token embedding on CPU: its two gradients summed in one node (GPT.sums_tied_gradients) "
                        "or nn.Embedding's own backward (a dense zero-filled gradient, then autograd's add)")
    p.add_argument("--pad-vocab-multiple", type=int, default=GPTConfig.pad_vocab_multiple,
                   help="our embedding rows rounded up to this multiple (1 = unpadded)")
    p.add_argument("--ours-only", action="store_true", help="time our model alone (a lever run: no baseline)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after timing, profile N steps of each side (torch.profiler) and print the top kernels by "
                        "device time (CPU time on CPU)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="'cpu': time by this process's CPU time (time.process_time), steadier on a shared "
                        "machine; with one thread it equals wall time on an idle one (CPU only)")
    p.add_argument("--baseline-optimizer", choices=["same", "default"], default="same",
                   help="'same': the baseline gets our AdamW settings; 'default': plain AdamW(params, lr)")
    p.add_argument("--baseline-activation", choices=BASELINE_ACTIVATIONS + ("both",), default="gelu_new",
                   help="the baseline's MLP activation: GPT-2's own 'gelu_new' (transformers' default for GPT-2 "
                        "checkpoints), 'gelu_pytorch_tanh' (the same one-kernel tanh GELU as ours), or 'both': "
                        "two baselines in the same alternating rounds, a ratio against each")
    p.add_argument("--peak-flops", type=float, help="peak FLOP/s for MFU when the GPU is not in the table")
    p.add_argument("--inductor", action="append", metavar="KEY=VALUE",
                   help="set torch._inductor.config KEY (dotted: triton.multi_kernel=1) to VALUE (int, float, "
                        "True/False, else a string) before compiling; repeatable")
    args = p.parse_args(argv)
    inductor_applied = apply_inductor(args.inductor, p)

    device = torch.device(args.device)
    if args.clock == "cpu" and device.type != "cpu":
        p.error("--clock cpu is for CPU runs (GPU work does not show in the process's CPU time)")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    if device.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda but torch.cuda.is_available() is False")
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    if args.model is None:
        args.model = "gpt2" if device.type == "cuda" else "small"
    batch = args.batch or (16 if device.type == "cuda" else 8)
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    config = build_config(args)
    if config.arch != "gpt2":
        p.error("the baseline is GPT2LMHeadModel: pick a GPT-2 size")
    T = config.block_size
    ours = (GPT if args.tied_grad == "in-place" else TwoNodeGPT)(config, loss_impl=args.loss).to(device)
    hf_cfg = {k: v for k, v in hf_config_dict(config).items()
              if k not in ("architectures", "model_type", "dtype", "activation_function")}
    activations = BASELINE_ACTIVATIONS if args.baseline_activation == "both" else (args.baseline_activation,)
    baselines = {}  # side name -> GPT2LMHeadModel with that MLP activation, our weights
    for activation in activations:
        baseline = GPT2LMHeadModel(GPT2Config(**hf_cfg, activation_function=activation, attn_implementation="sdpa"))
        baseline.load_state_dict(to_hf_state_dict(ours), strict=True)
        if not args.ours_only:
            baseline.to(device)
        baseline.train()
        n_ours, n_hf = ours.num_parameters(), baseline.num_parameters()
        assert n_ours == n_hf, f"parameter counts differ: ours {n_ours:,} vs transformers {n_hf:,}"
        assert baseline.config._attn_implementation == "sdpa", baseline.config._attn_implementation
        assert baseline.lm_head.weight is baseline.transformer.wte.weight, "the baseline's output layer is not tied"
        baselines[f"transformers ({activation})"] = baseline
    ours.train()

    data = torch.randint(0, config.vocab_size, (batch, T + 1), generator=torch.Generator().manual_seed(1))
    x, y = data[:, :T].contiguous().to(device), data[:, 1:].contiguous().to(device)
    def autocast():  # bf16 autocast (matmuls in bf16, softmax / norms in fp32), as trainers run on GPUs
        return torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()

    def compiled(model):
        return torch.compile(model, mode=args.compile_mode) if args.compile else model

    ours_fwd = compiled(ours)

    def ours_loss():
        return ours_fwd(x, y, return_logits=False)[1]

    def hf_loss(fwd):
        return lambda: fwd(input_ids=x, labels=y, shift_labels=y, use_cache=False).loss

    sides = {} if args.ours_only else {
        name: (hf_loss(compiled(model)), make_optimizer(model.parameters(), device,
                                                        plain=args.baseline_optimizer == "default"))
        for name, model in baselines.items()}
    sides[OURS] = (ours_loss, make_optimizer(ours.parameters(), device))

    def step(loss_fn, optimizer) -> float:
        with autocast():
            loss = loss_fn()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    first_loss = {}
    for name, (loss_fn, optimizer) in sides.items():
        for i in range(args.warmup):
            loss = step(loss_fn, optimizer)
            if i == 0:
                first_loss[name] = loss.item()
    sync(device)

    load_before = os.getloadavg()
    times = {name: [] for name in sides}
    order = list(sides)
    for r in range(args.rounds):
        for name in (order if r % 2 == 0 else order[::-1]):
            loss_fn, optimizer = sides[name]
            sync(device)
            start = clock()
            for _ in range(args.steps):
                step(loss_fn, optimizer)
            sync(device)
            times[name].append(clock() - start)

    load_after = os.getloadavg()
    tokens = batch * T * args.steps
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    opt = type(sides[OURS][1]).__name__
    fused = sides[OURS][1].defaults.get("fused")
    print(f"device: {where}; dtype {dtype}; torch {torch.__version__}; compile {args.compile}; "
          f"clock {args.clock}{' (tokens per CPU-second)' if args.clock == 'cpu' else ''}")
    print(f"model: {args.model} n_layer={config.n_layer} n_head={config.n_head} n_embd={config.n_embd} "
          f"vocab={config.vocab_size} T={T} B={batch}; parameters {n_ours:,} (both sides)")
    base_opt = None if args.ours_only else sides[next(iter(baselines))][1]
    base_desc = "none (--ours-only)" if base_opt is None else (
        f"{type(base_opt).__name__}({'fused' if base_opt.defaults.get('fused') else 'foreach' if base_opt.defaults.get('foreach') else 'default'}, "
        f"betas {base_opt.defaults['betas']}, weight decay {base_opt.defaults['weight_decay']})")
    print(f"optimizer: ours {opt}({'fused' if fused else 'foreach'}, betas {BETAS}, weight decay {WEIGHT_DECAY}); "
          f"baseline {base_desc}; {args.warmup} warmup steps, {args.rounds} alternating rounds of {args.steps} steps")
    print(f"ours: loss path {args.loss}, embedding rows {config.padded_vocab_size} (pad multiple "
          f"{config.pad_vocab_multiple}); tied embedding gradients {args.tied_grad}; "
          f"compile mode {args.compile_mode if args.compile else 'eager'}")
    print(f"inductor config: {', '.join(inductor_applied) or 'defaults'}"
          f"{'' if args.compile or not inductor_applied else ' (set, but no --compile)'}")
    print(f"attention: sdpa on both sides (baseline attn_implementation={baseline.config._attn_implementation!r}); "
          f"MLP activation: ours tanh GELU (one kernel), baseline {' / '.join(activations)}; dropout 0 on both; "
          f"tied embeddings on both")
    print(f"load average (1/5/15 min) before {'/'.join(f'{v:.2f}' for v in load_before)}, "
          f"after {'/'.join(f'{v:.2f}' for v in load_after)}")
    flops = ours.flops_per_token(T)
    peak = args.peak_flops or (peak_flops(where) if device.type == "cuda" else None)
    header = f"{'side':<34}{'first loss':>11}{'s/step':>9}{'tokens/s':>12}{'min-max tokens/s':>20}{'vs baseline':>13}"
    if peak:
        header += f"{'MFU':>8}"
    print(header)
    base_rate = None
    for name in sides:
        median = statistics.median(times[name])
        rate = tokens / median
        base_rate = base_rate or rate
        spread = f"{tokens / max(times[name]):,.0f}-{tokens / min(times[name]):,.0f}"
        line = (f"{name:<34}{first_loss[name]:>11.4f}{median / args.steps:>9.4f}{rate:>12,.0f}{spread:>20}"
                f"{rate / base_rate:>12.2f}x")
        if peak:
            line += f"{100 * flops * rate / peak:>7.1f}%"
        print(line)
    if device.type == "cuda":
        print(f"FLOPs/token 6N+12LCT = {flops / 1e6:,.1f}M; peak bf16 "
              f"{f'{peak / 1e12:.0f} TFLOP/s' if peak else 'unknown for this GPU (pass --peak-flops)'}")
    for name in sides if args.profile else ():
        profile_steps(lambda name=name: step(*sides[name]), args.profile, device, name=name)
    for name in () if args.ours_only else baselines:
        ours_times, base_times = times[OURS], times[name]
        ratio = statistics.median(base_times) / statistics.median(ours_times)
        per_round = [b / o for b, o in zip(base_times, ours_times, strict=True)]
        print(f"ratio ours / {name} (tokens/s): {ratio:.2f}x median, per round "
              f"{min(per_round):.2f}-{max(per_round):.2f}x (target >= 1.30x at the 124M shape on a quiet machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
