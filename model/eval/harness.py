"""``corpusforge eval``: zero-shot benchmarks, each reported on all / clean / dirty examples.

    corpusforge eval --model runs/gpt2-small --benchmark lambada:lambada_test.jsonl \\
        --benchmark wikitext2:wiki.test.raw --training audit-out/ --report eval-out/

Steps, in this order so that a bad input fails before the model runs:

1. load every benchmark (``dedup.benchmark_sets.load_benchmark``, ``kind:path[:option]``);
2. mark each example clean or dirty against ``--training`` (``model.eval.contamination``: a
   Bloom filter file/folder, an audit output folder, or training shards; GPT-2's rule by
   default: 8-grams, any overlap = dirty; ``--ngram 13`` for the GPT-3 convention);
3. load the model (our run folder / checkpoint, or a Hugging Face GPT-2 folder) and its
   tokenizer, score every benchmark (``model.eval.scoring``), and save each benchmark's
   per-example scores as soon as it is done (``OUT/scores/<name>.json``);
4. aggregate every metric on all / clean / dirty examples with seeded percentile
   bootstrap intervals and the GPT-3 Table C.1 relative difference, per overlap bucket too;
5. print a one-screen table and write ``OUT/report.json``, ``report.md``, ``report.html``.

Without ``--training`` every example is reported under "all" with a note. Bad input
(missing model, unknown benchmark kind, a training source built with other n-gram
settings, ...) exits with status 2 and one clear line; no report is written then.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from common import storage
from common.errors import InputError
from common.storage import write_atomically
from dedup.benchmark_sets import GENERATIVE_KINDS, BenchmarkSet, BenchmarkSpecError, load_benchmark
from model.eval.contamination import (
    DEFAULT_CONFIDENCE,
    DEFAULT_FP_QUERIES,
    DEFAULT_N,
    DEFAULT_RESAMPLES,
    DEFAULT_THRESHOLD,
    ContaminationError,
    mark_benchmarks,
    open_source,
    per_example_rows,
    summarize_benchmark,
)
from model.eval.report import benchmark_entry, build_report, gpt2_size, write_report
from model.eval.report import format_summary as format_report
from model.tokenizer import BPETokenizer

log = logging.getLogger(__name__)

PROG = "corpusforge eval"
DTYPES = ("float32", "bfloat16", "float16")


class EvalInputError(InputError):
    """Input the evaluation cannot use; ``main`` turns it into exit status 2."""


def _load_benchmarks(benchmarks) -> list:
    sets = []
    for item in benchmarks:
        if isinstance(item, BenchmarkSet):
            sets.append(item)
            continue
        try:
            sets.append(load_benchmark(item))
        except (BenchmarkSpecError, OSError, ValueError) as exc:
            raise EvalInputError(f"--benchmark {item}: {exc}") from exc
    if not sets:
        raise EvalInputError("no benchmark given (--benchmark kind:path[:option])")
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise EvalInputError(f"two benchmarks share a name: {names}")
    for s in sets:
        if not s.examples:
            raise EvalInputError(f"--benchmark {s.source}: no examples in it")
    return sets


def _load_scoring_model(model, tokenizer, *, context, batch_size, device, dtype):
    # torch (requirements-model.txt): this module stays importable without it, here and below
    import torch

    from model.eval.scoring import ScoringModel

    if isinstance(model, ScoringModel):
        return model, {"name": type(model.model).__name__}
    if isinstance(model, torch.nn.Module):
        if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
            raise EvalInputError("a model object needs a tokenizer object")
        net, path = model, None
    else:
        from model.checkpoint import load_model, tokenizer_folder  # torch

        path = storage.local_copy(os.fspath(model))  # a model on an object store: downloaded once
        if not os.path.exists(path):
            raise EvalInputError(f"--model {path}: no such run folder, checkpoint or Hugging Face folder")
        if tokenizer is None:
            tokenizer = tokenizer_folder(path)
            if tokenizer is None:
                raise EvalInputError(f"--model {path}: no tokenizer files (vocab.json + merges.txt, or encoder.json + "
                                     "vocab.bpe) with the model; pass --tokenizer FOLDER")
        try:
            net = load_model(path, device)
        except (ValueError, OSError) as exc:  # CheckpointError, HFCheckpointError are ValueErrors
            raise EvalInputError(f"--model {path}: {exc}") from exc
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            tokenizer = BPETokenizer.load(tokenizer)
        except (ValueError, OSError) as exc:
            raise EvalInputError(f"--tokenizer {tokenizer}: {exc}") from exc
    torch_dtype = None if dtype in (None, "float32") else getattr(torch, dtype)
    try:
        scoring = ScoringModel(net, tokenizer, device=device, context_length=context, batch_size=batch_size,
                               dtype=torch_dtype)
    except ValueError as exc:
        raise EvalInputError(str(exc)) from exc
    config = getattr(net, "config", None)
    config_dict = config.to_dict() if hasattr(config, "to_dict") else {}
    if not isinstance(config_dict, dict):
        config_dict = {}
    info = {"path": path, "name": os.path.basename(os.path.normpath(path)) if path else type(net).__name__,
            "parameters": sum(p.numel() for p in net.parameters()),
            "config": {k: v for k, v in config_dict.items() if isinstance(v, (int, float, str, bool, type(None)))},
            "tokenizer_vocab": int(getattr(tokenizer, "vocab_size", 0)) or None}
    info["gpt2_size"] = gpt2_size(info["config"])
    return scoring, info


def table3_reference(name: str, size: str | None) -> dict | None:
    """GPT-2 Table 3's numbers for this benchmark at this model size, in our metrics' units
    (accuracies as fractions, like the results; the report prints both as percentages)."""
    if not size:
        return None
    from model.eval.scoring import TABLE3, TABLE3_COLUMNS  # torch

    values = {metric: TABLE3[size][column] / factor for column, (bench, metric, factor) in TABLE3_COLUMNS.items()
              if bench == name and column in TABLE3.get(size, {})}
    return {"label": f"GPT-2 {size} (paper)", "values": values} if values else None


def _save_scores(out_dir: str, scores) -> str:
    folder = storage.join(out_dir, "scores")
    storage.makedirs(folder)  # a local folder only: an object store has none to make
    path = storage.join(folder, f"{scores.name}.json")
    data = {"name": scores.name, "kind": scores.kind, "split": scores.split, "metrics": scores.metrics,
            "meta": scores.meta, "examples": [s.to_dict() for s in scores.examples]}
    write_atomically(path, json.dumps(data, ensure_ascii=False, default=str) + "\n")
    return path


def run_eval(model, benchmarks: Sequence, *, training=None, tokenizer=None, ngram: int = DEFAULT_N,
             threshold: float = DEFAULT_THRESHOLD, apostrophes: str = "split", unicode: bool = True,
             max_doc_count: int | None = None, fp_queries: int = DEFAULT_FP_QUERIES, context: int | None = None,
             stride: int | None = None, batch_size: int = 8, device: str = "cpu", dtype: str | None = None,
             limit: int | None = None, detokenize: bool = True, bootstrap: int = DEFAULT_RESAMPLES,
             confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, report: str | os.PathLike | None = None,
             progress: bool = True, example_pairs: str | os.PathLike | None = None,
             max_new_tokens: dict | None = None) -> dict:
    """Evaluate ``model`` (a path, a module with ``tokenizer``, or a ``ScoringModel``) on
    ``benchmarks`` (specs or ``BenchmarkSet``s), marked against ``training`` (optional).
    Returns the report document; with ``report`` also writes it there (``paths`` key).
    ``example_pairs``: a file of ``left<TAB>right`` example pairs for wmt14 / nq prompts (default:
    drawn from other documents of the same test set); ``seed`` also seeds generation.
    ``max_new_tokens``: ``{task: N}``, the tokens a generative task generates instead of its
    protocol's (``generative.TASK_NEW_TOKENS``; the report notes the change). Every
    benchmark is checked against the model (a generative task must fit its context) before
    any is scored: a refusal writes nothing."""
    from model.eval.decoding import GenerationError  # torch
    from model.eval.generative import (  # rouge-score, sacrebleu (with torch)
        TASK_NEW_TOKENS,
        PairsError,
        check_generative,
        paper_reference,
        read_pairs,
    )
    from model.eval.scoring import evaluate_benchmark  # torch

    if bootstrap < 0:
        raise EvalInputError(f"--bootstrap must be >= 0, got {bootstrap}")
    if not 0.0 < confidence < 1.0:
        raise EvalInputError(f"--confidence must be in (0, 1), got {confidence}")
    if limit is not None and limit < 1:
        raise EvalInputError(f"--limit must be >= 1, got {limit}")
    if ngram < 1:
        raise EvalInputError(f"--ngram must be >= 1, got {ngram}")
    if not 0.0 <= threshold <= 1.0:
        raise EvalInputError(f"--threshold must be in [0, 1], got {threshold}")
    for task, count in (max_new_tokens or {}).items():
        if task not in TASK_NEW_TOKENS:
            raise EvalInputError(f"--max_new_tokens {task}={count}: no generative task {task!r}; known: {', '.join(TASK_NEW_TOKENS)}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise EvalInputError(f"--max_new_tokens {task}={count}: the count must be a whole number >= 1")
    sets = _load_benchmarks(benchmarks)
    pairs = None
    if example_pairs is not None:
        try:
            pairs = read_pairs(os.fspath(example_pairs))
        except PairsError as exc:
            raise EvalInputError(str(exc)) from exc
    marks = None
    notes = []
    training_info = None
    if training is not None:
        try:
            source = open_source(training)
            marks = mark_benchmarks(sets, source, n=ngram, threshold=threshold, apostrophes=apostrophes,
                                    unicode=unicode, max_doc_count=max_doc_count, fp_queries=fp_queries,
                                    progress=progress)
        except ContaminationError as exc:
            raise EvalInputError(str(exc)) from exc
        training_info = {"source": source.path, "kind": source.kind, "n": ngram, "threshold": threshold,
                         "apostrophes": apostrophes, "unicode": unicode, "max_doc_count": max_doc_count}
    else:
        notes.append("No --training corpus: the examples are not marked clean or dirty, every metric is on all examples.")
    if report is not None and storage.is_file(os.fspath(report)):
        raise EvalInputError(f"--report {report}: exists and is not a folder")
    scoring, model_info = _load_scoring_model(model, tokenizer, context=context, batch_size=batch_size,
                                              device=device, dtype=dtype)
    if stride is not None:
        try:
            scoring.windows(1, stride)
        except ValueError as exc:
            raise EvalInputError(f"--stride: {exc}") from exc
    for bench in sets:  # every benchmark checked before any is scored, so a refusal writes nothing
        if bench.meta.get("task") in GENERATIVE_KINDS:
            try:
                check_generative(scoring.model, bench, max_new_tokens)
            except ValueError as exc:
                raise EvalInputError(str(exc)) from exc
    entries = []
    for bench in sets:
        log.info("scoring %s (%d examples%s)", bench.name, len(bench.examples), f", first {limit}" if limit else "")
        try:
            scores = evaluate_benchmark(scoring, bench, stride=stride, detokenize=detokenize, limit=limit,
                                        progress=progress, seed=seed, example_pairs=pairs, new_tokens=max_new_tokens)
        except GenerationError as exc:
            raise EvalInputError(f"{bench.name}: {exc}") from exc
        if report is not None:
            _save_scores(os.fspath(report), scores)
        bench_marks = marks[bench.name] if marks else None
        summary = summarize_benchmark(bench.name, scores.examples, scores.metrics, bench_marks,
                                      resamples=bootstrap, confidence=confidence, seed=seed)
        meta = {k: v for k, v in scores.meta.items() if isinstance(v, (int, float, str, bool, type(None)))}
        reference = (paper_reference(bench) if scores.kind in GENERATIVE_KINDS
                     else table3_reference(bench.name, model_info.get("gpt2_size")))
        entries.append(benchmark_entry(summary, kind=scores.kind, split=scores.split, reference=reference,
                                       per_example=per_example_rows(scores.examples, bench_marks), meta=meta))
        if scores.meta.get("most_confident"):
            entries[-1]["most_confident"] = scores.meta["most_confident"]
        if scores.meta.get("protocol_changed"):
            notes.append(f"{bench.name}: {scores.meta['protocol_changed']}; not comparable with the paper's protocol.")
        for note in (bench_marks.notes if bench_marks else []):
            notes.append(f"{bench.name}: {note}")
    if limit:
        notes.append(f"--limit {limit}: only the first {limit} examples of each benchmark were scored.")
    settings = {"resamples": bootstrap, "confidence": confidence, "seed": seed, "context": scoring.context_length,
                "stride": stride, "batch_size": batch_size, "device": str(device), "dtype": dtype or "float32",
                "limit": limit, "detokenize": detokenize}
    document = build_report(entries, model=model_info, training=training_info, settings=settings, notes=notes)
    if report is not None:
        document["paths"] = write_report({k: v for k, v in document.items() if k != "paths"}, report)
    return document


EXTRA_OPTIONS = "store"  # pipelines.cli: models, benchmarks and corpora on an object store take the store options
PLAIN_ERRORS = True  # pipelines.cli: an input error is the line 'corpusforge eval: error: ...', as argparse writes its own


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return p


def task_counts(items: Sequence[str] | None) -> dict[str, int]:
    """``--max_new_tokens TASK=N ...`` -> ``{task: N}`` (``run_eval`` checks the tasks and counts)."""
    counts = {}
    for text in items or ():
        task, sep, count = text.partition("=")
        if not sep or not count.strip().lstrip("-").isdigit():
            raise EvalInputError(f"--max_new_tokens {text}: expected TASK=N, e.g. cnn_dm=40")
        counts[task.strip()] = int(count)
    return counts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="our run folder or checkpoint file, or a Hugging Face GPT-2 folder")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder (vocab.json + merges.txt); default: the model's")
    p.add_argument("--benchmark", nargs="+", action="extend", required=True, metavar="KIND:PATH[:OPTION]",
                   help="one or more, as in audit (and repeatable), e.g. lambada:lambada_test.jsonl wikitext2:wiki.test.raw")
    p.add_argument("--max_new_tokens", action="append", default=None, metavar="TASK=N",
                   help="tokens a generative task generates (coqa, cnn_dm, wmt14, nq; repeatable), instead of its "
                        "protocol's (cnn_dm 100, wmt14 96, coqa and nq 32): for a model whose context is shorter; "
                        "the report notes the change")
    p.add_argument("--training", nargs="+", default=None, metavar="PATH",
                   help="training corpus: a Bloom filter file or folder, an audit output folder, or shards")
    p.add_argument("--ngram", type=int, default=DEFAULT_N, help="words per n-gram (GPT-2: 8; GPT-3: 13)")
    p.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                   help="dirty when this share of an example's n-grams is found (0: any overlap)")
    p.add_argument("--apostrophes", choices=("split", "join"), default="split", help="as the audit: don't -> 'don t' or 'dont'")
    p.add_argument("--ascii", action="store_true", help="as the audit: only ASCII letters and digits are word characters")
    p.add_argument("--max_doc_count", type=int, default=None, help="ignore n-grams in more training documents (GPT-3: 10; shards only)")
    p.add_argument("--fp_queries", type=int, default=DEFAULT_FP_QUERIES, help="random keys for a Bloom filter's empirical FP rate")
    p.add_argument("--context", type=int, default=None, help="tokens of context per window (default: the model's)")
    p.add_argument("--stride", type=int, default=None, help="tokens a perplexity window moves (default: the scorer's)")
    p.add_argument("--batch_size", type=int, default=8, help="windows or sequences per forward pass")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="autocast dtype for the model")
    p.add_argument("--limit", type=int, default=None, help="score only the first N examples of each benchmark")
    p.add_argument("--no_detokenize", action="store_true", help="score the benchmark text as written")
    p.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, help="bootstrap resamples (0: no intervals)")
    p.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE, help="interval coverage")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed; also seeds top-k sampling and example-pair draws")
    p.add_argument("--example_pairs", default=None, metavar="FILE",
                   help="wmt14 / nq: example pairs, one 'english<TAB>french' or 'question<TAB>answer' a line "
                        "(default: drawn from other documents of the same test set)")
    p.add_argument("--report", default=None, metavar="OUT", help="write OUT/report.json, report.md, report.html")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> dict:
    """``corpusforge eval`` (``pipelines.cli``): the report document (``run_eval``)."""
    training = None
    if args.training:
        training = args.training[0] if len(args.training) == 1 else args.training
    return run_eval(args.model, args.benchmark, training=training, tokenizer=args.tokenizer, ngram=args.ngram,
                    threshold=args.threshold, apostrophes=args.apostrophes, unicode=not args.ascii,
                    max_doc_count=args.max_doc_count, fp_queries=args.fp_queries, context=args.context,
                    stride=args.stride, batch_size=args.batch_size, device=args.device, dtype=args.dtype,
                    limit=args.limit, detokenize=not args.no_detokenize, bootstrap=args.bootstrap,
                    confidence=args.confidence, seed=args.seed, report=args.report, progress=not args.quiet,
                    example_pairs=args.example_pairs, max_new_tokens=task_counts(args.max_new_tokens))


def format_summary(document: dict) -> str:
    """The report's table (``model.eval.report.format_summary``) and where the report files are."""
    lines = [format_report(document)]
    if document.get("paths"):
        lines.append("reports: " + ", ".join(document["paths"].values()))
    return "\n".join(lines)


if __name__ == "__main__":
    from pipelines.cli import main

    sys.exit(main(["eval", *sys.argv[1:]]))
