"""C4's text dedup as a Beam transform, shared by the C4 and WebText recipes: line dedup
(``lines``) or the T5 paper's 3-sentence span dedup (``spans``), by a shuffle of keys only.
The rules (keys, claims, what a page keeps) are ``dedup.lines`` and ``dedup.spans``.
"""

from __future__ import annotations

import functools

import apache_beam as beam

from corpus import c4
from corpus.sentences import has_sentences
from dedup.lines import key_claims, line_claims, remove_duplicate_lines
from dedup.spans import remove_duplicate_spans, span_claims, split_line
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import step

DEDUPE_SPANS = "dedupe-spans"


def dedupe_rule(mode: str, min_num_sentences: int):
    """``(claims, namespace, rule)`` of a dedup mode, for every engine: ``claims(page)`` is
    (md5(url), the page's keys), ``rule((page, owned keys))`` the Decision on the page."""
    if mode == "lines":
        return line_claims, c4.DEDUPE_LINES, functools.partial(remove_duplicate_lines, min_num_sentences=min_num_sentences, has_sentences=has_sentences)
    return span_claims, DEDUPE_SPANS, functools.partial(remove_duplicate_spans, min_num_sentences=min_num_sentences, split_line=split_line,
                                                        has_sentences=has_sentences)


class DedupeText(beam.PTransform):
    """C4's line dedup (``lines``) or the T5 paper's 3-sentence span dedup (``spans``).

    Pages are staged under the output (``pipelines.staging``) as they pass; each page
    claims its keys with ``(md5(url), staging reference)``, each key goes to the smallest
    claim (a CombinePerKey, so combiners lift it before the shuffle), owned keys go back
    to their page's staging file, and every staged page is read back once with the keys
    it owns (none: all its lines are duplicates). No shuffle carries page text or URLs.
    """

    def __init__(self, mode: str = "lines", min_num_sentences: int = c4.MIN_NUM_SENTENCES, *, out_dir: str):
        super().__init__()
        self.mode, self.min_num_sentences, self.out_dir = mode, min_num_sentences, out_dir

    def expand(self, pages):
        label = f"dedupe-{self.mode}"
        claims, namespace, rule = dedupe_rule(self.mode, self.min_num_sentences)
        staged = pages | "Stage pages" >> Stage(self.out_dir, label, claims)
        owned = (
            staged.refs
            | "Claim keys" >> beam.FlatMap(key_claims)
            | "Smallest md5(url) owns each key" >> beam.CombinePerKey(min)
            | "Owned key by staged page" >> beam.MapTuple(lambda key, owner: (owner[1], key))
        )
        return (
            (owned, staged.files)
            | "Read pages back with owned keys" >> LoadStaged(self.out_dir, label, every=True)
            | step("Remove duplicates", namespace, rule)
        )
