"""From a declared pipeline and settings to flows ready to start, in dependency order.

A flow that streams a lake table written by another flow of the same pipeline runs after
it. Planning builds every flow's DataFrame (Spark analyses it; nothing runs yet) and
creates each missing Delta output empty with the flow's schema, so that downstream flows
can start streaming from it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.pipelines.api import FlowSpec, Pipeline
from eventlake.pipelines.context import FlowContext
from eventlake.sinks import Sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class PlannedFlow:
    spec: FlowSpec
    ctx: FlowContext
    sink: Sink
    df: DataFrame
    trigger: str
    level: int
    upstream: tuple[str, ...]

    @property
    def checkpoint(self) -> Path:
        return self.ctx.checkpoint

    @property
    def query_name(self) -> str:
        return self.spec.query_name


@dataclass(frozen=True)
class Plan:
    pipeline: Pipeline
    flows: tuple[PlannedFlow, ...]
    selected: tuple[str, ...]

    def levels(self) -> list[list[PlannedFlow]]:
        """Selected flows grouped by dependency depth: each level only reads earlier ones."""
        chosen = [f for f in self.flows if f.spec.name in self.selected]
        depth = max((f.level for f in chosen), default=-1)
        grouped = [[f for f in chosen if f.level == d] for d in range(depth + 1)]
        return [group for group in grouped if group]


def dependency_order(pipeline: Pipeline) -> list[tuple[FlowSpec, int, tuple[str, ...]]]:
    """Flows with their level and upstream flows; EL-PIPELINE-002 on a cycle or two
    writers of one table."""
    writers: dict[tuple[str, str], str] = {}
    for spec in pipeline.flows.values():
        for table in spec.sink.tables():
            if table in writers:
                raise EventlakeError(
                    ErrorCode.PIPELINE_INVALID,
                    f"flows '{writers[table]}' and '{spec.name}' of pipeline "
                    f"'{pipeline.name}' both write table {table[0]}/{table[1]}.",
                    expected="one writing flow per table",
                    fix="write to separate tables, or union the inputs in one flow",
                )
            writers[table] = spec.name
    upstream: dict[str, tuple[str, ...]] = {}
    for spec in pipeline.flows.values():
        read = [t for t in (i.table() for i in spec.all_inputs()) if t is not None]
        ups = {w for w in (writers.get(t) for t in read) if w and w != spec.name}
        upstream[spec.name] = tuple(sorted(ups))
    levels: dict[str, int] = {}

    def level(name: str, seen: tuple[str, ...]) -> int:
        if name in seen:
            cycle = " -> ".join((*seen, name))
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"pipeline '{pipeline.name}' has a cycle: {cycle}.",
                fix="a flow must not read, directly or not, the table it writes",
            )
        if name not in levels:
            ups = upstream[name]
            levels[name] = 1 + max((level(u, (*seen, name)) for u in ups), default=-1)
        return levels[name]

    ordered = sorted(pipeline.flows.values(), key=lambda s: (level(s.name, ()), s.name))
    return [(s, levels[s.name], upstream[s.name]) for s in ordered]


def build_plan(
    pipeline: Pipeline,
    settings: Settings,
    spark: SparkSession,
    *,
    flows: list[str] | None = None,
    trigger: str | None = None,
    lake_root: Path | None = None,
    on_error: Callable[[FlowSpec, EventlakeError], None] | None = None,
    inspect: Callable[[PlannedFlow], bool] | None = None,
) -> Plan:
    """Resolve config, order flows, build DataFrames and create missing Delta outputs.

    ``on_error`` receives a flow that cannot be built (instead of raising), so that every
    problem is reported at once. ``inspect`` sees each built flow before its output is
    created; a False answer leaves the output uncreated.
    """
    params = pipeline.parse_params(settings.pipelines.get(pipeline.name))
    unknown = sorted(set(flows or ()) - set(pipeline.flows))
    if unknown:
        raise EventlakeError(
            ErrorCode.PIPELINE_NOT_FOUND,
            f"pipeline '{pipeline.name}' has no flow(s) {', '.join(unknown)} "
            f"(flows: {', '.join(sorted(pipeline.flows))}).",
            fix="check `eventlake list`",
        )
    root = (lake_root or settings.lake.root).absolute()
    planned: list[PlannedFlow] = []
    for spec, lvl, ups in dependency_order(pipeline):
        ctx = FlowContext(spark, settings, pipeline.name, spec.name, params, root)
        where = f"flow '{spec.query_name}'"
        try:
            source = spec.source.resolve(ctx)
            if spec.inputs:
                streams = {r: i.resolve(ctx).read_stream(spark) for r, i in spec.inputs}
                ctx = replace(ctx, streams=streams)
            sink = spec.sink.resolve(ctx)
            df = spec.transform(ctx, source.read_stream(spark))
            if not getattr(df, "isStreaming", False):
                raise EventlakeError(
                    ErrorCode.PIPELINE_INVALID,
                    f"{where} returned a batch DataFrame, not a streaming one.",
                    expected="the transform to derive its result from the DataFrame it is given",
                    fix="build the result from the `df` argument (join static tables to it)",
                )
        except Exception as exc:
            error = translate(exc, context=where)
            if on_error is None:
                raise error from exc
            on_error(spec, error)
            continue
        flow = PlannedFlow(
            spec=spec,
            ctx=ctx,
            sink=sink,
            df=df,
            trigger=trigger or spec.trigger or params.trigger,
            level=lvl,
            upstream=ups,
        )
        planned.append(flow)
        if inspect is not None and not inspect(flow):
            continue
        try:
            spec.sink.ensure(ctx, df.schema)
        except Exception as exc:
            raise translate(exc, context=f"{where}: creating {spec.sink.describe(ctx)}") from exc
    selected = tuple(flows) if flows else tuple(pipeline.flows)
    return Plan(pipeline=pipeline, flows=tuple(planned), selected=selected)
