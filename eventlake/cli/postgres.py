"""`eventlake postgres start | stop | status`: the local PostgreSQL server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eventlake.cli.state import CliState
from eventlake.postgres import EmbeddedPostgres

postgres_app = typer.Typer(
    help="Run a local PostgreSQL server (Debian's package) for ToPostgres targets.",
    no_args_is_help=True,
)
DataDir = Annotated[Path | None, typer.Option(help="Data folder (default: under .eventlake).")]


def _server(ctx: typer.Context, data_dir: Path | None) -> EmbeddedPostgres:
    state: CliState = ctx.obj
    return EmbeddedPostgres(state.settings().postgres, data_dir)


@postgres_app.command()
def start(ctx: typer.Context, data_dir: DataDir = None) -> None:
    """Start the server on postgres.host:postgres.port (creating it on first use)."""
    server = _server(ctx, data_dir)
    server.start()
    s = server.settings
    typer.echo(f"postgres running on {s.host}:{s.port} (database {s.database}, user {s.user}, "
               f"data {server.data_dir})")  # fmt: skip


@postgres_app.command()
def stop(ctx: typer.Context, data_dir: DataDir = None) -> None:
    """Stop the server (safe when it is not running)."""
    _server(ctx, data_dir).stop()
    typer.echo("postgres stopped")


@postgres_app.command()
def status(ctx: typer.Context, data_dir: DataDir = None) -> None:
    """Say whether the server runs; exit 1 when it does not."""
    server = _server(ctx, data_dir)
    s = server.settings
    if server.is_running():
        typer.echo(f"postgres running on {s.host}:{s.port}")
        return
    typer.echo(f"postgres not running (port {s.port})")
    raise typer.Exit(1)
