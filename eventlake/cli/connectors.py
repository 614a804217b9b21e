"""`eventlake connectors`: what each connector supports and guarantees."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from eventlake.cli.pipelines import ModuleOpt, load_registry
from eventlake.cli.state import CliState
from eventlake.connectors.catalog import ConnectorRow, connector_rows


def _table(kind: str, rows: list[ConnectorRow]) -> Table:
    columns = list(rows[0].capabilities) if rows else []
    table = Table(title=f"{kind}s", title_justify="left", show_lines=False)
    table.add_column(kind)
    table.add_column("guarantee")
    for column in columns:
        table.add_column(column)
    for row in rows:
        name = row.name if row.module.startswith("eventlake.") else f"{row.name} ({row.module})"
        table.add_row(name, row.guarantee, *(row.capabilities.get(c, "") for c in columns))
    return table


def connectors(
    ctx: typer.Context,
    module: ModuleOpt = None,
    output_format: Annotated[
        str, typer.Option("--format", help="table, or json for scripts.")
    ] = "table",
) -> None:
    """Print every input, output and fan-out target (eventlake's and those the --module
    files define) with its delivery guarantee and what it supports."""
    state: CliState = ctx.obj
    load_registry(state, module)  # user modules define their connectors when loaded
    rows = connector_rows()
    if output_format == "json":
        typer.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    console = Console(width=200)
    for kind in ("input", "output", "target"):
        console.print(_table(kind, [r for r in rows if r.kind == kind]))
