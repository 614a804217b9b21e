"""The production checklist as rules. Each finding has a stable code, the flow, what is
wrong, why it matters and the fix. Errors stop a run; warnings do not (unless --strict)."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.pipelines.io import KafkaInput
from eventlake.sinks import ConsoleSink, DeltaAppendSink, KafkaSink, MemorySink
from eventlake.triggers import parse_trigger
from eventlake.validation.plan_tree import STATEFUL, PlanNode, analysed_tree

if TYPE_CHECKING:
    from eventlake.pipelines.plan import PlannedFlow

ERROR, WARNING = "error", "warning"
FINGERPRINT = "eventlake-flow.json"
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
class Rule:
    code: str
    severity: str
    title: str
    check: Callable[[PlannedFlow, PlanNode], Iterator[tuple[str, str, str]]]


RULES: list[Rule] = []


def rule(code: str, severity: str, title: str) -> Callable[..., object]:
    def register(fn: Callable[[PlannedFlow, PlanNode], Iterator[tuple[str, str, str]]]) -> object:
        RULES.append(Rule(code, severity, title, fn))
        return fn

    return register


def _reads_kafka(flow: PlannedFlow) -> bool:
    return any(isinstance(i, KafkaInput) for i in flow.spec.all_inputs())


def _trigger(flow: PlannedFlow) -> dict[str, object]:
    return parse_trigger(flow.trigger)


# --- errors ---------------------------------------------------------------------------


@rule("EL-V001", ERROR, "append mode with an aggregation and no watermark on its event time")
def _append_agg_without_watermark(
    flow: PlannedFlow, tree: PlanNode
) -> Iterator[tuple[str, str, str]]:
    if flow.spec.output_mode != "append":
        return
    for agg in tree.find("Aggregate"):
        if agg.streaming and not agg.keys_watermarked():
            yield (
                "aggregates in append mode, but no grouping key is a watermarked event time",
                "append mode writes a group only once it is final, which needs a watermark; "
                "Spark refuses to start such a query",
                "add ctx.with_watermark(df, 'event_time', '10 minutes') and group by "
                "F.window('event_time', ...), or use complete mode",
            )


@rule("EL-V002", ERROR, "complete mode without an aggregation")
def _complete_without_agg(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if flow.spec.output_mode == "complete" and not tree.find("Aggregate"):
        yield (
            "uses complete mode but does not aggregate",
            "complete mode rewrites the whole result every batch, which only exists for "
            "aggregations; Spark refuses to start",
            "use append mode, or aggregate",
        )


@rule("EL-V003", ERROR, "an output mode the sink cannot take")
def _mode_not_supported(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if flow.spec.output_mode not in flow.sink.output_modes:
        modes = ", ".join(sorted(flow.sink.output_modes))
        yield (
            f"writes in {flow.spec.output_mode} mode to {flow.spec.sink.describe(flow.ctx)}, "
            f"which takes only {modes}",
            "the sink cannot apply that mode (Delta's streaming sink cannot update rows in "
            "place; files cannot be rewritten; Kafka cannot retract)",
            "change the output mode; for upserts into Delta write through MERGE in foreachBatch",
        )


@rule("EL-V004", ERROR, "continuous trigger with state, a join or an unsupported sink")
def _continuous(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if "continuous" not in _trigger(flow):
        return
    stateful = [n.name for n in tree.walk() if n.name in (*STATEFUL, "Join")]
    if stateful:
        yield (
            f"uses the continuous trigger with {', '.join(sorted(set(stateful)))}",
            "continuous processing supports only map-like queries (select, filter)",
            "use a processing-time or available-now trigger",
        )
    if not isinstance(flow.sink, KafkaSink | ConsoleSink | MemorySink):
        yield (
            f"uses the continuous trigger with sink {flow.spec.sink.describe(flow.ctx)}",
            "continuous processing writes only to Kafka, console and memory sinks",
            "use a processing-time trigger for this sink",
        )


_SLIDE = re.compile(r"slide[ _]duration", re.IGNORECASE)


@rule("EL-V006", ERROR, "a checkpoint folder written by a query of a different plan")
def _foreign_checkpoint(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    folder = flow.checkpoint
    mark = folder / FINGERPRINT
    if mark.is_file():
        recorded = json.loads(mark.read_text())
        current = fingerprint(flow, tree)
        changed = sorted(k for k in current if recorded.get(k) != current[k])
        if changed:
            yield (
                f"checkpoint {folder} was written by a different plan (changed: "
                f"{', '.join(changed)})",
                "a checkpoint stores the offsets and state of one query; another plan "
                "replays them wrongly or fails mid-stream",
                "keep the old plan, or give the changed flow a new name (a new checkpoint); "
                "delete the folder only if reprocessing from scratch is intended",
            )
    elif (folder / "offsets").is_dir():
        yield (
            f"checkpoint {folder} holds a query's progress but was not written by this flow",
            "the offsets and state there belong to another query",
            "point checkpoints.root elsewhere, or delete the folder to start afresh",
        )


@rule("EL-V008", ERROR, "a stream-stream outer join without watermarks and a time range")
def _outer_join(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
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
            yield (
                f"{kind} stream-stream join without a watermark on both sides and an "
                "event-time range in its condition",
                "Spark can only emit the unmatched rows of an outer join once it knows no "
                "match can arrive any more; without both it refuses to start",
                "watermark both inputs and add a condition like "
                "b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR",
            )


@rule("EL-V009", ERROR, "partitioning by a nested or absent column")
def _partition_columns(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if not isinstance(flow.sink, DeltaAppendSink):
        return
    top = set(flow.df.columns)
    bad = [c for c in flow.sink.partition_by if c not in top]
    if bad:
        yield (
            f"partitions {flow.spec.sink.describe(flow.ctx)} by {', '.join(bad)}, which is "
            "not a top-level column of the flow's result",
            "Delta partitions only by top-level columns; the first batch would fail",
            "select the field as a top-level column (e.g. F.col('window.start')"
            ".alias('window_start')) and partition by that",
        )


# --- warnings -------------------------------------------------------------------------


@rule("EL-W101", WARNING, "a stateful operator without a watermark")
def _state_without_watermark(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    for node in tree.walk():
        if node.stream_stream_join:
            if all(c.has_watermark for c in node.children):
                continue
            yield (
                "stream-stream Join without a watermark on both inputs",
                "each side's rows are kept as state until a watermark says no match can "
                "arrive; the unwatermarked side is kept forever",
                "add ctx.with_watermark(df, event_time_column, delay) to both inputs and "
                "bound the match in time in the join condition",
            )
        elif node.name in STATEFUL and node.streaming and not node.has_watermark:
            if node.name == "Aggregate" and flow.spec.output_mode != "update":
                continue  # append: EL-V001; complete keeps all state by design: EL-W106
            yield (
                f"{node.name} keeps state but the flow sets no watermark",
                "state is never purged and grows until the driver or executors run out of memory",
                "add ctx.with_watermark(df, event_time_column, delay) before the operator",
            )


@rule("EL-W102", WARNING, "dropDuplicates where dropDuplicatesWithinWatermark was meant")
def _dedup_keys(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    for node in tree.find("Deduplicate"):
        if node.has_watermark and not node.keys_watermarked():
            yield (
                "dropDuplicates on keys without the event-time column",
                "its state is kept forever: the watermark cannot expire keys that carry no "
                "event time",
                "use df.dropDuplicatesWithinWatermark([...keys])",
            )


@rule("EL-W103", WARNING, "a Kafka source without maxOffsetsPerTrigger")
def _kafka_backpressure(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if _reads_kafka(flow) and flow.ctx.params.max_offsets_per_trigger is None:
        yield (
            "reads Kafka with no bound on a batch's size",
            "after an outage the first batch takes the whole backlog and may run for hours or fail",
            f"set pipelines.{flow.ctx.pipeline}.max_offsets_per_trigger",
        )


@rule("EL-W104", WARNING, "the deprecated once trigger")
def _once(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if "once" in _trigger(flow):
        yield (
            "uses the once trigger",
            "it processes everything in one batch, ignoring rate limits, and is deprecated",
            "use --trigger available-now",
        )


@rule("EL-W105", WARNING, "a Kafka sink in a flow described as exactly-once")
def _kafka_exactly_once(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    text = flow.spec.description.lower().replace("_", "-").replace(" ", "-")
    if isinstance(flow.sink, KafkaSink) and "exactly-once" in text:
        yield (
            "writes to Kafka but says it is exactly-once",
            "Spark's Kafka sink is at-least-once: a replayed batch is sent again",
            "say at-least-once, and de-duplicate downstream by key",
        )


@rule("EL-W106", WARNING, "complete mode over a high-cardinality key")
def _complete_cardinality(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if flow.spec.output_mode != "complete":
        return
    for agg in tree.find("Aggregate"):
        keys = [k.strip().split("#")[0] for k in agg.keys().split(",") if k.strip()]
        ids = [k for k in keys if k == "id" or k.endswith("_id")]
        if ids:
            yield (
                f"complete mode groups by {', '.join(ids)}",
                "every batch rewrites one row per distinct key, and the state keeps them all",
                "use append with windows and a watermark, or update into a MERGE sink",
            )


def _local(path: Path) -> bool:
    tmp = Path(tempfile.gettempdir()).resolve()
    text = str(path)
    return "://" not in text or text.startswith("file:") or tmp in Path(path).resolve().parents


@rule("EL-W107", WARNING, "a checkpoint or table on a temporary or local folder in production")
def _production_paths(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    if not flow.ctx.settings.production:
        return
    for kind, path in (("checkpoint", flow.checkpoint), ("table", flow.ctx.lake_root)):
        if _local(path):
            yield (
                f"its {kind} is on a local or temporary folder ({path})",
                "a local disk is lost with the machine: the checkpoint (and with it "
                "exactly-once) does not survive",
                "put checkpoints.root and lake.root on reliable storage (s3a://, abfss://, "
                "gs://, hdfs://)",
            )


@rule("EL-W108", WARNING, "the HDFS state store with state")
def _hdfs_state(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    provider = flow.ctx.spark.conf.get("spark.sql.streaming.stateStore.providerClass", "") or ""
    if "HDFSBackedStateStoreProvider" in provider and tree.find(*STATEFUL):
        yield (
            "keeps state in the HDFS-backed state store",
            "it holds all state in executor memory; large state means long GC pauses or "
            "out-of-memory",
            "use the RocksDB state store (eventlake's default): remove the providerClass override",
        )


@rule("EL-W109", WARNING, "failOnDataLoss=false without a note")
def _data_loss(flow: PlannedFlow, tree: PlanNode) -> Iterator[tuple[str, str, str]]:
    p = flow.ctx.params
    if _reads_kafka(flow) and not p.fail_on_data_loss and not p.data_loss_note:
        yield (
            "reads Kafka with fail_on_data_loss=false and no note why",
            "records deleted by retention before they were read are skipped silently",
            f"set pipelines.{flow.ctx.pipeline}.data_loss_note to the reason it is acceptable",
        )


def fingerprint(flow: PlannedFlow, tree: PlanNode | None = None) -> dict[str, object]:
    tree = tree or analysed_tree(flow.df)
    return {
        "flow": flow.query_name,
        "source": flow.spec.source.describe(flow.ctx),
        "sink": flow.spec.sink.describe(flow.ctx),
        "output_mode": flow.spec.output_mode,
        "stateful": sorted(n.name for n in tree.walk() if n.name in (*STATEFUL, "Join")),
    }


def check_flow(flow: PlannedFlow) -> list[Finding]:
    tree = analysed_tree(flow.df)
    return [
        Finding(r.code, r.severity, flow.query_name, what, why, fix)
        for r in RULES
        for what, why, fix in r.check(flow, tree)
    ]


def slide_finding(flow: str, message: str) -> Finding | None:
    """EL-V005, from Spark's analysis error for a window whose slide exceeds its size."""
    if not _SLIDE.search(message):
        return None
    return Finding(
        "EL-V005", ERROR, flow,
        "a sliding window's slide is larger than its size",
        "events between windows would belong to no window and be lost",
        "make the slide at most the window size (e.g. 1 hour windows sliding every 30 minutes)",
    )  # fmt: skip


def write_fingerprint(flow: PlannedFlow) -> None:
    mark = flow.checkpoint / FINGERPRINT
    if not mark.exists():
        flow.checkpoint.mkdir(parents=True, exist_ok=True)
        mark.write_text(json.dumps(fingerprint(flow), indent=2))
