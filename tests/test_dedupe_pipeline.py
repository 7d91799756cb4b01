"""pipelines.dedupe: line and span dedup on the real Beam DirectRunner, claims shuffled in
batches, against each key given to its smallest claim computed here at once."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from corpus import c4
from corpus.records import Document
from corpus.urls import url_digest
from corpus.warc import read_archive
from dedup.lines import keep_smallest_claims
from dedup.text import dedupe_rule
from pipelines import dedupe
from pipelines.dedupe import DedupeText, owned_keys_by_file

pytestmark = pytest.mark.pipeline  # runs Beam jobs: not in `make test-fast`


def real_pages(real_data) -> list[c4.C4Page]:
    """The real WET pages, and copies of some under other URLs (lines shared across pages)."""
    docs = [d for name in ("ccscalatools/filter_test_1.wet.gz", "whirlwind/whirlwind.warc.wet.gz")
            for d in read_archive(str(real_data / "warc" / name), text_mode="c4") if isinstance(d, Document)]
    pages = [c4.C4Page(d.url, d.text, d.timestamp) for d in docs]
    copies = [c4.C4Page(f"https://copy.example/{i}", p.text + "\nA line of its own. It has words. Three sentences here.", p.timestamp)
              for i, p in enumerate(pages[::3])]
    return pages + copies


def expected(pages, mode: str) -> list[tuple[str, str]]:
    """Each key owned by the page with the smallest md5(url), all claims taken at once."""
    claims, _, rule = dedupe_rule(mode, c4.MIN_NUM_SENTENCES)
    keys_of = {p.url: claims(p)[1] for p in pages}
    owner: dict = {}
    for p in pages:
        claim = (url_digest(p.url), p.url)
        for key in keys_of[p.url]:
            owner[key] = min(owner.get(key, claim), claim)
    decisions = [rule((p, [k for k in keys_of[p.url] if owner[k][1] == p.url])) for p in pages]
    return [(d.record.url, d.record.text) for d in decisions if d.record is not None]


@pytest.mark.parametrize("claims_per_batch", [5, dedupe.CLAIMS_PER_BATCH])
@pytest.mark.parametrize("mode", ["lines", "spans"])
def test_batched_claims_keep_what_the_smallest_claim_per_key_keeps(real_data, tmp_path, monkeypatch, mode, claims_per_batch):
    monkeypatch.setattr(dedupe, "CLAIMS_PER_BATCH", claims_per_batch)  # 5: a bundle sends batches many times over
    pages = real_pages(real_data)
    want = expected(pages, mode)
    assert 0 < len(want) < len(pages)  # some pages lose everything, some keep lines
    with beam.Pipeline() as pipeline:
        kept = (pipeline | beam.Create(pages) | DedupeText(mode, out_dir=str(tmp_path / "out")))
        assert_that(kept.pages | beam.Map(lambda page: (page.url, page.text)), equal_to(want))


def test_owned_keys_go_to_the_smallest_claim_grouped_by_staging_file():
    batches = [[(b"k1", (b"\x02", (7, 0))), (b"k2", (b"\x01", (8, 3)))],
               [(b"k1", (b"\x01", (9, 4))), (b"k3", (b"\x05", (7, 2)))],
               [(b"k2", (b"\x03", (7, 1)))]]
    owned = dict((file_id, sorted(items)) for file_id, items in owned_keys_by_file((0, batches)))
    assert owned == {9: [(4, b"k1")], 8: [(3, b"k2")], 7: [(2, b"k3")]}
    assert keep_smallest_claims({b"k": (b"\x00", (1, 1))}, [(b"k", (b"\x01", (0, 0)))]) == {b"k": (b"\x00", (1, 1))}
