"""What lives for a run is owned by the run: no module of the package keeps mutable state
at its top level, starts anything when imported, or patches pyspark."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "eventlake"
#: Kept on purpose, with the reason (docs/architecture.md, "The run scope").
ALLOWED = {
    # The process's one SparkSession is created under this lock.
    ("session.py", "_lock"),
    # Local files need no state: one stateless LocalStorage serves every local path.
    ("storage/__init__.py", "_LOCAL"),
    # The validation rules, registered by their decorators at import, read-only after.
    ("validation/rules.py", "RULES"),
}
#: Constructors of values or declarations, not of state: type variables, context
#: variables (per context by design), paths, and pipelines declared in a module.
VALUES = {"TypeVar", "ContextVar", "Path", "Location", "Pipeline", "Typer"}
MUTABLE_CALLS = {"dict", "list", "set", "count", "defaultdict", "deque", "Thread", "Event",
                 "Queue", "SimpleQueue", "OrderedDict", "Counter"}  # fmt: skip


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _name(node.func)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _mutable(name: str, value: ast.expr | None) -> bool:
    """Whether a top-level ``name = value`` holds something a run could change: an empty
    container (filled later), a mutable container of a lowercase name, an instance built
    at import (a singleton), or a counter, queue, thread or event."""
    if isinstance(value, ast.List | ast.Dict | ast.Set):
        empty = not (getattr(value, "elts", None) or getattr(value, "keys", None))
        return empty or not name.isupper()
    if not isinstance(value, ast.Call):
        return False
    called = _name(value)
    if called in MUTABLE_CALLS:
        return True
    instance = called[:1].isupper() and called not in VALUES
    return instance and not called.isupper()


def module_state(source: str, where: str) -> list[str]:
    """Top-level names bound to mutable values (constants in UPPER_CASE aside), top-level
    calls run at import, and assignments to attributes of pyspark's classes."""
    found = []
    tree = ast.parse(source)
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _name(stmt.value) != "setattr"
            # The CLI declares its typer command tree at import: declarations, not state.
            and not where.startswith("cli/")
        ):
            found.append(f"{where}:{stmt.lineno} runs {_name(stmt.value)}() at import")
        for target in targets:
            name = target.id if isinstance(target, ast.Name) else ""
            if name.startswith("__"):
                continue  # __all__ and friends
            if name and _mutable(name, value) and (where, name) not in ALLOWED:
                found.append(f"{where}:{stmt.lineno} keeps {name}")
    for node in ast.walk(tree):
        # setattr on anything but the object itself or a function being declared is how
        # a class gets patched (``setattr(type(df), "withWatermark", ...)``).
        if isinstance(node, ast.Call) and _name(node.func) == "setattr" and node.args:
            first = ast.unparse(node.args[0])
            if first not in ("self", "fn"):
                found.append(f"{where}:{node.lineno} patches {first}")
    return found


def test_the_checker_finds_state_imports_that_run_and_patches() -> None:
    source = (
        "_seen: dict[str, int] = {}\nTABLE = {'a': 1}\n_n = itertools.count(1)\n"
        "_PER_BATCH: dict[str, int] = {}\nWORKER = Worker()\nP = TypeVar('P')\n"
        "disable_created_metrics()\nsetattr(DataFrame, 'groupBy', f)\n"
        "def hook():\n    setattr(frame, 'withWatermark', g)\n    setattr(self, 'x', 1)\n"
    )
    assert module_state(source, "m.py") == [
        "m.py:1 keeps _seen",
        "m.py:3 keeps _n",
        "m.py:4 keeps _PER_BATCH",
        "m.py:5 keeps WORKER",
        "m.py:7 runs disable_created_metrics() at import",
        "m.py:8 patches DataFrame",
        "m.py:10 patches frame",
    ]


def test_no_module_of_the_package_keeps_run_state() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent.name == "testing" and path.name == "crash.py":
            continue  # the crash injector wraps the fan-out on purpose, in tests only
        found += module_state(path.read_text(), str(path.relative_to(PACKAGE)))
    assert found == []
