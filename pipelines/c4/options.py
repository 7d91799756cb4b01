"""The C4 pipeline: Common Crawl WET (or WARC) -> c4/en and its variants, as Apache Beam.

    corpusforge c4 --crawl CC-MAIN-2019-18 --max_files 10 --output c4-out/
        [--variant en|en.noclean|en.noblocklist|realnewslike|webtextlike] [--dedup lines|spans]
        [--format c4json parquet] [--num_shards 1024] [any Beam option]

The steps, in the reference's order (TFDS ``c4`` 3.1.0; spec ``c4.md``); every rule is
a pure function in ``corpus.c4`` / ``dedup/``, every count a Beam counter named as the
reference names it, every dedup a shuffle (``CombinePerKey``/``CoGroupByKey``) of keys
only: the pages wait in staging files under the output (``pipelines.staging``) and are
read back once the shuffle has decided, so memory and shuffled bytes do not carry text:

    read WET pages  ->  length  ->  [RealNews domains]  ->  URL dedup (newest wins)
    ->  [WebText-like URL join]  ->  clean_page  ->  line (or 3-sentence span) dedup
    ->  langdetect en >= 0.99  ->  bad words  ->  md5(url) % 1000 split  ->  shards
"""

from __future__ import annotations

import argparse

from corpus import c4
from corpus.inputs import COMMON_CRAWL_BASE_URL
from corpus.shards import FORMATS
from pipelines.engines import add_engine_arguments
from pipelines.options import (
    add_manifest_path_argument,
    add_max_record_bytes,
    add_overwrite_argument,
    positive_float,
    positive_int,
)

EXTRA_OPTIONS = "beam"  # pipelines.cli: what is not this job's option is a Beam pipeline option
DEDUP_MODES = ("lines", "spans")
INPUT_KINDS = ("auto", "wet", "warc")
LANGDETECT_IMPLEMENTATIONS = ("fast", "reference")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()  # one is required, but webtextlike has a default (check_source)
    source.add_argument("--input", nargs="+", help="WET/WARC files, globs, folders, *.paths.gz manifests or URLs")
    source.add_argument("--crawl", nargs="+", help=f"Common Crawl crawl id(s), e.g. {c4.DEFAULT_CRAWL}: expands to its wet.paths.gz "
                                                   f"(webtextlike without --input: the reference's {len(c4.OPENWEBTEXT_CRAWLS)} crawls, "
                                                   f"{c4.OPENWEBTEXT_CRAWLS[-1]} to {c4.OPENWEBTEXT_CRAWLS[1]})")
    parser.add_argument("--output", required=True, help="output folder")
    add_overwrite_argument(parser)
    parser.add_argument("--variant", choices=sorted(c4.VARIANTS), default="en", help="C4 variant (default en)")
    parser.add_argument("--dedup", choices=DEDUP_MODES, default="lines", help="lines: the reference's line dedup (default); spans: the T5 paper's 3-sentence spans")
    parser.add_argument("--input_kind", choices=INPUT_KINDS, default="auto", help="wet, warc (trafilatura main text), or auto by file name")
    parser.add_argument("--crawl_files", choices=("wet", "warc"), default="wet", help="with --crawl: read the crawl's WET (default) or WARC files")
    parser.add_argument("--max_files", "--max-files", type=positive_int, default=None, help="read only the first N files")
    parser.add_argument("--base_url", default=COMMON_CRAWL_BASE_URL, help="Common Crawl's host or a mirror (URL or folder): where --crawl manifests and manifest paths are found")
    add_manifest_path_argument(parser)
    parser.add_argument("--format", nargs="+", choices=FORMATS, default=["c4json", "parquet"], help="shard format(s) (default c4json parquet)")
    parser.add_argument("--num_shards", type=positive_int, default=1, help="train shards (released c4/en: 1024)")
    parser.add_argument("--num_validation_shards", type=positive_int, default=1, help="validation shards (released c4/en: 8)")
    parser.add_argument("--badwords", default=c4.BADWORDS_URL, help="bad-words list, file or URL (default: the LDNOOBW en list at C4's pinned commit, downloaded once into ~/.cache/corpusforge, then used offline)")
    parser.add_argument("--realnews_domains", default=c4.REALNEWS_DOMAINS_URL, help="realnewslike: allowed domains (Grover JSON or one per line), file or URL")
    parser.add_argument("--webtext_urls", default=None, help="webtextlike: URL list file(s) (glob), one URL a line")
    parser.add_argument("--langdetect", choices=LANGDETECT_IMPLEMENTATIONS, default="fast", help="fast: exact reimplementation (default); reference: langdetect itself")
    parser.add_argument("--extract_timeout", type=positive_float, default=10.0, help="WARC input: seconds allowed per page for trafilatura")
    add_max_record_bytes(parser)
    add_engine_arguments(parser)
