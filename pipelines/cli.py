"""The ``corpusforge`` command: one subcommand per job. Logs go to stderr, results to stdout.

Every job's module is imported only when its subcommand runs, so ``corpusforge --help`` and
the corpus jobs (inspect, stats, read, c4, webtext, audit, decontaminate) never import torch
or the tokenizer libraries: they run on an install of requirements.txt alone (a Beam worker's).
train, sample, eval and demo need the ``model`` extra (requirements-model.txt); tokenize
needs only its tokenizer libraries (tokenizers, tiktoken), never torch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter

from tqdm import tqdm

log = logging.getLogger("corpusforge")

MODEL_LIBRARIES = ("torch", "tokenizers", "tiktoken", "safetensors")  # requirements-model.txt


def cmd_inspect(args: argparse.Namespace) -> int:
    from corpus.inputs import expand_inputs
    from corpus.warc import inspect_archive

    files = expand_inputs(args.files, base=args.base_url, allow_any_manifest_path=args.allow_any_manifest_path)
    totals = {"records": Counter(), "mime_types": Counter(), "languages": Counter(), "errors": Counter()}
    per_file = []
    for path in tqdm(files, desc="inspect", unit="file", disable=args.quiet):
        summary = inspect_archive(path)
        per_file.append(summary.to_dict())
        for key in totals:
            totals[key].update(getattr(summary, key))
    report = {"files": len(files), **{k: dict(v.most_common()) for k, v in totals.items()}, "per_file": per_file}
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(format_inspection(report))
    return 1 if args.strict and totals["errors"] else 0


def format_inspection(report: dict) -> str:
    lines = [f"{report['files']} file(s)"]
    for title, key in (("records by type", "records"), ("payload MIME types", "mime_types"), ("language headers", "languages"), ("errors by reason", "errors")):
        lines.append(f"\n{title}:")
        counts = report[key]
        if not counts:
            lines.append("  (none)")
        for name, count in counts.items():
            lines.append(f"  {name:48} {count:>10,}")
    errors = [e for f in report["per_file"] for e in f["first_errors"]]
    if errors:
        lines.append("\nfirst errors (file @ offset: reason):")
        lines.extend(f"  {e['source']} @{e['offset']}: {e['reason']} {e['detail']}"[:160] for e in errors[:20])
    return "\n".join(lines)


# Beam options that configure FileSystems (S3, GCS, HDFS), which ``stats`` accepts for remote shards.
FILESYSTEM_OPTIONS = ("--s3_", "--project", "--hdfs_", "--gcs_")


def cmd_stats(args: argparse.Namespace) -> int:
    from common import storage
    from corpus.shards import find_shards, read_documents
    from corpus.stats import compute_stats, format_stats, plot_length_histogram

    storage.configure(getattr(args, "filesystem_args", []))
    shards = find_shards(args.shards)
    docs = tqdm(read_documents(shards), desc="stats", unit="doc", disable=args.quiet)
    stats = compute_stats(docs, top_domains=args.top_domains)
    if args.json:
        print(json.dumps(stats.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_stats(stats))
    if args.plot:
        plot_length_histogram(stats, args.plot, title=f"Document length, {len(shards)} shard(s)")
        log.info("length histogram written to %s", args.plot)
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    from pipelines.read import run

    stats = run(args.sub_argv)
    read = stats["counters"].get("read-archive", {})
    errors = {k.split(":", 1)[1]: v for k, v in read.items() if k.startswith("error:")}
    print(f"{stats['files']} file(s): {read.get('produced:conversion', 0):,} documents, {read.get('produced:response', 0):,} HTML pages, errors {errors or 'none'}")
    return _read_status(stats)


def _read_status(stats: dict) -> int:
    """1 when not one record could be read from the inputs (e.g. a ``.wet.gz`` that is not
    gzip): the job ran and wrote empty shards, but what it was given is not what was meant."""
    from pipelines.steps import read_nothing

    if read_nothing(stats["counters"]):
        log.error("no WARC record could be read from any input file (the summary lists the errors by reason)")
        return 1
    return 0


def cmd_c4(args: argparse.Namespace) -> int:
    from pipelines.c4 import format_summary, run

    stats = run(args.sub_argv)
    print(format_summary(stats))
    return _read_status(stats)


def cmd_webtext(args: argparse.Namespace) -> int:
    from pipelines.webtext import format_summary, run

    stats = run(args.sub_argv)
    print(format_summary(stats))
    return _read_status(stats)


def cmd_audit(args: argparse.Namespace) -> int:
    from pipelines.audit import format_audit, run_audit

    print(format_audit(run_audit(args.sub_argv)))
    return 0


def cmd_decontaminate(args: argparse.Namespace) -> int:
    from pipelines.audit import format_decontaminate, run_decontaminate

    print(format_decontaminate(run_decontaminate(args.sub_argv)))
    return 0


def delegate(module: str):
    """A command whose module parses its own options: ``module.main(argv) -> exit status``."""

    def cmd(args: argparse.Namespace) -> int:
        import importlib

        return importlib.import_module(module).main(args.sub_argv)

    return cmd


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.demo import run_demo

    run_demo(args.out, seed=args.seed, pages=args.pages)
    return 0


JOBS = [
    ("read", "read WARC/WET files into document shards with Apache Beam (no filtering)", cmd_read),
    ("c4", "build C4 (en, en.noclean, en.noblocklist, realnewslike, webtextlike) from Common Crawl with Apache Beam", cmd_c4),
    ("webtext", "build WebText from Reddit links (>= 3 karma): safe live fetch or a Common Crawl join", cmd_webtext),
    ("audit", "8-gram overlap of benchmarks with a training corpus: Bloom filter (1e-8) and exact index, reports", cmd_audit),
    ("decontaminate", "remove benchmark overlaps from training shards (GPT-3 spans, drop or mask)", cmd_decontaminate),
    ("tokenize", "train byte-level BPE on shards and write llm.c token shards (train/val) with Apache Beam",
     delegate("pipelines.tokenize")),
    ("train", "train GPT-1/GPT-2 on token shards (CPU, GPU, torchrun DDP); exact resume", delegate("model.train")),
    ("sample", "generate text from a checkpoint (top-k / top-p / temperature)", delegate("model.sample")),
    ("eval", "zero-shot GPT-2 benchmarks, each reported on all / clean / contaminated examples", delegate("model.harness")),
]


def build_parser() -> argparse.ArgumentParser:
    from pipelines.options import add_manifest_path_argument

    parser = argparse.ArgumentParser(prog="corpusforge", description="Build C4/WebText-style corpora from Common Crawl and Reddit links.")
    parser.add_argument("-v", "--verbose", "--debug", action="store_true",
                        help="debug logging, tracebacks of errors, Beam's own logs and every worker line")
    parser.add_argument("-q", "--quiet", action="store_true", dest="no_progress",
                        help="no progress display on Beam jobs (warnings and errors still shown)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", help="count records in WARC/WET files by type, MIME type, language header and error")
    p.add_argument("files", nargs="+", help="files, globs, folders, *.paths.gz manifests or URLs")
    p.add_argument("--base_url", default="https://data.commoncrawl.org/", help="base URL (or folder) for manifest paths")
    add_manifest_path_argument(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--strict", action="store_true", help="exit 1 if any error was found")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("stats", help="documents, bytes, characters, words, top domains and a length histogram of shards")
    p.add_argument("shards", nargs="+", help="shard files, globs or folders (.json.gz, .jsonl, .parquet)")
    p.add_argument("--plot", metavar="PNG", help="write a document-length histogram to this PNG")
    p.add_argument("--top_domains", type=int, default=20, help="how many domains to list (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_stats)

    for name, help_text, func in JOBS:  # jobs that own their options (each has its own --help)
        sub.add_parser(name, help=help_text, add_help=False).set_defaults(func=func)

    p = sub.add_parser("demo", help="generate the bundled sample crawl and run every working job on it")
    p.add_argument("--out", default="demo-out", help="output folder (default demo-out)")
    p.add_argument("--seed", type=int, default=0, help="sample crawl seed (default 0)")
    p.add_argument("--pages", type=int, default=300, help="pages in the sample crawl (default 300)")
    p.set_defaults(func=cmd_demo)
    return parser


# Lines Beam logs that say nothing about the job being run: the import-time warning when the
# optional GCP client libraries are absent, the note that the default runner is used, and
# the start-up warnings of local worker processes that Beam forwards.
QUIET_BEAM_LINES = ("apitools not found", "Missing pipeline option (runner)")
QUIET_WORKER_WORDS = ("semi_persistent_directory", "Discarding unparseable args")


class _QuietBeamLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.name.startswith("apache_beam") and message.startswith("KeyboardInterrupt"):
            return False  # the command reports the interrupt itself, in one line
        if record.name.startswith("apache_beam.runners.portability") and any(w in message for w in QUIET_WORKER_WORDS):
            return False
        return not message.startswith(QUIET_BEAM_LINES)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_QuietBeamLines())
    logging.getLogger("apache_beam").setLevel(logging.WARNING)  # before Beam is imported; -v resets it
    try:
        return _main(argv)
    except BrokenPipeError:  # `corpusforge inspect --json | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return _interrupted()
    except RuntimeError as exc:  # Beam wraps an interrupt in its worker as RuntimeError("KeyboardInterrupt [while ...]")
        if not str(exc).startswith("KeyboardInterrupt"):
            raise
        return _interrupted()


def _interrupted() -> int:
    log.error("interrupted: no output was committed (a webtext fetch keeps what it fetched under fetch/ and resumes "
              "when the same command runs again; other jobs start over with --overwrite)")
    return 130


def _main(argv: list[str]) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command in {name for name, _, _ in JOBS}:
        args.sub_argv = rest  # the job owns its options and passes Beam's through
    elif args.command == "stats" and all(a.startswith(FILESYSTEM_OPTIONS) for a in rest if a.startswith("-")):
        args.filesystem_args = rest  # e.g. --s3_endpoint_url for s3:// shards
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("apache_beam").setLevel(logging.NOTSET if args.verbose else logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.NOTSET if args.verbose else logging.WARNING)
    from pipelines import progress

    progress.enabled = not args.no_progress
    from corpus.inputs import InputError
    from common.storage import IncompleteOutputError, OutputExistsError

    try:
        return args.func(args)
    except (InputError, IncompleteOutputError, OutputExistsError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        # A user's mistake (a path, an existing output): the cause in one line; -v adds the traceback.
        log.error("%s", exc, exc_info=args.verbose)
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in MODEL_LIBRARIES:
            raise
        log.error("corpusforge %s needs %s, which is not installed: pip install 'corpusforge[model]' "
                  "(the pins of requirements-model.txt)", args.command, exc.name)
        return 2


if __name__ == "__main__":
    sys.exit(main())
