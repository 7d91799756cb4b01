"""The audit and decontamination Beam jobs on the DirectRunner: Bloom and exact paths agree on
real benchmarks (their own files, cut to their first lines) against a C4 corpus of the sample
crawl with planted benchmark passages."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from corpus import native
from corpus.records import Document
from corpus.shards import read_documents, shard_files, shard_split, write_shard
from dedup.benchmark_sets import load_benchmark
from dedup.ngrams import DEFAULT, ngram_hashes
from pipelines.audit import job as audit
from pipelines.c4 import job as c4_pipeline

pytestmark = pytest.mark.pipeline  # runs Beam jobs (or the corpusforge command in a subprocess): not in `make test-fast`


# Each benchmark's own file cut to its first lines (11 WikiText-2 articles, 600 PTB sentences, 600
# LAMBADA passages: 94k words of 626k), read by its own loader. Every exact scan and decontamination
# hands the benchmark index to each Beam bundle (pickled, bz2-compressed): the whole files made one
# audit about two minutes and one decontamination up to one, for the same proof (the planted
# passages among hundreds of others, short examples and long ones).
BENCHMARK_LINES = {"wikitext2": ("wikitext2_raw/wiki.test.raw", 500), "ptb": ("ptb/ptb.test.txt", 600),
                   "lambada": ("lambada/lambada_test.jsonl", 600)}


def benchmark_heads(real_data: Path, folder: Path, names) -> dict[str, str]:
    """``{name: spec}`` of each named benchmark's own file cut to its first ``BENCHMARK_LINES``, in ``folder``."""
    specs = {}
    for name in names:
        relative, count = BENCHMARK_LINES[name]
        head = folder / relative
        head.parent.mkdir(parents=True, exist_ok=True)
        with open(real_data / "lm_benchmarks" / relative, encoding="utf-8", newline="") as f:
            head.write_text("".join(line for _, line in zip(range(count), f, strict=False)), encoding="utf-8", newline="")
        specs[name] = f"{name}:{head}"
    return specs


@pytest.fixture(scope="module")
def corpus(small_crawl, real_data, tmp_path_factory):
    """C4 of the small sample crawl plus a shard of pages quoting WikiText-2, PTB and LAMBADA."""
    root = tmp_path_factory.mktemp("audit-corpus")
    c4_pipeline.run(["--input", *small_crawl.wet_paths, "--output", str(root / "c4"), "--badwords", small_crawl.badwords_path,
                     "--format", "jsonl"])
    specs = benchmark_heads(real_data, root / "benchmarks", BENCHMARK_LINES)
    sets = {name: load_benchmark(spec) for name, spec in specs.items()}
    def long_from(name, start):  # the first example from ``start`` with 20+ words (shorter ones are whole-text keys)
        return next(i for i in range(start, len(sets[name].examples)) if len(sets[name].examples[i].text.split()) >= 20)

    planted = {"wikitext2": [3, 10], "ptb": [long_from("ptb", 100), long_from("ptb", 400)], "lambada": [7, 400]}
    docs = []
    for name, indices in planted.items():
        for i in indices:
            example = sets[name].examples[i]
            quote = " ".join(example.text.split()[:60])
            docs.append(Document(text=f"A blog post that quotes a passage. {quote} That was the passage, thanks for reading.",
                                 url=f"http://planted.example/{name}/{i}", timestamp="2019-04-20T00:00:00Z"))
    # Beside the C4 job's folder, not inside it: its _SUCCESS lists the job's own shards only.
    write_shard(docs, root / "planted" / "planted-train.00000-of-00001.jsonl", "jsonl")
    return {"inputs": [str(root / "c4"), str(root / "planted")], "specs": specs, "sets": sets, "planted": planted}


