"""common.environ: variables set for a block, then exactly as they were."""

from __future__ import annotations

import os

import pytest

from common.environ import environment_with, prepended


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
