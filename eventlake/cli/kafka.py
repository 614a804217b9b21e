"""`eventlake kafka ...`: the embedded broker and topics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eventlake.kafka import EmbeddedKafkaBroker, create_topic
from eventlake.kafka.broker import DEFAULT_PORT

kafka_app = typer.Typer(
    help="Run an embedded Kafka broker and manage topics.", no_args_is_help=True
)

PortOpt = Annotated[int, typer.Option("--port", "-p", help="Client port on 127.0.0.1.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Broker data folder (default: .eventlake/kafka-<port>)."),
]


@kafka_app.command()
def start(port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None) -> None:
    """Start a single-node KRaft broker in the background; returns once it answers."""
    broker = EmbeddedKafkaBroker(port=port, data_dir=data_dir)
    was_running = broker.status().running
    status = broker.start()
    verb = "already running" if was_running else "started"
    typer.echo(f"Kafka broker {verb} at {status.bootstrap_servers} (pid {status.pid})")


@kafka_app.command()
def stop(port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None) -> None:
    """Stop the broker cleanly; safe to call when it is not running."""
    broker = EmbeddedKafkaBroker(port=port, data_dir=data_dir)
    if broker.stop():
        typer.echo(f"Kafka broker at {broker.bootstrap_servers} stopped")
    else:
        typer.echo(f"Kafka broker at {broker.bootstrap_servers} was not running")


@kafka_app.command()
def status(port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None) -> None:
    """Print the bootstrap address and whether the broker runs (exit 3 when stopped)."""
    s = EmbeddedKafkaBroker(port=port, data_dir=data_dir).status()
    state = f"running (pid {s.pid})" if s.running else "stopped"
    typer.echo(f"{s.bootstrap_servers}\t{state}\t{s.data_dir}")
    if not s.running:
        raise typer.Exit(3)


@kafka_app.command("create-topic")
def create_topic_cmd(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", min=1)] = 1,
    bootstrap: Annotated[str, typer.Option("--bootstrap-servers")] = f"127.0.0.1:{DEFAULT_PORT}",
    exist_ok: Annotated[bool, typer.Option("--exist-ok")] = False,
) -> None:
    """Create a topic through the Kafka admin API."""
    created = create_topic(bootstrap, name, partitions=partitions, exist_ok=exist_ok)
    typer.echo(f"topic '{name}' {'created' if created else 'already exists'} on {bootstrap}")
