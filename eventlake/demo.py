"""`make demo`: the embedded broker, generated orders, and a Kafka -> Delta bronze query."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.table import Table

from eventlake.config import Settings
from eventlake.generator import generate_orders, order_records
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce, topic_offsets
from eventlake.queries import await_finished
from eventlake.session import get_spark
from eventlake.sinks import DeltaAppendSink
from eventlake.sources import KafkaSource, kafka_records
from eventlake.testing import delta_version, read_delta

DEMO_TOPIC = "orders"
DEMO_PARTITIONS = 3


@dataclass(frozen=True)
class DemoSummary:
    produced: int
    rows_written: int
    table_rows: int
    delta_version: int
    table: Path
    checkpoint: Path
    offsets: dict[int, int]


def _broker_for(settings: Settings) -> EmbeddedKafkaBroker:
    first = settings.kafka.bootstrap_servers.split(",")[0]
    port = urlsplit(f"//{first}").port or 9092
    return EmbeddedKafkaBroker(port=port)


def run_demo(
    settings: Settings, *, events: int = 5000, console: Console | None = None
) -> DemoSummary:
    """Run the demo job and print what it wrote; stops the broker only if it started it."""
    console = console or Console()
    broker = _broker_for(settings)
    started_here = not broker.status().running
    with console.status("starting the embedded Kafka broker"):
        broker.start()
    bootstrap = broker.bootstrap_servers
    kafka = settings.kafka.model_copy(update={"bootstrap_servers": bootstrap})
    console.print(f"Kafka broker at [bold]{bootstrap}[/] (data in {broker.data_dir})")
    try:
        create_topic(bootstrap, DEMO_TOPIC, partitions=DEMO_PARTITIONS, exist_ok=True)
        # Each run produces new orders: the seed follows what the topic already holds.
        seed = sum(topic_offsets(bootstrap, DEMO_TOPIC).values())
        produced = produce(bootstrap, DEMO_TOPIC, order_records(generate_orders(events, seed=seed)))
        console.print(f"produced {produced} order events to topic '{DEMO_TOPIC}'")

        with console.status("starting Spark"):
            spark = get_spark(settings)
        table = settings.lake.table_path("bronze", "orders").absolute()
        checkpoint = settings.checkpoints.for_flow("demo", "bronze_orders").absolute()
        source = KafkaSource(topics=(DEMO_TOPIC,), kafka=kafka, max_offsets_per_trigger=20_000)
        sink = DeltaAppendSink(path=table)
        with console.status("streaming Kafka -> Delta (available-now)"):
            query = sink.start(
                kafka_records(source.read_stream(spark)),
                query_name="demo.bronze_orders",
                checkpoint=checkpoint,
                trigger="available-now",
            )
            await_finished(query, timeout=600)
        written = sum(int(p["numInputRows"]) for p in query.recentProgress)
        summary = DemoSummary(
            produced=produced,
            rows_written=written,
            table_rows=read_delta(table).num_rows,
            delta_version=delta_version(table),
            table=table,
            checkpoint=checkpoint,
            offsets=topic_offsets(bootstrap, DEMO_TOPIC),
        )
    finally:
        if started_here:
            with console.status("stopping the broker"):
                broker.stop()
    _print_summary(console, summary)
    return summary


def _print_summary(console: Console, s: DemoSummary) -> None:
    table = Table(title="eventlake demo: Kafka -> Delta (bronze/orders)", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("events produced this run", str(s.produced))
    table.add_row("rows written this run", str(s.rows_written))
    table.add_row("rows in table", str(s.table_rows))
    table.add_row("Delta version", str(s.delta_version))
    table.add_row("table", str(s.table))
    table.add_row("checkpoint", str(s.checkpoint))
    table.add_row("topic end offsets", ", ".join(f"p{p}={o}" for p, o in sorted(s.offsets.items())))
    console.print(table)
