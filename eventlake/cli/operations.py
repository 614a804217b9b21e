"""`eventlake status | checkpoint show|reset | lateness | upgrade-check | verify`."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from eventlake.cli.pipelines import ModuleOpt, load_registry
from eventlake.cli.state import CliState
from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import Pipeline, Registry
from eventlake.pipelines.plan import check_flow_names
from eventlake.storage import Location, filesystem

if TYPE_CHECKING:
    from eventlake.operations.checkpoints import CheckpointReport

checkpoint_app = typer.Typer(help="Inspect or reset flows' checkpoints.", no_args_is_help=True)

FormatOpt = Annotated[str, typer.Option("--format", help="table or json.")]
FlowArg = Annotated[str, typer.Argument(metavar="PIPELINE.FLOW")]


def _check_format(output: str) -> None:
    if output not in ("table", "json"):
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            f"--format {output!r} is not one of table, json.",
            fix="pass --format table or --format json",
        )


def _flow(registry: Registry, target: str) -> tuple[Pipeline, str]:
    name, _, flow = target.partition(".")
    pipeline = registry.get(name)
    if not flow:
        raise EventlakeError(
            ErrorCode.PIPELINE_NOT_FOUND,
            f"'{target}' names no flow (flows of '{name}': {', '.join(sorted(pipeline.flows))}).",
            expected="PIPELINE.FLOW, e.g. orders.silver",
            fix="check `eventlake list`",
        )
    check_flow_names(pipeline, [flow])
    return pipeline, flow


def _when(epoch: float | None, *, short: bool = False) -> str:
    if not epoch:
        return "-"
    ago = f"{time.time() - epoch:.0f}s ago"
    if short:
        return ago
    return f"{datetime.fromtimestamp(epoch, timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ')} ({ago})"


def _live_status(settings: Settings, registry: Registry, name: str) -> dict[str, Any] | None:
    """The status of a live run: what its metrics endpoint serves, or with none (or none
    answering), the checkpoints' with the run's flows marked running; None when no run of
    ``name`` is alive."""
    from eventlake.operations.status import fetch_status, live_run, pipeline_status

    run = live_run(settings, name)
    if not run:
        return None
    if run.get("url"):
        try:
            return fetch_status(run["url"], settings.metrics)
        except (OSError, ValueError):
            pass
    record = pipeline_status(registry.get(name), settings, running=set(run.get("flows", [])))
    record["source"] = f"checkpoints (run pid {run['pid']} alive, no metrics endpoint answers)"
    return record


def status(
    ctx: typer.Context,
    pipeline_name: Annotated[str | None, typer.Argument(metavar="[PIPELINE]")] = None,
    output: FormatOpt = "table",
    module: ModuleOpt = None,
) -> None:
    """Where each flow stands: running or not, last committed batch and when, in-flight
    batch, watermark, state rows, Kafka lag per partition, rows in each output. From the
    run's metrics endpoint when one is up, else from the checkpoints (a stopped pipeline)."""
    from eventlake.operations.status import pipeline_status

    _check_format(output)
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    root = _checkpoints_root(settings)
    if pipeline_name is not None:
        names = [registry.get(pipeline_name).name]
    else:  # every pipeline that has run here
        names = [n for n in registry.names() if filesystem(root).is_dir(root / n)]
    records = []
    for name in names:
        record = _live_status(settings, registry, name)
        if record is None:
            record = pipeline_status(registry.get(name), settings)
            record["source"] = f"checkpoints in {settings.checkpoints.root / name}"
        records.append(record)
    if output == "json":
        typer.echo(json.dumps(records if pipeline_name is None else records[0], indent=2))
        return
    console = Console()
    if not records:
        console.print(
            f"no pipeline has run here yet (no checkpoints in {settings.checkpoints.root})"
        )
    for record in records:
        _print_status(console, record)


def _checkpoints_root(settings: Settings) -> Location:
    """The checkpoints root, with Spark started when it is a URI (its Hadoop client reads it)."""
    root = settings.checkpoints.root
    if not root.is_local:
        from eventlake.session import get_spark

        get_spark(settings)
    return root


