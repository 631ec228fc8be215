"""No import cycles among the project's modules: shared types live in their own module (e.g.
offline/timeline.py between the render and its pictures, verify/series.py between the p2p verdict
and its parsers). Every import counts, also one inside a function or under TYPE_CHECKING: a cycle
hidden that way is still two modules that cannot be understood one without the other."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

from tests.paths import ROOT

PACKAGES = ("core", "components", "offline", "stack", "stack_config", "verify", "clusterside", "labeler", "policy")


def _modules() -> dict[str, Path]:
    """Every module by its dotted name, sub-packages included (components/platform/volcano.py is
    components.platform.volcano; a package's __init__.py is the package)."""
    found = {p.stem: p for p in ROOT.glob("*.py") if p.stem != "__main__"}
    for package in PACKAGES:
        for p in (ROOT / package).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return found


def test_the_walk_sees_every_module_of_every_package_and_sub_package():
    """A module the walk misses is a module whose imports nobody checks: the count is every .py file of
    the packages (sub-packages too) and the top-level modules but __main__.py."""
    on_disk = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    top = [p for p in ROOT.glob("*.py") if p.stem != "__main__"]
    modules = _modules()
    assert len(modules) == len(on_disk) + len(top)
    assert {"components.platform", "components.platform.volcano", "components.fabric.nccl_job",
            "components.namespace"} <= set(modules)


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a module's syntax tree, parsed once for all the tests of this file."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    out: set[str] = set()
    for node in _nodes(path):
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


# --- imports point down ---------------------------------------------------------------------------
# Each package's layer (docs/architecture.md): a module imports only from a lower layer or its own
# package. core holds the pure rules (catalog, fabric contract, pins, modes, kinds); verify (the pure
# judge: parsers, verdicts, the result) and the policy pack (in Pulumi's analyzer) read only core, and
# the labeler (one script shipped alone to the nodes) reads nothing of the project; clusterside (the
# collector and the certifier, what talks to a cluster) reads the judge; stack_config and components are
# peers that the assembly (stack/) joins (config -> typed Args); offline renders everything.
LAYERS = {"core": 0, "verify": 1, "policy": 1, "labeler": 1, "clusterside": 2, "stack_config": 3, "components": 3,
          "stack": 4, "offline": 4, "__main__": 5}
# Entry points that join packages of their layer or below, each its own unit above what it joins:
# `python -m verify` is the name users, the docs and the certifier's pods run, so the command line is
# verify/__main__.py, and it dispatches to the cluster side (collect, certify, wait-access). No other
# module of verify may import clusterside, and nothing imports an entry point but a higher layer.
ENTRIES = {"verify.__main__": LAYERS["clusterside"] + 0.5}
LAYERS.update(ENTRIES)


def _package(module: str) -> str:
    return module if module in ENTRIES else module.split(".")[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import that does not point down: to a higher layer, or to another package of the same one."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if _package(a) != _package(b) and LAYERS[_package(a)] <= LAYERS[_package(b)])


def _graph_with_main() -> dict[str, set[str]]:
    graph = import_graph()
    graph["__main__"] = _imports(ROOT / "__main__.py", _modules())
    return graph


def test_imports_point_down():
    graph = _graph_with_main()
    assert {_package(m) for m in graph} == set(LAYERS)  # a new package gets a layer
    assert upward_imports(graph) == []


def test_the_program_declares_its_resources_only_through_the_assembly():
    """__main__.py reads the configuration, asks stack/ for the halves and exports their outputs: it reaches
    no component itself (Volcano's manifest check included: stack/kubernetes.py)."""
    assert {_package(m) for m in _graph_with_main()["__main__"]} == {"stack", "stack_config"}


def test_the_layer_check_sees_an_upward_and_a_sideways_import():
    graph = _graph_with_main()
    graph["core.catalog"] = {*graph["core.catalog"], "stack_config.schema"}
    graph["components.platform.cluster"] = {*graph["components.platform.cluster"], "stack_config"}
    assert upward_imports(graph) == ["components.platform.cluster -> stack_config",
                                     "core.catalog -> stack_config.schema"]


def test_the_platform_does_not_import_the_fabric_test():
    """components/platform/ (the cluster, the operators, Volcano, the labeler) stands without
    components/fabric/ (the fabric test, its verdict, the certifier): the test builds on the platform,
    never the reverse. Both may use the shared helpers at components/ (namespace.py)."""
    graph = import_graph()
    platform = {m for m in graph if m.startswith("components.platform")}
    assert platform and {m for m in graph if m.startswith("components.fabric")}
    assert [f"{a} -> {b}" for a in sorted(platform) for b in sorted(graph[a])
            if b.startswith("components.fabric")] == []


def test_the_judge_does_not_import_the_cluster_side_and_only_its_command_line_may():
    graph = _graph_with_main()
    assert "clusterside.certify_cli" in graph["verify.__main__"]  # the entry point dispatches to it
    assert not any(_package(b) == "clusterside" for a, targets in graph.items() if _package(a) == "verify"
                   for b in targets)
    graph["verify.readers"] = {*graph["verify.readers"], "clusterside.kube"}
    graph["clusterside.collect"] = {*graph["clusterside.collect"], "verify.__main__"}
    assert upward_imports(graph) == ["clusterside.collect -> verify.__main__", "verify.readers -> clusterside.kube"]


def _roots(path: Path) -> set[str]:
    """The top-level names a module imports."""
    roots = set()
    for node in _nodes(path):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        roots.update(n.split(".")[0] for n in names)
    return roots


def test_core_imports_nothing_but_the_standard_library_and_itself():
    """The pure rules run in every layer, the pod's verify and the policy pack's analyzer included."""
    for name, path in _modules().items():
        if _package(name) != "core":
            continue
        for root in _roots(path):
            assert root == "core" or root in sys.stdlib_module_names, f"{name} imports {root}"


def test_the_labeler_imports_nothing_but_the_standard_library():
    """labeler/topology.py is shipped alone (one ConfigMap key) and run by the nodes' python3: it can import
    nothing else, not even core."""
    labeler = {name: path for name, path in _modules().items() if _package(name) == "labeler"}
    assert "labeler.topology" in labeler
    for name, path in labeler.items():
        assert all(root in sys.stdlib_module_names for root in _roots(path)), f"{name} imports {_roots(path)}"


def test_the_configuration_imports_neither_the_judge_nor_the_cluster_side():
    """What the configuration validates against (the modes and levels, the verdict's floor) lives in core/: the
    config layer reads core only, so a stack's configuration is checked without the judge or a cluster client."""
    graph = _graph_with_main()
    config = {a: {b for b in targets if _package(b) in ("verify", "clusterside")} for a, targets in graph.items()
              if _package(a) == "stack_config"}
    assert "stack_config.schema" in config and not any(config.values()), config
