"""The C4 reference implementation (TFDS ``c4_utils``), as an oracle for tests and benchmarks.

``tensorflow-datasets`` is a development dependency (the ``dev`` extra). Its
``c4_utils`` needs TensorFlow for two trivial calls (``tf.compat.as_text`` and
``tf.io.gfile.GFile``) and downloads the withdrawn punkt pickle on first use; this module
points both at local equivalents and then only *calls* the reference's functions, wired
as the reference's ``c4.py`` wires them, on Beam's DirectRunner.
"""

from __future__ import annotations

import json
import os
import types

import apache_beam as beam
import pytest

from corpus.sentences import punkt_tokenizer


def _as_text(value, encoding="utf-8"):
    return value.decode(encoding) if isinstance(value, bytes) else value


_TF_SHIM = types.SimpleNamespace(
    compat=types.SimpleNamespace(as_text=_as_text),
    io=types.SimpleNamespace(gfile=types.SimpleNamespace(GFile=open)),
)


def load_c4_utils():
    """The reference module, pointed at local punkt and without TensorFlow; skip if absent."""
    c4_utils = pytest.importorskip("tensorflow_datasets.text.c4_utils", reason="the C4 reference needs the dev extra (tensorflow-datasets)")
    c4_utils.tf = _TF_SHIM
    c4_utils._SENTENCE_TOKENIZER = punkt_tokenizer()
    return c4_utils


def run_reference(wet_paths, out_dir, *, variant="en", badwords=(), realnews_domains=None, webtext_urls=None):
    """Run the reference chain for ``variant`` over local WET files.

    Returns ``(pages by split, counters)``: pages as ``{"url", "text", "timestamp"}`` dicts
    sorted by URL, counters as ``{namespace: {name: value}}``.
    """
    from pipelines.jobs import counters_of

    c4_utils = load_c4_utils()
    clean = variant != "en.noclean"
    os.makedirs(out_dir, exist_ok=True)
    with beam.Pipeline(runner="DirectRunner") as pipeline:
        pages = (
            pipeline
            | beam.Create(list(wet_paths))
            | beam.FlatMap(c4_utils.split_wet_file)
            | beam.Filter(c4_utils.is_valid_length)
        )
        if variant == "realnewslike":
            # Through a lambda: Beam's type check rejects the function's Mapping[str, Collection]
            # hint for Grover's real file, whose values may be null.
            pages |= beam.Filter(lambda page, domains: c4_utils.is_realnews_domain(page, domains), realnews_domains)
        pages = (
            pages
            | "normalize_url" >> beam.Map(lambda p: (p.normalized_url, p))
            | "select_newest" >> beam.CombinePerKey(c4_utils.select_newest_page)
            | beam.Values()
        )
        if variant == "webtextlike":
            urls = pipeline | "urls" >> beam.Create(list(webtext_urls)) | beam.Map(lambda u: (c4_utils.normalize_url(u), c4_utils.PageFeatures()))
            pages = (
                {"pages": pages | beam.Map(lambda p: (p.normalized_url, p)), "webtextlike_urls": urls}
                | beam.CoGroupByKey()
                | beam.FlatMap(c4_utils.filter_by_webtextlike)
            )
        if clean:
            pages |= "clean_pages" >> beam.FlatMap(c4_utils.get_clean_page_fn())
            pages = c4_utils.remove_duplicate_text(pages)
        pages |= beam.FlatMap(c4_utils.detect_english)
        if variant in ("en", "realnewslike", "webtextlike"):
            pages |= beam.Filter(c4_utils.get_badwords_filter_fn({"en": set(badwords)}, filter_fraction=1.0))
        for split, predicate in (("train", lambda x: x % 1000 != 0), ("validation", lambda x: x % 1000 == 0)):
            def emit(page, split=split):
                c4_utils.get_counter_inc_fn(split)("examples")
                return {"url": page.url, "text": page.text, "timestamp": page.timestamp}

            (
                pages
                | f"filter {split}" >> beam.Filter(c4_utils.get_hashed_url_filter_fn(predicate))
                | f"emit {split}" >> beam.Map(emit)
                | f"collect {split}" >> beam.combiners.ToList()
                | f"write {split}" >> beam.Map(_write_rows, os.path.join(out_dir, f"{split}.json"))
            )
    result = pipeline.result
    out = {}
    for split in ("train", "validation"):
        with open(os.path.join(out_dir, f"{split}.json"), encoding="utf-8") as f:
            out[split] = json.load(f)
    return out, counters_of(result)


def _write_rows(rows, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(sorted(rows, key=lambda r: r["url"]), f, ensure_ascii=False)
