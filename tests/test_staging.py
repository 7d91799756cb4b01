"""pipelines.staging: elements wait in files under the output while a shuffle decides on
small references, and come back exactly once (real Beam DirectRunner, local and memory://)."""

from __future__ import annotations

import apache_beam as beam
import pytest
import zstandard
from apache_beam.testing.util import assert_that, equal_to

from common import storage
from pipelines.staging import LoadStaged, Stage, StagingError, read_staged, stage_folder, staged_file, write_staged

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`

ROWS = [{"url": f"https://example.com/{i}", "text": "line\n" * (i % 7)} for i in range(40)]


def _url(row):
    return row["url"]


@pytest.fixture(params=["local", "memory"])
def out_dir(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "out")
        return
    folder = f"memory://staging-test-{tmp_path.name}/out"
    yield folder
    storage.delete([folder])


def test_only_referenced_elements_come_back_once_with_their_payload(out_dir):
    with beam.Pipeline() as pipeline:
        staged = pipeline | beam.Create(ROWS) | Stage(out_dir, "rows", _url, file_bytes=200)
        wanted = (staged.refs
                  | beam.Filter(lambda item: item[1].endswith(("3", "5")))
                  | beam.MapTuple(lambda ref, url: (ref, url.upper())))
        twice = wanted | "Twice" >> beam.FlatMap(lambda item: [item, (item[0], item[1].lower())])
        back = twice | LoadStaged(out_dir, "rows") | beam.MapTuple(lambda row, payloads: (row["url"], row["text"], sorted(payloads)))
        assert_that(back, equal_to([(r["url"], r["text"], sorted([r["url"].upper(), r["url"].lower()]))
                                    for r in ROWS if r["url"].endswith(("3", "5"))]))
        assert_that(staged.files | beam.combiners.Count.Globally(), lambda counts: _more_than_one_file(counts), label="rolls over")


def _more_than_one_file(counts):
    assert counts[0] > 1, "200-byte staging files should have rolled over"


def test_every_element_comes_back_with_no_payload_when_nobody_refers_to_it(out_dir):
    with beam.Pipeline() as pipeline:
        staged = pipeline | beam.Create(ROWS) | Stage(out_dir, "rows", _url, file_bytes=300)
        first = staged.refs | beam.Filter(lambda item: item[1].endswith("/0")) | beam.MapTuple(lambda ref, url: (ref, "kept"))
        back = (first, staged.files) | LoadStaged(out_dir, "rows", every=True) | beam.MapTuple(
            lambda row, payloads: (row["url"], tuple(payloads)))
        assert_that(back, equal_to([(r["url"], ("kept",) if r["url"].endswith("/0") else ()) for r in ROWS]))


def test_batched_references_come_back_as_single_ones_do(out_dir):
    """``batched=True``: references grouped per file, several lists per file, give each element
    the payloads the same references one by one give it."""
    with beam.Pipeline() as pipeline:
        staged = pipeline | beam.Create(ROWS) | Stage(out_dir, "rows", _url, file_bytes=300)
        refs = staged.refs | beam.Filter(lambda item: item[1][-1] in "1357") | beam.MapTuple(lambda ref, url: (ref, url[-2:]))
        batches = (refs
                   | beam.MapTuple(lambda ref, payload: ((ref[0], ref[1] % 2), (ref[1], payload)))  # two lists per file at most
                   | beam.GroupByKey()
                   | beam.MapTuple(lambda file_and_half, items: (file_and_half[0], list(items))))
        back = (batches, staged.files) | LoadStaged(out_dir, "rows", every=True, batched=True) | beam.MapTuple(
            lambda row, payloads: (row["url"], tuple(payloads)))
        assert_that(back, equal_to([(r["url"], (r["url"][-2:],) if r["url"][-1] in "1357" else ()) for r in ROWS]))


def test_a_staging_file_cut_short_is_an_error_naming_it(tmp_path):
    out = str(tmp_path / "out")
    with beam.Pipeline() as pipeline:
        _ = pipeline | beam.Create(ROWS) | Stage(out, "rows", _url)
    (name,) = storage.list_files(stage_folder(out, "rows"))
    path = storage.join(stage_folder(out, "rows"), storage.basename(name))
    assert [row for _, row in read_staged(path)] == ROWS

    raw = zstandard.ZstdDecompressor().decompress(storage.read_bytes(path), max_output_size=1 << 24)
    with storage.open_write(path) as stream:
        stream.write(zstandard.ZstdCompressor().compress(raw[:-10]))
    with pytest.raises(StagingError, match=r"rows/.*record 39 is cut short"):
        list(read_staged(path))


def test_write_staged_commits_every_element_or_nothing(out_dir):
    path = staged_file(stage_folder(out_dir, "rows"), 7)
    write_staged(path, ROWS)
    assert [row for _, row in read_staged(path)] == ROWS

    def failing():
        yield from ROWS[:3]
        raise ValueError("the producer failed")

    broken = staged_file(stage_folder(out_dir, "rows"), 8)
    with pytest.raises(ValueError, match="the producer failed"):
        write_staged(broken, failing())
    assert not storage.exists(broken)
    assert [storage.basename(f) for f in storage.list_files(stage_folder(out_dir, "rows"))] == [storage.basename(path)]  # no partial file
