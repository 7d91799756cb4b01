"""The layers of the house (docs/architecture.md): which package may import which.

Every import of every module is read from its syntax tree, at module level and inside
functions alike (a deferred import is still a dependency), with ``importlib.import_module``
and ``__import__`` calls on a literal name counted as imports too. Code under
``if __name__ == "__main__":`` is a program, not a library: it may hand over to the command
line (``pipelines.cli``) and nothing else outside its layer.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the packages of this project it may import (besides itself); third-party and stdlib are free
ALLOWED = {
    "common": set(),
    "corpus": {"common"},
    "dedup": {"common", "corpus"},
    "model": {"common", "corpus", "dedup"},
    "samplecrawl": {"common"},
    "pipelines": {"common", "corpus", "dedup", "model", "samplecrawl"},
}
PACKAGES = set(ALLOWED)
BEAM_FREE = {"corpus", "dedup"}  # plain functions over plain records: never apache_beam
# What a Spark Python worker imports to run any job (the modules of the functions it unpickles):
# without Beam, which a worker would load for a second of CPU and never use.
SPARK_WORKER_MODULES = ("pipelines.spark.engine", "pipelines.spark.read", "pipelines.spark.plan", "pipelines.plan", "pipelines.spark.dedupe", "pipelines.spark.staging",
                        "pipelines.spark.tokenize", "pipelines.spark.audit", "pipelines.spark.webtext")
# What the launcher of ``corpusforge c4 --engine spark`` imports before its session: not Beam
# either (its import is 1.5 CPU-s; the Beam interpretation is ``pipelines.beam.plan``).
SPARK_LAUNCHER_MODULES = ("pipelines.cli", "pipelines.c4.job", "pipelines.c4.options", "pipelines.engines", "pipelines.read.job", "pipelines.spark.jvm")
MAIN_BLOCK_MAY_IMPORT = {"pipelines.cli"}  # ``python -m corpus.fetch`` is ``corpusforge fetch``

# Violations known and not fixed yet, (module file, imported module); a fixed one leaves this list.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _is_main_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    names = [test.left, *test.comparators]
    return (any(isinstance(n, ast.Name) and n.id == "__name__" for n in names)
            and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in names))


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool = False) -> list[tuple[str, bool, int]]:
    """(imported module, inside a ``__main__`` block, line) for every import in ``source``."""
    tree = ast.parse(source)
    main_lines: set[int] = set()
    for node in ast.walk(tree):
        if _is_main_block(node):
            for inner in ast.walk(node):
                if hasattr(inner, "lineno"):
                    main_lines.add(inner.lineno)
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, base] if base else anchor)
            names = [base]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__"):
                names = [node.args[0].value]
        for name in names:
            found.append((name, node.lineno in main_lines, node.lineno))
    return found


def violations(root: Path = ROOT) -> set[tuple[str, str]]:
    """(module file, imported module) for every import that breaks the layer rules."""
    bad = set()
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(path, root)
            rel = path.relative_to(root).as_posix()
            for name, in_main, _ in imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
                top = name.split(".")[0]
                if top == "apache_beam" and package in BEAM_FREE:
                    bad.add((rel, name))
                elif top in PACKAGES and top != package and top not in ALLOWED[package]:
                    if not (in_main and name in MAIN_BLOCK_MAY_IMPORT):
                        bad.add((rel, name))
    return bad


def test_every_import_follows_the_layers():
    found = violations()
    new = sorted(found - KNOWN_VIOLATIONS)
    assert not new, "imports against the layers (docs/architecture.md):\n" + "\n".join(f"  {f} imports {m}" for f, m in new)


def test_known_violations_are_still_there():
    """Each known violation still exists: when one is fixed, it leaves KNOWN_VIOLATIONS too."""
    if not KNOWN_VIOLATIONS:
        pytest.skip("no known violations")
    assert KNOWN_VIOLATIONS <= violations()


def test_the_checker_sees_deferred_imports_relative_imports_and_import_module(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "__init__.py").write_text("")
    (tmp_path / "corpus" / "late.py").write_text(
        "import json\n"
        "def f():\n"
        "    from pipelines.jobs import write_json  # a function-level import is a dependency too\n"
        "def g():\n"
        "    import importlib\n"
        "    return importlib.import_module('model.train')\n"
        "def h():\n"
        "    import apache_beam as beam\n"
        "from .urls import normalize_url\n"
        "if __name__ == '__main__':\n"
        "    from pipelines.cli import main\n"
        "    from pipelines.demo.job import run_demo\n"
    )
    for package in PACKAGES - {"corpus"}:
        (tmp_path / package).mkdir()
    assert violations(tmp_path) == {
        ("corpus/late.py", "pipelines.jobs"),
        ("corpus/late.py", "model.train"),
        ("corpus/late.py", "apache_beam"),
        ("corpus/late.py", "pipelines.demo.job"),  # a __main__ block may hand over to the CLI only
    }
    names = [name for name, _, _ in imports_of((tmp_path / "corpus" / "late.py").read_text(), "corpus.late")]
    assert "corpus.urls" in names and "json" in names and "importlib" in names


def test_a_dedup_module_may_use_corpus_but_corpus_may_not_use_dedup(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "dedup" / "keys.py").write_text("from corpus.records import Document\nfrom common import storage\n")
    (tmp_path / "corpus" / "rules.py").write_text("from dedup.lines import dedupe_lines\n")
    (tmp_path / "model" / "train.py").write_text("import torch\nfrom dedup import bloom\nfrom pipelines import cli\n")
    assert violations(tmp_path) == {("corpus/rules.py", "dedup.lines"), ("model/train.py", "pipelines")}


@pytest.mark.pipeline  # an import probe in a fresh Python process
def test_a_spark_worker_and_the_c4_launcher_run_without_loading_beam():
    pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install 'corpusforge[spark]'")
    probe = f"import sys, {', '.join(SPARK_WORKER_MODULES + SPARK_LAUNCHER_MODULES)}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam'))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout[:2000]


def pipelines_import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each ``pipelines`` module -> the ``pipelines`` modules it imports, deferred imports (inside
    functions) included, ``__main__`` blocks and ``TYPE_CHECKING`` blocks left out;
    ``from pipelines import progress`` counts as an import of ``pipelines.progress``."""
    paths = {_module_name(path, root): path for path in sorted((root / "pipelines").rglob("*.py"))
             if "data" not in path.relative_to(root).parts}  # pipelines/data/: package data, not modules
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set()
        for node in ast.walk(tree):
            if _is_main_block(node) or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
                skipped.update(id(inner) for inner in ast.walk(node))
        found = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                             for a in node.names)
        graph[module] = {name for name in found if name in paths and name != module and name != "pipelines"}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_pipelines_has_no_import_circle():
    """No ``pipelines`` module imports, even from inside a function, a module that imports it back."""
    graph = pipelines_import_graph()
    assert len(graph) > 40 and "pipelines.spark_launch" in graph["pipelines.spark.engine"]
    cycles = import_cycles(graph)
    assert not cycles, "import circles in pipelines/:\n" + "\n".join(
        "  " + ", ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in cycles)


def test_the_circle_check_finds_a_deferred_circle(tmp_path):
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "__init__.py").write_text("")
    (tmp_path / "pipelines" / "a.py").write_text("from pipelines import b\n")
    (tmp_path / "pipelines" / "b.py").write_text("def f():\n    from pipelines.a import x\n")
    (tmp_path / "pipelines" / "c.py").write_text("if __name__ == '__main__':\n    from pipelines import a\n")
    graph = pipelines_import_graph(tmp_path)
    assert graph["pipelines.a"] == {"pipelines.b"} and graph["pipelines.c"] == set()
    assert import_cycles(graph) == [["pipelines.a", "pipelines.b"]]
