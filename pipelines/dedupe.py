"""C4's text dedup as a Beam transform, shared by the C4 and WebText recipes: line dedup
(``lines``) or the T5 paper's 3-sentence span dedup (``spans``), by a shuffle of keys only.
The rules (keys, claims, what a page keeps) are ``dedup.lines`` and ``dedup.spans``, by mode
``dedup.text.dedupe_rule``.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from corpus import c4
from dedup.lines import (  # noqa: F401  (owned_keys_by_file: the tests import it from here)
    CLAIM_BUCKETS,
    CLAIMS_PER_BATCH,
    claim_batches,
    keep_smallest_claims,
    key_claims,
    owned_keys_by_file,
)
from dedup.text import dedupe_rule
from pipelines.staging import LoadStaged, Stage
from pipelines.steps import step


class _SmallestClaimsFn(beam.DoFn):
    """Staged pages' claims (``key_claims``) -> ``(bucket, [(key, smallest claim), ...])``:
    each bundle keeps the smallest claim it saw per key (``keep_smallest_claims``) and sends
    them on in one batch per bucket when it holds ``CLAIMS_PER_BATCH`` keys and at its end,
    so the shuffle moves a few hundred lists instead of one element per line claim."""

    def start_bundle(self):
        self.best = {}

    def process(self, staged):
        keep_smallest_claims(self.best, key_claims(staged))
        if len(self.best) >= CLAIMS_PER_BATCH:
            yield from self._batches()

    def finish_bundle(self):
        for batch in self._batches():
            yield WindowedValue(batch, MIN_TIMESTAMP, [GlobalWindow()])

    def _batches(self):
        batches = claim_batches(self.best, CLAIM_BUCKETS)
        self.best = {}
        return batches


class DedupeText(beam.PTransform):
    """C4's line dedup (``lines``) or the T5 paper's 3-sentence span dedup (``spans``).

    Pages are staged under the output (``pipelines.staging``) as they pass; each page
    claims its keys with ``(md5(url), staging reference)``, each key goes to the smallest
    claim (per bundle first, then per bucket of keys after one shuffle of batches), owned
    keys go back to their page's staging file in one list per file and bucket, and every
    staged page is read back once with the keys it owns (none: all its lines are
    duplicates). No shuffle carries page text or URLs.
    """

    def __init__(self, mode: str = "lines", min_num_sentences: int = c4.MIN_NUM_SENTENCES, *, out_dir: str, punkt=None):
        super().__init__()
        self.mode, self.min_num_sentences, self.out_dir, self.punkt = mode, min_num_sentences, out_dir, punkt

    def expand(self, pages):
        label = f"dedupe-{self.mode}"
        claims, namespace, rule = dedupe_rule(self.mode, self.min_num_sentences, self.punkt)
        staged = pages | "Stage pages" >> Stage(self.out_dir, label, claims)
        owned = (
            staged.refs
            | "Smallest claims per bundle" >> beam.ParDo(_SmallestClaimsFn())
            | "Batches by key bucket" >> beam.GroupByKey()
            | "Owned keys by staged file" >> beam.FlatMap(owned_keys_by_file)
        )
        return (
            (owned, staged.files)
            | "Read pages back with owned keys" >> LoadStaged(self.out_dir, label, every=True, batched=True)
            | step("Remove duplicates", namespace, rule)
        )
