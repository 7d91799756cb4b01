"""constraints.txt, the lock ``make install`` installs under (pip's ``-c``): one exact pin per
distribution, agreeing with every pin of requirements*.txt, and with what is installed here, so a
fresh clone gets the transitive dependencies CI tested."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.test_requires_python import REQUIREMENT_FILES, ROOT


def requirement_lines(path: Path) -> list[Requirement]:
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            found.append(Requirement(line))
    return found


def constraints() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for requirement in requirement_lines(ROOT / "constraints.txt"):
        (pin,) = requirement.specifier
        assert pin.operator == "==" and "+" not in pin.version, f"constraints.txt: {requirement} is not one exact public version"
        name = canonicalize_name(requirement.name)
        assert name not in pins, f"constraints.txt pins {name} twice"
        pins[name] = Version(pin.version)
    return pins


def test_constraints_pin_every_requirement_at_a_version_it_allows():
    pins = constraints()
    for file in REQUIREMENT_FILES:
        for requirement in requirement_lines(ROOT / file):
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{file}: {requirement.name} is not in constraints.txt (make constraints)"
            assert requirement.specifier.contains(pins[name]), f"{file}: {requirement} but constraints.txt has {pins[name]}"


def test_constraints_are_what_is_installed():
    """What ``make install`` installed here is the lock: a pin changed without ``make constraints`` fails."""
    pins = constraints()
    assert len(pins) > 100  # the transitive set, not only the direct pins
    installed = {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in importlib.metadata.distributions()}
    differ = {name: (str(want), str(installed[name])) for name, want in pins.items()
              if name in installed and installed[name].public != want.public}
    missing = sorted(name for name in pins if name not in installed)
    assert not differ, f"installed versions differ from constraints.txt (pinned, installed): {differ}"
    assert not missing, f"constraints.txt pins packages that make install did not install: {missing}"


def test_make_install_uses_the_constraints():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "pip install --quiet -c $(CONSTRAINTS) -e '.[model,dev,spark]'" in makefile
    assert "CONSTRAINTS := constraints.txt" in makefile
