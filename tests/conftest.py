"""Shared fixtures (the real-data folder through CORPUSFORGE_TEST_DATA, the sample crawl and its
C4 output, one Spark session a process) and the order the suite starts in under pytest-xdist."""

from __future__ import annotations

import atexit
import functools
import os
import sys
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression
from xdist.scheduler import LoadFileScheduling

from corpus.sentences import PunktMissingError, require_punkt
from pipelines.cli import run_job
from pipelines.spark_launch import SHORT_RUN_JVM_OPTIONS, missing_java
from samplecrawl.crawl import write_sample_crawl

DATA_ENV = "CORPUSFORGE_TEST_DATA"
# How the line that marks a whole test file (its module-level ``pytestmark``) as a pipeline test starts.
WHOLE_FILE_PIPELINE = ("pytestmark = pytest.mark.pipeline", "pytestmark = [pytest.mark.pipeline")


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
        if expression.evaluate(lambda name, marks=marks, **_: name in marks):
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


@functools.cache
def punkt_installed() -> bool:
    """Whether NLTK's punkt model loads: asked only when a test needs to know (loading NLTK
    costs every process that imports this file, xdist's controller included, half a second)."""
    try:
        require_punkt()
    except PunktMissingError:
        return False
    return True


PUNKT_SKIP = "NLTK's punkt model is not installed (set NLTK_DATA, or nltk.download('punkt_tab')): sentence tests skipped"


@pytest.fixture
def needs_punkt() -> None:
    """A test that splits sentences itself is skipped, saying why, without NLTK's punkt model."""
    if not punkt_installed():
        pytest.skip(PUNKT_SKIP)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Without punkt, a test that stopped because punkt is missing (the job's own check, or a
    subprocess's message) is reported as skipped, with the reason; with punkt, nothing changes."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None or punkt_installed():
        return
    if "punkt sentence model is not installed" in str(call.excinfo.value):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {PUNKT_SKIP}")


@pytest.fixture(scope="session")
def sample_crawl(tmp_path_factory):
    """The bundled sample crawl (seed 0), generated once per test session."""
    return write_sample_crawl(tmp_path_factory.mktemp("sample-crawl"), seed=0)


@pytest.fixture(scope="session")
def sample_c4(sample_crawl, tmp_path_factory):
    """``corpusforge c4`` of the sample crawl in C4 JSON and Parquet, two train shards, once per
    test process: (the output folder, the job's summary). Tests read it and never write into it."""
    folder = tmp_path_factory.mktemp("sample-c4") / "c4"
    stats = run_job("c4", ["--input", *sample_crawl.wet_paths, "--output", str(folder), "--badwords", sample_crawl.badwords_path,
                           "--num_shards", "2", "--format", "c4json", "parquet"])
    return folder, stats


SMALL_CRAWL_PAGES = 120  # every special page kind and its copies, with fewer ordinary articles than the 300 default


@pytest.fixture(scope="session")
def small_crawl(tmp_path_factory):
    """The sample crawl (seed 0) at 120 pages, once per test session: for a job compared with the
    reference or another engine, where what is proven holds page by page, not by the crawl's size."""
    return write_sample_crawl(tmp_path_factory.mktemp("small-crawl"), seed=0, pages=SMALL_CRAWL_PAGES)


@pytest.fixture(scope="session")
def java() -> None:
    """A test that starts Spark (here or in a subprocess) is skipped, saying why, without the
    Java its JVM needs (``pipelines.spark_launch.missing_java``)."""
    why = missing_java()
    if why:
        pytest.skip(f"Spark tests skipped: {why}")


@pytest.fixture(scope="session")
def spark(java):
    """One Spark session (``local[2]``, workers on this interpreter) per test process, shared by
    every Spark test file; a session already running is used as it is and left running."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")
    from pipelines.spark import engine  # the optional spark extra: only a Spark test loads it and pyspark

    before = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYTHONPATH")}
    session, started = engine.session("local[2]")
    # Spark's workers got this interpreter and the project; nothing run later in this process does.
    assert {name: os.environ.get(name) for name in before} == before
    yield session
    if started:
        session.stop()


# How `make test` (`pytest -n auto --dist loadfile --no-loadscope-reorder`) spreads the suite
# over its workers. A work unit is a test file (its module fixtures, a Beam run or a server, are
# built once), or one of the groups below: files that share a costly session fixture run on one
# worker, so the fixture is built once rather than once a worker. Units start in the order of
# their first test after the sort below: the costliest files first (longest processing time
# first, so the two workers end together), then the other slow tests' files, then pipeline
# files, then unit files, whose many small units fill both workers at the end.
WORKER_GROUPS = {  # a test file's name -> the group it runs in
    **dict.fromkeys(("test_spark_engine.py", "test_spark_jobs_audit.py", "test_spark_jobs_tokweb.py", "test_output_dataset.py", "test_plan.py"),
                    "spark"),  # one `local[2]` Spark session (a JVM) for the four
}
# Files whose tests build all they use (no module fixture): each test is a unit of its own, so
# the file's many CLI subprocesses spread over both workers instead of queueing on one.
SPLIT_FILES = {"test_cli.py"}
# Seconds each unit's tests take (setup, call, teardown; the Spark group's four files added):
# the pipeline/slow tier's figures on 2 workers at a load of 3 to 15, each scaled by the
# before/after ratio measured when that file's inputs were cut (docs/architecture.md, "Test
# tiers"). Only their order matters, so a stale number costs balance, never a result. A unit
# not listed starts after these, by its marks.
UNIT_SECONDS = {
    "tests/test_object_store.py": 465.0,
    "spark": 455.0,
    "tests/test_c4_pipeline.py": 371.0,
    "tests/test_demo.py": 290.0,
    "tests/test_store_jobs.py": 214.0,
    "tests/test_packaging.py": 116.0,
    "tests/test_audit_pipeline.py": 102.0,
    "tests/test_portable.py": 95.0,
    "tests/test_webtext_pipeline.py": 70.0,
}
START_ORDER = ("slow", "pipeline")


def work_unit(nodeid: str) -> str:
    """The work unit of a test under ``--dist loadfile``: its file, the group the file is in, or
    the test itself in a ``SPLIT_FILES`` file."""
    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    return nodeid if name in SPLIT_FILES else WORKER_GROUPS.get(name, path)


class GroupedFileScheduling(LoadFileScheduling):
    """xdist's ``loadfile`` with ``WORKER_GROUPS`` kept on one worker (xdist's own ``loadgroup``
    cannot be used: xdist 3.8 marks a group in ``item._nodeid``, which pytest 9.2 no longer reads)."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: unknown when xdist is disabled (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return GroupedFileScheduling(config, log)
    return None  # xdist's own scheduler for any other --dist


