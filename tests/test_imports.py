"""No import cycles among the project's modules: shared types live in their own module (e.g.
offline/timeline.py between the render and its pictures, verify/series.py between the p2p verdict
and its parsers). Every import counts, also one inside a function or under TYPE_CHECKING: a cycle
hidden that way is still two modules that cannot be understood one without the other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "components", "offline", "stack_config", "verify", "policy")


def _modules() -> dict[str, Path]:
    found = {p.stem: p for p in ROOT.glob("*.py") if p.stem != "__main__"}
    for package in PACKAGES:
        for p in (ROOT / package).glob("*.py"):
            found[package if p.stem == "__init__" else f"{package}.{p.stem}"] = p
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in modules else node.module)
    return {m for m in out if m in modules}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
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


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_check_sees_a_cycle_hidden_in_a_function():
    graph = import_graph()
    assert "verify.series" in graph["verify.osu"] and "offline.timeline" in graph["offline.mermaid"]
    graph["verify.series"] = {*graph["verify.series"], "verify.osu"}
    assert cycles(graph) == [["verify.osu", "verify.series"]]
