"""Can changed code resume from the old checkpoints? One verdict per flow.

Compares each flow as now coded (its plan) with what its checkpoint holds: the plan
fingerprint written when the checkpoint was new (source, sink, output mode, watermarks)
and the stateful operators in Spark's state metadata, with their key schemas.

- ``resumes safely``: nothing the checkpoint depends on changed.
- ``resumes, changes results``: it runs, but rows differ from what the old code wrote
  (another sink, output mode or watermark delay).
- ``cannot resume``: the offsets or the state belong to another query (another source, a
  stateful operator added or removed, a state key changed); Spark would fail or silently
  misread the state. The fix names the command that starts the flow afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventlake.checkpoints import CheckpointLog, read_fingerprint
from eventlake.pipelines.plan_tree import PlanNode, StatefulOperator, planned_operators

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.config import Settings
    from eventlake.pipelines.api import Pipeline
    from eventlake.pipelines.plan import PlannedFlow

NEW, SAFE, CHANGES, BLOCKED = "new", "resumes safely", "resumes, changes results", "cannot resume"


@dataclass(frozen=True)
class Verdict:
    """What resuming ``flow`` from its checkpoint would do."""

    flow: str
    outcome: str
    reasons: tuple[str, ...] = ()
    fix: str | None = None

    def text(self) -> str:
        why = "; ".join(self.reasons)
        return f"{self.flow}: {self.outcome}" + (f" ({why})" if why else "")

    def as_dict(self) -> dict[str, Any]:
        return {"flow": self.flow, "outcome": self.outcome, "reasons": list(self.reasons),
                "fix": self.fix}  # fmt: skip


def struct_fields(simple: str) -> tuple[str, ...]:
    """Top-level field names of a ``struct<a:int,b:struct<c:int>>`` type string."""
    inner = simple.strip()
    if not inner.startswith("struct<"):
        return ()
    inner = inner[len("struct<") : -1]
    names, depth, start = [], 0, 0
    for i, ch in enumerate(inner + ","):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            names.append(inner[start:i].split(":", 1)[0].strip("` "))
            start = i + 1
    return tuple(n for n in names if n)


def held_state(spark: SparkSession, flow: PlannedFlow) -> list[dict[str, Any]] | None:
    """The checkpoint's stateful operators and key schemas (rows not counted); None before
    a batch committed (there is no state to compare yet)."""
    from eventlake.operations.checkpoints import state_operators

    if CheckpointLog(flow.checkpoint).last_committed is None:
        return None
    return state_operators(spark, flow.checkpoint, count=False)


def verdict(
    flow: PlannedFlow, state: list[dict[str, Any]] | None, tree: PlanNode | None = None
) -> Verdict:
    """The verdict for ``flow``; ``state`` is its checkpoint's operators (None: not read,
    the fingerprint's operator names are compared instead)."""
    name = flow.query_name
    log = CheckpointLog(flow.checkpoint)
    planned = log.planned
    if not planned:  # nothing to resume: the query starts at batch 0
        return Verdict(name, NEW)
    recorded = read_fingerprint(flow.checkpoint)
    tree = tree or flow.tree()
    now = flow.fingerprint(tree).as_dict()
    blocked: list[str] = []
    changes: list[str] = []
    if recorded is None:
        blocked.append("its checkpoint was not written by this flow")
    else:
        if recorded.get("source") != now["source"]:
            blocked.append(f"reads {now['source']}, its offsets are of {recorded.get('source')}")
        if recorded.get("sink") != now["sink"]:
            changes.append(f"writes to {now['sink']} from the next batch on, no longer to "
                           f"{recorded.get('sink')}")  # fmt: skip
        if recorded.get("output_mode") != now["output_mode"]:
            changes.append(f"output mode {recorded.get('output_mode')} -> {now['output_mode']}")
        was = recorded.get("watermarks")
        if was is not None and list(was) != list(now["watermarks"]):
            changes.append(f"watermark {', '.join(was) or 'none'} -> "
                           f"{', '.join(now['watermarks']) or 'none'}")  # fmt: skip
    sources = log.sources(planned[-1])
    held = len(sources)
    reads = sum(1 for n in tree.walk() if n.name.startswith("StreamingRelation"))
    if reads and held != reads:  # e.g. idle_timeout's heartbeat source added or removed
        blocked.append(f"the query reads {reads} source(s), its checkpoint has offsets "
                       f"of {held}")  # fmt: skip
    elif _rate_heartbeat(sources) and flow.ctx.params.idle_timeout:
        blocked.append("its idle_timeout heartbeats were Spark's rate source, now the "
                       "eventlake_heartbeat source")  # fmt: skip
    if state is not None:
        blocked += _state_changes(planned_operators(tree), state)
    elif recorded is not None and recorded.get("stateful") != now["stateful"]:
        blocked.append(f"stateful operators {recorded.get('stateful')} -> {now['stateful']}")
    reset = f"eventlake checkpoint reset {flow.query_name} --yes"
    if blocked:
        fix = (f"start the flow afresh: `{reset}` (it reprocesses its input from "
               "starting_offsets), or restore the code that wrote the checkpoint")  # fmt: skip
        return Verdict(name, BLOCKED, tuple(blocked + changes), fix)
    if changes:
        return Verdict(name, CHANGES, tuple(changes))
    return Verdict(name, SAFE)


