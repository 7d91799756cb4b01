"""C4's text dedup as a Beam transform, shared by the C4 and WebText recipes: line dedup
(``lines``) or the T5 paper's 3-sentence span dedup (``spans``), by a shuffle of keys only.
"""

from __future__ import annotations

import functools

import apache_beam as beam

from corpus import c4
from corpus.sentences import has_sentences, split_sentences
from corpus.urls import url_digest
from dedup.lines import page_line_keys, remove_duplicate_lines
from dedup.spans import page_span_keys, remove_duplicate_spans
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import step

DEDUPE_SPANS = "dedupe-spans"


def _split_lines(line: str) -> list[str]:
    return split_sentences(line) if line.strip() else []


def _apply_owned(item, *, mode: str, min_num_sentences: int):
    """(page, the keys it owns) -> verdict."""
    page, owned = item
    if mode == "lines":
        text, counts, dropped = remove_duplicate_lines(page.text, owned, min_num_sentences=min_num_sentences, has_sentences=has_sentences)
    else:
        text, counts, dropped = remove_duplicate_spans(page.text, owned, min_num_sentences=min_num_sentences,
                                                       split_line=_split_lines, has_sentences=has_sentences)
    if text is not None:
        page.text = text
    return c4.Verdict(page if text is not None else None, counts, dropped)


def _line_keys(page):
    return url_digest(page.url), page_line_keys(page.text)


def _span_keys(page):
    return url_digest(page.url), page_span_keys(page.text, _split_lines)


def _claims(staged):
    """A page's claim on each of its keys: (md5(url), staging reference); the smallest wins."""
    ref, (digest, keys) = staged
    claim = (digest, ref)
    return [(key, claim) for key in keys]


class DedupeText(beam.PTransform):
    """C4's line dedup (``lines``) or the T5 paper's 3-sentence span dedup (``spans``).

    Pages are staged under the output (``pipelines.staging``) as they pass; each page
    claims its keys with ``(md5(url), staging reference)``, each key goes to the smallest
    claim (a CombinePerKey, so combiners lift it before the shuffle: the smallest md5(url),
    and on an md5 collision of two URLs a fixed one of them), owned keys go back to their
    page's staging file, and every staged page is read back once with the keys it owns
    (none: all its lines are duplicates). No shuffle carries page text or URLs.
    """

    def __init__(self, mode: str = "lines", min_num_sentences: int = c4.MIN_NUM_SENTENCES, *, out_dir: str):
        super().__init__()
        self.mode, self.min_num_sentences, self.out_dir = mode, min_num_sentences, out_dir

    def expand(self, pages):
        label = f"dedupe-{self.mode}"
        staged = pages | "Stage pages" >> Stage(self.out_dir, label, _line_keys if self.mode == "lines" else _span_keys)
        owned = (
            staged.refs
            | "Claim keys" >> beam.FlatMap(_claims)
            | "Smallest md5(url) owns each key" >> beam.CombinePerKey(min)
            | "Owned key by staged page" >> beam.MapTuple(lambda key, owner: (owner[1], key))
        )
        namespace = c4.DEDUPE_LINES if self.mode == "lines" else DEDUPE_SPANS
        rule = functools.partial(_apply_owned, mode=self.mode, min_num_sentences=self.min_num_sentences)
        return (
            (owned, staged.files)
            | "Read pages back with owned keys" >> LoadStaged(self.out_dir, label, every=True)
            | step("Remove duplicates", namespace, rule)
        )
