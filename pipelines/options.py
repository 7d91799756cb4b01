"""The command-line options every corpusforge job shares: argument types (a value out of range
is a one-line usage error before any work), the split of a job's own options from Beam's, and
the options several jobs take. Which engine runs a job: ``pipelines/engines.py``; what a Spark
launcher checks before a JVM starts: ``pipelines/spark_launch.py``; the code shipped to Beam
workers: ``pipelines/beam_package.py``.
"""

from __future__ import annotations

import argparse
import difflib

from common import storage
from corpus.warc import MAX_RECORD_BYTES


# --- argument types: a value out of range is a one-line usage error before any work ------
def _number(kind, text: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None


def int_at_least(minimum: int):
    """An argparse type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        value = _number(int, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value
    return parse


positive_int = int_at_least(1)


def non_negative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, not {value}")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(float, text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, not {text}")
    return value


def open_probability(text: str) -> float:
    """Strictly between 0 and 1 (a false-positive rate)."""
    value = _number(float, text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), not {text}")
    return value


def unit_fraction(text: str) -> float:
    """From 0 to 1 inclusive (a share, a probability threshold)."""
    value = _number(float, text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def power_of_two(text: str) -> int:
    value = positive_int(text)
    if value & (value - 1):
        raise argparse.ArgumentTypeError(f"must be a power of two (1, 2, 4, ...), not {value}")
    return value


# --- Beam options: what the job does not take must be a real Beam pipeline option --------
def split_job_args(parser: argparse.ArgumentParser, argv) -> tuple[argparse.Namespace, list[str]]:
    """The job's own options, and the rest as Beam options, refusing (usage error, exit 2)
    any ``--flag`` that is neither: Beam would drop it with a warning and run with defaults.

    Then the store options (S3 endpoint and credentials, GCP project, HDFS namenode,
    ``--store_timeout_s``) are given to ``common.storage``, here for every job, before the
    job lists or reads anything."""
    parser.add_argument(storage.STORE_TIMEOUT_OPTION, type=positive_float, default=storage.STORE_TIMEOUT_S,
                        help=f"seconds an object store may stay silent before the job ends with one line naming it "
                             f"(default {storage.STORE_TIMEOUT_S:g})")
    args, beam_args = parser.parse_known_args(argv)
    unknown = unknown_beam_flags(beam_args)
    if unknown:
        known = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
        hints = []
        for flag in unknown:
            close = difflib.get_close_matches(flag.split("=", 1)[0], known, n=1)
            hints.append(f"{flag} (did you mean {close[0]}?)" if close else flag)
        parser.error(f"unrecognized arguments: {', '.join(hints)} (neither an option of this job nor a Beam pipeline option)")
    storage.configure(beam_args, timeout_s=args.store_timeout_s)
    return args, beam_args


def unknown_beam_flags(beam_args) -> list[str]:
    """The ``--flags`` of ``beam_args`` that no registered Beam PipelineOptions class defines."""
    if not any(token.startswith("-") for token in beam_args):
        return []  # nothing to check: Beam is not imported (a usage error comes before it)
    # Beam (about a second): this module is imported at the CLI's start (--help, inspect, stats)
    import apache_beam.options.pipeline_options as beam_options

    import pipelines.sources  # noqa: F401  (registers corpusforge's own --shard_sort; imports Beam)

    parser_class = getattr(beam_options, "_BeamArgumentParser", argparse.ArgumentParser)
    parser = parser_class(allow_abbrev=False, add_help=False)
    for cls in {str(c): c for c in beam_options.PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    _, rest = parser.parse_known_args(list(beam_args))
    return [token for token in rest if token.startswith("-")]


def add_max_record_bytes(parser) -> None:
    """The reading options every job that reads crawl files takes."""
    parser.add_argument("--max_record_bytes", type=int_at_least(1024), default=MAX_RECORD_BYTES,
                        help=f"largest WARC/WET record block, and largest decoded HTTP body, read into memory; "
                             f"longer ones are skipped and counted (default {MAX_RECORD_BYTES})")
    parser.add_argument("--verify_digest", action="store_true",
                        help="check WARC-Block-Digest and WARC-Payload-Digest; mismatches are counted "
                             "(read-archive digest:*_mismatch) and logged, the records still read")



def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--overwrite", action="store_true",
                        help="replace what --output already holds (the old set is readable until the job starts, and its "
                             "shard files are removed when the new set is complete); without it a non-empty --output is refused")


def add_manifest_path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow_any_manifest_path", action="store_true",
                        help="open manifest entries that leave --base_url (.., absolute paths, other URLs); "
                             "by default such an entry is refused before anything runs")
