"""How fast model.eval.scoring scores a text with overlapping windows, against a plain Hugging Face loop.

    baseline   transformers GPT2LMHeadModel, the same weights (model.hf.to_hf_state_dict),
               the same windows, one window at a time: full logits, log_softmax over the
               vocabulary at every position, gather the targets of the scored positions
               (the loop of the transformers perplexity guide, per token)
    ours       model.eval.scoring.ScoringModel.token_nlls on our GPT: windows batched, the
               output projection and log-softmax only on the scored positions, in chunks

Both score the same token ids (the start of WikiText-2 test from the data folder, else the
bundled sample crawl's text) with the same context and stride. The table gives tokens
scored per second (best of --repeat interleaved passes) and the ratio ours / baseline; the
run then checks that both gave the same NLL for every token (max abs difference <= --tol,
fp32) and exits with status 1 if not.

The model is randomly initialised from a named size (--config, default GPT-2 124M, context
1024) or loaded from --model (our checkpoint / run folder / HF GPT-2 folder with its
tokenizer). Without --model, a byte-level BPE is trained on the text itself (the speed
does not depend on the vocabulary's contents; the model keeps GPT-2's 50,257 outputs).

    python benchmarks/eval_speed.py [--data ../shared/data] [--tokens 8192] [--stride 512]
        [--config gpt2] [--batch-size 8] [--device cpu] [--repeat 2] [--threads N]

With ``--generation``, it measures decoding instead:

    baseline   transformers ``generate`` (greedy, its own KV cache) on GPT2LMHeadModel with the
               same weights, a batch of left-padded prompts with their attention mask
    ours       ``model.eval.decoding.generate_batch`` (greedy, our preallocated KV cache) on our GPT

Both decode --new-tokens tokens for each of --batch-size prompts (64 to 128 tokens of the
text); the table gives new tokens per second (best of --repeat) and the ratio, and the run
checks that both chose the same tokens (exit 1 if not). Then, with --data, each GPT-2
generative task (coqa on the test fixture; the data folder's cnn_dm, wmt14 fr-en and en-fr,
nq) is scored on its first --task-examples examples the way ``corpusforge eval`` scores it
(``model.eval.harness.run_eval`` with one ``--benchmark`` spec: ``evaluate_benchmark``, then
``model.eval.generative.score_generative``), and its examples per second printed: the seconds are
``evaluate_benchmark``'s own (generation and scoring), the last column adds loading the
task's files. "new tokens" counts the generations that are scored (cnn_dm also generates
a summary without the TL;DR hint, not counted). The model is a random one with the trained
tokenizer's vocabulary, so that every generated id decodes, of the --config shape (with
--layers) or of --task-shape LAYERSxWIDTH[xHEADS], e.g. 6x384 for rows in minutes on a CPU;
the decoding comparison keeps the --config shape (default 124M).

    python benchmarks/eval_speed.py --generation [--new-tokens 64] [--batch-size 8] [--task-examples 4]
        [--task-shape 6x384]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model.eval.scoring import ScoringModel  # noqa: E402


def load_text(data: Path | None) -> str:
    if data is not None:
        path = data / "lm_benchmarks/wikitext2_raw/wiki.test.raw"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    from corpus.records import Document
    from corpus.warc import read_archive
    from samplecrawl.crawl import write_sample_crawl

    crawl = write_sample_crawl(Path(tempfile.mkdtemp(prefix="eval-bench-")), seed=0)
    return "\n\n".join(d.text for p in crawl.wet_paths for d in read_archive(p) if isinstance(d, Document))


def build(args, text: str):
    from model.gpt import GPT, GPTConfig
    from model.tokenizer import train_tokenizer

    if args.model:
        from model.checkpoint import load_model, tokenizer_folder
        from model.tokenizer import BPETokenizer

        folder = tokenizer_folder(args.model)
        if folder is None:
            sys.exit(f"no tokenizer files found with {args.model}")
        return load_model(args.model, "cpu"), BPETokenizer.load(folder)
    tok = train_tokenizer([text], vocab_size=8192, show_progress=False)
    torch.manual_seed(0)
    overrides = {"n_layer": args.layers} if args.layers else {}
    return GPT(GPTConfig.named(args.config, **overrides)).eval(), tok


def hf_twin(model):
    """GPT2LMHeadModel holding the same weights as our GPT."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from model.hf import hf_config_dict, to_hf_state_dict

    config = {k: v for k, v in hf_config_dict(model.config).items() if k not in ("architectures", "torch_dtype", "dtype")}
    hf = GPT2LMHeadModel(GPT2Config(**config))
    missing, unexpected = hf.load_state_dict(to_hf_state_dict(model), strict=False)
    if [m for m in missing if not m.endswith("attn.bias") and "masked_bias" not in m] or unexpected:
        sys.exit(f"weights do not map onto GPT2LMHeadModel: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return hf.eval()


def baseline_nlls(hf, sm: ScoringModel, ids: list[int], stride: int, device) -> np.ndarray:
    """The plain loop: one window at a time, full log-softmax, gather the scored targets."""
    seq = [sm.eot_id, *ids]
    out = []
    with torch.no_grad():
        for start, end, first in sm.windows(len(ids), stride):
            inputs = torch.tensor([seq[start:end]], device=device)
            logits = hf(inputs).logits
            logp = torch.log_softmax(logits.float(), dim=-1)[0]
            targets = torch.tensor(seq[start + 1:end + 1], device=device)
            nll = -logp.gather(1, targets.unsqueeze(1)).squeeze(1)
            out.append(nll[first - start:].double().cpu())
    return torch.cat(out).numpy()


def generation_speed(args, model, tok, hf, text: str, device) -> int:
    from model.eval.decoding import generate_batch

    ids = tok.encode(text)
    lengths = [64 + (64 * i) // max(1, args.batch_size - 1) for i in range(args.batch_size)]
    prompts, start = [], 0
    for length in lengths:
        prompts.append(ids[start:start + length])
        start += length
    longest = max(lengths)
    pad = torch.tensor([[0] * (longest - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (longest - len(p)) + [1] * len(p) for p in prompts], device=device)
    new = args.new_tokens
    model.to(device)

    def baseline():
        with torch.no_grad():
            out = hf.generate(input_ids=pad, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                              do_sample=False, pad_token_id=0, eos_token_id=None)
        return out[:, longest:].tolist()

    def ours():
        return [g.tokens for g in generate_batch(model, prompts, new)]

    sides = {"baseline": baseline, "ours": ours}
    for run in sides.values():  # warm-up
        run()
    best, outputs = {name: float("inf") for name in sides}, {}
    for _ in range(args.repeat):
        for name, run in sides.items():
            sync(device)
            started = time.perf_counter()
            outputs[name] = run()
            sync(device)
            best[name] = min(best[name], time.perf_counter() - started)
    params = model.num_parameters()
    print(f"model {params / 1e6:.1f}M params, batch {len(prompts)} prompts of {min(lengths)}-{longest} tokens, "
          f"{new} new tokens each (greedy), device {device}, threads {torch.get_num_threads()}")
    rate = {name: len(prompts) * new / seconds for name, seconds in best.items()}
    labels = {"baseline": "transformers generate, KV cache (baseline)", "ours": "model.eval.decoding.generate_batch, KV cache"}
    print(f"{'side':<46} {'seconds':>9} {'new tok/s':>11} {'x baseline':>11}")
    for name in sides:
        print(f"{labels[name]:<46} {best[name]:>9.3f} {rate[name]:>11.1f} {rate[name] / rate['baseline']:>11.2f}")
    same = outputs["baseline"] == outputs["ours"]
    print(f"outputs: {'the same' if same else 'DIFFERENT'} {len(prompts)} x {new} tokens")
    if args.data is not None and args.task_examples:
        task_speed(args, tok, device)
    return 0 if same else 1


def parse_shape(value: str) -> tuple[int, int, int]:
    """``LAYERSxWIDTH`` or ``LAYERSxWIDTHxHEADS`` (heads default: width / 64) -> (layers, width, heads)."""
    try:
        parts = [int(v) for v in value.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) == 2:
        parts.append(max(1, parts[1] // 64))
    if len(parts) != 3 or min(parts) < 1 or parts[1] % parts[2]:
        raise argparse.ArgumentTypeError(f"{value!r}: expected LAYERSxWIDTH[xHEADS], width divisible by heads "
                                         "(e.g. 6x384)")
    return parts[0], parts[1], parts[2]


def task_specs(data: Path) -> list[str]:
    """The GPT-2 generative tasks, as ``corpusforge eval --benchmark`` specs."""
    lm = data / "lm_benchmarks"
    fixture = Path(__file__).resolve().parents[1] / "tests/fixtures/coqa/coqa-dev-schema.json"
    return [f"coqa:{fixture}", f"cnn_dm:{lm / 'cnn_dm'}", f"wmt14:{lm / 'wmt14_fren'}:fr-en",
            f"wmt14:{lm / 'wmt14_fren'}:en-fr", f"nq:{lm / 'nq_open/NQ-open.dev.jsonl'}"]


def task_speed(args, tok, device) -> None:
    """Examples per second of each generative task, scored as ``corpusforge eval`` scores it
    (``model.eval.harness.run_eval``: spec loading, ``evaluate_benchmark``, ``score_generative``)."""
    from model.eval.harness import run_eval
    from model.eval.scoring import ScoringModel
    from model.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    if args.task_shape:
        layers, width, heads = args.task_shape
        overrides = {"n_layer": layers, "n_embd": width, "n_head": heads}
    else:
        overrides = {"n_layer": args.layers} if args.layers else {}
    model = GPT(GPTConfig.named(args.config, vocab_size=tok.vocab_size, **overrides)).eval().to(device)
    c = model.config
    scoring = ScoringModel(model, tok, device=device, batch_size=args.batch_size)
    print(f"per task: first {args.task_examples} examples each, through model.eval.harness.run_eval (corpusforge eval), "
          f"a {model.num_parameters() / 1e6:.1f}M model ({c.n_layer} layers, width {c.n_embd}, {c.n_head} heads, "
          f"vocabulary {tok.vocab_size}), batch {args.batch_size}")
    print(f"{'task':<14} {'examples':>9} {'seconds':>9} {'examples/s':>11} {'new tokens':>11} {'with load s':>12}")
    for spec in task_specs(args.data):  # one run_eval per task, so that each row is printed when it is done
        sync(device)
        started = time.perf_counter()
        document = run_eval(scoring, [spec], limit=args.task_examples, batch_size=args.batch_size,
                            device=str(device), bootstrap=0, progress=False)
        sync(device)
        seconds = time.perf_counter() - started
        entry = document["benchmarks"][0]
        examples = entry["meta"].get("examples", len(entry["per_example"]))
        scored = entry["meta"].get("seconds") or seconds  # evaluate_benchmark's own time: generation and scoring
        tokens = sum(row["tokens"] for row in entry["per_example"])
        print(f"{entry['name']:<14} {examples:>9} {scored:>9.2f} {examples / scored:>11.2f} {tokens:>11} "
              f"{seconds:>12.2f}", flush=True)


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=os.environ.get("CORPUSFORGE_TEST_DATA"))
    parser.add_argument("--model", help="our checkpoint / run folder / HF GPT-2 folder (else a random --config)")
    parser.add_argument("--config", default="gpt2", help="named size for a random model (default gpt2 = 124M)")
    parser.add_argument("--layers", type=int, default=None, help="override the number of layers")
    parser.add_argument("--tokens", type=int, default=8192, help="tokens to score")
    parser.add_argument("--context", type=int, default=None, help="context length (default: the model's)")
    parser.add_argument("--stride", type=int, default=None, help="window stride (default: half the context)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tol", type=float, default=1e-4)
    parser.add_argument("--generation", action="store_true", help="measure greedy decoding instead (see above)")
    parser.add_argument("--new-tokens", type=int, default=64, help="--generation: new tokens per prompt")
    parser.add_argument("--task-examples", type=int, default=4, help="--generation: examples per task (0: none)")
    parser.add_argument("--task-shape", type=parse_shape, default=None, metavar="LAYERSxWIDTH[xHEADS]",
                        help="--generation: shape of the random model the tasks are timed with, e.g. 6x384 "
                             "(heads default width/64; default: the --config shape, with --layers)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    text = load_text(args.data)
    model, tok = build(args, text)
    hf = hf_twin(model).to(device)
    if args.generation:
        return generation_speed(args, model, tok, hf, text, device)
    sm = ScoringModel(model, tok, device=device, context_length=args.context, batch_size=args.batch_size)
    stride = args.stride or sm.default_stride()
    ids = tok.encode(text)[:args.tokens]
    if len(ids) < args.tokens:
        print(f"note: the text has {len(ids)} tokens, fewer than --tokens {args.tokens}")
    windows = len(sm.windows(len(ids), stride))
    params = model.num_parameters() if hasattr(model, "num_parameters") else sum(p.numel() for p in model.parameters())
    print(f"model {params / 1e6:.1f}M params, context {sm.context_length}, stride {stride}, {len(ids)} tokens, "
          f"{windows} windows, device {device}, threads {torch.get_num_threads()}, batch {args.batch_size}")
    best = {"baseline": float("inf"), "ours": float("inf")}
    outputs = {}
    baseline_nlls(hf, sm, ids[:sm.context_length], stride, device)  # warm-up, both sides
    sm.token_nlls(ids[:sm.context_length], stride=stride)
    for _ in range(args.repeat):
        for name in ("baseline", "ours"):
            sync(device)
            start = time.perf_counter()
            if name == "baseline":
                nll = baseline_nlls(hf, sm, ids, stride, device)
            else:
                nll = sm.token_nlls(ids, stride=stride)
            sync(device)
            best[name] = min(best[name], time.perf_counter() - start)
            outputs[name] = nll
    rate = {name: len(ids) / seconds for name, seconds in best.items()}
    print(f"{'side':<46} {'seconds':>9} {'tokens/s':>11} {'x baseline':>11}")
    labels = {"baseline": "HF GPT2LMHeadModel loop, one window (baseline)", "ours": "model.eval.scoring.ScoringModel.token_nlls"}
    for name in ("baseline", "ours"):
        print(f"{labels[name]:<46} {best[name]:>9.3f} {rate[name]:>11.1f} {rate[name] / rate['baseline']:>11.2f}")
    diff = float(np.max(np.abs(outputs["baseline"] - outputs["ours"]))) if len(ids) else 0.0
    same_shape = outputs["baseline"].shape == outputs["ours"].shape == (len(ids),)
    print(f"outputs: {len(ids)} token NLLs each, max abs difference {diff:.2e} (tolerance {args.tol:g}); "
          f"mean NLL {outputs['ours'].mean():.4f} nats")
    if not same_shape or diff > args.tol:
        print("MISMATCH: the two sides disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