def test_bloom_and_exact_agree_on_every_hit_for_real_benchmarks(corpus, tmp_path):
    out = tmp_path / "audit"
    own_train = tmp_path / "lambada-train.txt"  # a stand-in "own training split": 2 of its passages
    own_train.write_text("\n".join(corpus["sets"]["lambada"].examples[i].text.replace("\n", " ") for i in (0, 1)) + "\n", encoding="utf-8")
    result = audit.run_audit(["--corpus", *corpus["inputs"], "--benchmark", *corpus["specs"].values(), "--output", str(out),
                              "--fp_queries", "200000", "--filter_parts", "2", "--own_train", f"lambada=text:{own_train}"])
    rows = {row["name"]: row for row in result["rows"]}
    assert set(rows) == {"wikitext2", "ptb", "lambada"}
    for name, row in rows.items():
        agreement = row["agreement"]
        assert agreement["false_negatives"] == 0  # a Bloom filter never misses
        assert agreement["bloom_only"] == 0  # at p = 1e-8 no false positive among a few 100k queries
        assert agreement["exact_found"] == row["unique_found"] > 0
        planted_ids = {corpus["sets"][name].examples[i].id for i in corpus["planted"][name]}
        assert planted_ids <= set(row["dirty_ids"]), name
        for example in row["per_example"]:  # localisation: where in the example, which training document
            if example["id"] in planted_ids:
                assert example["spans"] and any(doc.startswith(f"http://planted.example/{name}/") for doc in example["training_docs"])
    lambada = rows["lambada"]
    assert 0 < lambada["own_train_percent"] < 5  # 2 of 600 passages
    assert "the dataset's own train split" in (out / "report.md").read_text(encoding="utf-8")
    evidence = result["fp_evidence"]
    assert evidence["parts"] == 2 and evidence["k"] == 27 and evidence["estimated_fp_rate"] < 1e-8
    assert evidence["empirical_found"] == 0 and evidence["empirical_queries"] == 200000
    for name in ("report.json", "report.md", "report.html"):
        assert (out / name).stat().st_size > 0
    assert "<svg" in (out / "report.html").read_text(encoding="utf-8")
    assert "| training corpus |" in (out / "report.md").read_text(encoding="utf-8")
    written = json.loads((out / "audit.json").read_text())
    assert written["filter"]["parts"] == 2
    native_here = shutil.which(os.environ.get("CC") or "cc") and not os.environ.get(native.NO_NATIVE_ENV)
    expected = "native" if native_here else native.status()["bloom-kernel"]  # the part builders' and the launcher's kernel
    assert written["kernels"]["bloom-kernel"] == written["filter"]["kernels"]["bloom-kernel"] == expected
    print(audit.format_audit(result))


def test_a_shard_written_in_two_formats_is_read_once(tmp_path):
    docs = [Document(text="one two three four five six seven eight nine", url="http://a.example/1", timestamp="")]
    for fmt, name in (("c4json", "c4-train.00000-of-00001.json.gz"), ("parquet", "c4-train.00000-of-00001.parquet")):
        write_shard(docs, tmp_path / name, fmt)
    assert shard_files([str(tmp_path)]) == [str(tmp_path / "c4-train.00000-of-00001.parquet")]


def test_a_benchmark_overlaps_itself_completely(real_data, tmp_path):
    lambada = real_data / "lm_benchmarks" / "lambada" / "lambada_test.jsonl"
    examples = load_benchmark(f"lambada:{lambada}").examples[:300]
    write_shard([Document(text=e.text, url=f"http://copy.example/{e.id}", timestamp="") for e in examples],
                tmp_path / "copy-train.00000-of-00001.jsonl", "jsonl")
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join(json.dumps({"id": e.id, "text": e.text}) + "\n" for e in examples), encoding="utf-8")
    result = audit.run_audit(["--corpus", str(tmp_path / "copy-train.00000-of-00001.jsonl"), "--benchmark", f"jsonl:{subset}:text",
                              "--output", str(tmp_path / "out"), "--mode", "bloom", "--fp_queries", "10000"])
    row = result["rows"][0]
    assert row["percent_found"] == 100.0 and row["dirty_examples"] == 300 and row["source"] == "bloom"


