"""`make demo`: the orders pipeline live on the embedded broker, then the users CDC one.

A generator streams orders (with late, out-of-order, duplicate and malformed ones) for
about a minute while every flow of the pipeline runs on its processing-time trigger (the
shipped ones: silver and revenue_hourly at ``0 seconds``, the others every 10 s) with
live progress. Once the generator is done and the flows have caught up, the run stops
between batches and a summary of every table is printed. Each demo run starts afresh:
new topics, and the demo's own lake and checkpoints under ``.eventlake/demo``.

Then the users CDC pipeline runs on generated Debezium change events into the SCD1 and
SCD2 Delta tables and PostgreSQL (started here from Debian's package), and the demo shows
that PostgreSQL and ``silver/users`` hold the same state.

Last, the clickstream pipeline runs on generated clicks in two available-now runs on one
checkpoint, so the watermark advances between them: late clicks are dropped and counted,
closed windows and sessions are written, and the two session tables (``session_window``
and ``transformWithState``) are shown to agree.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from rich.console import Console
from rich.table import Table

from eventlake.config import CheckpointSettings, LakeSettings, Settings
from eventlake.generator import OrdersConfig, OrdersGenerator, paced, send
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, topic_offsets
from eventlake.monitoring import ProgressListener
from eventlake.paths import state_dir
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.runner import RunResult
from eventlake.run import run_pipeline
from eventlake.storage import Location
from eventlake.testing import read_delta

if TYPE_CHECKING:
    import pyarrow as pa

    from eventlake.pipelines import Registry
    from eventlake.pipelines.plan import Plan

DEMO_TRIGGER = "10 seconds"


@dataclass
class DemoSummary:
    produced: Counter[str]
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # rows, version
    high_value_records: int = 0
    lake: Path = Path()
    #: Valid orders the silver flow dropped as behind its watermark.
    silver_late_dropped: int = 0


def _broker_for(settings: Settings) -> EmbeddedKafkaBroker:
    first = settings.kafka.bootstrap_servers.split(",")[0]
    return EmbeddedKafkaBroker(port=urlsplit(f"//{first}").port or 9092)


def _demo_settings(settings: Settings, bootstrap: str, run_id: str) -> Settings:
    root = state_dir() / "demo"
    for sub in ("lake", "checkpoints"):
        shutil.rmtree(root / sub, ignore_errors=True)
    pipelines = dict(settings.pipelines)
    pipelines["orders"] = {
        **pipelines.get("orders", {}),
        "topic": f"demo-orders-{run_id}",
        "high_value_topic": f"demo-high-value-{run_id}",
        "trigger": DEMO_TRIGGER,
        "max_offsets_per_trigger": 2000,
    }
    pipelines["users"] = {
        **pipelines.get("users", {}),
        "topic": f"demo-users-cdc-{run_id}",
        "state_topic": f"demo-users-state-{run_id}",
        "postgres_table": f"demo_users_{run_id.replace('-', '_')}",
        "max_offsets_per_trigger": 1000,
    }
    pipelines["clickstream"] = {
        **pipelines.get("clickstream", {}),
        "topic": f"demo-clicks-{run_id}",
        "max_offsets_per_trigger": CLICKS_PER_RUN // 2,
    }
    return settings.model_copy(
        update={
            "kafka": settings.kafka.model_copy(update={"bootstrap_servers": bootstrap}),
            "lake": LakeSettings(root=Location(root / "lake")),
            "checkpoints": CheckpointSettings(root=Location(root / "checkpoints")),
            "pipelines": pipelines,
        }
    )


def _caught_up(listener: ProgressListener, produced: int, timeout: float) -> None:
    """Wait until bronze, silver and quarantine have read every record, then two gold
    batches."""
    deadline = time.monotonic() + timeout

    def totals(name: str) -> tuple[int, int]:
        t = listener.snapshot().get(f"orders.{name}")
        return (t.input_rows, t.batches) if t else (0, 0)

    while time.monotonic() < deadline:
        if all(totals(flow)[0] >= produced for flow in ("bronze", "silver", "quarantine")):
            break
        time.sleep(0.5)
    batches = totals("revenue_hourly")[1]
    while time.monotonic() < deadline and totals("revenue_hourly")[1] < batches + 2:
        time.sleep(0.5)


def triggers_line(plan: Plan) -> str:
    """The plan's flows by trigger: ``silver, revenue_hourly 0 seconds; bronze, ... 10 seconds``."""
    flows: dict[str, list[str]] = {}
    for flow in plan.chosen():
        flows.setdefault(flow.trigger, []).append(flow.spec.name)
    return "; ".join(f"{', '.join(names)} {trigger}" for trigger, names in flows.items())


