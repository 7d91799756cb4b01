"""``requirements-cluster.txt`` (docs/spark.md, for runtimes that bring their own numpy,
pandas and pyarrow) is ``requirements.txt`` with those three as ranges that hold the pinned
versions, and every other pin the same."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RANGED = ("numpy", "pandas", "pyarrow")


def requirements(name: str) -> dict[str, str]:
    lines = [line.strip() for line in (ROOT / name).read_text(encoding="utf-8").splitlines()]
    return {re.match(r"[A-Za-z0-9._-]+", line).group().lower(): line for line in lines if line and not line.startswith("#")}


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_cluster_requirements_are_the_pins_with_three_ranges_that_hold_them():
    pinned, cluster = requirements("requirements.txt"), requirements("requirements-cluster.txt")
    assert sorted(pinned) == sorted(cluster)
    for name, line in pinned.items():
        if name not in RANGED:
            assert cluster[name] == line, name
            continue
        version = version_tuple(line.split("==")[1])
        bounds = dict(re.findall(r"(>=|<)([0-9.]+)", cluster[name]))
        assert set(bounds) == {">=", "<"}, cluster[name]
        assert version_tuple(bounds[">="]) <= version < version_tuple(bounds["<"]), name
