"""The package's layers import in one direction: every import, type-only and
function-local ones too, goes down the documented layer order (docs/architecture.md)."""

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


#: The layers, lowest first: a module imports only from layers below its own.
LAYERS: list[tuple[str, ...]] = [
    ("secrets",),
    ("errors",),
    ("paths",),
    ("durations", "storage", "processes", "jars", "class_archive", "scratch", "allocator"),
    ("triggers", "kafka", "jvm_code"),
    ("config",),
    ("postgres", "checkpoints", "generator"),
    ("monitoring", "watermarks"),
    ("transforms", "state"),
    ("scope",),
    ("context",),
    ("connectors",),
    ("pipelines",),
    ("reference", "cluster"),
    ("session",),
    ("operations",),
    ("validation",),
    ("run",),
    ("testing", "warmup"),
    ("demo",),
    ("cli",),
    ("resources",),  # spark-submit's application file: it runs the CLI
]
RANK = {f"eventlake.{name}": i for i, layer in enumerate(LAYERS) for name in layer}


def imported_nodes(source: str, node: str) -> set[str]:
    """The other nodes that the module ``source`` (text, of node ``node``) imports, from
    every import statement anywhere in it: top level, type-only and inside functions."""
    found: set[str] = set()
    for stmt in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(stmt, ast.Import):
            targets = [alias.name for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
            targets = [stmt.module]
        found |= {_node(t) for t in targets if t.startswith("eventlake.") and _node(t) != node}
    return found


def import_graph() -> dict[str, set[str]]:
    """Each node's imports of other nodes, from every import statement."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name == "eventlake":
            continue  # the root package only re-exports
        node = _node(name)
        graph.setdefault(node, set()).update(imported_nodes(path.read_text(), node))
    return graph


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Edges that do not go down the layer order (or reach a node no layer lists)."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if a not in RANK or b not in RANK or RANK[b] >= RANK[a]
    )


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


def test_every_import_goes_down_the_layers() -> None:
    graph = import_graph()
    assert set(graph) <= set(RANK), sorted(set(graph) - set(RANK))
    assert upward(graph) == []


def test_a_function_local_import_up_the_layers_is_caught() -> None:
    source = "def f() -> None:\n    from eventlake.cli.main import main\n"
    edges = imported_nodes(source, "eventlake.context")
    assert edges == {"eventlake.cli"}
    assert upward({"eventlake.context": edges}) == ["eventlake.context -> eventlake.cli"]


def test_no_private_name_is_imported_across_modules() -> None:
    """A ``_name`` stays in its module: other modules and the tests use public API (or
    ``eventlake.testing``)."""
    root = PACKAGE.parent
    crossing = []
    for path in [*PACKAGE.rglob("*.py"), *(root / "tests").rglob("*.py")]:
        for stmt in ast.walk(ast.parse(path.read_text())):
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("eventlake"):
                crossing += [
                    f"{path.relative_to(root)}: {stmt.module}.{alias.name}"
                    for alias in stmt.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert crossing == []
