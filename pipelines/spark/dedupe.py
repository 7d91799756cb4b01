"""C4's text dedup on Spark, shared by the C4 and WebText wirings as ``pipelines.dedupe``
is by their Beam twins: line dedup (``lines``) or the T5 paper's 3-sentence span dedup
(``spans``), the same rules (``dedup.text.dedupe_rule``: ``dedup.lines`` / ``dedup.spans``).

Pages are numbered (``zipWithUniqueId``) and stored once (``SparkJob.once``); each page
claims its keys with ``(md5(url), its number)``, ``reduceByKey(min)`` gives each key to
the smallest claim, and ``cogroup`` brings every page back with the keys it owns (none:
all its lines are duplicates) to the rule.
"""

from __future__ import annotations

from dedup.lines import key_claims
from dedup.text import dedupe_rule


def dedupe_text(job, pages, mode: str, min_num_sentences: int, punkt=None):
    """``pages`` (an RDD of ``C4Page``) -> the pages the dedup rule passes on, counted in its
    namespace; ``punkt``: the job's shipped punkt model (``corpus.sentences.PunktModel``)."""
    claims, namespace, rule = dedupe_rule(mode, min_num_sentences, punkt)
    numbered = job.once(pages.zipWithUniqueId().map(lambda page_id: (page_id[1], page_id[0])))
    owned = (numbered
             .flatMap(lambda id_page: key_claims((id_page[0], claims(id_page[1]))))
             .reduceByKey(min, job.partitions)
             .map(lambda key_owner: (key_owner[1][1], key_owner[0])))
    joined = numbered.cogroup(owned, job.partitions).map(lambda kv: (next(iter(kv[1][0])), list(kv[1][1])))
    return job.step(joined, namespace, rule)
