"""The `eventlake` command. EventlakeErrors end as a message with its code and exit 1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from eventlake.cli.cluster import cluster_app
from eventlake.cli.connectors import connectors
from eventlake.cli.generate import generate_app
from eventlake.cli.init import init
from eventlake.cli.jars import jars_app
from eventlake.cli.kafka import kafka_app
from eventlake.cli.operations import (
    checkpoint_app,
    lateness,
    maintain,
    status,
    upgrade_check,
    verify,
)
from eventlake.cli.pipelines import list_pipelines, run, validate
from eventlake.cli.postgres import postgres_app
from eventlake.cli.state import CliState
from eventlake.connectors.delta.tables import plain_delta_rs_errors
from eventlake.errors import EventlakeError
from eventlake.secrets import mask_text, masked

app = typer.Typer(
    name="eventlake",
    help="Exactly-once streaming from Kafka into Delta Lake, on Spark Structured Streaming.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(kafka_app, name="kafka")
app.add_typer(cluster_app, name="cluster")
app.add_typer(generate_app, name="generate")
app.add_typer(postgres_app, name="postgres")
app.add_typer(jars_app, name="jars")
app.command("init")(init)
app.command("list")(list_pipelines)
app.command("run")(run)
app.command("validate")(validate)
app.command("status")(status)
app.command("lateness")(lateness)
app.command("upgrade-check")(upgrade_check)
app.command("verify")(verify)
app.command("maintain")(maintain)
app.command("connectors")(connectors)
app.add_typer(checkpoint_app, name="checkpoint")
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="YAML config (default: ./eventlake.yaml if present)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a config key: dotted.key=value (repeatable)."),
]


@app.callback()
def _root(ctx: typer.Context, config: ConfigOpt = None, overrides: SetOpt = None) -> None:
    state = ctx.obj if isinstance(ctx.obj, CliState) else CliState()
    state.config_path, state.overrides = config, tuple(overrides or ())
    ctx.obj = state


@app.command()
def demo(
    ctx: typer.Context,
    seconds: Annotated[float, typer.Option(help="How long the generator streams.")] = 60.0,
    rate: Annotated[float, typer.Option(help="Orders per second.")] = 100.0,
    metrics_port: Annotated[
        int | None,
        typer.Option("--metrics-port", help="Serve the orders run's dashboard and /metrics."),
    ] = None,
) -> None:
    """The orders pipeline live: generator, processing-time triggers, progress, summary."""
    from eventlake.cli.signals import stop_on_signals
    from eventlake.demo import run_demo

    state: CliState = ctx.obj
    console = Console()
    with stop_on_signals(console) as stop:
        run_demo(state.settings(), seconds=seconds, rate=rate, stop=stop, console=console,
                 metrics_port=metrics_port)  # fmt: skip


@config_app.command("show")
def config_show(ctx: typer.Context) -> None:
    """Print the effective configuration (defaults filled in), secrets masked."""
    import yaml

    from eventlake.pipelines.loader import project_pipelines

    state: CliState = ctx.obj
    settings = state.settings()
    registry = project_pipelines(settings)
    data = settings.model_dump(mode="json")
    data["pipelines"] = {
        name: registry.get(name).parse_params(settings.pipelines.get(name)).model_dump(mode="json")
        if name in registry.names()
        else raw
        for name, raw in {**{n: {} for n in registry.names()}, **settings.pipelines}.items()
    }
    shown = masked(data, settings.secret_values)
    typer.echo(yaml.safe_dump(shown, sort_keys=False).rstrip())


@app.command()
def version() -> None:
    """Print eventlake's version and the stack it runs on: Python, the pinned packages and
    the jars Spark and the broker load."""
    from eventlake.cli.version import stack

    rows = stack()
    width = max(len(name) for name, _ in rows)
    typer.echo("\n".join(f"{name:<{width}}  {value}" for name, value in rows))


@app.command("submit-file")
def submit_file() -> None:
    """Print the file to give spark-submit as the application: it runs this CLI in
    spark-submit's driver (spark-submit [options] FILE run PIPELINE ...)."""
    from importlib import resources

    typer.echo(str(resources.files("eventlake.resources").joinpath("spark_submit.py")))


def main() -> None:
    plain_delta_rs_errors()
    state = CliState()
    try:
        app(obj=state)
    except EventlakeError as err:
        text = escape(mask_text(err.render(), state.secret_values()))
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error[/] {text}", highlight=False, markup=True
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