def test_decontaminate_removes_planted_passages_and_keeps_the_rest(corpus, tmp_path):
    out = tmp_path / "clean"
    lambada = corpus["specs"]["lambada"]
    stats = audit.run_decontaminate(["--corpus", *corpus["inputs"], "--benchmark", lambada, "--output", str(out),
                                     "--mode", "drop", "--n", "8"])
    assert stats["counters"]["contaminated"] == 2
    assert sorted(stats["examples"]) == ["contaminated"] and len(stats["examples"]["contaminated"]) == 2
    assert all(e.startswith("http://planted.example/lambada/") for e in stats["examples"]["contaminated"])
    assert stats["units"] == {"clean": "documents", "contaminated": "documents", "removed_chars": "other"}
    kept = list(read_documents(str(out / "decontaminated-train.*.parquet")))
    assert not any(d.url.startswith("http://planted.example/lambada/") for d in kept)
    assert any(d.url.startswith("http://planted.example/ptb/") for d in kept)
    removed = [json.loads(line) for line in (out / audit.REMOVED_FILE).read_text().splitlines()]
    assert sorted(r["url"] for r in removed) == [f"http://planted.example/lambada/{i}" for i in (400, 7)]
    # Spans mode keeps the text around a match, minus the match and 200 characters either side.
    spans = audit.run_decontaminate(["--corpus", *corpus["inputs"], "--benchmark", lambada, "--output", str(tmp_path / "spans"),
                                     "--mode", "spans", "--min_piece", "10", "--margin", "0"])
    assert spans["counters"]["split"] + spans["counters"].get("no_piece_left", 0) == 2
    lambada_hashes = set()
    for example in corpus["sets"]["lambada"].examples:
        lambada_hashes.update(ngram_hashes(example.text, DEFAULT).tolist())
    for doc in read_documents(str(tmp_path / "spans" / "decontaminated-train.*.parquet")):
        if doc.url.startswith("http://planted.example/lambada/"):
            assert not lambada_hashes & set(ngram_hashes(doc.text, DEFAULT).tolist())


def test_decontaminate_keeps_train_and_validation_apart(corpus, tmp_path):
    # The case: c4-train and c4-validation used to merge into one decontaminated-train set.
    folder = tmp_path / "c4"
    lambada = corpus["sets"]["lambada"].examples[7].text
    train = [Document(text=f"train page {i} " + "plain words " * 30, url=f"http://t.example/{i}", timestamp="") for i in range(5)]
    validation = [Document(text=f"validation page {i} " + "other words " * 30, url=f"http://v.example/{i}", timestamp="") for i in range(3)]
    validation.append(Document(text=lambada, url="http://v.example/quoted", timestamp=""))
    write_shard(train, folder / "c4-train.00000-of-00001.json.gz", "c4json")
    write_shard(validation, folder / "c4-validation.00000-of-00001.json.gz", "c4json")
    stats = audit.run_decontaminate(["--corpus", str(folder), "--benchmark", corpus["specs"]["lambada"], "--output",
                                     str(tmp_path / "out"), "--mode", "drop"])
    assert stats["splits"] == {"train": 1, "validation": 1}
    assert sorted(p.name for p in (tmp_path / "out").glob("*.parquet")) == [
        "decontaminated-train.00000-of-00001.parquet", "decontaminated-validation.00000-of-00001.parquet"]
    kept_train = {d.url for d in read_documents(str(tmp_path / "out" / "decontaminated-train.00000-of-00001.parquet"))}
    kept_validation = {d.url for d in read_documents(str(tmp_path / "out" / "decontaminated-validation.00000-of-00001.parquet"))}
    assert kept_train == {d.url for d in train}
    assert kept_validation == {f"http://v.example/{i}" for i in range(3)}


def test_shard_split_reads_the_split_from_a_shard_name():
    assert shard_split("gs://b/c4/c4-validation.00003-of-01024.json.gz") == "validation"
    assert shard_split("webtext-train.00000-of-00001.parquet") == "train"
    assert shard_split("my-corpus.jsonl") is None