def _lag_text(flow: dict[str, Any]) -> str:
    if flow.get("lag_error"):
        return f"unknown ({flow['lag_error']})"
    if not flow["lag"]:
        return "-"
    parts = [f"{lag['topic']}/{lag['partition']}: {lag['records']} ({lag['seconds']:.1f}s)"
             for lag in flow["lag"]]  # fmt: skip
    return "\n".join(parts)


def _flow_state(flow: dict[str, Any]) -> str:
    last = flow.get("last_restart")
    if flow.get("restarting") and last:
        return f"restarting ({last['code']}, restart {last['restarts']})"
    state = "running" if flow["running"] else "stopped"
    return f"{state} ({last['restarts']} restarts)" if last else state


def _print_status(console: Console, record: dict[str, Any]) -> None:
    state = "running" if record["running"] else "stopped"
    table = Table(title=f"{record['pipeline']}: {state} (from {record['source']})")
    columns = ("flow", "state", "last batch", "committed", "in flight", "watermark",
               "state rows", "lag records (seconds)", "output rows")  # fmt: skip
    for col in columns:
        table.add_column(col, overflow="fold")
    for f in record["flows"]:
        outputs = "\n".join(f"{k}: {'-' if v is None else v}" for k, v in f["outputs"].items())
        table.add_row(
            f["flow"],
            _flow_state(f),
            "-" if f["last_batch"] is None else str(f["last_batch"]),
            _when(f["last_commit"], short=True),
            "-" if f["in_flight"] is None else str(f["in_flight"]),
            (f["watermark"] or "-")[:19].replace("T", " "),
            "-" if f["state_rows"] is None else str(f["state_rows"]),
            _lag_text(f),
            outputs or "-",
        )
    console.print(table)
    if record.get("tables"):
        _print_tables(console, record["tables"])


def _print_tables(console: Console, reports: list[dict[str, Any]]) -> None:
    table = Table(title="tables: files and maintenance")
    for col in ("table", "files", "small", "MB", "last compaction", "last vacuum"):
        table.add_column(col, overflow="fold")
    for r in reports:
        if r.get("error"):
            table.add_row(r["table"], "-", "-", "-", r["error"], "-")
            continue

        def last(kind: str, r: dict[str, Any] = r) -> str:
            done = r.get(f"last_{kind}")
            text = f"{_when(done['at'], short=True)}: {done['did']}" if done else "never"
            return text + _failed(r, kind)

        size = "-" if r.get("bytes") is None else f"{r['bytes'] / 1e6:.1f}"
        small = "-" if r.get("small_files") is None else f"{r['small_files']}"
        table.add_row(r["table"], str(r.get("files") if r.get("files") is not None else "-"),
                      small, size, last("compact"), last("vacuum"))  # fmt: skip
    console.print(table)


def _failed(report: dict[str, Any], kind: str) -> str:
    """A live run's failed ``kind`` actions on the table, as a line of its cell."""
    count = (report.get("maintenance_failures") or {}).get(kind)
    if not count:
        return ""
    last = report.get("last_failure") or {}
    if last.get("kind") != kind:
        return f"\nfailed {count}x in this run"
    return f"\nfailed {count}x in this run, last {_when(last['at'], short=True)}: {last['error']}"