def run_demo(
    settings: Settings,
    *,
    seconds: float = 60.0,
    rate: float = 100.0,
    stop: threading.Event | None = None,
    console: Console | None = None,
    metrics_port: int | None = None,
) -> DemoSummary:
    console = console or Console()
    stop = stop or threading.Event()
    broker = _broker_for(settings)
    started_here = not broker.status().running
    with console.status("starting the embedded Kafka broker"):
        broker.start()
    console.print(f"Kafka broker at [bold]{broker.bootstrap_servers}[/] ({broker.data_dir})")
    run_id = time.strftime("%Y%m%d-%H%M%S")
    demo = _demo_settings(settings, broker.bootstrap_servers, run_id)
    params = demo.pipelines["orders"]
    try:
        create_topic(broker.bootstrap_servers, params["topic"], partitions=3)
        create_topic(broker.bootstrap_servers, params["high_value_topic"], partitions=1)
        registry = load_pipelines(examples=True)
        listener = ProgressListener(console)
        summary = DemoSummary(produced=Counter(), lake=demo.lake.root.path)
        generator = OrdersGenerator(
            OrdersConfig(
                seed=int(time.time()) % 10_000,
                late_fraction=0.02,
                out_of_order_fraction=0.05,
                duplicate_fraction=0.03,
                malformed_fraction=0.02,
            )
        )

        def produce_then_stop() -> None:
            try:
                records = paced(generator.records(), rate, seconds)
                summary.produced = send(broker.bootstrap_servers, params["topic"], records)
                console.print(f"generator done: {sum(summary.produced.values())} records")
                _caught_up(listener, sum(summary.produced.values()), timeout=180)
            finally:
                stop.set()

        feeder = threading.Thread(target=produce_then_stop, name="demo-generator", daemon=True)

        def start_feeding(plan: Plan, report: object) -> None:
            console.print(
                f"streaming ~{rate:.0f} orders/s for {seconds:.0f}s into '{params['topic']}'; "
                f"triggers: {triggers_line(plan)} (Ctrl-C stops cleanly)"
            )
            feeder.start()

        console.print(
            f"starting Spark and planning the orders pipeline (Spark and library logs: "
            f"{demo.log_file()})",
            highlight=False,
            soft_wrap=True,
        )
        try:
            run_pipeline("orders", demo, registry=registry, listener=listener, stop=stop,
                         on_plan=start_feeding, metrics_port=metrics_port,
                         on_serve=lambda url: console.print(f"dashboard {url}"))  # fmt: skip
        finally:
            listener.close()
            if feeder.ident is not None:
                feeder.join(timeout=5)
        _collect(summary, demo, broker.bootstrap_servers, params["high_value_topic"])
        silver = listener.snapshot().get("orders.silver")
        summary.silver_late_dropped = silver.dropped_by_watermark if silver else 0
        _print_summary(console, summary, demo)
        if not stop_requested(stop, summary):
            run_users_demo(demo, registry, console)
            run_clickstream_demo(demo, registry, console)
    finally:
        if started_here:
            with console.status("stopping the broker"):
                broker.stop()
    return summary


def stop_requested(stop: threading.Event, summary: DemoSummary) -> bool:
    """True when the user interrupted the orders part (the generator did not finish)."""
    return stop.is_set() and not summary.produced


USERS_CDC_RECORDS = 3000


