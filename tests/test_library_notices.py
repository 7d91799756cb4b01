"""The libraries' own notices that a normal run would print whatever the user did (Beam's
``apitools not found``, PySpark's pandas >= 3 FutureWarning) are silenced at their source
(``pipelines.library_notices``), and nothing else is: the same words from elsewhere, and a
real Spark run's own lines, still show. Fresh processes: warnings filters and the root
logger are per process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.pipeline  # fresh Python processes (and one Spark job)

ROOT = Path(__file__).resolve().parents[1]
WET = "warc/ccscalatools/filter_test_1.wet.gz"
BEAM_NOTICE = "apitools not found, and bigquery client libraries are not available"
PYSPARK_NOTICE = "PySpark does not yet fully support pandas >= 3.0.0"
# What the two libraries do on import, then a user's program saying the same words itself.
PROBE = """
import logging, warnings
import apache_beam
import pyspark.testing.utils
logging.warning("apitools not found: the user's own line")
warnings.warn("PySpark does not yet fully support pandas >= 3.0.0: the user's own warning", FutureWarning)
"""


def python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_libraries_print_their_notices_on_import_without_the_project(tmp_path):
    """The control: Beam 2.77 and PySpark 4.3 under pandas 3.1 do print them (when an upgrade
    stops, this fails and pipelines/library_notices.py can go)."""
    done = python(PROBE, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"WARNING:root:{BEAM_NOTICE}" in done.stderr
    assert f"pyspark/testing/utils.py:127: FutureWarning: {PYSPARK_NOTICE}. Some features" in done.stderr


def test_after_importing_the_project_only_the_users_own_lines_show(tmp_path):
    done = python("import pipelines\n" + PROBE, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert BEAM_NOTICE not in done.stderr and "pyspark/testing/utils.py" not in done.stderr
    assert "WARNING:root:apitools not found: the user's own line" in done.stderr
    assert re.search(rf"<string>:\d+: FutureWarning: {re.escape(PYSPARK_NOTICE)}: the user's own warning", done.stderr)


def test_a_spark_run_prints_neither_notice(java, real_data, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = tmp_path / "docs"
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "read", "--engine", "spark", "--spark_master", "local[1]",
                           "--input", str(real_data / WET), "--output", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "25 documents" in done.stdout
    assert "apitools" not in done.stderr and "pandas" not in done.stderr, done.stderr[-3000:]
    assert "reading 1 file(s)" in done.stderr  # the run's own lines still show
