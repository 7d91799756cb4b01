"""The ``corpusforge`` command: one subcommand per job. Logs go to stderr, results to stdout.

One job contract (docs/architecture.md): every subcommand is a module named in ``COMMANDS``
that exposes ``add_arguments(parser)``, ``run(args) -> summary`` and
``format_summary(summary) -> str``. This module builds the parsers from that one registry,
prints the summary, and is the one error funnel: the project's own input errors
(``common.errors.InputError`` and its subclasses) are one line and exit 2; anything else is
a bug and keeps its traceback (exit 1).

A command's module is imported only when that command runs: Apache Beam takes about a
second to import, torch longer. So ``corpusforge --help`` starts at once, and the corpus
jobs (inspect, stats, fetch, read, c4, webtext, audit, decontaminate) never import torch or
the tokenizer libraries: they run on an install of requirements.txt alone (a Beam
worker's). train, finetune, sample, eval and demo need the ``model`` extra
(requirements-model.txt); tokenize needs only its tokenizer libraries (tokenizers,
tiktoken), never torch.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import threading
import time
from types import ModuleType

from common import storage
from common.errors import InputError, UsageError
from pipelines.options import split_job_args
from pipelines.progress import LOST_WORKER, LOST_WORKER_CLEANUP

log = logging.getLogger("corpusforge")

MODEL_LIBRARIES = ("torch", "tokenizers", "tiktoken", "safetensors")  # requirements-model.txt

# The one registry: command -> (its module, the line ``corpusforge --help`` shows), in the
# order --help lists them. A module may also define:
#   EXTRA_OPTIONS = "beam"   what is not the job's own option must be a Beam pipeline option
#                            (pipelines.options.split_job_args): ``args.beam_args``, store options applied
#   EXTRA_OPTIONS = "store"  the object-store options (common.storage) are taken out and applied
#   DESCRIPTION              the --help text (default: the module's docstring)
#   PLAIN_ERRORS = True      an input error is printed as argparse prints its own ("corpusforge NAME: error: ..."), not logged
#   exit_status(summary)     the exit code of a run that finished (default 0)
COMMANDS: dict[str, tuple[str, str]] = {
    "inspect": ("pipelines.inspect_crawl", "count records in WARC/WET files by type, MIME type, language header and error"),
    "stats": ("pipelines.shard_stats", "documents, bytes, characters, words, top domains and a length histogram of shards"),
    "fetch": ("pipelines.fetch_links", "fetch a file of links safely and politely into WARC files and a fetch log; rerun to resume"),
    "read": ("pipelines.read.job", "read WARC/WET files into document shards with Apache Beam (no filtering)"),
    "c4": ("pipelines.c4.job", "build C4 (en, en.noclean, en.noblocklist, realnewslike, webtextlike) from Common Crawl with Apache Beam"),
    "webtext": ("pipelines.webtext.job", "build WebText from Reddit links (>= 3 karma): safe live fetch or a Common Crawl join"),
    "audit": ("pipelines.audit.job", "8-gram overlap of benchmarks with a training corpus: Bloom filter (1e-8) and exact index, reports"),
    "decontaminate": ("pipelines.audit.decontaminate", "remove benchmark overlaps from training shards (GPT-3 spans, drop or mask)"),
    "tokenize": ("pipelines.tokenize.job", "train byte-level BPE on shards and write llm.c token shards (train/val) with Apache Beam"),
    "train": ("model.train", "train GPT-1/GPT-2 on token shards (CPU, GPU, torchrun DDP); exact resume"),
    "finetune": ("model.finetune.train", "fine-tune a trained checkpoint on a task (GPT-1's input transformations, a linear head)"),
    "sample": ("model.sample", "generate text from a checkpoint (top-k / top-p / temperature)"),
    "eval": ("model.eval.harness", "zero-shot GPT-2 benchmarks, each reported on all / clean / contaminated examples"),
    "demo": ("pipelines.demo.job", "generate the bundled sample crawl and run every working job on it"),
    "spark-package": ("pipelines.spark_package", "write corpusforge.zip and spark_main.py for spark-submit on a cluster, and the line to run"),
}
CONTRACT = ("add_arguments", "run", "format_summary")
# Commands whose module imports Apache Beam or torch keep their options (add_arguments, EXTRA_OPTIONS) and
# their --help text (the module's docstring or DESCRIPTION) in a module without them, so `--help` and a
# usage error are answered before Beam (about 2 s) or torch is imported; the command's module re-exports them.
OPTIONS_MODULES = {
    "read": "pipelines.read.options",
    "c4": "pipelines.c4.options",
    "webtext": "pipelines.webtext.options",
    "audit": "pipelines.audit.options",
    "tokenize": "pipelines.tokenize.options",
    "sample": "model.sample_options",
    "demo": "pipelines.demo.options",
}

# Commands that never run a Beam pipeline: they do not pay for importing Beam's progress display.
NO_BEAM = {"inspect", "stats", "fetch", "train", "finetune", "sample", "eval", "spark-package"}


def load_command(name: str) -> ModuleType:
    """The module of ``corpusforge NAME``, imported now (Beam, torch: only the command that runs pays)."""
    return importlib.import_module(COMMANDS[name][0])


def load_options(name: str) -> ModuleType:
    """The module that holds ``corpusforge NAME``'s options and --help text: its ``OPTIONS_MODULES``
    entry (no Beam), else the command's own module."""
    return importlib.import_module(OPTIONS_MODULES.get(name, COMMANDS[name][0]))


