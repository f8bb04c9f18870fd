"""The package's import graph: no cycles, and data flows one way (DESIGN, "The house").

Every import statement counts: at module level, inside a function, and under `if TYPE_CHECKING:`
(annotations only, never executed, yet still one module naming the other, so the two cannot be
read or moved apart). `from package import name` is an edge to the submodule `package.name` when
there is one, else to the package's `__init__`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "bayesdp"


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _imports(name: str, path: Path, package: bool, modules: dict) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = name if package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            subs = {f"{base}.{alias.name}" for alias in node.names}
            found.update(subs & modules.keys())
            if not subs <= modules.keys():
                found.add(base)
    return {m for m in found if m in modules and m != name}


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    modules = _modules(root)
    return {name: _imports(name, path, package, modules) for name, (path, package) in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_detector_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_the_detector_counts_imports_made_for_annotations_only(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from pkg.b import B\n")
    (pkg / "b.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import pkg.a\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.b"]]


def test_no_import_cycles():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("layer", ["privacy", "noise"])
def test_privacy_and_noise_import_nothing_else_of_the_project(layer):
    allowed = (f"bayesdp.{layer}", "bayesdp.errors")
    graph = import_graph()
    bad = {m: sorted(d for d in deps if not d.startswith(allowed))
           for m, deps in graph.items() if m.startswith(f"bayesdp.{layer}")}
    assert {m: d for m, d in bad.items() if d} == {}


def test_reports_sit_on_top():
    """report/ receives a release; only the command line, the service and itself import it (and
    the public face, which names every subpackage for annotations and loads it on first use)."""
    above = ("bayesdp.report", "bayesdp.commands", "bayesdp.serve", "bayesdp.cli")
    importers = {m for m, deps in import_graph().items() if any(d.startswith("bayesdp.report") for d in deps)}
    assert {m for m in importers if not m.startswith(above) and m != "bayesdp"} == set()


def upward(graph: dict[str, set[str]], above: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules outside the layers `above` that import one of their modules."""
    found = {m: sorted(d for d in deps if d.startswith(above))
             for m, deps in graph.items() if not m.startswith(above)}
    return {m: d for m, d in found.items() if d}


def test_the_layer_check_finds_an_upward_import(tmp_path):
    pkg = tmp_path / "bayesdp"
    (pkg / "serve").mkdir(parents=True)
    (pkg / "commands").mkdir()
    for init in (pkg, pkg / "serve", pkg / "commands"):
        (init / "__init__.py").write_text("")
    (pkg / "commands" / "release.py").write_text("def build(): pass\n")
    (pkg / "serve" / "service.py").write_text("def f():\n    from bayesdp.commands.release import build\n")
    assert upward(import_graph(pkg), ("bayesdp.commands",)) == {
        "bayesdp.serve.service": ["bayesdp.commands.release"]}


def test_only_the_command_line_imports_the_command_line():
    """commands/ and cli.py sit on top: the service and the library never import them (the
    service parses specs through `bayesdp.tables.spec`, as the command line does)."""
    assert upward(import_graph(), ("bayesdp.commands", "bayesdp.cli", "bayesdp.__main__")) == {}
