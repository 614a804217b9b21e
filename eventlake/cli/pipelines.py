"""`eventlake list | run | validate`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from eventlake.cli.signals import stop_on_signals
from eventlake.cli.state import CliState
from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import Pipeline, Registry
from eventlake.pipelines.context import FlowContext
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.plan import Plan, build_plan, dependency_order

ModuleOpt = Annotated[
    list[Path] | None,
    typer.Option("--module", "-m", help="A Python file declaring pipelines (repeatable)."),
]


def _registry(state: CliState, modules: list[Path] | None) -> tuple[Settings, Registry]:
    settings = state.settings()
    registry = load_pipelines(modules or ())
    unknown = sorted(set(settings.pipelines) - set(registry.names()))
    if unknown:
        raise EventlakeError(
            ErrorCode.CONFIG_UNKNOWN_KEY,
            f"unknown config key(s): {', '.join('pipelines.' + u for u in unknown)} "
            "(no such pipeline).",
            expected=f"sections for known pipelines: {', '.join(registry.names())}",
            fix="correct the pipeline name, or load its module with --module",
        )
    return settings, registry


def _offline_contexts(pipeline: Pipeline, settings: Settings) -> list[FlowContext]:
    """Contexts for checks that need config but no Spark (topics, descriptions)."""
    params = pipeline.parse_params(settings.pipelines.get(pipeline.name))
    no_spark = cast(Any, None)
    return [
        FlowContext(no_spark, settings, pipeline.name, spec.name, params, settings.lake.root)
        for spec in pipeline.flows.values()
    ]


def list_pipelines(ctx: typer.Context, module: ModuleOpt = None) -> None:
    """List pipelines and their flows in run order."""
    state: CliState = ctx.obj
    settings, registry = _registry(state, module)
    lines = []
    for name in registry.names():
        pipeline = registry.get(name)
        contexts = {c.flow: c for c in _offline_contexts(pipeline, settings)}
        lines.append(f"{name}: {pipeline.description}".rstrip(": "))
        for spec, level, _ups in dependency_order(pipeline):
            c = contexts[spec.name]
            lines.append(
                f"  {spec.query_name:<28} level {level}  {spec.source.describe(c)} -> "
                f"{spec.sink.describe(c)}  ({spec.output_mode})  {spec.description}".rstrip()
            )
    typer.echo("\n".join(lines))


def _print_plan(console: Console, plan: Plan) -> None:
    table = Table(title=f"pipeline {plan.pipeline.name}")
    for col in ("level", "flow", "reads", "writes", "mode", "trigger", "checkpoint"):
        table.add_column(col, overflow="fold")
    for f in plan.flows:
        if f.spec.name in plan.selected:
            table.add_row(
                str(f.level),
                f.spec.name,
                f.spec.source.describe(f.ctx),
                f.spec.sink.describe(f.ctx),
                f.spec.output_mode,
                f.trigger,
                str(f.checkpoint),
            )
    console.print(table)


def validate(
    ctx: typer.Context,
    pipeline_name: Annotated[str, typer.Argument(metavar="PIPELINE")],
    module: ModuleOpt = None,
) -> None:
    """Check a pipeline without running it: config, flow order, every flow's query plan."""
    from eventlake.session import get_spark

    state: CliState = ctx.obj
    settings, registry = _registry(state, module)
    pipeline = registry.get(pipeline_name)
    _offline_contexts(pipeline, settings)
    spark = get_spark(settings)
    with tempfile.TemporaryDirectory(prefix="eventlake-validate-") as scratch:
        # Missing upstream tables are created here, never in the real lake.
        plan = build_plan(pipeline, settings, spark, lake_root=Path(scratch))
        console = Console()
        _print_plan(console, plan)
    console.print(f"pipeline '{pipeline_name}' is valid: {len(plan.flows)} flow(s)")


def run(
    ctx: typer.Context,
    pipeline_name: Annotated[str, typer.Argument(metavar="PIPELINE")],
    flow: Annotated[
        list[str] | None, typer.Option("--flow", "-f", help="Run only this flow (repeatable).")
    ] = None,
    trigger: Annotated[
        str | None,
        typer.Option(
            "--trigger",
            "-t",
            help="available-now | once | '10 seconds' | continuous (default: from config).",
        ),
    ] = None,
    module: ModuleOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Run a pipeline: finite triggers exit 0 when all input is processed; others run until
    SIGINT/SIGTERM, then stop every query between batches and exit 0."""
    from eventlake.monitoring import ProgressListener
    from eventlake.pipelines.runner import preflight_topics, run_plan
    from eventlake.session import get_spark

    state: CliState = ctx.obj
    settings, registry = _registry(state, module)
    pipeline = registry.get(pipeline_name)
    preflight_topics(pipeline, _offline_contexts(pipeline, settings), flow)
    console = Console(stderr=True)
    with stop_on_signals(console) as stop:
        spark = get_spark(settings)
        plan = build_plan(pipeline, settings, spark, flows=flow, trigger=trigger)
        if not quiet:
            _print_plan(console, plan)
        listener = ProgressListener(console, show=not quiet)
        try:
            result = run_plan(plan, stop=stop, listener=listener)
        finally:
            listener.close()
    summary = Table(title=f"run of {pipeline_name}" + (" (stopped)" if stop.is_set() else ""))
    for col in ("flow", "batches", "input rows", "late dropped", "writes"):
        summary.add_column(col)
    for f in plan.flows:
        if f.spec.name in plan.selected:
            t = result.flows.get(f.query_name)
            summary.add_row(
                f.spec.name,
                str(t.batches if t else 0),
                str(t.input_rows if t else 0),
                str(t.dropped_by_watermark if t else 0),
                f.spec.sink.describe(f.ctx),
            )
    Console().print(summary)
