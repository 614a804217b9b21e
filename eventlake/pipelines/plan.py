"""From a declared pipeline and settings to flows ready to start, in dependency order.

A flow that streams a lake table written by another flow of the same pipeline runs after
it. Planning builds every flow's DataFrame (Spark analyses it; nothing runs yet) and
creates each missing Delta output empty with the flow's schema, so that downstream flows
can start streaming from it at once.

Flows are built one at a time, in dependency order (a transform is the user's code, never
called from two threads at once); each output is created on a worker thread while the
next flows are built, and a flow is built once every output of the levels before its own
exists. With ``defer_creation``, an output no flow reads whose writer waits for it (the
``deferred_creation`` capability) is left to the run's :class:`OutputCreation`: its flow's
query starts while it is created, and the first write waits for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from typing_extensions import Unpack

from eventlake.checkpoints import Fingerprint
from eventlake.config import Settings
from eventlake.connectors.base import TableRef
from eventlake.context import FlowConfig, FlowContext
from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.monitoring.observed import count_output
from eventlake.pipelines.api import FlowSpec, Pipeline
from eventlake.pipelines.expectations import apply_expectations
from eventlake.pipelines.plan_tree import STATEFUL, PlanNode, analysed_tree, watermarks
from eventlake.scope import CREATE_THREADS, CREATE_WORKERS, OutputCreation, RunScope
from eventlake.storage import Location
from eventlake.triggers import is_finite, is_micro_batch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class PlannedFlow:
    spec: FlowSpec
    ctx: FlowContext
    df: DataFrame
    trigger: str
    level: int
    upstream: tuple[str, ...]

    @property
    def checkpoint(self) -> Location:
        return self.ctx.checkpoint

    @property
    def query_name(self) -> str:
        return self.spec.query_name

    def tree(self) -> PlanNode:
        """The flow's analysed logical plan (read from Spark once: validation, the
        fingerprint and the late keeper all ask)."""
        return self._tree

    @cached_property
    def _tree(self) -> PlanNode:
        return analysed_tree(self.df)

    def fingerprint(self, tree: PlanNode | None = None) -> Fingerprint:
        """What the flow's checkpoint records of its plan (see ``checkpoints.fingerprint``)."""
        tree = tree or self.tree()
        return Fingerprint(
            flow=self.query_name,
            source=self.spec.input.describe(self.ctx),
            sink=self.spec.output.describe(self.ctx),
            output_mode=self.spec.output_mode,
            stateful=tuple(sorted(n.name for n in tree.walk() if n.name in (*STATEFUL, "Join"))),
            watermarks=watermarks(tree),
        )


@dataclass(frozen=True)
class Plan:
    pipeline: Pipeline
    flows: tuple[PlannedFlow, ...]
    selected: tuple[str, ...]
    #: The run the plan's flows belong to (their contexts' ``run``).
    run: RunScope

    def chosen(self) -> list[PlannedFlow]:
        """The planned flows that run (all, or those selected with ``flows=``)."""
        return [f for f in self.flows if f.spec.name in self.selected]

    def levels(self) -> list[list[PlannedFlow]]:
        """Selected flows grouped by dependency depth: each level only reads earlier ones."""
        chosen = self.chosen()
        depth = max((f.level for f in chosen), default=-1)
        grouped = [[f for f in chosen if f.level == d] for d in range(depth + 1)]
        return [group for group in grouped if group]


def dependency_order(pipeline: Pipeline) -> list[tuple[FlowSpec, int, tuple[str, ...]]]:
    """Flows with their level and upstream flows; EL-PIPELINE-002 on a cycle or two
    writing flows of one table."""
    writers: dict[tuple[str, str], str] = {}
    for spec in pipeline.flows.values():
        for table in spec.output.tables():
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


def trigger_of(spec: FlowSpec, config: FlowConfig, trigger: str | None = None) -> str:
    """The trigger ``spec`` runs with: ``trigger`` (the run's), else the config's for the
    flow, else the one its code declares, else the pipeline's."""
    params = config.params
    return trigger or params.triggers.get(spec.name) or spec.trigger or params.trigger


def ends(pipeline: Pipeline, configs: dict[str, FlowConfig], flows: list[str] | None,
         trigger: str | None) -> bool:  # fmt: skip
    """Whether every flow a run of ``pipeline`` starts (``flows``, else all) ends once its
    input is read (``available-now``, ``once``)."""
    chosen = [s for s in pipeline.flows.values() if not flows or s.name in flows]
    return all(is_finite(trigger_of(s, configs[s.name], trigger)) for s in chosen)


def check_flow_names(pipeline: Pipeline, flows: list[str] | None) -> None:
    """EL-PIPELINE-001 for names in ``flows`` the pipeline does not declare."""
    unknown = sorted(set(flows or ()) - set(pipeline.flows))
    if unknown:
        raise EventlakeError(
            ErrorCode.PIPELINE_NOT_FOUND,
            f"pipeline '{pipeline.name}' has no flow(s) {', '.join(unknown)} "
            f"(flows: {', '.join(sorted(pipeline.flows))}).",
            fix="check `eventlake list`",
        )


