"""common.environ: variables set for a block, then exactly as they were; and its use for a short
Spark run's JVM flags (``pipelines.spark_launch.short_run_jvm``)."""

from __future__ import annotations

import os

import pytest

from common.environ import environment_with, prepended
from pipelines.spark_launch import SHORT_RUN_JVM_OPTIONS, short_run_jvm


def test_a_block_sees_the_values_and_after_it_every_variable_is_as_before(monkeypatch):
    monkeypatch.setenv("CF_SET_BEFORE", "old")
    monkeypatch.delenv("CF_UNSET_BEFORE", raising=False)
    with environment_with({"CF_SET_BEFORE": "new", "CF_UNSET_BEFORE": "here"}):
        assert os.environ["CF_SET_BEFORE"] == "new" and os.environ["CF_UNSET_BEFORE"] == "here"
    assert os.environ["CF_SET_BEFORE"] == "old" and "CF_UNSET_BEFORE" not in os.environ
    with pytest.raises(RuntimeError), environment_with({"CF_SET_BEFORE": "during"}):
        raise RuntimeError("the block fails")
    assert os.environ["CF_SET_BEFORE"] == "old"  # put back on the way out of a failing block too


def test_prepended_puts_a_path_first_once(monkeypatch):
    monkeypatch.delenv("CF_PATHS", raising=False)
    assert prepended("CF_PATHS", "/a") == "/a"
    monkeypatch.setenv("CF_PATHS", os.pathsep.join(["/b", "", "/c"]))
    assert prepended("CF_PATHS", "/a") == os.pathsep.join(["/a", "/b", "/c"])
    monkeypatch.setenv("CF_PATHS", os.pathsep.join(["/b", "/a"]))
    assert prepended("CF_PATHS", "/a") == os.pathsep.join(["/b", "/a"])  # already there: left as it is


def test_a_short_runs_jvm_flags_are_set_for_the_block_unless_the_user_set_their_own(monkeypatch):
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    with short_run_jvm():
        assert os.environ["SPARK_SUBMIT_OPTS"] == SHORT_RUN_JVM_OPTIONS
    assert "SPARK_SUBMIT_OPTS" not in os.environ
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xmx2g")
    with short_run_jvm():
        assert os.environ["SPARK_SUBMIT_OPTS"] == "-Xmx2g"  # the user's flags win
    assert os.environ["SPARK_SUBMIT_OPTS"] == "-Xmx2g"
