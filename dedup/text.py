"""C4's text dedup by mode, for every engine: ``dedupe_rule(mode, floor)`` gives the claims a
page makes and the rule that decides on it, line dedup (``lines``: ``dedup.lines``) or the T5
paper's 3-sentence span dedup (``spans``: ``dedup.spans``). Beam wires it in
``pipelines.dedupe``, Spark in ``pipelines.spark.dedupe``. Tests: ``tests/test_dedupe_pipeline.py``.
"""

from __future__ import annotations

import functools

from corpus import c4
from corpus.sentences import has_sentences
from dedup.lines import line_claims, remove_duplicate_lines
from dedup.spans import remove_duplicate_spans, span_claims, split_line

DEDUPE_SPANS = "dedupe-spans"  # span dedup's counter namespace (line dedup's is ``c4.DEDUPE_LINES``, as TFDS names it)


def dedupe_rule(mode: str, min_num_sentences: int, punkt=None):
    """``(claims, namespace, rule)`` of a dedup mode, for every engine: ``claims(page)`` is
    (md5(url), the page's keys), ``rule((page, owned keys))`` the Decision on the page.
    ``punkt``: the job's shipped punkt model (``corpus.sentences.PunktModel``), bound into
    both so that a worker splits with it; ``None``: this process's punkt."""
    sentences_in = punkt.has_sentences if punkt is not None else has_sentences
    if mode == "lines":
        return line_claims, c4.DEDUPE_LINES, functools.partial(remove_duplicate_lines, min_num_sentences=min_num_sentences, has_sentences=sentences_in)
    line_splitter = split_line if punkt is None else functools.partial(split_line, split_sentences=punkt.split_sentences)
    claims = span_claims if punkt is None else functools.partial(span_claims, split_line=line_splitter)
    return claims, DEDUPE_SPANS, functools.partial(remove_duplicate_spans, min_num_sentences=min_num_sentences, split_line=line_splitter,
                                                   has_sentences=sentences_in)
