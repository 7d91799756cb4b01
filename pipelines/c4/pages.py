"""What the C4 job's two engines share besides the rules in ``corpus.c4``: the crawl-file
reader (``C4PageReader``), its counter namespaces, the language detectors by name and the
RealNews domain splitter. The job declares its steps in ``pipelines.c4.job`` (``plan``); each
engine interprets them (``pipelines.beam.plan``, ``pipelines.spark.plan``).

Beam-free: a Spark worker loads this, not Beam (``pipelines.spark``). Tests: the C4 job's,
``tests/test_c4_pipeline.py`` and ``tests/test_spark_engine.py``.
"""

from __future__ import annotations

import os

from common.decision import OTHER
from corpus import c4, langid
from corpus.records import Document, HtmlPage
from corpus.warc import MAX_RECORD_BYTES, ReadStats
from pipelines.plan import FileCounts
from pipelines.shard_io import READ_NAMESPACE, crawl_records

EXTRACT_NAMESPACE = "extract-main-text"
BADWORDS_NAMESPACES = (c4.BADWORDS_FILTER, f"{c4.BADWORDS_FILTER}-en")  # TFDS counts bad words under both


# --- resources the rules are bound to ---------------------------------------------------
_domain_splitter = None


def registered_domain_parts(url: str) -> tuple[str, str, str]:
    """(subdomain, domain, suffix) by the public suffix list bundled with tldextract (offline)."""
    global _domain_splitter
    if _domain_splitter is None:
        import tldextract  # only realnewslike needs it (75 ms to import); loaded once per worker

        _domain_splitter = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    parts = _domain_splitter(url)
    return parts.subdomain, parts.domain, parts.suffix


LANGDETECT = {"fast": langid.detect_langs, "reference": langid.reference_detect_langs}


class C4PageReader:
    """One crawl file -> C4 pages, for every engine: WET conversion records as the reference
    parses them (``c4.wet_page``), WARC HTML responses through trafilatura
    (``c4.extracted_page``); bad input comes out as error dicts. Counts per file go to the
    file's ``FileCounts``: the reader's tallies (``read-archive``), the pages
    (``split-wet-file``) and extractions (``extract-main-text``), drops sampled."""

    def __init__(self, input_kind: str, extract_timeout_s: float, max_record_bytes: int = MAX_RECORD_BYTES, verify_digest: bool = False):
        self.input_kind, self.extract_timeout_s, self.max_record_bytes = input_kind, extract_timeout_s, max_record_bytes
        self.verify_digest = verify_digest
        self.extractor = None

    def close(self):
        if self.extractor is not None:
            self.extractor.close()
            self.extractor = None

    def read(self, index: int, path: str, counted: FileCounts):
        """Pages (``C4Page``) and error dicts of file number ``index``: a ``pipelines.plan.FileReader``."""
        stats, wet, extracted = ReadStats(), counted.tally(c4.SPLIT_WET_FILE), counted.tally(EXTRACT_NAMESPACE)
        if self.input_kind == "wet" or (self.input_kind == "auto" and ".wet" in os.path.basename(path)):
            wet.add(c4.WET_FILE_READ)
        try:
            for record in crawl_records(path, "c4", stats, self.max_record_bytes, self.verify_digest):
                if isinstance(record, Document):
                    decision = c4.wet_page(record, index)
                    wet.add(decision)
                elif isinstance(record, HtmlPage):
                    decision = self._extracted_page(index, record)
                    extracted.add(decision)
                else:
                    wet.add(c4.unreadable_record(record))
                    yield record.to_dict()
                    continue
                if decision.record is not None:
                    yield decision.record
        finally:  # a failing worker still reports what it counted
            wet.add(c4.warcinfo_records(path, stats.counts.get("records:warcinfo", 0)))
            counted.add(READ_NAMESPACE, stats.counts, OTHER)

    def _extracted_page(self, index, page: HtmlPage):
        from corpus.extract import (  # trafilatura (120 ms): only when a WARC page comes
            MainTextExtractor,
            extract_text_from_page,
        )

        if self.extractor is None:
            self.extractor = MainTextExtractor(timeout_s=self.extract_timeout_s)
        doc, extraction = extract_text_from_page(page, self.extractor)
        return c4.extracted_page(page.url, doc, extraction.outcome, extraction.detail, (index, page.offset))
