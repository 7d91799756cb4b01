"""WebText's link stage in bounded memory (``pipelines.webtext.job.MergeLinks``): sorted runs
of submissions spilled by URL key and merged give exactly the links, counters and link
table bytes of the in-memory reference (``corpus.reddit.select_links`` + ``write_link_table``)."""

from __future__ import annotations

import json
import pickle
import random
from collections import Counter
from types import SimpleNamespace

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from corpus.records import HtmlPage
from corpus.reddit import LinkFilter, filter_submission, read_link_table, select_links, write_link_table
from corpus.shards import shard_index
from corpus.urls import url_key
from corpus.webtext import capture_of_link
from pipelines import staging
from pipelines.jobs import counters_of
from pipelines.steps import Steps
from pipelines.webtext import job as webtext_pipeline

pytestmark = pytest.mark.pipeline  # runs Beam jobs: not in `make test-fast`


def generated_dump(count: int, seed: int) -> list[str]:
    """Pushshift-shaped lines over ~count/5 pages: respelled URLs (scheme, www, tracking, slash),
    the same post read twice with another score, posts without id, scores around the cut
    (2 and 3), self posts, Reddit media, over_18 and malformed lines."""
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        page = rng.randrange(count // 5)
        url = f"https://site{page % 37}.example.com/story/{page}"
        url = rng.choice([url, url.replace("https://", "http://"), url.replace("https://", "https://www."),
                          url + "?utm_source=reddit", url + "/"])
        record = {"id": f"p{n}" if rng.random() > 0.05 else None, "url": url, "score": rng.choice([0, 1, 2, 2, 3, 3, 4, 7, 120]),
                  "created_utc": 1_500_000_000 + rng.randrange(10**7), "subreddit": rng.choice(["news", "science", "books"]),
                  "over_18": rng.random() < 0.02, "title": f"Post {n}", "num_comments": rng.randrange(50)}
        roll = rng.random()
        if roll < 0.05:
            record.update(url=f"https://www.reddit.com/r/news/comments/p{n}/", is_self=True, domain="self.news")
        elif roll < 0.08:
            record["url"] = f"https://i.redd.it/p{n}.jpg"
        line = json.dumps(record)
        if roll > 0.995:
            line = line[:-10]  # cut: malformed_json
        lines.append(line)
        if roll <= 0.995 and rng.random() < 0.04:  # the same post in an overlapping dump, rescored
            lines.append(json.dumps({**record, "score": rng.choice([1, 2, 3, 5])}))
    rng.shuffle(lines)
    return lines


def test_generated_dump_has_the_edge_cases_the_merge_must_get_right():
    lines = generated_dump(3000, seed=7)
    kept, counts = select_links(lines, LinkFilter())
    assert counts["malformed_json"] > 0 and counts["self_post"] > 0 and counts["reddit_internal"] > 0 and counts["low_score"] > 0
    assert any(link.num_submissions > 1 and len(link.submission_urls) > 1 for link in kept)  # respelled URLs merged
    assert any(link.max_score == 3 for link in kept)  # exactly at the cut: kept
    assert len({json.loads(line)["id"] for line in lines if line.endswith("}")}) < len(lines)  # repeated ids


@pytest.mark.parametrize("score_mode,num_shards", [("max", 1), ("max", 3), ("sum", 2)])
def test_spilled_runs_give_the_in_memory_links_counters_and_table_bytes(tmp_path, score_mode, num_shards):
    lines = generated_dump(3000, seed=11)
    filt = LinkFilter(score_mode=score_mode)
    kept, counts = select_links(lines, filt)
    out = tmp_path / "out"
    pipeline = beam.Pipeline()
    run_step = Steps()
    subs = run_step(pipeline | beam.Create(lines), "Filter submissions", webtext_pipeline.SUBMISSIONS,
                    lambda line: filter_submission(line, filt))
    merged = subs | webtext_pipeline.MergeLinks(str(out), num_shards, filt, run_bytes=8 << 10)  # many small runs
    run_step.add(merged.examples)
    assert_that(merged.links, equal_to(kept))  # the very Link records, every field
    result = pipeline.run()
    result.wait_until_finish()

    counters = counters_of(result)
    expected_karma = {name: counts[name] for name in ("low_score",) if counts[name]}
    assert counters[webtext_pipeline.LINK_KARMA] == {"passed": counts["kept_links"], **expected_karma}
    assert counters[webtext_pipeline.SUBMISSIONS]["passed"] == counts["kept_submissions"]
    runs = list((out / "_temporary" / "stage" / webtext_pipeline.LINK_RUNS).iterdir())
    assert len(runs) > 3 * num_shards  # the stage really spilled and merged several runs per shard
    for index in range(num_shards):
        name = f"links-{index:05d}-of-{num_shards:05d}.parquet"
        write_link_table([link for link in kept if shard_index(link.key, num_shards) == index], tmp_path / f"ref-{name}")
        assert (out / "links" / name).read_bytes() == (tmp_path / f"ref-{name}").read_bytes()



def test_link_tables_streamed_in_small_row_groups_hold_the_in_memory_rows(tmp_path):
    lines = generated_dump(2000, seed=13)
    filt = LinkFilter()
    kept, _ = select_links(lines, filt)
    out = tmp_path / "out"
    pipeline = beam.Pipeline()
    subs = pipeline | beam.Create(lines) | beam.Map(lambda line: filter_submission(line, filt)) | beam.FlatMap(
        lambda decision: [decision.record] if decision.record is not None else [])
    merged = subs | webtext_pipeline.MergeLinks(str(out), 2, filt, run_bytes=8 << 10, table_rows=16)
    assert_that(merged.links, equal_to(kept))
    pipeline.run().wait_until_finish()
    for index in range(2):
        path = out / "links" / f"links-{index:05d}-of-00002.parquet"
        shard = [link for link in kept if shard_index(link.key, 2) == index]
        assert pq.ParquetFile(path).metadata.num_row_groups == -(-len(shard) // 16) > 2
        assert read_link_table(path) == shard  # the same links, in the same (key) order


def test_a_merge_wider_than_its_fan_in_merges_in_passes(tmp_path):
    lines = generated_dump(1200, seed=3)
    filt = LinkFilter()
    subs = [d.record for d in map(lambda line: filter_submission(line, filt), lines) if d.kept]
    folder = str(tmp_path / "runs")
    paths = []
    for start in range(0, len(subs), 40):  # 20+ sorted runs
        path = staging.staged_file(folder, staging.new_file_id())
        writer = staging.StagedWriter(path)
        for item in sorted(((url_key(sub.url), sub) for sub in subs[start:start + 40]), key=lambda item: item[0]):
            writer.write(item)
        writer.commit()
        paths.append(path)
    merged = list(webtext_pipeline.merged_runs(paths, folder, fan_in=3))
    expected: dict[str, list] = {}
    for sub in subs:
        expected.setdefault(url_key(sub.url), []).append(sub)
    assert [key for key, _ in merged] == sorted(expected)
    assert all(sorted(group, key=repr) == sorted(expected[key], key=repr) for key, group in merged)
    assert len(list((tmp_path / "runs").iterdir())) > len(paths)  # intermediate runs were written


def test_the_webtext_job_writes_the_reference_link_table_and_counts(real_data, tmp_path):
    lines = generated_dump(2500, seed=5)
    dump = tmp_path / "RS_2017-06.ndjson"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    stats = webtext_pipeline.run(["--submissions", str(dump), "--pages", "crawl", "--warc", str(real_data / "warc/warcio/example.warc.gz"),
                                  "--output", str(out), "--num_link_shards", "2"])
    kept, counts = select_links(lines, LinkFilter())
    counters = stats["counters"]
    submissions = {name: n for name, n in counts.items() if name not in ("lines", "kept_submissions", "links", "kept_links", "low_score")}
    assert counters[webtext_pipeline.SUBMISSIONS] == {"passed": counts["kept_submissions"], **submissions}
    assert counters[webtext_pipeline.LINK_KARMA] == {"passed": counts["kept_links"], "low_score": counts["low_score"]}
    assert counters[webtext_pipeline.CRAWL_JOIN]["no_capture"] == len(kept)
    for index in range(2):
        name = f"links-{index:05d}-of-00002.parquet"
        write_link_table([link for link in kept if shard_index(link.key, 2) == index], tmp_path / name)
        assert (out / "links" / name).read_bytes() == (tmp_path / name).read_bytes()


# --- the page stage reads the kept links by reference ------------------------------------------
def _page(url: str, timestamp: str, status: int = 200, offset: int = 0, source: str = "crawl-0.warc.gz") -> HtmlPage:
    return HtmlPage(url=url, timestamp=timestamp, status=status, headers={}, html=f"<p>{url} {timestamp}</p>" + "x" * 300,
                    charset="utf-8", source=source, offset=offset)


def crawl_of(kept: list, seed: int) -> list[HtmlPage]:
    """Captures of about half the kept links (some several times, some not with status 200,
    respelled URLs) and pages no link asked for."""
    rng = random.Random(seed)
    pages = []
    for n, link in enumerate(kept):
        if rng.random() < 0.5:
            for capture in range(rng.choice([1, 1, 2, 3])):
                url = rng.choice(link.submission_urls)
                pages.append(_page(url, f"2019-04-{10 + rng.randrange(9):02d}T10:00:00Z", rng.choice([200, 200, 200, 404, 301]),
                                   offset=1000 * n + capture, source=f"crawl-{capture}.warc.gz"))
    pages += [_page(f"https://unlinked{n}.example.org/page", "2019-04-12T10:00:00Z", offset=n) for n in range(200)]
    rng.shuffle(pages)
    return pages


def in_memory_join(kept: list, pages: list[HtmlPage]) -> tuple[list, Counter]:
    """The former CoGroupByKey of links and pages on URL key, applied with capture_of_link."""
    groups: dict[str, dict[str, list]] = {}
    for link in kept:
        groups.setdefault(link.key, {"links": [], "pages": []})["links"].append(link)
    for page in pages:
        groups.setdefault(url_key(page.url), {"links": [], "pages": []})["pages"].append(page)
    records, counts = [], Counter()
    for key, group in groups.items():
        decision = capture_of_link(key, group)
        counts.update(dict(decision.counts))
        if decision.record is not None:
            records.append(decision.record)
    return records, counts


@pytest.mark.parametrize("num_shards", [1, 3])
def test_the_crawl_join_by_reference_equals_the_in_memory_join_with_many_small_runs(tmp_path, num_shards):
    # Links and pages far larger than a run (4 KiB): the join only ever holds one key's captures.
    lines = generated_dump(3000, seed=13)
    filt = LinkFilter()
    kept, _ = select_links(lines, filt)
    pages = crawl_of(kept, seed=2)
    expected, expected_counts = in_memory_join(kept, pages)
    assert expected_counts["matched"] > 50 and expected_counts["no_capture"] > 50
    out = tmp_path / "out"
    pipeline = beam.Pipeline()
    run_step = Steps()
    subs = run_step(pipeline | "Lines" >> beam.Create(lines), "Filter submissions", webtext_pipeline.SUBMISSIONS,
                    lambda line: filter_submission(line, filt))
    merged = subs | webtext_pipeline.MergeLinks(str(out), num_shards, filt, run_bytes=8 << 10, page_shard=lambda _link, shard: shard)
    run_step.add(merged.examples)
    joined = (merged.links, pipeline | "Pages" >> beam.Create(pages)) | webtext_pipeline.JoinCrawl(str(out), num_shards, run_bytes=4 << 10)
    run_step.add(joined.examples)
    assert_that(joined.pages, equal_to(expected))  # the very (link, capture) pairs
    result = pipeline.run()
    result.wait_until_finish()

    assert counters_of(result)[webtext_pipeline.CRAWL_JOIN] == dict(expected_counts)
    stage = out / "_temporary" / "stage"
    page_runs = list((stage / webtext_pipeline.CRAWL_PAGE_RUNS).iterdir())
    captured = sum(len(pickle.dumps(p)) for p in pages if p.status == 200)
    assert len(page_runs) >= captured // (4 << 10)  # pages spilled in many runs, never held together
    kept_files = list((stage / webtext_pipeline.KEPT_LINKS).iterdir())
    assert 1 <= len(kept_files) <= num_shards
    staged_links = [link for path in kept_files for _, link in staging.read_staged(str(path))]
    assert sorted(staged_links, key=lambda link: link.key) == kept  # each kept link staged once


def test_kept_links_are_read_back_in_key_order_across_files(tmp_path):
    kept, _ = select_links(generated_dump(1500, seed=17), LinkFilter())
    out = str(tmp_path / "out")
    writers = webtext_pipeline._KeptLinkWriters(out)
    for n, link in enumerate(kept):  # in key order, spread over three page shards
        writers.write(n % 3, link)
    refs = writers.commit()
    assert [shard for shard, _ in refs] == [0, 1, 2]
    read = list(webtext_pipeline.read_kept_links(out, [file_id for _, file_id in refs]))
    assert read == kept
    assert list(webtext_pipeline.read_kept_links(out, [refs[1][1]])) == kept[1::3]


def test_join_sorted_pairs_each_link_with_its_own_key_only():
    links = [SimpleNamespace(key=key) for key in ("b.example/1", "c.example/2", "d.example/3", "f.example/4")]
    keyed_pages = [("a.example/0", ["a"]), ("c.example/2", ["c1", "c2"]), ("e.example/9", ["e"]), ("f.example/4", ["f"])]
    joined = [(link.key, pages) for link, pages in webtext_pipeline.join_sorted(links, keyed_pages)]
    assert joined == [("b.example/1", []), ("c.example/2", ["c1", "c2"]), ("d.example/3", []), ("f.example/4", ["f"])]
    assert [pages for _, pages in webtext_pipeline.join_sorted(links, [])] == [[], [], [], []]
