"""The Python side's package graph, read from the imports of ts/ (docs/architecture.md draws it).

Two rules, each a failing test when broken: no import cycle between ts's packages (``ts.<name>``,
and ``ts.llm.<layer>`` for the LLM layers), and the LLM layers import only the layers below them
(the Java side's counterpart is frontend/src/test/java/org/tserve/LayeringTest.java).
Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "ts"

# ts.llm's layers, each with the ts.llm layers it may import (docs/architecture.md, "ts/llm").
LLM_LAYERS: dict[str, set[str]] = {
    "ts.llm.params": set(),
    "ts.llm.guidance": {"ts.llm.params"},
    "ts.llm.api": {"ts.llm.params", "ts.llm.guidance"},
    "ts.llm.engine": {"ts.llm.params", "ts.llm.guidance"},
    "ts.llm.process": {"ts.llm.engine", "ts.llm.params", "ts.llm.guidance"},
    "ts.llm.handler": {"ts.llm.engine", "ts.llm.params", "ts.llm.guidance"},
}


def package_of(module: str) -> str:
    """``ts.llm.engine.paged.pool`` -> ``ts.llm.engine``; ``ts.protocol.codec`` -> ``ts.protocol``."""
    depth = 3 if module.startswith("ts.llm.") else 2
    return ".".join(module.split(".")[:depth])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {m for m in found if m == "ts" or m.startswith("ts.")}


def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in root.rglob("*.py"):
        source = package_of(module_name(path))
        for target in map(package_of, imported_modules(path)):
            if target != source:
                graph[source].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(graph) | {t for targets in graph.values() for t in targets}):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_ts_packages() -> None:
    assert cycles(package_graph()) == []


def test_llm_layers_import_only_the_layers_below_them() -> None:
    graph = package_graph()
    wrong = {layer: sorted(t for t in graph.get(layer, ()) if t.startswith("ts.llm.") and t not in allowed)
             for layer, allowed in LLM_LAYERS.items()}
    assert {layer: targets for layer, targets in wrong.items() if targets} == {}


def test_every_llm_package_is_a_declared_layer() -> None:
    packages = {package_of(module_name(p)) for p in (ROOT / "llm").rglob("*.py")} - {"ts.llm"}
    assert packages - set(LLM_LAYERS) == set(), "a new ts.llm package needs its row in LLM_LAYERS and architecture.md"


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    # the rule above can fail: two packages importing each other make one cycle
    for name, other in (("a", "b"), ("b", "a")):
        (tmp_path / "ts" / name).mkdir(parents=True)
        (tmp_path / "ts" / name / "__init__.py").write_text(f"from ts.{other} import x\n")
    graph: dict[str, set[str]] = defaultdict(set)
    for path in (tmp_path / "ts").rglob("*.py"):
        source = ".".join(path.relative_to(tmp_path).parts[:2])
        graph[source].update(package_of(m) for m in imported_modules(path))
    assert cycles(graph) == [["ts.a", "ts.b"]]