def run_users_demo(demo: Settings, registry: Registry, console: Console) -> None:
    """The users CDC pipeline: change events -> SCD1/SCD2 Delta tables and PostgreSQL."""
    import psycopg

    from eventlake.generator import CdcConfig, CdcGenerator
    from eventlake.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(demo.postgres)
    started_here = not server.is_running()
    with console.status("starting PostgreSQL"):
        server.start()
    pg = demo.postgres
    console.print(f"\nPostgreSQL at [bold]{pg.host}:{pg.port}[/] ({server.data_dir})")
    try:
        params = demo.pipelines["users"]
        create_topic(demo.kafka.bootstrap_servers, params["topic"], partitions=3)
        create_topic(demo.kafka.bootstrap_servers, params["state_topic"], partitions=1)
        config = CdcConfig(seed=int(time.time()) % 10_000, users=200)
        produced = send(
            demo.kafka.bootstrap_servers, params["topic"],
            CdcGenerator(config).records(USERS_CDC_RECORDS),
        )  # fmt: skip
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(produced.items()))
        console.print(f"produced {USERS_CDC_RECORDS} change events ({kinds})")
        _run_available_now("users", demo, registry, console)
        names = ("bronze/users_cdc", "silver/users", "silver/users_history",
                 "silver/users_quarantine")  # fmt: skip
        table = _rows_table("users CDC: Delta and PostgreSQL", demo, names)
        delta_users = _read(demo, "silver/users").to_pandas()
        with psycopg.connect(**pg.connect_kwargs()) as conn:
            pg_rows = conn.execute(
                f'SELECT user_id, email, tier FROM "{params["postgres_table"]}"'
            ).fetchall()
        table.add_row(f"postgres: {params['postgres_table']}", str(len(pg_rows)))
        console.print(table)
        same = sorted(pg_rows) == sorted(
            (int(r.user_id), r.email, r.tier) for r in delta_users.itertuples(index=False)
        )
        console.print(f"PostgreSQL {'matches' if same else 'DIFFERS FROM'} silver/users")
    finally:
        if started_here:
            with console.status("stopping PostgreSQL"):
                server.stop()


CLICKS_PER_RUN = 600


def run_clickstream_demo(demo: Settings, registry: Registry, console: Console) -> None:
    """The clickstream pipeline in two available-now runs on one checkpoint: late clicks
    dropped, closed windows and sessions written, both session tables equal."""
    from eventlake.generator.clicks import ClicksConfig, ClicksGenerator

    topic = demo.pipelines["clickstream"]["topic"]
    bootstrap = demo.kafka.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    generator = ClicksGenerator(
        ClicksConfig(
            seed=int(time.time()) % 10_000,
            late_fraction=0.05,
            # 30 min behind the clock, so some land behind the 10-minute watermark
            late_delay=timedelta(minutes=30),
            out_of_order_fraction=0.1,
            duplicate_fraction=0.03,
            malformed_fraction=0.02,
        )
    )
    console.print(f"\nclickstream: {2 * CLICKS_PER_RUN} generated clicks into '{topic}', "
                  "in two available-now runs on one checkpoint")  # fmt: skip
    late = 0
    for _ in range(2):
        send(bootstrap, topic, generator.records(CLICKS_PER_RUN))
        result = _run_available_now("clickstream", demo, registry, console)
        clicks = result.flows.get("clickstream.clicks")
        late += clicks.dropped_by_watermark if clicks else 0

    names = ("silver/clicks", "silver/clicks_quarantine", "gold/user_clicks_5min",
             "gold/user_sessions", "gold/user_sessions_custom")  # fmt: skip
    console.print(_rows_table("clickstream: event-time tables", demo, names))
    kept = demo.lake.table_path("silver", "clicks_late")
    kept_rows = _read(demo, "silver/clicks_late").num_rows if kept.path.exists() else 0
    console.print(f"late clicks dropped (behind the watermark when they arrived): {late}, "
                  f"kept in silver/clicks_late: {kept_rows}")  # fmt: skip
    key = ["session_start", "session_end", "user_id", "events"]

    def sessions(name: str) -> set[tuple[object, ...]]:
        table = _read(demo, name).select(key)
        return {tuple(row.values()) for row in table.to_pylist()}

    plain = sessions("gold/user_sessions")
    same = plain == sessions("gold/user_sessions_custom")
    console.print(
        f"closed sessions: session_window and transformWithState "
        f"{'agree' if same else 'DIFFER'} ({len(plain)} sessions)"
    )


