"""Read WARC/WET files into document shards, unfiltered: the first step of every recipe.

    corpusforge read --input 'crawl/*.wet.gz' --output out/ --format c4json parquet --num_shards 8 \
        [--text_mode c4] [any Beam option, e.g. --runner DataflowRunner --setup_file ./beam_setup.py]

WET ``conversion`` records become documents (``text``, ``url``, ``timestamp`` and ``meta``
with language header and provenance). WARC HTML responses are counted here; turning HTML
into text belongs to the recipes that choose an extractor. Bad input goes to
``_errors/errors.jsonl``; all counters and up to 5 example errors per reason go to
``_stats.json``.
"""

from __future__ import annotations

import argparse

from corpus.inputs import COMMON_CRAWL_BASE_URL
from corpus.shards import FORMATS
from corpus.warc import TEXT_MODES
from pipelines.engines import add_engine_arguments
from pipelines.options import add_manifest_path_argument, add_max_record_bytes, add_overwrite_argument, positive_int

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", nargs="+", required=True, help="WARC/WET files, globs, folders, *.paths.gz manifests or URLs")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=["c4json"], help="shard format(s), e.g. c4json parquet (default c4json)")
    add_max_record_bytes(parser)
    parser.add_argument("--num_shards", type=positive_int, default=1, help="number of output shards (default 1)")
    parser.add_argument("--name", default="docs", help="shard name prefix (default docs)")
    parser.add_argument("--split", default="train", help="split name in shard file names (default train)")
    parser.add_argument("--text_mode", choices=TEXT_MODES, default="faithful", help="WET text as written, or with the C4 reference's quirks")
    parser.add_argument("--base_url", default=COMMON_CRAWL_BASE_URL, help="base URL (or folder) for manifest paths")
    add_manifest_path_argument(parser)
    parser.add_argument("--max_files", type=positive_int, default=None, help="read only the first N files")
    add_engine_arguments(parser)