@checkpoint_app.command("show")
def checkpoint_show(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(metavar="PIPELINE[.FLOW]")],
    last: Annotated[int, typer.Option(help="How many of the latest batches to list.")] = 10,
    state_stores: Annotated[
        bool, typer.Option("--state/--no-state", help="Read the state stores (starts Spark).")
    ] = True,
    output: FormatOpt = "table",
    module: ModuleOpt = None,
) -> None:
    """A flow's checkpoint, or every flow's of a pipeline: offsets per source per batch,
    commits, the in-flight batch, watermark, stateful operators (schema, rows, size) and
    the plan fingerprint."""
    from eventlake.checkpoints import CheckpointLog
    from eventlake.operations.checkpoints import inspect_checkpoint, state_operators

    _check_format(output)
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    whole = "." not in target
    if whole:
        pipeline = registry.get(target)
        names = list(pipeline.flows)
    else:
        pipeline, flow = _flow(registry, target)
        names = [flow]
    configs = pipeline.configs(settings)
    _checkpoints_root(settings)
    reports, missing = [], []
    for name in names:
        config = configs[name]
        if whole and not CheckpointLog(config.checkpoint).exists:
            missing.append(config.query_name)  # never ran: nothing to show, not an error
            continue
        report = inspect_checkpoint(config, last=last)
        if state_stores and filesystem(config.checkpoint).is_dir(config.checkpoint / "state"):
            from eventlake.session import get_spark

            report.state = state_operators(get_spark(settings), config.checkpoint)
        reports.append(report)
    if output == "json":
        shown: Any = (
            {"pipeline": pipeline.name, "flows": [r.as_dict() for r in reports],
             "without_checkpoint": missing}
            if whole else reports[0].as_dict()
        )  # fmt: skip
        typer.echo(json.dumps(shown, indent=2, default=str))
        return
    console = Console()
    for report in reports:
        _print_checkpoint(console, report)
    if missing:
        console.print(f"no checkpoint yet (never run): {', '.join(missing)}", highlight=False)


def _print_checkpoint(console: Console, report: CheckpointReport) -> None:
    console.print(f"[bold]{report.flow}[/]  checkpoint {report.path}", highlight=False)
    console.print(f"query id {report.stream_id}; {report.total_batches} batch(es) planned, "
                  f"last committed {report.last_committed}", highlight=False)  # fmt: skip
    if report.in_flight is not None:
        console.print(
            f"[yellow]in flight: batch {report.in_flight}[/] (planned, not committed: the next "
            "start re-runs exactly its offsets)",
            highlight=False,
        )
    else:
        console.print("in flight: none (the last planned batch committed)")
    wm = report.watermark_ms
    console.print(f"watermark: {_iso(wm) if wm else 'none'}", highlight=False)
    batches = Table(title=f"last {len(report.batches)} batch(es)")
    for col in ("batch", "committed", "watermark", "source offsets (end of batch)"):
        batches.add_column(col, overflow="fold")
    for b in report.batches:
        sources = "\n".join(f"{s['kind']}: {json.dumps(s['offset'])}" for s in b.sources)
        committed = _when(b.committed_at) if b.committed else "[yellow]no (in flight)[/]"
        batches.add_row(str(b.batch), committed, _iso(b.watermark_ms) or "-", sources)
    console.print(batches)
    if report.state:
        ops = Table(title="stateful operators")
        for col in ("id", "operator", "partitions", "batches", "key", "value", "rows", "on disk"):
            ops.add_column(col, overflow="fold")
        for op in report.state:
            ops.add_row(
                str(op["operator_id"]), f"{op['operator']} ({op['store']})", str(op["partitions"]),
                f"{op['min_batch']}..{op['max_batch']}", op.get("key_schema", "-"),
                op.get("value_schema", op.get("error", "-")), str(op.get("rows", "-")),
                f"{op['bytes_on_disk'] // 1024} KiB",
            )  # fmt: skip
        console.print(ops)
    console.print(f"plan fingerprint: {json.dumps(report.fingerprint)}", highlight=False)


def _iso(ms: int) -> str:
    from eventlake.operations.status import iso_from_ms

    return iso_from_ms(ms) if ms else ""


