"""``corpusforge demo``: the bundled sample crawl through every job that exists, offline.

1. generate the sample crawl (WET, WARC, manifests, a Pushshift-style dump), seeded;
2. inspect every crawl file (records by type, MIME, language header, errors);
3. read the WET files listed in the manifest into C4-style JSON and Parquet shards with
   the Beam DirectRunner (errors output and _stats.json included);
4. build C4 (``en``, the reference's line dedup) from the WET manifest with Beam:
   ``c4-train``/``c4-validation`` JSON and Parquet shards (``c4json/``, ``parquet/``), _stats.json, the summary table;
   then the same job into ``memory://`` and on the native Spark engine (``local[2]``, when
   pyspark is installed), each checked byte-identical to the first;
5. build WebText from the sample's Pushshift dump (.zst) joined against the sample WARC
   files (the offline, reproducible way): link table, WARC text through newspaper3k +
   trafilatura, cleaning, exact and MinHash near-duplicate dedup, shards with metadata;
6. audit the C4 corpus against the sample's benchmark (passages of pages C4 kept, and of
   pages it dropped): 8-gram Bloom filter at 1e-8 and the exact index, compared; JSON,
   Markdown and HTML reports; then decontaminate the corpus against it;
7. tokenize the C4 corpus with Beam: train a small byte-level BPE vocabulary on it and
   write llm.c token shards (train/val);
8. train a tiny GPT-2 on those shards for a few steps on the CPU (checkpoint, metrics,
   loss curve, Hugging Face export) and sample a few tokens from it;
9. fine-tune it with GPT-1's input transformations on a small two-topic sentence task
   (a few steps; every metric on all / clean / dirty evaluation sentences, checked against
   the C4 corpus), with a Hugging Face sequence-classification export;
10. evaluate it on the sample benchmark and on small samples of two of GPT-2's generative
   tasks (CoQA, NQ; built from the benchmark's passages in the tasks' real layouts), every
   metric reported on all / clean / dirty examples, dirty meaning 8-gram overlap found by
   the audit of step 6 (JSON, Markdown, HTML report);
11. corpus statistics of the C4 shards and a document-length histogram (PNG).
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="demo-out", help="output folder (default demo-out)")
    parser.add_argument("--seed", type=int, default=0, help="sample crawl seed (default 0)")
    parser.add_argument("--pages", type=int, default=300, help="pages in the sample crawl (default 300)")
