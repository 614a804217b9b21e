"""The production checklist as rules. Each finding has a stable code, the flow, what is
wrong, why it matters and the fix. Errors stop a run; warnings do not (unless --strict)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NamedTuple

from eventlake.connectors import TriggerKind
from eventlake.errors import CODES, EventlakeError
from eventlake.pipelines.plan_tree import STATEFUL, PlanNode
from eventlake.triggers import parse_trigger

if TYPE_CHECKING:
    from eventlake.pipelines.plan import PlannedFlow

ERROR, WARNING = "error", "warning"
OUTER_JOINS = ("LeftOuter", "RightOuter", "FullOuter")


@dataclass(frozen=True)
class Finding:
    code: str
    severity: str
    flow: str
    what: str
    why: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Issue:
    """What a rule found; ``why`` and ``fix`` default to the code table's texts."""

    what: str
    why: str | None = None
    fix: str | None = None


Check = Callable[["PlannedFlow", PlanNode], Iterator[Issue]]


class Rule(NamedTuple):
    code: str
    check: Check

    @property
    def severity(self) -> str:
        return CODES[self.code].severity

    @property
    def title(self) -> str:
        return CODES[self.code].title


RULES: list[Rule] = []


def rule(code: str) -> Callable[..., object]:
    """Register a rule under ``code``; its severity and title are in the code table."""

    def register(fn: Check) -> object:
        RULES.append(Rule(code, fn))
        return fn

    return register


def _offset_limited(flow: PlannedFlow) -> bool:
    return any(i.capabilities.offset_limits for i in flow.spec.all_inputs())


def _loses_to_retention(flow: PlannedFlow) -> bool:
    return any(i.capabilities.retention_loss for i in flow.spec.all_inputs())


def _unsupported(flow: PlannedFlow, kind: TriggerKind) -> Iterator[Issue]:
    """The flow's inputs and output that do not run under a ``kind`` trigger."""
    for source in flow.spec.all_inputs():
        if kind not in source.capabilities.triggers:
            yield Issue(f"uses the {kind} trigger with input {source.describe(flow.ctx)}")
    output = flow.spec.output
    if kind not in output.capabilities.triggers:
        yield Issue(f"uses the {kind} trigger with output {output.describe(flow.ctx)}")


def _trigger(flow: PlannedFlow) -> dict[str, object]:
    return parse_trigger(flow.trigger)


# --- errors ---------------------------------------------------------------------------