@checkpoint_app.command("reset")
def checkpoint_reset(
    ctx: typer.Context,
    target: FlowArg,
    yes: Annotated[bool, typer.Option("--yes", help="Delete the checkpoint.")] = False,
    module: ModuleOpt = None,
) -> None:
    """Delete a flow's checkpoint, so its next run starts over from its starting offsets.
    Says what will be reprocessed; refuses without --yes or while the pipeline runs."""

    from eventlake.operations.checkpoints import reprocessing, require_checkpoint
    from eventlake.operations.status import live_run

    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    pipeline, flow = _flow(registry, target)
    config = pipeline.configs(settings)[flow]
    spec = pipeline.flows[flow]
    _checkpoints_root(settings)
    cp = require_checkpoint(config)
    run = live_run(settings, pipeline.name)
    if run is not None:
        raise EventlakeError(
            ErrorCode.CHECKPOINT_RESET_REFUSED,
            f"pipeline '{pipeline.name}' is running (pid {run['pid']}); its checkpoints are "
            "in use.",
            fix=f"stop it first, then `eventlake checkpoint reset {target} --yes`",
        )
    console = Console()
    console.print(f"Resetting {config.query_name} deletes {cp}. Its next run reads again:")
    for line in reprocessing(config, spec):
        console.print(f"  {line}", highlight=False)
    console.print(
        f"  and writes to {spec.output.describe(config)} ({spec.output.guarantee}) again: the "
        "outputs keep their rows, so appended rows are written a second time; clear the "
        "outputs too for a clean rebuild.",
        highlight=False,
    )
    if not yes:
        raise EventlakeError(
            ErrorCode.CHECKPOINT_RESET_REFUSED,
            f"not resetting {config.query_name} without --yes.",
            fix=f"eventlake checkpoint reset {target} --yes",
        )
    filesystem(cp).delete(cp)
    console.print(f"deleted {cp}")


def lateness(
    ctx: typer.Context,
    target: FlowArg,
    output: FormatOpt = "table",
    module: ModuleOpt = None,
) -> None:
    """How late the flow's input arrives (event time behind the newest seen before it),
    as quantiles and a histogram, with the watermark delay that would keep 99% / 99.9% of
    records and what the configured delay drops. Reads the flow's inputs as they are now."""
    from eventlake.operations.lateness_report import measure_lateness
    from eventlake.session import get_spark

    _check_format(output)
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    pipeline, flow = _flow(registry, target)
    results = measure_lateness(pipeline, flow, settings, get_spark(settings))
    if output == "json":
        typer.echo(json.dumps([r.as_dict() for r in results], indent=2))
        return
    console = Console()
    for r in results:
        console.print(
            f"[bold]{r.flow}[/] watermark on {r.column}: {r.records} records", highlight=False
        )
        q = ", ".join(f"{k} {v:g}s" for k, v in r.quantiles.items())
        console.print(f"  lateness: {q}", highlight=False)
        console.print(
            f"  a delay of {r.keep_99:g}s keeps 99%, {r.keep_99_9:g}s keeps 99.9% of records",
            highlight=False,
        )
        console.print(
            f"  configured {r.configured_delay} ({r.configured_seconds:g}s) drops {r.dropped} "
            f"record(s): {r.drop_rate:.3%}",
            highlight=False,
        )
        peak = max((c for _b, c in r.histogram), default=0) or 1
        lo = "0"
        for bound, count in r.histogram:
            label = "0s (on time)" if bound == 0 else f"{lo}-{bound:g}s" if bound else f">{lo}s"
            lo = f"{bound:g}" if bound else lo
            bar = "█" * round(40 * count / peak)
            console.print(f"  {label:>14} {count:>9} {bar}", highlight=False)


def upgrade_check(
    ctx: typer.Context,
    pipeline_name: Annotated[str, typer.Argument(metavar="PIPELINE")],
    output: FormatOpt = "table",
    module: ModuleOpt = None,
) -> None:
    """Say per flow whether the code as now written resumes from its checkpoint: safely,
    with changed results (how), or not at all (what state would be lost, and the command to
    start afresh). Exit 0 when every flow can resume, 1 when one cannot."""
    from eventlake.session import get_spark
    from eventlake.validation.upgrade import BLOCKED, CHANGES, upgrade_verdicts

    _check_format(output)
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    pipeline = registry.get(pipeline_name)
    pipeline.parse_params(settings.pipelines.get(pipeline.name))
    verdicts = upgrade_verdicts(pipeline, settings, get_spark(settings))
    if output == "json":
        typer.echo(json.dumps([v.as_dict() for v in verdicts], indent=2))
    else:
        table = Table(title=f"upgrade check: {pipeline.name}", show_lines=True)
        for column in ("flow", "verdict", "why", "fix"):
            table.add_column(column, overflow="fold")
        colours = {BLOCKED: "red", CHANGES: "yellow"}
        for v in verdicts:
            colour = colours.get(v.outcome, "green")
            table.add_row(v.flow, f"[{colour}]{v.outcome}[/]", "\n".join(v.reasons), v.fix or "")
        Console().print(table)
    raise typer.Exit(1 if any(v.outcome == BLOCKED for v in verdicts) else 0)