def command_parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"corpusforge {name}", description=getattr(module, "DESCRIPTION", module.__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    return parser


def parse_command(parser: argparse.ArgumentParser, module: ModuleType, argv: list[str]) -> argparse.Namespace:
    """The command's options from ``argv`` (a usage error exits 2 here, before any work), the
    extra options its module takes (``EXTRA_OPTIONS``) applied; ``args.command_argv``: ``argv``
    without the store options."""
    extra = getattr(module, "EXTRA_OPTIONS", None)
    if extra == "beam":
        args, args.beam_args = split_job_args(parser, argv)
    elif extra == "store":
        store, argv = storage.split_store_args(argv)
        args = parser.parse_args(argv)
        try:
            storage.configure(store)
        except InputError:
            raise  # a store that cannot be used: the funnel's one line
        except ValueError as exc:  # an option's value, e.g. --store_timeout_s 0
            parser.error(str(exc))
    else:
        args = parser.parse_args(argv)
    args.command_argv = list(argv)  # what the command parses again (``--resume`` compares the options given)
    return args


def run_job(name: str, argv: list[str]):
    """``corpusforge NAME ARGV``'s summary, for a program that runs a job in its own process
    (the demo, benchmarks, tests): errors are raised, not reported."""
    options = load_options(name)
    parser = command_parser(name, options)
    args = parse_command(parser, options, argv)
    return _run(parser, load_command(name), args)


def _run(parser: argparse.ArgumentParser, module: ModuleType, args: argparse.Namespace):
    try:
        return module.run(args)
    except UsageError as exc:  # an option combination argparse cannot state: reported as argparse does
        parser.error(str(exc))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="corpusforge", description="Build C4/WebText-style corpora from Common Crawl and Reddit links.")
    parser.add_argument("-v", "--verbose", "--debug", action="store_true",
                        help="debug logging, tracebacks of errors, Beam's own logs and every worker line")
    parser.add_argument("-q", "--quiet", action="store_true", dest="no_progress",
                        help="no progress display on Beam jobs (warnings and errors still shown)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():  # each command owns its options (and its --help)
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


# Lines Beam logs that say nothing about the job being run: the note that the default runner
# is used, and the start-up warnings of local worker processes that Beam forwards. (Its
# import-time "apitools not found" is dropped at its source: pipelines.library_notices.)
QUIET_BEAM_LINES = ("Missing pipeline option (runner)",)
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
    global _exit_promptly
    _exit_promptly = False  # set by this run's lost worker only, not by an earlier call in the same process
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
            _exit_promptly = getattr(exc, "exit_promptly", False)
            return 1
        if not str(exc).startswith("KeyboardInterrupt"):
            raise
        return _interrupted()


# A failed job's client threads that may never end: the process ends this long after the command
# has said why it failed, whatever is still waiting (see program()).
EXIT_GRACE_S = 30.0
_exit_promptly = False


def program() -> None:
    """The ``corpusforge`` command: ``main()``, then the process ends with its status.

    After a job whose worker died (``WorkerLostError``), Beam's threads that wait on the dead
    job can keep the interpreter from ending after the one-line error; such an exit is
    finished by ``exit_within`` once ``EXIT_GRACE_S`` has passed. Every other exit is the
    interpreter's own, so a thread still writing output is always waited for."""
    code = main()
    if _exit_promptly:
        exit_within(code, EXIT_GRACE_S)
    sys.exit(code)


def exit_within(code: int, seconds: float) -> None:
    """Ends the process with ``code`` ``seconds`` from now unless it has ended by then: a
    daemon thread, which runs on while the interpreter waits for its other threads at exit."""

    def finish() -> None:
        time.sleep(seconds)
        print(f"corpusforge: threads of the failed job still waited after {seconds:g} s; exiting with status {code}",
              file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)

    threading.Thread(target=finish, name="corpusforge-exit", daemon=True).start()


def _interrupted() -> int:
    log.error("interrupted: no output was committed; run the same command again (a webtext fetch resumes from what "
              "it kept under fetch/, other jobs start over)")
    return 130


def _main(argv: list[str]) -> int:
    top, rest = build_parser().parse_known_args(argv)  # the command's own options are in rest
    logging.getLogger().setLevel(logging.DEBUG if top.verbose else logging.INFO)
    logging.getLogger("apache_beam").setLevel(logging.NOTSET if top.verbose else logging.WARNING)
    logging.getLogger("matplotlib").setLevel(logging.NOTSET if top.verbose else logging.WARNING)
    module = progress = None
    try:
        module = load_options(top.command)  # the options first: a usage error or --help before Beam loads
        parser = command_parser(top.command, module)
        args = parse_command(parser, module, rest)
        if top.command not in NO_BEAM:
            from pipelines import progress  # Apache Beam: only for the commands that run a pipeline

            # one command's -q never outlives it (main() may run several commands in one process)
            restore_progress, progress.enabled = progress.enabled, not top.no_progress
        module = load_command(top.command)
        summary = _run(parser, module, args)
        text = module.format_summary(summary)
        if text and int(os.environ.get("RANK", "0")) == 0:  # under torchrun, rank 0 prints
            print(text)
        return module.exit_status(summary) if hasattr(module, "exit_status") else 0
    except (InputError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        # A user's mistake (a path, an existing output, a bad file): the cause in one line; -v adds the traceback.
        if getattr(module, "PLAIN_ERRORS", False):
            print(f"corpusforge {top.command}: error: {exc}", file=sys.stderr)
        else:
            log.error("%s", exc, exc_info=top.verbose)
        return 2
    except Exception as exc:  # noqa: BLE001  (only a full disk and a missing extra are handled here; anything else goes on up)
        full = storage.disk_full_cause(exc)
        if full is None:
            if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in MODEL_LIBRARIES:
                log.error("corpusforge %s needs %s, which is not installed: pip install 'corpusforge[model]' "
                          "(the pins of requirements-model.txt)", top.command, exc.name)
                return 2
            raise
        log.error("%s", storage.disk_full_message(full, _written_path(rest)), exc_info=top.verbose)
        return 1
    finally:
        if progress is not None:
            progress.enabled = restore_progress


def _written_path(argv: list[str]) -> str | None:
    """Where the command writes (its --output, --out or --plot), for the disk-full line."""
    for flag in ("--output", "--out", "--plot"):
        for n, arg in enumerate(argv):
            if arg == flag and n + 1 < len(argv):
                return argv[n + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


if __name__ == "__main__":
    program()