def _start_rank(item: pytest.Item) -> int:
    return next((rank for rank, marker in enumerate(START_ORDER) if item.get_closest_marker(marker)), len(START_ORDER))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole units in start order: the costliest first (``UNIT_SECONDS``), then units with a slow
    test, units with a pipeline test, the rest; each unit's tests stay together, slow ones first
    (so a module fixture is built once without xdist too). Stable: ties keep collection order."""
    unit_of = {item: work_unit(item.nodeid) for item in items}
    first: dict[str, int] = {}
    rank: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = unit_of[item]
        first.setdefault(unit, index)
        rank[unit] = min(rank.get(unit, len(START_ORDER)), _start_rank(item))
    items.sort(key=lambda item: (-UNIT_SECONDS.get(unit_of[item], 0.0), rank[unit_of[item]], first[unit_of[item]],
                                 _start_rank(item)))


def pytest_configure(config) -> None:
    """Every JVM the suite starts (a Spark session here, in an xdist worker or in a subprocess,
    which inherit the environment) takes ``SHORT_RUN_JVM_OPTIONS`` unless ``SPARK_SUBMIT_OPTS`` is
    set: each runs small jobs, where the JVM's start is most of the cost (docs/architecture.md)."""
    os.environ.setdefault("SPARK_SUBMIT_OPTS", SHORT_RUN_JVM_OPTIONS)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """An xdist worker, once it has reported its results (``workerfinished``) and every other
    plugin has unconfigured, runs its ``atexit`` functions and exits at once: the interpreter's
    own teardown of a process that has loaded torch, Beam, transformers and every test module
    (freeing each module and object one by one) takes seconds that the controller waits for."""
    if not hasattr(config, "workerinput"):
        return
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