def _run_available_now(
    name: str, demo: Settings, registry: Registry, console: Console
) -> RunResult:
    """Run one shipped pipeline with ``available-now``, validated, printing its progress."""
    listener = ProgressListener(console)
    try:
        return run_pipeline(name, demo, trigger="available-now", registry=registry,
                            listener=listener)  # fmt: skip
    finally:
        listener.close()


def _read(settings: Settings, name: str) -> pa.Table:
    """A lake table, ``layer/table``, read with delta-rs."""
    layer, table = name.split("/")
    return read_delta(settings.lake.table_path(layer, table))


def _rows_table(title: str, settings: Settings, names: tuple[str, ...]) -> Table:
    table = Table(title=title)
    for col in ("table", "rows"):
        table.add_column(col)
    for name in names:
        table.add_row(name, str(_read(settings, name).num_rows))
    return table


TABLES = (
    ("bronze", "orders"),
    ("silver", "orders"),
    ("silver", "orders_quarantine"),
    ("gold", "revenue_hourly"),
    ("gold", "category_orders_sliding"),
)


def _collect(summary: DemoSummary, settings: Settings, bootstrap: str, high: str) -> None:
    from eventlake.connectors.delta.tables import open_delta_rs, rows_of

    for layer, name in TABLES:
        table = open_delta_rs(settings.lake.table_path(layer, name))
        summary.tables[f"{layer}/{name}"] = (rows_of(table), int(table.version()))
    summary.high_value_records = sum(topic_offsets(bootstrap, high).values())


def balance(s: DemoSummary, bronze: int, silver: int, quarantined: int) -> str:
    """The demo's "nothing lost" check, against the generator's own counts: every record
    sent is in bronze, and each is in silver, in quarantine, a duplicate the generator
    sent, or dropped late by silver's watermark."""
    sent = sum(s.produced.values())
    duplicates, malformed = s.produced.get("duplicate", 0), s.produced.get("malformed", 0)
    late = s.silver_late_dropped
    accounted = silver + quarantined + duplicates + late
    terms = (
        f"silver {silver} + quarantine {quarantined} + duplicates {duplicates} "
        f"(sent by the generator) + late dropped {late}"
    )
    problems = []
    if bronze != sent:
        problems.append(f"bronze holds {bronze} of the {sent} records sent")
    if quarantined != malformed:
        problems.append(f"quarantine holds {quarantined}, the generator sent {malformed} malformed")
    if accounted != bronze:
        problems.append(f"{bronze - accounted:+d} record(s) unaccounted for")
    if problems:
        return f"[bold red]does not balance[/]: bronze {bronze} vs {terms}: " + "; ".join(problems)
    return f"nothing lost: bronze {bronze} = {terms}"


def _print_summary(console: Console, s: DemoSummary, settings: Settings) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(s.produced.items()))
    console.print(f"\nproduced {sum(s.produced.values())} records ({kinds})")
    tables = Table(title=f"eventlake demo: tables under {s.lake}")
    for col in ("table", "rows", "last Delta version"):
        tables.add_column(col)
    for name, (rows, version) in s.tables.items():
        tables.add_row(name, str(rows), str(version))
    tables.add_row("kafka: high_value_orders", str(s.high_value_records), "-")
    console.print(tables)
    bronze = s.tables.get("bronze/orders", (0, 0))[0]
    silver = s.tables.get("silver/orders", (0, 0))[0]
    quarantined = s.tables.get("silver/orders_quarantine", (0, 0))[0]
    console.print(balance(s, bronze, silver, quarantined), highlight=False)

    gold = _read(settings, "gold/revenue_hourly").to_pandas()
    top = Table(title="gold/revenue_hourly (latest closed windows)")
    for col in ("window_start", "window_end", "category", "order_count", "total_amount"):
        top.add_column(col)
    if not gold.empty:
        gold = gold.sort_values(["window_start", "total_amount"], ascending=[False, False])
        for row in gold.head(12).itertuples(index=False):
            top.add_row(
                f"{row.window_start:%Y-%m-%d %H:%M}",
                f"{row.window_end:%H:%M}",
                str(row.category),
                str(row.order_count),
                f"{row.total_amount:,.2f}",
            )
    console.print(top)
