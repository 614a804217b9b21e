"""`eventlake list | run | validate`."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from eventlake.cli.signals import stop_on_signals
from eventlake.cli.state import CliState
from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import Registry
from eventlake.pipelines.loader import project_pipelines
from eventlake.pipelines.plan import Plan, dependency_order
from eventlake.validation import Report

ModuleOpt = Annotated[
    list[Path] | None,
    typer.Option("--module", "-m", help="A Python file declaring pipelines (repeatable)."),
]


def load_registry(state: CliState, modules: list[Path] | None) -> tuple[Settings, Registry]:
    """The CLI's settings and the project's pipelines: ``project.modules``, the
    ``--module`` files, and the examples if the project opts in."""
    settings = state.settings()
    registry = project_pipelines(settings, modules or ())
    unknown = sorted(set(settings.pipelines) - set(registry.names()))
    if unknown:
        examples = [u for u in unknown if u in registry.hints]
        fixes = [f"{', '.join(examples)}: {registry.hints[examples[0]]}"] if examples else []
        if len(examples) < len(unknown):
            fixes.append("correct the pipeline name, or name its module in project.modules "
                         "(or --module)")  # fmt: skip
        raise EventlakeError(
            ErrorCode.CONFIG_UNKNOWN_KEY,
            f"unknown config key(s): {', '.join('pipelines.' + u for u in unknown)} "
            "(no such pipeline).",
            expected=f"sections for known pipelines: {', '.join(registry.names())}",
            fix="; ".join(fixes),
        )
    return settings, registry


def list_pipelines(ctx: typer.Context, module: ModuleOpt = None) -> None:
    """List pipelines and their flows in run order."""
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    lines = []
    for name in registry.names():
        pipeline = registry.get(name)
        configs = pipeline.configs(settings)
        lines.append(f"{name}: {pipeline.description}".rstrip(": "))
        for spec, level, _ups in dependency_order(pipeline):
            c = configs[spec.name]
            lines.append(
                f"  {spec.query_name:<28} level {level}  {spec.describe_inputs(c)} -> "
                f"{spec.output.describe(c)}  ({spec.output_mode}, {spec.output.guarantee})  "
                f"{spec.description}".rstrip()
            )
    typer.echo("\n".join(lines))


def _print_plan(console: Console, plan: Plan) -> None:
    table = Table(title=f"pipeline {plan.pipeline.name}")
    for col in ("level", "flow", "reads", "writes", "guarantee", "mode", "trigger", "checkpoint"):
        table.add_column(col, overflow="fold")
    for f in plan.chosen():
        table.add_row(
            str(f.level),
            f.spec.name,
            f.spec.describe_inputs(f.ctx),
            f.spec.output.describe(f.ctx),
            str(f.spec.output.guarantee),
            f.spec.output_mode,
            f.trigger,
            str(f.checkpoint),
        )
    console.print(table)


def _print_findings(console: Console, report: Report) -> None:
    if not report.findings:
        return
    table = Table(title=f"findings for {report.pipeline}", show_lines=True)
    for col in ("code", "severity", "flow", "what", "why", "fix"):
        table.add_column(col, overflow="fold")
    for f in report.findings:
        style = "red" if f.severity == "error" else "yellow"
        table.add_row(f.code, f"[{style}]{f.severity}[/]", f.flow, f.what, f.why, f.fix)
    console.print(table)


def validate(
    ctx: typer.Context,
    pipeline_name: Annotated[str | None, typer.Argument(metavar="[PIPELINE]")] = None,
    all_pipelines: Annotated[bool, typer.Option("--all", help="Check every pipeline.")] = False,
    strict: Annotated[bool, typer.Option(help="Warnings fail too (exit 2).")] = False,
    output: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    module: ModuleOpt = None,
) -> None:
    """Check pipelines without running them: config, flow order, each flow's analysed plan
    against the production rules. Exit 0 clean, 1 errors, 2 warnings under --strict."""
    from eventlake.session import get_spark
    from eventlake.validation import check_pipeline

    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    if all_pipelines == (pipeline_name is not None):
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            "validate needs a PIPELINE or --all, not both.",
            fix="eventlake validate orders, or eventlake validate --all",
        )
    names = registry.names() if all_pipelines else [str(pipeline_name)]
    pipelines = [registry.get(n) for n in names]
    for p in pipelines:
        p.parse_params(settings.pipelines.get(p.name))  # config errors before Spark starts
    spark = get_spark(settings)
    console = Console()
    reports = []
    for pipeline in pipelines:
        with tempfile.TemporaryDirectory(prefix="eventlake-validate-") as scratch:
            # Missing upstream tables are created here, never in the real lake.
            plan, report = check_pipeline(pipeline, settings, spark, lake_root=Path(scratch))
        reports.append(report)
        if output == "table":
            _print_plan(console, plan)
            _print_findings(console, report)
            errors, warnings = len(report.errors), len(report.warnings)
            verdict = "is valid" if not errors else "is NOT valid"
            console.print(
                f"pipeline '{pipeline.name}' {verdict}: {len(plan.flows)} flow(s), "
                f"{errors} error(s), {warnings} warning(s)"
            )
    if output == "json":
        import json

        typer.echo(json.dumps(
            [{"pipeline": r.pipeline, "findings": [f.as_dict() for f in r.findings]}
             for r in reports], indent=2,
        ))  # fmt: skip
    raise typer.Exit(max(r.exit_code(strict) for r in reports))


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
            help=(
                "available-now | once | '10 seconds' | real-time[:interval] | continuous "
                "(default: from config)."
            ),
        ),
    ] = None,
    module: ModuleOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port",
            help="Serve /metrics (Prometheus), /api/status and the dashboard at / on this "
            "port while the run lasts (default: metrics.port; 0 picks a free port).",
        ),
    ] = None,
) -> None:
    """Run a pipeline: finite triggers exit 0 when all input is processed; others run until
    SIGINT/SIGTERM, then stop every query between batches and exit 0."""
    from eventlake.monitoring import ProgressListener
    from eventlake.run import run_pipeline

    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    console = Console(stderr=True)

    def show(plan: Plan, report: Report | None) -> None:
        if not quiet:
            _print_plan(console, plan)
            console.print(
                f"Spark and library logs: {settings.log_file()}", highlight=False, soft_wrap=True
            )
        if report is not None:
            _print_findings(console, report)

    with stop_on_signals(console) as stop:
        listener = ProgressListener(console, show=not quiet)
        try:
            result = run_pipeline(
                pipeline_name, settings, trigger=trigger, flows=flow, listener=listener,
                stop=stop, registry=registry, on_plan=show, metrics_port=metrics_port,
                on_serve=lambda url: console.print(
                    f"dashboard {url}  metrics {url}metrics  status {url}api/status",
                    highlight=False, soft_wrap=True,
                ),
            )  # fmt: skip
        finally:
            listener.close()
    summary = Table(title=f"run of {pipeline_name}" + (" (stopped)" if stop.is_set() else ""))
    for col in ("flow", "batches", "input rows", "late dropped", "writes"):
        summary.add_column(col)
    for f in result.plan.chosen():
        t = result.flows.get(f.query_name)
        summary.add_row(
            f.spec.name,
            str(t.batches if t else 0),
            str(t.input_rows if t else 0),
            str(t.dropped_by_watermark if t else 0),
            f.spec.output.describe(f.ctx),
        )
    Console().print(summary)