@rule("EL-V001")
def _append_agg_without_watermark(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if flow.spec.output_mode != "append":
        return
    for agg in tree.find("Aggregate"):
        if agg.streaming and not agg.keys_watermarked():
            yield Issue(
                "aggregates in append mode, but no grouping key is a watermarked event time"
            )


@rule("EL-V002")
def _complete_without_agg(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if flow.spec.output_mode == "complete" and not tree.find("Aggregate"):
        yield Issue("uses complete mode but does not aggregate")


@rule("EL-V003")
def _mode_not_supported(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    output = flow.spec.output
    accepted = output.capabilities.output_modes
    if flow.spec.output_mode not in accepted:
        modes = ", ".join(sorted(accepted))
        mode = flow.spec.output_mode
        yield Issue(
            f"writes in {mode} mode to {output.describe(flow.ctx)}, which takes only {modes}"
        )


@rule("EL-V004")
def _continuous(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if "continuous" not in _trigger(flow):
        return
    stateful = [n.name for n in tree.walk() if n.name in (*STATEFUL, "Join")]
    if stateful:
        yield Issue(f"uses the continuous trigger with {', '.join(sorted(set(stateful)))}")
    yield from _unsupported(flow, TriggerKind.CONTINUOUS)


@rule("EL-V010")
def _real_time(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if "realTime" not in _trigger(flow):
        return
    stateful = {n.name for n in tree.walk() if n.name in STATEFUL and n.streaming}
    stateful |= {
        "stream-stream Join"
        for j in tree.find("Join")
        if len(j.children) == 2 and all(c.streaming for c in j.children)
    }
    if stateful:
        yield Issue(f"uses the real-time trigger with {', '.join(sorted(stateful))}")
    yield from _unsupported(flow, TriggerKind.REAL_TIME)


@rule("EL-V006")
def _checkpoint_cannot_resume(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    from eventlake.validation.upgrade import BLOCKED, held_state, verdict

    found = verdict(flow, held_state(flow.ctx.spark, flow), tree)
    if found.outcome == BLOCKED:
        yield Issue(f"checkpoint {flow.checkpoint} {found.outcome}: {'; '.join(found.reasons)}",
                    fix=found.fix)  # fmt: skip


@rule("EL-W110")
def _checkpoint_changes_results(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    from eventlake.validation.upgrade import CHANGES, verdict

    found = verdict(flow, None, tree)
    if found.outcome == CHANGES:
        yield Issue(f"checkpoint {flow.checkpoint} {found.outcome}: {'; '.join(found.reasons)}")


@rule("EL-V008")
def _outer_join(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    for join in tree.find("Join"):
        kind = join.text.split(" ", 2)[1].rstrip(",") if " " in join.text else ""
        if kind not in OUTER_JOINS or len(join.children) != 2:
            continue
        left, right = join.children
        if not (left.streaming and right.streaming):
            continue
        condition = join.text.split(",", 1)[1] if "," in join.text else ""
        ranged = bool(re.search(r"[<>]=?|between\(", condition)) and "-T" in condition
        if not (left.has_watermark and right.has_watermark and ranged):
            yield Issue(
                f"{kind} stream-stream join without a watermark on both sides and an "
                "event-time range in its condition"
            )


@rule("EL-V009")
def _partition_columns(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    output = flow.spec.output
    top = set(flow.df.columns)
    bad = [c for c in output.partition_columns() if c not in top]
    if bad:
        yield Issue(
            f"partitions {output.describe(flow.ctx)} by {', '.join(bad)}, which is "
            "not a top-level column of the flow's result"
        )


# --- warnings -------------------------------------------------------------------------


@rule("EL-W101")
def _state_without_watermark(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    for node in tree.walk():
        if node.stream_stream_join:
            if all(c.has_watermark for c in node.children):
                continue
            yield Issue(
                "stream-stream Join without a watermark on both inputs",
                why="each side's rows are kept as state until a watermark says no match can "
                "arrive; the unwatermarked side is kept forever",
                fix="add ctx.with_watermark(df, event_time_column, delay) to both inputs and "
                "bound the match in time in the join condition",
            )
        elif node.name in STATEFUL and node.streaming and not node.has_watermark:
            if node.name == "Aggregate" and flow.spec.output_mode != "update":
                continue  # append: EL-V001; complete keeps all state by design: EL-W106
            yield Issue(f"{node.name} keeps state but the flow sets no watermark")


@rule("EL-W102")
def _dedup_keys(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    for node in tree.find("Deduplicate"):
        if node.has_watermark and not node.keys_watermarked():
            yield Issue("dropDuplicates on keys without the event-time column")


@rule("EL-W103")
def _kafka_backpressure(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if _offset_limited(flow) and flow.ctx.params.max_offsets_per_trigger is None:
        yield Issue("reads Kafka with no bound on a batch's size")


@rule("EL-W104")
def _once(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if "once" in _trigger(flow):
        yield Issue("uses the once trigger")


@rule("EL-W105")
def _weaker_guarantee(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    required, output = flow.spec.guarantee, flow.spec.output
    if required is not None and not output.guarantee.covers(required):
        yield Issue(
            f"declares {required} delivery, but its output {output.describe(flow.ctx)} is "
            f"{output.guarantee}",
            fix=f"declare guarantee='{output.guarantee}' and de-duplicate downstream by key, "
            f"or write to an output that is {required}",
        )


@rule("EL-W106")
def _complete_cardinality(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    if flow.spec.output_mode != "complete":
        return
    for agg in tree.find("Aggregate"):
        keys = [k.strip().split("#")[0] for k in agg.keys().split(",") if k.strip()]
        ids = [k for k in keys if k == "id" or k.endswith("_id")]
        if ids:
            yield Issue(f"complete mode groups by {', '.join(ids)}")


@rule("EL-W107")
def _production_paths(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    settings = flow.ctx.settings
    if not settings.production:
        return
    # The config's lake root, not the plan's (`validate` plans into a scratch folder).
    for kind, where in (("checkpoint", flow.checkpoint), ("table", settings.lake.root)):
        if where.is_local:
            yield Issue(f"its {kind} is on a local folder ({where}), not a distributed store")


@rule("EL-W108")
def _hdfs_state(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    provider = flow.ctx.spark.conf.get("spark.sql.streaming.stateStore.providerClass", "") or ""
    if "HDFSBackedStateStoreProvider" in provider and tree.find(*STATEFUL):
        yield Issue("keeps state in the HDFS-backed state store")


@rule("EL-W109")
def _data_loss(flow: PlannedFlow, tree: PlanNode) -> Iterator[Issue]:
    p = flow.ctx.params
    if _loses_to_retention(flow) and not p.fail_on_data_loss and not p.data_loss_note:
        yield Issue("reads Kafka with fail_on_data_loss=false and no note why")


def finding(code: str, flow: str, issue: Issue, pipeline: str = "") -> Finding:
    """A finding of ``code``, its texts completed from the code table."""
    entry = CODES[code]
    why = issue.why or entry.why or ""
    fix = issue.fix or (entry.fix or "").replace("{pipeline}", pipeline)
    return Finding(code, entry.severity, flow, issue.what, why, fix)


def check_flow(flow: PlannedFlow) -> list[Finding]:
    tree = flow.tree()
    pipeline = flow.ctx.pipeline
    return [
        finding(r.code, flow.query_name, issue, pipeline)
        for r in RULES
        for issue in r.check(flow, tree)
    ]


def slide_finding(flow: str, error: EventlakeError) -> Finding | None:
    """EL-V005, from Spark's analysis error for a window whose slide exceeds its size
    (condition ``DATATYPE_MISMATCH.PARAMETER_CONSTRAINT_VIOLATION`` on ``slide_duration``)."""
    params = error.spark_parameters or {}
    if error.spark_condition != SLIDE_CONDITION or "slide_duration" not in params.get(
        "leftExprName", ""
    ):
        return None
    return finding("EL-V005", flow, Issue("a sliding window's slide is larger than its size"))


SLIDE_CONDITION = "DATATYPE_MISMATCH.PARAMETER_CONSTRAINT_VIOLATION"
