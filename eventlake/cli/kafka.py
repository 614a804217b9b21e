"""`eventlake kafka ...`: the embedded broker and topics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eventlake.cli.state import CliState
from eventlake.jars import BROKER_JARS, jar_files
from eventlake.kafka import EmbeddedKafkaBroker, EmbeddedKafkaCluster, create_topic
from eventlake.kafka.broker import DEFAULT_PORT, BrokerStatus

kafka_app = typer.Typer(
    help="Run an embedded Kafka broker and manage topics.", no_args_is_help=True
)

PortOpt = Annotated[int, typer.Option("--port", "-p", help="Client port on 127.0.0.1.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Data folder (default: .eventlake/kafka-<port>, or kafka-cluster-<port>).",
    ),
]
BrokersOpt = Annotated[
    int,
    typer.Option(
        "--brokers", min=1,
        help="Nodes: 1, or a KRaft cluster on ports PORT, PORT+1... whose topics get "
        "3 copies with min.insync.replicas 2.",
    ),
]  # fmt: skip


def _nodes(port: int, data_dir: Path | None, brokers: int) -> EmbeddedKafkaCluster | None:
    return EmbeddedKafkaCluster(brokers, port, data_dir) if brokers > 1 else None


@kafka_app.command()
def start(ctx: typer.Context, port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None,
          brokers: BrokersOpt = 1) -> None:  # fmt: skip
    """Start a KRaft broker (or --brokers N of them) in the background; returns once
    each answers."""
    state: CliState = ctx.obj
    jar_files(BROKER_JARS, repository=state.settings().jars.repository)  # the first start
    cluster = _nodes(port, data_dir, brokers)
    if cluster is not None:
        for s in cluster.start():
            typer.echo(f"Kafka broker running at {s.bootstrap_servers} (pid {s.pid})")
        typer.echo(f"bootstrap servers: {cluster.bootstrap_servers}")
        return
    broker = EmbeddedKafkaBroker(port=port, data_dir=data_dir)
    was_running = broker.status().running
    status = broker.start()
    verb = "already running" if was_running else "started"
    typer.echo(f"Kafka broker {verb} at {status.bootstrap_servers} (pid {status.pid})")


@kafka_app.command()
def stop(port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None,
         brokers: BrokersOpt = 1) -> None:  # fmt: skip
    """Stop the broker(s) cleanly; safe to call when not running."""
    cluster = _nodes(port, data_dir, brokers)
    node = cluster or EmbeddedKafkaBroker(port=port, data_dir=data_dir)
    verb = "stopped" if node.stop() else "was not running"
    typer.echo(f"Kafka at {node.bootstrap_servers} {verb}")


@kafka_app.command()
def status(port: PortOpt = DEFAULT_PORT, data_dir: DataDirOpt = None,
           brokers: BrokersOpt = 1) -> None:  # fmt: skip
    """Print each broker's address and whether it runs (exit 3 when any is stopped)."""
    cluster = _nodes(port, data_dir, brokers)
    states: list[BrokerStatus] = (
        cluster.status()
        if cluster
        else [EmbeddedKafkaBroker(port=port, data_dir=data_dir).status()]
    )
    for s in states:
        state = f"running (pid {s.pid})" if s.running else "stopped"
        typer.echo(f"{s.bootstrap_servers}\t{state}\t{s.data_dir}")
    if not all(s.running for s in states):
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
