"""Every connector class loaded in this process and what each declares it supports: the
matrix ``eventlake connectors`` prints and README's tables are checked against."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields

from eventlake.connectors.base import Input, Output, Target
from eventlake.connectors.capabilities import TriggerKind


@dataclass(frozen=True)
class ConnectorRow:
    """One connector class: its kind (input, output, target), the guarantee it gives (an
    input: whether it is replayable) and its other capabilities, as text."""

    kind: str
    name: str
    module: str
    guarantee: str
    capabilities: dict[str, str]


def _concrete(base: type) -> list[type]:
    found: list[type] = []
    todo: list[type] = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not inspect.isabstract(cls) and not cls.__name__.startswith("_") and cls not in found:
            found.append(cls)
    return sorted(found, key=lambda c: (not c.__module__.startswith("eventlake."), c.__name__))


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, frozenset):
        order = [k.value for k in TriggerKind] + ["append", "update", "complete"]
        texts = {str(getattr(v, "value", v)) for v in value}
        return ", ".join(sorted(texts, key=lambda t: order.index(t) if t in order else 99))
    return str(getattr(value, "value", value))


def _row(kind: str, cls: type, attribute: str) -> ConnectorRow | None:
    """A row from the class's declared ``attribute``: a capabilities record or the
    guarantee; a property (computed per instance) is described by its docstring. None for
    a class whose definition was refused for lacking it."""
    declared = inspect.getattr_static(cls, attribute, None)
    if declared is None:
        return None
    if isinstance(declared, property):
        doc = (declared.__doc__ or "per instance").strip().splitlines()[0].rstrip(".")
        return ConnectorRow(kind, cls.__name__, cls.__module__, doc, {})
    if attribute == "guarantee":
        return ConnectorRow(kind, cls.__name__, cls.__module__, _cell(declared), {})
    cells = {f.name.replace("_", " "): _cell(getattr(declared, f.name)) for f in fields(declared)}
    replayable = cells.pop("replayable", None)
    guarantee = cells.pop("guarantee", None) or (
        "replayable" if replayable == "yes" else "not replayable"
    )
    return ConnectorRow(kind, cls.__name__, cls.__module__, guarantee, cells)


def connector_rows() -> list[ConnectorRow]:
    """Every concrete input, output and target class loaded now (eventlake's and those of
    loaded user modules), with what it declares."""
    kinds = (("input", Input, "capabilities"), ("output", Output, "capabilities"),
             ("target", Target, "guarantee"))  # fmt: skip
    rows = [
        _row(kind, cls, attribute) for kind, base, attribute in kinds for cls in _concrete(base)
    ]
    return [row for row in rows if row is not None]