@pytest.fixture(scope="module")
def filters(real_data, tmp_path_factory):
    """Two small corpora of LAMBADA passages and the Bloom filters the audit built of them."""
    root = tmp_path_factory.mktemp("filters")
    examples = load_benchmark(f"lambada:{real_data / 'lm_benchmarks' / 'lambada' / 'lambada_test.jsonl'}").examples
    benchmark = root / "subset.jsonl"
    benchmark.write_text("".join(json.dumps({"id": e.id, "text": e.text}) + "\n" for e in examples[:200]), encoding="utf-8")
    corpora = {}
    for name, chosen in (("a", examples[:200]), ("b", examples[200:400])):
        write_shard([Document(text=e.text, url=f"http://{name}.example/{e.id}", timestamp="") for e in chosen],
                    root / name / "copy-train.00000-of-00001.jsonl", "jsonl")
        corpora[name] = str(root / name)
    common = ["--benchmark", f"jsonl:{benchmark}:text", "--mode", "bloom", "--fp_queries", "1000", "--filter_parts", "2"]
    built = {}
    for label, corpus_name, extra in (("a", "a", []), ("b", "b", []), ("a13", "a", ["--n", "13"])):
        result = audit.run_audit(["--corpus", corpora[corpus_name], "--output", str(root / f"audit-{label}")] + common + extra)
        built[label] = (root / f"audit-{label}" / "bloom", result["rows"][0]["percent_found"])
    return {"corpora": corpora, "common": common, "built": built}


def _reuse(filters, folder, corpus="a", extra=()):
    out = folder.parent / "reuse-out"
    return audit.run_audit(["--corpus", filters["corpora"][corpus], "--output", str(out), "--filter", str(folder),
                            *filters["common"], *extra])


def _damaged(filters, tmp_path, label="a"):
    import shutil

    folder = tmp_path / "bloom"
    shutil.copytree(filters["built"][label][0], folder)
    return folder


