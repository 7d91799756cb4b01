"""Shared fixtures: the real-data folder (through CORPUSFORGE_TEST_DATA) and the sample crawl."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA_ENV = "CORPUSFORGE_TEST_DATA"


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The folder of real files written by others; tests that need it skip when it is unset."""
    folder = os.environ.get(DATA_ENV)
    if not folder:
        pytest.skip(f"{DATA_ENV} is not set: point it at the shared real-data folder to run real-data tests")
    path = Path(folder)
    if not path.is_dir():
        pytest.fail(f"{DATA_ENV}={folder} is not a folder")
    return path


@pytest.fixture(scope="session")
def sample_crawl(tmp_path_factory):
    """The bundled sample crawl (seed 0), generated once per test session."""
    from corpus.sample import write_sample_crawl

    return write_sample_crawl(tmp_path_factory.mktemp("sample-crawl"), seed=0)