def _rate_heartbeat(sources: list[Any]) -> bool:
    """Whether a checkpoint's offsets hold a rate source's (a bare number) beside others:
    how flows with idle_timeout checkpointed their heartbeats before eventlake_heartbeat."""
    return len(sources) > 1 and any(isinstance(s, int) for s in sources[1:])


#: Spark's state operator names of one kind of operator (a session window aggregates too).
FAMILIES = {
    "stateStoreSave": "aggregation",
    "sessionWindowStateStoreSaveExec": "aggregation",
    "dedupe": "dedupe",
    "dedupeWithinWatermark": "dedupeWithinWatermark",
    "symmetricHashJoin": "stream-stream join",
    "flatMapGroupsWithState": "flatMapGroupsWithState",
    "transformWithStateExec": "transformWithState",
    "transformWithStateInPySparkExec": "transformWithState",
}
#: State keys compared by column names: those that are the grouping or dedup columns.
_COMPARED_KEYS = ("stateStoreSave", "dedupe", "dedupeWithinWatermark")


def _held(state: list[dict[str, Any]]) -> list[StatefulOperator]:
    """One entry per stateful operator of the checkpoint (a join has four stores)."""
    first: dict[Any, dict[str, Any]] = {}
    for entry in state:
        first.setdefault(entry["operator_id"], entry)
    return [
        StatefulOperator(
            str(op["operator"]),
            struct_fields(str(op.get("key_schema") or ""))
            if op["operator"] in _COMPARED_KEYS else None,
        )
        for op in first.values()
    ]  # fmt: skip


def _state_changes(planned: list[StatefulOperator], state: list[dict[str, Any]]) -> list[str]:
    def family(op: StatefulOperator) -> str:
        return FAMILIES.get(op.operator, op.operator)

    left = _held(state)
    problems: list[str] = []
    for op in planned:
        same = [h for h in left if family(h) == family(op)]
        if not same:
            problems.append(f"new stateful operator {op.operator} has no state in the checkpoint")
            continue
        match = next((h for h in same if None in (op.keys, h.keys) or h.keys == op.keys), None)
        if match is None:
            problems.append(f"state key of {op.operator} changed: ({', '.join(same[0].keys or ())})"
                            f" -> ({', '.join(op.keys or ())})")  # fmt: skip
            match = same[0]
        left.remove(match)
    for h in left:
        keys = f" ({', '.join(h.keys)})" if h.keys else ""
        problems.append(f"stateful operator {h.operator} was removed: its state would be lost"
                        f"{keys}")  # fmt: skip
    return problems


def upgrade_verdicts(pipeline: Pipeline, settings: Settings, spark: SparkSession) -> list[Verdict]:
    """A verdict per flow of ``pipeline`` as now coded against its checkpoints (planned
    against a scratch lake: nothing is created in the real one)."""
    import tempfile
    from pathlib import Path

    from eventlake.pipelines.plan import build_plan

    with tempfile.TemporaryDirectory(prefix="eventlake-upgrade-") as scratch:
        plan = build_plan(pipeline, settings, spark, lake_root=Path(scratch))
        return [verdict(flow, held_state(spark, flow)) for flow in plan.flows]
