"""pyproject.toml's ``requires-python`` is the truth: the lowest Python that every pinned
dependency supports, by the ``Requires-Python`` of the pinned distributions installed here
(numpy 2.4.6's ``>=3.11``: it has no wheel for 3.10), and the README says the same."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENT_FILES = ("requirements.txt", "requirements-model.txt", "requirements-spark.txt", "requirements-dev.txt")


def lowest_python(specifier: str) -> tuple[int, int]:
    """The lowest 3.x a ``Requires-Python`` specifier admits."""
    allowed = SpecifierSet(specifier)
    return next((3, minor) for minor in range(0, 40) if allowed.contains(f"3.{minor}"))


def pinned_requires_python() -> dict[str, str]:
    """Each pin of the requirement files -> its installed distribution's Requires-Python ('' if it says none)."""
    found = {}
    for name in REQUIREMENT_FILES:
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            requirement = Requirement(line)
            (pin,) = requirement.specifier
            installed = importlib.metadata.version(requirement.name)  # 2.13.0+cpu is torch==2.13.0's CPU build
            assert pin.operator == "==" and pin.contains(installed), f"{name}: {line}, but {installed} is installed"
            found[requirement.name] = importlib.metadata.metadata(requirement.name).get("Requires-Python") or ""
    return found


def test_requires_python_is_the_lowest_python_the_pins_support():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    numpy = importlib.metadata.metadata("numpy")["Requires-Python"]
    assert lowest_python(declared) == lowest_python(numpy) == (3, 11), (declared, numpy)
    pins = pinned_requires_python()
    assert "numpy" in pins and "pandas" in pins
    lowest = max(lowest_python(spec) for spec in pins.values() if spec)
    assert lowest_python(declared) == lowest, {name: spec for name, spec in pins.items() if spec and lowest_python(spec) == lowest}
    minimum = ".".join(map(str, lowest))
    assert all(SpecifierSet(spec).contains(minimum) for spec in pins.values() if spec)  # no pin excludes it either


def test_the_readme_names_the_same_python():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert re.search(r"Needs Python >= {}\.{}\b".format(*lowest_python(declared)), (ROOT / "README.md").read_text())


def test_the_worker_setup_file_names_the_same_python():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    assert f'python_requires=">={".".join(map(str, lowest_python(declared)))}"' in (ROOT / "beam_setup.py").read_text(encoding="utf-8")
