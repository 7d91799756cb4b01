"""Shared fixtures: the real-data folder (through CORPUSFORGE_TEST_DATA) and the sample crawl."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from corpus.sentences import PunktMissingError, require_punkt
from samplecrawl.crawl import write_sample_crawl

DATA_ENV = "CORPUSFORGE_TEST_DATA"
# The line that marks a whole test file (its module-level ``pytestmark``) as a pipeline test.
WHOLE_FILE_PIPELINE = "pytestmark = pytest.mark.pipeline"


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """A test file marked ``pipeline`` as a whole is not even imported when ``-m`` deselects
    pipeline tests (``make test-fast``): its imports (Beam, Spark, moto, a whole job's modules)
    would cost every xdist worker seconds for tests that are deselected anyway."""
    markexpr = config.getoption("markexpr")
    if not markexpr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    expression = Expression.compile(markexpr)
    others = sorted(expression.idents() - {"pipeline"})
    for bits in range(1 << len(others)):  # whatever other marks a test of the file carries
        marks = {"pipeline"} | {name for i, name in enumerate(others) if bits >> i & 1}
        if expression.evaluate(lambda name, **_: name in marks):
            return None  # a pipeline test of this file could be selected
    lines = collection_path.read_text(encoding="utf-8").splitlines()
    return True if any(line.startswith(WHOLE_FILE_PIPELINE) for line in lines) else None


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The folder of real files written by others; tests that need it skip when it is unset."""
    folder = os.environ.get(DATA_ENV)
    if not folder:
        pytest.skip(f"{DATA_ENV} is not set: point it at the shared real-data folder to run real-data tests")
    path = Path(folder)
    if not path.is_dir():
        pytest.skip(f"{DATA_ENV}={folder} is not a folder: real-data tests skipped")
    return path


def _punkt_installed() -> bool:
    try:
        require_punkt()
    except PunktMissingError:
        return False
    return True


PUNKT_INSTALLED = _punkt_installed()
PUNKT_SKIP = "NLTK's punkt model is not installed (set NLTK_DATA, or nltk.download('punkt_tab')): sentence tests skipped"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Without punkt, a test that stopped because punkt is missing (the job's own check, or a
    subprocess's message) is reported as skipped, with the reason; with punkt, nothing changes."""
    outcome = yield
    report = outcome.get_result()
    if PUNKT_INSTALLED or not report.failed or call.excinfo is None:
        return
    if "punkt sentence model is not installed" in str(call.excinfo.value):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {PUNKT_SKIP}")


@pytest.fixture(scope="session")
def sample_crawl(tmp_path_factory):
    """The bundled sample crawl (seed 0), generated once per test session."""
    return write_sample_crawl(tmp_path_factory.mktemp("sample-crawl"), seed=0)
