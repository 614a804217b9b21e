"""A flow's analysed logical plan as a small tree, read from Spark's ``treeString``.

Only what the rules need: operator names, their text, children, and which attributes
carry a watermark (Spark marks them ``name#id-T<delay>ms``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_PREFIX = re.compile(r"^[\s:+\-|]*")
_WATERMARKED = re.compile(r"-T\d+ms")
STATEFUL = ("Aggregate", "Deduplicate", "DeduplicateWithinWatermark", "FlatMapGroupsWithState",
            "FlatMapGroupsInPandasWithState", "TransformWithState", "TransformWithStateInPandas",
            "TransformWithStateInPySpark")  # fmt: skip


@dataclass
class PlanNode:
    name: str
    text: str
    children: list[PlanNode] = field(default_factory=list)

    def walk(self) -> list[PlanNode]:
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes

    def find(self, *names: str) -> list[PlanNode]:
        return [n for n in self.walk() if n.name in names]

    @property
    def streaming(self) -> bool:
        return any(n.name.startswith("StreamingRelation") for n in self.walk())

    @property
    def stream_stream_join(self) -> bool:
        """A join of two streams: the only kind that keeps state (stream-static does not)."""
        return (
            self.name == "Join"
            and len(self.children) == 2
            and all(c.streaming for c in self.children)
        )

    @property
    def has_watermark(self) -> bool:
        return bool(self.find("EventTimeWatermark"))

    def keys(self) -> str:
        """The text of the first bracketed list: grouping keys, dedup keys."""
        start, end = self.text.find("["), self.text.find("]")
        return self.text[start + 1 : end] if 0 <= start < end else ""

    def keys_watermarked(self) -> bool:
        return bool(_WATERMARKED.search(self.keys()))


def parse_tree(text: str) -> PlanNode:
    stack: list[tuple[int, PlanNode]] = []
    root: PlanNode | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        depth = len(_PREFIX.match(line).group(0))  # type: ignore[union-attr]
        body = line[depth:].lstrip("~")
        node = PlanNode(name=body.split(" ", 1)[0].split("[", 1)[0], text=body)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        else:
            root = node
        stack.append((depth, node))
    if root is None:
        raise ValueError("empty plan")
    return root


def analysed_tree(df: DataFrame) -> PlanNode:
    return parse_tree(str(df._jdf.queryExecution().analyzed().treeString()))


#: Spark's state-metadata operator names by the logical plan node that keeps the state.
STATE_OPERATORS = {
    "Aggregate": "stateStoreSave",
    "Deduplicate": "dedupe",
    "DeduplicateWithinWatermark": "dedupeWithinWatermark",
    "Join": "symmetricHashJoin",
    "FlatMapGroupsWithState": "flatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState": "flatMapGroupsWithState",
    "TransformWithState": "transformWithStateExec",
    "TransformWithStateInPandas": "transformWithStateInPySparkExec",
    "TransformWithStateInPySpark": "transformWithStateInPySparkExec",
}
#: Operators whose state key is the node's bracketed key list (grouping or dedup columns).
KEYED = ("Aggregate", "Deduplicate", "DeduplicateWithinWatermark")
_ATTRIBUTE_ID = re.compile(r"#\d+(-T\d+ms)?")


@dataclass(frozen=True)
class StatefulOperator:
    """A stateful operator as the plan has it: Spark's state operator name, key columns."""

    operator: str
    keys: tuple[str, ...] | None = field(default=None)


def planned_operators(tree: PlanNode) -> list[StatefulOperator]:
    """The stateful operators of a plan (stream-stream joins only; a stream-static join
    keeps no state), sorted."""
    found = []
    for node in tree.walk():
        if node.name not in (*STATEFUL, "Join") or not node.streaming:
            continue
        if node.name == "Join" and not node.stream_stream_join:
            continue
        keys = None
        if node.name in KEYED:
            listed = [k for k in node.keys().split(",") if k.strip()]
            keys = tuple(_ATTRIBUTE_ID.sub("", k).strip() for k in listed)
        found.append(StatefulOperator(STATE_OPERATORS[node.name], keys))
    return sorted(found, key=lambda o: (o.operator, o.keys or ()))


def watermarks(tree: PlanNode) -> tuple[str, ...]:
    """``column delay`` of each EventTimeWatermark of the plan, sorted.

    Spark 4.2 writes the node as ``EventTimeWatermark <uuid>, ts#188: timestamp, 10 minutes``.
    """
    marks = []
    for node in tree.find("EventTimeWatermark"):
        parts = [p.strip() for p in node.text.removeprefix("EventTimeWatermark").split(",")]
        column = next((p for p in parts if "#" in p), "?").split("#", 1)[0]
        marks.append(f"{column} {parts[-1]}")
    return tuple(sorted(marks))
