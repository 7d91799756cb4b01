"""The train/test overlap audit (GPT-2 paper, section 4) and decontamination, as Beam jobs
(or on Spark with ``--engine spark``: ``pipelines.spark.audit``, the same output bytes).

    corpusforge audit --corpus 'c4-out/c4-train.*.json.gz' --benchmark wikitext2:wiki.test.raw \
        ptb:ptb.test.txt lambada:lambada_test.jsonl --output audit/ [--mode both|bloom|exact] [--n 8]
    corpusforge decontaminate --corpus 'c4-out/*.parquet' --benchmark lambada:lambada_test.jsonl \
        --output clean/ [--mode spans|drop|mask] [--n 13]

Audit: (1) count the corpus's n-grams (capacity); (2) build a Bloom filter at p <= 1e-8,
partitioned by hash prefix, each part a GroupByKey of the n-gram hashes of its prefix;
(3) stream the corpus once against an exact index of every benchmark's n-grams (which
document, which span, how many documents per n-gram), the index written once to a staged
file and loaded once per worker process (``stage_indexes``, ``WithIndexes``: the job's
graph carries its path, not the index; decontamination reads it the same way); (4) per
benchmark: % of its n-grams found (unique and token-weighted, GPT-2 Table 6), dirty/clean
examples, longest match, the filter's false-positive evidence, and whether the Bloom and
exact paths agree; written as JSON, Markdown and an HTML page with a bar chart.
"""

from __future__ import annotations

import argparse

from corpus.shards import FORMATS
from dedup.decontaminate import GPT3_MARGIN, GPT3_MAX_SPLITS, GPT3_MIN_PIECE
from dedup.overlap import GPT3_MAX_DOC_COUNT
from pipelines.engines import add_engine_arguments
from pipelines.options import (
    add_overwrite_argument,
    non_negative_int,
    open_probability,
    positive_int,
    power_of_two,
    unit_fraction,
)

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option
MODES = ("both", "bloom", "exact")


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", nargs="+", required=True, help="training shards: files, globs or folders (.json.gz, .jsonl, .parquet)")
    parser.add_argument("--benchmark", nargs="+", action="extend", required=True, help="KIND:PATH[:OPTION], e.g. wikitext2:wiki.test.raw lambada:lambada_test.jsonl jsonl:file.jsonl:text")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--n", type=positive_int, default=8, help="words per n-gram (GPT-2: 8; GPT-3 / harness: 13)")
    parser.add_argument("--apostrophes", choices=("split", "join"), default="split", help="don't -> 'don t' (split, default) or 'dont'")
    parser.add_argument("--ascii", action="store_true", help="only ASCII letters and digits are word characters")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``corpusforge audit``'s options."""
    add_common_arguments(parser)
    parser.add_argument("--mode", choices=MODES, default="both", help="bloom filter, exact index, or both compared (default)")
    parser.add_argument("--error_rate", type=open_probability, default=1e-8, help="Bloom false-positive rate (GPT-2: <= 1e-8)")
    parser.add_argument("--capacity", type=positive_int, default=None, help="n-grams the filter is sized for (default: counted)")
    parser.add_argument("--filter_parts", type=power_of_two, default=1, help="Bloom parts by hash prefix, built in parallel (a power of two)")
    parser.add_argument("--filter", default=None, help="reuse the filter parts in this folder instead of building them")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="Bloom hash seed")
    parser.add_argument("--fp_queries", type=non_negative_int, default=1_000_000, help="random never-added keys queried for the empirical FP rate (paper: 1M)")
    parser.add_argument("--dirty_threshold", type=unit_fraction, default=0.0, help="an example is dirty when this share of its n-grams is found (0: any)")
    parser.add_argument("--max_doc_count", type=positive_int, default=None, help=f"ignore n-grams found in more training documents (GPT-3: {GPT3_MAX_DOC_COUNT})")
    parser.add_argument("--own_train", nargs="*", default=[], metavar="NAME=SPEC", help="a benchmark's own training split, for Table 6's first row")
    parser.add_argument("--corpus_name", default="training corpus", help="the corpus's name in the reports")
    add_engine_arguments(parser)


def add_decontaminate_arguments(parser: argparse.ArgumentParser) -> None:
    """``corpusforge decontaminate``'s options (``pipelines.audit.decontaminate``)."""
    add_common_arguments(parser)
    parser.add_argument("--mode", choices=("spans", "drop", "mask"), default="spans", help="GPT-3 spans (default), drop documents, or mask matches")
    parser.add_argument("--margin", type=non_negative_int, default=GPT3_MARGIN, help="characters removed either side of a match (GPT-3: 200)")
    parser.add_argument("--min_piece", type=non_negative_int, default=GPT3_MIN_PIECE, help="drop pieces shorter than this (GPT-3: 200)")
    parser.add_argument("--max_splits", type=positive_int, default=GPT3_MAX_SPLITS, help="drop documents split into more pieces (GPT-3: 10)")
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=["parquet"], help="output shard formats")
    parser.add_argument("--num_shards", type=positive_int, default=1, help="output shards")
    parser.add_argument("--name", default="decontaminated", help="output shard name")
    add_engine_arguments(parser)
