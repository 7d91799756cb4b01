"""The ``corpusforge`` command: one subcommand per job. Logs go to stderr, results to stdout.

Each subcommand imports its job's module when it runs, in one line at the top of its
``cmd_*`` function that says why: Apache Beam (about a second to import), warcio and numpy,
or torch. So ``corpusforge --help`` starts at once, and the corpus jobs (inspect, stats,
fetch, read, c4, webtext, audit, decontaminate) never import torch or the tokenizer
libraries: they run on an install of requirements.txt alone (a Beam worker's). train,
finetune, sample, eval and demo need the ``model`` extra (requirements-model.txt);
tokenize needs only its tokenizer libraries (tokenizers, tiktoken), never torch.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter

from tqdm import tqdm

from common import storage
from corpus.inputs import InputError, expand_inputs
from pipelines.options import LOST_WORKER, LOST_WORKER_CLEANUP, add_manifest_path_argument

log = logging.getLogger("corpusforge")

MODEL_LIBRARIES = ("torch", "tokenizers", "tiktoken", "safetensors")  # requirements-model.txt


def cmd_inspect(args: argparse.Namespace) -> int:
    from corpus.warc import inspect_archive  # warcio and numpy: not at the CLI's start (--help, the other jobs)

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


def cmd_stats(args: argparse.Namespace) -> int:
    # pyarrow, numpy and matplotlib (about a second): not at the CLI's start
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


def cmd_fetch(args: argparse.Namespace) -> int:
    from corpus.fetch import FetchConfig, fetch_links  # asyncio, ssl and warcio: only this command needs them

    parser = fetch_parser(FetchConfig())
    options = parser.parse_args(args.sub_argv)
    try:
        config = FetchConfig(
            allow_hosts=frozenset(options.allow_hosts),
            deadline_s=options.deadline,
            concurrency=options.concurrency,
            per_host_concurrency=options.per_host_concurrency,
            per_host_delay_s=options.per_host_delay,
            retries=options.retries,
            respect_robots=not options.ignore_robots,
        )
    except ValueError as exc:  # e.g. --concurrency 0: a usage error, before anything runs
        parser.error(str(exc))
    source = sys.stdin if options.links == "-" else open(options.links, encoding="utf-8")
    with source:
        links = (line.strip() for line in source)
        counts = fetch_links((link for link in links if link and not link.startswith("#")), config, options.out,
                             resume=not options.no_resume)
    print(json.dumps(dict(sorted(counts.items()))))
    return 0


def fetch_parser(defaults) -> argparse.ArgumentParser:
    """``corpusforge fetch``'s options; ``defaults`` is a ``FetchConfig()``. The dashed spellings
    (``--per-host-concurrency``) are those of the old ``python -m corpus.fetch`` and still work."""
    parser = argparse.ArgumentParser(
        prog="corpusforge fetch",
        description="Fetch links (one per line) safely and politely into WARC files and a fetch log; rerun to resume.",
    )
    parser.add_argument("links", help="file of URLs, one per line ('-' reads standard input)")
    parser.add_argument("--out", required=True, help="folder for the WARC files and fetch-log-*.jsonl")
    parser.add_argument("--allow_hosts", "--allow-hosts", nargs="*", default=[], metavar="HOST:PORT",
                        help="private/loopback host:port allowed anyway (tests, local mirrors)")
    parser.add_argument("--deadline", type=float, default=defaults.deadline_s,
                        help=f"seconds per page, redirects and retries included (default {defaults.deadline_s:g})")
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency,
                        help=f"requests in flight overall (default {defaults.concurrency})")
    parser.add_argument("--per_host_concurrency", "--per-host-concurrency", type=int, default=defaults.per_host_concurrency,
                        help=f"requests in flight per host (default {defaults.per_host_concurrency})")
    parser.add_argument("--per_host_delay", "--per-host-delay", type=float, default=defaults.per_host_delay_s,
                        help=f"seconds between request starts on one host (default {defaults.per_host_delay_s:g})")
    parser.add_argument("--retries", type=int, default=defaults.retries,
                        help=f"extra tries for 429/5xx and reset connections (default {defaults.retries})")
    parser.add_argument("--ignore_robots", "--ignore-robots", action="store_true", help="do not fetch or obey robots.txt")
    parser.add_argument("--no_resume", "--no-resume", action="store_true", help="fetch every link even if a log in --out has it")
    return parser


def cmd_read(args: argparse.Namespace) -> int:
    from pipelines.read import run  # Apache Beam (about a second): not at the CLI's start

    stats = run(args.sub_argv)
    read = stats["counters"].get("read-archive", {})
    errors = {k.split(":", 1)[1]: v for k, v in read.items() if k.startswith("error:")}
    print(f"{stats['files']} file(s): {read.get('produced:conversion', 0):,} documents, {read.get('produced:response', 0):,} HTML pages, errors {errors or 'none'}")
    return _read_status(stats)


def _read_status(stats: dict) -> int:
    """1 when not one record could be read from the inputs (e.g. a ``.wet.gz`` that is not
    gzip): the job ran and wrote empty shards, but what it was given is not what was meant."""
    from pipelines.steps import read_nothing  # Apache Beam, already loaded by the job that just ran

    if read_nothing(stats["counters"]):
        log.error("no WARC record could be read from any input file (the summary lists the errors by reason)")
        return 1
    return 0


def cmd_c4(args: argparse.Namespace) -> int:
    from pipelines.c4 import format_summary, run  # Apache Beam: not at the CLI's start

    stats = run(args.sub_argv)
    print(format_summary(stats))
    return _read_status(stats)


def cmd_webtext(args: argparse.Namespace) -> int:
    from pipelines.webtext import format_summary, run  # Apache Beam: not at the CLI's start

    stats = run(args.sub_argv)
    print(format_summary(stats))
    return _read_status(stats)


def cmd_audit(args: argparse.Namespace) -> int:
    from pipelines.audit import format_audit, run_audit  # Apache Beam: not at the CLI's start

    print(format_audit(run_audit(args.sub_argv)))
    return 0


def cmd_decontaminate(args: argparse.Namespace) -> int:
    from pipelines.audit import format_decontaminate, run_decontaminate  # Apache Beam: not at the CLI's start

    print(format_decontaminate(run_decontaminate(args.sub_argv)))
    return 0


def cmd_tokenize(args: argparse.Namespace) -> int:
    from pipelines.tokenize import main  # Apache Beam and the tokenizer libraries: not at the CLI's start

    return main(args.sub_argv)


# The model commands import torch (requirements-model.txt), which data users and Beam workers do not install.


def cmd_train(args: argparse.Namespace) -> int:
    from model.train import main  # torch: only the model commands may import it

    return main(args.sub_argv)


def cmd_finetune(args: argparse.Namespace) -> int:
    from model.finetune import main  # torch: only the model commands may import it

    return main(args.sub_argv)


def cmd_sample(args: argparse.Namespace) -> int:
    from model.sample import main  # torch: only the model commands may import it

    return main(args.sub_argv)


def cmd_eval(args: argparse.Namespace) -> int:
    from model.harness import main  # torch: only the model commands may import it

    return main(args.sub_argv)


def cmd_demo(args: argparse.Namespace) -> int:
    from pipelines.demo import run_demo  # Apache Beam and torch: every job of the house runs

    run_demo(args.out, seed=args.seed, pages=args.pages)
    return 0


# Jobs that own their options (each has its own --help): ``cmd(args)`` parses ``args.sub_argv``.
JOBS = [
    ("fetch", "fetch a file of links safely and politely into WARC files and a fetch log; rerun to resume", cmd_fetch),
    ("read", "read WARC/WET files into document shards with Apache Beam (no filtering)", cmd_read),
    ("c4", "build C4 (en, en.noclean, en.noblocklist, realnewslike, webtextlike) from Common Crawl with Apache Beam", cmd_c4),
    ("webtext", "build WebText from Reddit links (>= 3 karma): safe live fetch or a Common Crawl join", cmd_webtext),
    ("audit", "8-gram overlap of benchmarks with a training corpus: Bloom filter (1e-8) and exact index, reports", cmd_audit),
    ("decontaminate", "remove benchmark overlaps from training shards (GPT-3 spans, drop or mask)", cmd_decontaminate),
    ("tokenize", "train byte-level BPE on shards and write llm.c token shards (train/val) with Apache Beam", cmd_tokenize),
    ("train", "train GPT-1/GPT-2 on token shards (CPU, GPU, torchrun DDP); exact resume", cmd_train),
    ("finetune", "fine-tune a trained checkpoint on a task (GPT-1's input transformations, a linear head)", cmd_finetune),
    ("sample", "generate text from a checkpoint (top-k / top-p / temperature)", cmd_sample),
    ("eval", "zero-shot GPT-2 benchmarks, each reported on all / clean / contaminated examples", cmd_eval),
]

# Commands that never run a Beam pipeline: they do not pay for importing Beam's progress display.
NO_BEAM = {"inspect", "stats", "fetch", "train", "finetune", "sample", "eval"}


def build_parser() -> argparse.ArgumentParser:
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
        if record.name.startswith("apache_beam") and storage.disk_full_cause(record.exc_info[1] if record.exc_info else None):
            return False  # so does a full disk (the runner logs it once more, with its traceback)
        if record.name.startswith("apache_beam.runners.portability") and any(w in message for w in QUIET_WORKER_WORDS):
            return False
        if (LOST_WORKER in message or LOST_WORKER_CLEANUP in message) and not logging.getLogger().isEnabledFor(logging.DEBUG):
            return False  # the job server's report of a dead worker: the command says it in one line (-v shows it)
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
        if getattr(exc, "one_line", False):  # e.g. pipelines.progress.WorkerLostError
            log.error("%s", exc, exc_info="-v" in argv or "--verbose" in argv)
            return 1
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
    elif args.command == "stats" and not storage.split_store_args(rest)[1]:
        args.filesystem_args = rest  # the store options (common.storage), e.g. --s3_endpoint_url for s3:// shards
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("apache_beam").setLevel(logging.NOTSET if args.verbose else logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.NOTSET if args.verbose else logging.WARNING)
    if args.command not in NO_BEAM:
        from pipelines import progress  # Apache Beam: only for the commands that run a pipeline

        # one command's -q never outlives it (main() may run several commands in one process)
        restore_progress, progress.enabled = progress.enabled, not args.no_progress
    try:
        return args.func(args)
    except (InputError, storage.IncompleteOutputError, storage.OutputExistsError, storage.StoreError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        # A user's mistake (a path, an existing output): the cause in one line; -v adds the traceback.
        log.error("%s", exc, exc_info=args.verbose)
        return 2
    except Exception as exc:  # noqa: BLE001  (only a full disk is handled here; anything else goes on up)
        full = storage.disk_full_cause(exc)
        if full is None:
            if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in MODEL_LIBRARIES:
                log.error("corpusforge %s needs %s, which is not installed: pip install 'corpusforge[model]' "
                          "(the pins of requirements-model.txt)", args.command, exc.name)
                return 2
            raise
        log.error("%s", storage.disk_full_message(full, _written_path(args)), exc_info=args.verbose)
        return 1
    finally:
        if args.command not in NO_BEAM:
            progress.enabled = restore_progress


def _written_path(args: argparse.Namespace) -> str | None:
    """Where the command writes (its --output, --out or --plot), for the disk-full line."""
    argv = list(getattr(args, "sub_argv", None) or [])
    for flag in ("--output", "--out"):
        for n, arg in enumerate(argv):
            if arg == flag and n + 1 < len(argv):
                return argv[n + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return getattr(args, "plot", None)


if __name__ == "__main__":
    sys.exit(main())
