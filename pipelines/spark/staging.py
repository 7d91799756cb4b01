"""Page text out of Spark's shuffles, as in the Beam job (``pipelines.staging``): a task
writes its elements to staging files under the output (``pipelines.staged_files``) and
passes on ``(ref, light(element))``; the shuffles move the light part and the references;
a later task reads each surviving element back from its file once.

Moving whole pages through ``combineByKey`` and ``cogroup`` pickled every page on each
side of every shuffle and of the cache between them, and made the JVM carry the text:
most of the Spark job's cost beyond the rules (``benchmarks/engines.py --breakdown``).

Retries: file ids are drawn per task attempt, so a retried or speculative attempt writes
new files; only a successful attempt's shuffle output (which holds its references) is ever
read, and a file is committed before its task's output is complete. A lost executor's
outputs are recomputed into new files; the old ones, on shared storage, stay readable
until the job commits and ``_temporary/`` goes.
"""

from __future__ import annotations

from dedup.lines import (
    CLAIM_BUCKETS,
    CLAIMS_PER_BATCH,
    claim_batches,
    keep_smallest_claims,
    key_claims,
    owned_keys_by_file,
)
from pipelines.spark.engine import on_worker
from pipelines.staged_files import Stager, load_file, stage_folder, staged_file

FILES_KEY = -1  # the claim batches' key for the staged file ids (buckets are 0 .. CLAIM_BUCKETS - 1)


def _stager_over(folder: str, light, beam_args):
    def run(elements):
        on_worker(beam_args)
        stager = Stager(folder, light)
        try:
            for element in elements:
                yield stager.stage(element)
        except BaseException:  # a failing (or abandoned) task leaves nothing that anything refers to
            stager.discard()
            raise
        stager.close()
    return run


def stage(job, rdd, out_dir: str, label: str, light):
    """``rdd``'s elements staged under ``out_dir`` -> an RDD of ``(ref, light(element))``."""
    return rdd.mapPartitions(_stager_over(stage_folder(out_dir, label), light, job.beam_args))


def _loader(folder: str, every: bool, beam_args):
    def run(groups):
        on_worker(beam_args)
        for file_id, batches in groups:
            wanted: dict[int, list] = {}
            for batch in batches:
                for index, payload in batch:
                    wanted.setdefault(index, []).append(payload)
            yield from load_file(staged_file(folder, file_id), wanted, every)
    return run


def load(job, refs, out_dir: str, label: str, partitions: int):
    """``((file id, index), payload)`` pairs -> ``(element, [payloads])`` for every element
    referred to, each staging file read once, in ``partitions`` tasks."""
    by_file = refs.map(lambda ref_payload: (ref_payload[0][0], ((ref_payload[0][1], ref_payload[1]),))).groupByKey(partitions)
    return by_file.mapPartitions(_loader(stage_folder(out_dir, label), False, job.beam_args))


def _claims_over(folder: str, claims, beam_args):
    """Pages staged, their claims (``key_claims``) folded to the smallest per key in the task
    (``keep_smallest_claims``) and sent as ``(bucket, batch)``; then ``(FILES_KEY, file id)``
    for every file the task staged."""
    def run(pages):
        on_worker(beam_args)
        stager, best = Stager(folder, claims), {}
        try:
            for page in pages:
                keep_smallest_claims(best, key_claims(stager.stage(page)))
                if len(best) >= CLAIMS_PER_BATCH:
                    yield from claim_batches(best, CLAIM_BUCKETS)
                    best = {}
        except BaseException:
            stager.discard()
            raise
        stager.close()
        yield from claim_batches(best, CLAIM_BUCKETS)
        for file_id in stager.file_ids:
            yield FILES_KEY, file_id
    return run


def _owned_by_file(bucket_values):
    bucket, values = bucket_values
    if bucket == FILES_KEY:
        return [(file_id, ()) for file_id in values]  # every staged file, read back whatever it owns
    return owned_keys_by_file((bucket, values))


def stage_with_owned_keys(job, pages, out_dir: str, label: str, claims, partitions: int):
    """Pages -> ``(page, [keys it owns])`` for every page: each page staged with its claims
    (``claims(page) -> (md5(url), keys)``), each key given to its smallest claim after one
    shuffle of batches, the owned keys sent back to their page's staging file."""
    folder = stage_folder(out_dir, label)
    owned = (pages.mapPartitions(_claims_over(folder, claims, job.beam_args))
             .groupByKey(partitions)
             .flatMap(_owned_by_file)
             .groupByKey(partitions))
    return owned.mapPartitions(_loader(folder, True, job.beam_args))
