"""C4's text dedup on Spark, shared by the C4 and WebText wirings as ``pipelines.dedupe``
is by their Beam twins: line dedup (``lines``) or the T5 paper's 3-sentence span dedup
(``spans``), the same rules (``dedup.text.dedupe_rule``: ``dedup.lines`` / ``dedup.spans``).

As in the Beam job, pages are staged under the output (``pipelines.spark.staging``); each
page claims its keys with ``(md5(url), staging reference)``, each key goes to the smallest
claim (per task first, then per bucket of keys after one shuffle of batches), and every
staged page is read back once with the keys it owns (none: all its lines are duplicates)
for the rule. No shuffle carries page text.
"""

from __future__ import annotations

from dedup.text import dedupe_rule
from pipelines.spark.staging import stage_with_owned_keys


def dedupe_text(job, pages, mode: str, min_num_sentences: int, punkt, out_dir: str):
    """``pages`` (an RDD of ``C4Page``) -> the pages the dedup rule passes on, counted in its
    namespace; ``punkt``: the job's shipped punkt model (``corpus.sentences.PunktModel``);
    staging files under ``out_dir``'s ``_temporary/``."""
    claims, namespace, rule = dedupe_rule(mode, min_num_sentences, punkt)
    with_owned = stage_with_owned_keys(job, pages, out_dir, f"dedupe-{mode}", claims, max(job.partitions, pages.getNumPartitions()))
    return job.step(with_owned, namespace, rule)