class PlanOptions(TypedDict, total=False):
    """What to plan: ``flows`` (a subset), ``trigger`` (over every flow's own) and
    ``lake_root`` (instead of the config's: `validate` plans into a scratch folder) and
    ``run`` (the scope the flows will run in; a new one when the plan is only looked at),
    ``defer_creation`` (outputs that no flow reads and that wait for their creation
    themselves are created while the queries start; else every output exists when the
    plan is returned)."""

    flows: list[str] | None
    trigger: str | None
    lake_root: Location | Path | None
    run: RunScope | None
    defer_creation: bool


def build_plan(
    pipeline: Pipeline,
    settings: Settings,
    spark: SparkSession,
    *,
    on_error: Callable[[FlowSpec, EventlakeError], None] | None = None,
    inspect: Callable[[PlannedFlow], bool] | None = None,
    **options: Unpack[PlanOptions],
) -> Plan:
    """Resolve config, order flows, build DataFrames and create missing Delta outputs.

    ``on_error`` receives a flow that cannot be built (instead of raising), so that every
    problem is reported at once. ``inspect`` sees each built flow before its output is
    created; a False answer leaves the output uncreated.
    """
    run = options.get("run") or RunScope()
    flows, trigger = options.get("flows"), options.get("trigger")
    configs = pipeline.configs(settings, options.get("lake_root"))
    check_flow_names(pipeline, flows)
    read = _tables_read(pipeline) if options.get("defer_creation") else None
    planned: list[PlannedFlow] = []
    creating: list[Future[None]] = []
    level = 0
    with ThreadPoolExecutor(CREATE_WORKERS, CREATE_THREADS) as pool:
        for spec, lvl, ups in dependency_order(pipeline):  # sorted by level
            if lvl != level:  # what was submitted so far is the levels below this one
                _created(creating)
                level = lvl
            flow = _build(spec, lvl, ups, configs[spec.name], spark, trigger, run, on_error)
            if flow is None:
                continue
            planned.append(flow)
            if inspect is not None and not inspect(flow):
                continue
            if read is not None and _deferrable(flow, read):
                run.service(OutputCreation).submit(flow.query_name, partial(_create_output, flow))
            else:
                creating.append(pool.submit(_create_output, flow))
        _created(creating)
    selected = tuple(flows) if flows else tuple(pipeline.flows)
    return Plan(pipeline=pipeline, flows=tuple(planned), selected=selected, run=run)


def _tables_read(pipeline: Pipeline) -> set[TableRef]:
    """Every lake table a flow of ``pipeline`` reads (streamed or static)."""
    inputs = (i for spec in pipeline.flows.values() for i in spec.all_inputs())
    return {t for t in (i.table() for i in inputs) if t is not None}


def _deferrable(flow: PlannedFlow, read: set[TableRef]) -> bool:
    """Whether ``flow``'s output can be created while its query starts: its writer waits
    for it, and no flow reads it (a reader is built against the table's schema)."""
    output = flow.spec.output
    return output.capabilities.deferred_creation and not set(output.tables()) & read


def _created(futures: Iterable[Future[None]]) -> None:
    """Wait for each creation, in order; the first that failed raises its error."""
    for future in futures:
        future.result()


def _create_output(flow: PlannedFlow) -> None:
    try:
        flow.spec.output.ensure(flow.ctx, flow.df.schema)
    except Exception as exc:
        where = f"flow '{flow.spec.query_name}': creating {flow.spec.output.describe(flow.ctx)}"
        raise translate(exc, context=where) from exc


def _build(
    spec: FlowSpec,
    lvl: int,
    ups: tuple[str, ...],
    config: FlowConfig,
    spark: SparkSession,
    trigger: str | None,
    run: RunScope,
    on_error: Callable[[FlowSpec, EventlakeError], None] | None,
) -> PlannedFlow | None:
    """The flow's DataFrame, with its expectations and output counted; None when it
    cannot be built and ``on_error`` took the error."""
    where = f"flow '{spec.query_name}'"
    flow_trigger = trigger_of(spec, config, trigger)
    try:
        bare = FlowContext.of(config, spark, trigger=flow_trigger, run=run)
        streams = {r: i.read(bare) for r, i in spec.inputs}
        sources = tuple(spec.all_inputs())
        ctx = FlowContext.of(config, spark, streams, flow_trigger, sources, run=run)
        df = spec.transform(ctx, spec.input.read(ctx))
        if spec.expectations and not is_micro_batch(flow_trigger):
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"{where} has expectations and runs with the {flow_trigger} trigger.",
                expected="a micro-batch trigger (their counts are per batch)",
                fix="run the flow with a processing-time or available-now trigger",
            )
        if getattr(df, "isStreaming", False) and is_micro_batch(flow_trigger):
            df = count_output(apply_expectations(df, spec.expectations))
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
        return None
    return PlannedFlow(spec=spec, ctx=ctx, df=df, trigger=flow_trigger, level=lvl, upstream=ups)