def verify(
    ctx: typer.Context,
    target: FlowArg,
    rows: Annotated[int, typer.Option(help="How many differing rows to print each way.")] = 10,
    output: FormatOpt = "table",
    module: ModuleOpt = None,
) -> None:
    """Recompute the flow's output in batch from its input as of its last committed batch
    (late rows left out as Spark dropped them; windows the watermark closed) and diff it
    with the output table. Exit 0 when equal, 1 with the first differing rows."""
    from eventlake.operations.verify import verify_flow
    from eventlake.session import get_spark

    _check_format(output)
    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    pipeline, flow = _flow(registry, target)
    result = verify_flow(pipeline, flow, settings, get_spark(settings), rows=rows)
    if output == "json":
        typer.echo(json.dumps(result.as_dict(), indent=2, default=str))
        raise typer.Exit(0 if result.ok else 1)
    console = Console()
    console.print(
        f"{result.flow} as of batch {result.batch_id} (watermark {result.watermark or '-'}): "
        f"{result.expected_rows} rows recomputed ({result.late_rows} late input rows left "
        f"out), {result.output_rows} in the output",
        highlight=False, soft_wrap=True,
    )  # fmt: skip
    if result.ok:
        console.print("[green]the output equals the recomputation[/]")
        raise typer.Exit(0)
    for title, count, sample in (
        ("missing from the output", result.missing_count, result.missing),
        ("in the output, not recomputed", result.unexpected_count, result.unexpected),
    ):
        if not count:
            continue
        console.print(f"{count} row(s) {title} (first {len(sample)}):", soft_wrap=True)
        table = Table()
        for column in sample[0]:
            table.add_column(column, overflow="fold")
        for row in sample:
            table.add_row(*(str(v) for v in row.values()))
        console.print(table)
    raise typer.Exit(1)


def maintain(
    ctx: typer.Context,
    pipeline_name: Annotated[str, typer.Argument(metavar="PIPELINE")],
    tables: Annotated[
        list[str] | None, typer.Option("--table", help="Only this layer/table (repeatable).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be done.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Compact any table with small files; vacuum now.")
    ] = False,
    module: ModuleOpt = None,
) -> None:
    """Compact (cluster) and vacuum the Delta tables the pipeline writes and trim their logs
    to maintenance.log_retention_commits, as a run does between batches: for a schedule, or
    a pipeline that is stopped."""
    from eventlake.operations.maintain import maintain_pipeline
    from eventlake.session import get_spark

    state: CliState = ctx.obj
    settings, registry = load_registry(state, module)
    pipeline = registry.get(pipeline_name)
    done = maintain_pipeline(pipeline, settings, get_spark(settings), tables=tables,
                             dry_run=dry_run, force=force)  # fmt: skip
    table = Table(title=f"{pipeline.name}: maintenance{' (dry run)' if dry_run else ''}")
    for col in ("table", "files before", "files after", "small after", "done"):
        table.add_column(col, overflow="fold")
    for m in done:
        did = "\n".join(f"{a.kind}: {a.error or a.detail} ({a.seconds:.1f}s)" for a in m.actions)
        table.add_row(m.table, "-" if m.before is None else str(m.before.files),
                      "-" if m.after is None else str(m.after.files),
                      "-" if m.after is None else str(m.after.small_files),
                      did or "nothing due")  # fmt: skip
    Console().print(table)
    failed = [a for m in done for a in m.actions if a.error]
    if failed:
        raise typer.Exit(1)
