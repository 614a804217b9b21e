"""The package's layers import in one direction: no cycle between its packages and modules."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "eventlake"


def _node(module: str) -> str:
    """``eventlake.<package or top-level module>`` for a dotted module name."""
    return ".".join(module.split(".")[:2])


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Each node's imports of other nodes, from every import statement (type-only too)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name == "eventlake":
            continue  # the root package only re-exports
        source = _node(name)
        edges = graph.setdefault(source, set())
        for stmt in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(stmt, ast.Import):
                targets = [alias.name for alias in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                targets = [stmt.module]
            for target in targets:
                if target.startswith("eventlake.") and _node(target) != source:
                    edges.add(_node(target))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_finds_a_cycle_when_there_is_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_between_packages() -> None:
    graph = import_graph()
    assert "eventlake.connectors" in graph
    assert "eventlake.pipelines" in graph["eventlake.validation"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_runtime_never_imports_the_validator() -> None:
    graph = import_graph()
    for runtime in ("eventlake.connectors", "eventlake.pipelines", "eventlake.checkpoints"):
        assert "eventlake.validation" not in graph[runtime], runtime