def _patch(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


PART0, PART1 = "bloom-part-00000-of-00002.bin", "bloom-part-00001-of-00002.bin"


def test_a_reused_filter_of_the_same_corpus_and_settings_gives_the_same_figures(filters, tmp_path):
    folder = _damaged(filters, tmp_path)
    assert filters["built"]["a"][1] == 100.0
    assert _reuse(filters, folder)["rows"][0]["percent_found"] == 100.0
    manifest = json.loads((folder / "bloom.json").read_text())
    assert manifest["parts"] == 2 and [f["name"] for f in manifest["files"]] == [PART0, PART1]
    assert manifest["meta"]["ngram_config"]["n"] == 8 and manifest["corpus"].startswith("sha256:")


@pytest.mark.parametrize("damage, message", [
    ("flip a bit", "checksum mismatch"),
    ("flip the stored checksum", "a part swapped in from another build"),
    ("truncate", "truncated, or replaced"),
    ("remove a part", f"part {PART1} is missing"),
    ("a part is a folder", f"part {PART1} is missing \\(or not a file\\)"),
    ("an extra part", "part file\\(s\\) that bloom.json does not list"),
    ("deep manifest JSON", "unreadable filter manifest \\(RecursionError"),
    ("huge manifest", "over 1,048,576 bytes"),
    ("m = 2^52", "truncated: .* bytes, expected"),
    ("no manifest", "no bloom.json: not a complete corpusforge filter"),
    ("empty folder", "no Bloom filter there"),
    ("a part of another build", "another build"),
])
def test_a_corrupt_or_partial_filter_is_refused_in_one_line_before_work(filters, tmp_path, damage, message):
    import shutil
    import struct

    folder = _damaged(filters, tmp_path)
    part0, part1 = folder / PART0, folder / PART1
    if damage == "flip a bit":
        _patch(part0, part0.stat().st_size - 100, bytes([part0.read_bytes()[-100] ^ 0x10]))
    elif damage == "flip the stored checksum":
        _patch(part0, 64, bytes([part0.read_bytes()[64] ^ 1]))
    elif damage == "truncate":
        part1.write_bytes(part1.read_bytes()[:-4096])
    elif damage == "remove a part":
        part1.unlink()
    elif damage == "a part is a folder":
        part1.unlink()
        part1.mkdir()
    elif damage == "an extra part":
        shutil.copy(part0, folder / "bloom-part-00002-of-00004.bin")
    elif damage == "deep manifest JSON":
        (folder / "bloom.json").write_text("[" * 100_000)
    elif damage == "huge manifest":
        (folder / "bloom.json").write_text(" " * (2 << 20))
    elif damage == "m = 2^52":
        _patch(part0, 16, struct.pack("<Q", 1 << 52))
    elif damage == "no manifest":
        (folder / "bloom.json").unlink()
    elif damage == "empty folder":
        shutil.rmtree(folder)
        folder.mkdir()
    elif damage == "a part of another build":
        shutil.copy(filters["built"]["b"][0] / PART1, part1)
    with pytest.raises(audit.InputError, match=f"--filter {folder}: refused: .*{message}"):
        _reuse(filters, folder)
    assert not (folder.parent / "reuse-out").exists()  # refused before the job began


@pytest.mark.parametrize("label, corpus, message", [
    ("a13", "a", r"other n-gram settings \(.*n=13.*\) than this audit's \(.*n=8"),
    ("b", "a", "built from another corpus"),
])
def test_a_foreign_filter_is_refused_not_queried(filters, tmp_path, label, corpus, message):
    folder = _damaged(filters, tmp_path, label)
    with pytest.raises(audit.InputError, match=message):
        _reuse(filters, folder, corpus)


def test_the_cli_refuses_a_bad_filter_with_exit_2_and_one_line(filters, tmp_path, caplog):
    import logging

    from pipelines import cli

    folder = _damaged(filters, tmp_path)
    (folder / "bloom.json").write_text("[" * 100_000)
    with caplog.at_level(logging.INFO):
        code = cli.main(["-q", "audit", "--corpus", filters["corpora"]["a"], "--output", str(tmp_path / "out"), "--filter", str(folder),
                         *filters["common"]])
    assert code == 2
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "refused" in errors[0].getMessage() and "\n" not in errors[0].getMessage()
    assert not errors[0].exc_info  # no traceback


def test_a_full_disk_ends_the_audit_with_one_line_and_commits_nothing(filters, tmp_path):
    import sys

    from full_disk import error_lines, small_disk

    with small_disk(tmp_path / "disk", 16 << 10) as disk:
        out = disk.folder / "out"
        done = disk.run([sys.executable, "-m", "pipelines.cli", "-q", "audit", "--corpus", filters["corpora"]["a"], "--output", str(out),
                         *filters["common"]], cwd=Path(__file__).resolve().parents[1])
        assert done.returncode == 1, done.stderr[-3000:]
        (line,) = error_lines(done.stderr)
        assert f"{out}: {disk.reason} (" in line and "Nothing partial was committed" in line
        assert "Traceback" not in done.stderr and not (out / "_SUCCESS").exists()


def test_the_audit_takes_gpt2s_generative_tasks_and_finds_what_was_planted(real_data, tmp_path):
    """nq / wmt14 benchmarks, as `eval` reads them, audited by their own text (question, source)."""
    bench = real_data / "lm_benchmarks"
    specs = [f"nq:{bench / 'nq_open' / 'NQ-open.dev.jsonl'}", f"wmt14:{bench / 'wmt14_fren'}:fr-en"]
    sets = [load_benchmark(spec) for spec in specs]
    planted = {}
    docs = []
    for bench_set in sets:
        example = next(e for e in bench_set.examples if len(e.text.split()) >= 12)
        planted[bench_set.name] = example.id
        docs.append(Document(text=f"Someone wrote this down. {example.text} And then went on.", url=f"http://planted.example/{bench_set.name}",
                             timestamp="2019-04-20T00:00:00Z"))
    write_shard(docs, tmp_path / "corpus" / "planted-train.00000-of-00001.jsonl", "jsonl")
    result = audit.run_audit(["--corpus", str(tmp_path / "corpus"), "--benchmark", *specs, "--output", str(tmp_path / "audit"), "--mode", "exact"])
    rows = {row["name"]: row for row in result["rows"]}
    assert set(rows) == set(planted)
    for name, example_id in planted.items():
        assert rows[name]["dirty_ids"] == [example_id], name
