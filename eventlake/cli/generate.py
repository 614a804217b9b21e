"""`eventlake generate orders ...`: reproducible test events into Kafka."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

import typer

from eventlake.cli.state import CliState
from eventlake.durations import parse_duration
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.generator import GeneratedRecord, OrdersConfig, OrdersGenerator, paced, send
from eventlake.generator.events import DEFAULT_START, EventStreamConfig
from eventlake.kafka import create_topic

C = TypeVar("C", bound=EventStreamConfig)

generate_app = typer.Typer(help="Produce generated events to Kafka.", no_args_is_help=True)


Fraction = Annotated[float, typer.Option(min=0.0, max=1.0)]


@generate_app.command()
def orders(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option(help="Topic to produce to (created if missing).")],
    count: Annotated[int | None, typer.Option(help="Number of records.")] = None,
    rate: Annotated[float | None, typer.Option(help="Records per second (with --seconds).")] = None,
    seconds: Annotated[float, typer.Option(help="How long to produce at --rate.")] = 60.0,
    seed: Annotated[int, typer.Option(help="Same seed, same records.")] = 0,
    late_fraction: Fraction = 0.0,
    late_delay: Annotated[str, typer.Option(help="How far behind late events are.")] = "15m",
    out_of_order_fraction: Fraction = 0.0,
    duplicate_fraction: Fraction = 0.0,
    malformed_fraction: Fraction = 0.0,
    start: Annotated[
        str | None, typer.Option(help="Event time of the first order (ISO-8601, UTC).")
    ] = None,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions if created.")] = 3,
    bootstrap_servers: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Orders with optional late, out-of-order, duplicate and malformed events."""
    from datetime import timedelta

    if (count is None) == (rate is None):
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            "generate needs exactly one of --count N or --rate R (with --seconds S).",
            fix="pass --count 10000, or --rate 200 --seconds 60",
        )
    first = datetime.fromisoformat(start.replace("Z", "+00:00")) if start else DEFAULT_START
    config = OrdersConfig(
        seed=seed,
        start=first if first.tzinfo else first.replace(tzinfo=UTC),
        late_fraction=late_fraction,
        late_delay=timedelta(seconds=parse_duration(late_delay, what="--late-delay").seconds),
        out_of_order_fraction=out_of_order_fraction,
        duplicate_fraction=duplicate_fraction,
        malformed_fraction=malformed_fraction,
    )
    gen = OrdersGenerator(config)
    records = gen.records(count) if count is not None else paced(gen.records(), rate or 1, seconds)
    _produce(ctx, bootstrap_servers, topic, partitions, records)


@generate_app.command()
def cdc(
    ctx: typer.Context,
    topic: Annotated[str, typer.Option(help="Topic to produce to (created if missing).")],
    count: Annotated[int, typer.Option(min=1, help="Number of records (tombstones count).")],
    rate: Annotated[
        float | None, typer.Option(help="Records per second (default: all now).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Same seed, same records.")] = 0,
    users: Annotated[int, typer.Option(min=1, help="Size of the user id space.")] = 50,
    delete_fraction: Fraction = 0.15,
    out_of_order_fraction: Fraction = 0.1,
    duplicate_fraction: Fraction = 0.05,
    malformed_fraction: Fraction = 0.02,
    snapshot: Annotated[bool, typer.Option(help="First change of a user as op 'r'.")] = False,
    partitions: Annotated[int, typer.Option(min=1, help="Partitions if created.")] = 3,
    bootstrap_servers: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Debezium-shaped change events of a users table: creates, updates, deletes with
    tombstones, re-creates, out-of-order, duplicate and malformed events."""
    from eventlake.generator import CdcConfig, CdcGenerator

    config = CdcConfig(
        seed=seed,
        users=users,
        delete_fraction=delete_fraction,
        out_of_order_fraction=out_of_order_fraction,
        duplicate_fraction=duplicate_fraction,
        malformed_fraction=malformed_fraction,
        snapshot=snapshot,
    )
    records = CdcGenerator(config).records(count)
    if rate is not None:
        records = paced(records, rate, seconds=float("inf"))
    _produce(ctx, bootstrap_servers, topic, partitions, records)


def _stream_config(
    cls: type[C], seed: int, late_fraction: float, late_delay: str,
    out_of_order_fraction: float, duplicate_fraction: float, malformed_fraction: float,
) -> C:  # fmt: skip
    from datetime import timedelta

    return cls(
        seed=seed,
        late_fraction=late_fraction,
        late_delay=timedelta(seconds=parse_duration(late_delay, what="--late-delay").seconds),
        out_of_order_fraction=out_of_order_fraction,
        duplicate_fraction=duplicate_fraction,
        malformed_fraction=malformed_fraction,
    )


def _produce(ctx: typer.Context, bootstrap_servers: str | None, topic: str, partitions: int,
             records: Iterable[GeneratedRecord]) -> None:  # fmt: skip
    state: CliState = ctx.obj
    bootstrap = bootstrap_servers or state.settings().kafka.bootstrap_servers
    create_topic(bootstrap, topic, partitions=partitions, exist_ok=True)
    kinds = send(bootstrap, topic, records)
    detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    typer.echo(f"produced {sum(kinds.values())} records to '{topic}' on {bootstrap} ({detail})")


Count = Annotated[int, typer.Option(min=1, help="Number of events.")]
Seed = Annotated[int, typer.Option(help="Same seed, same records.")]
LateDelay = Annotated[str, typer.Option(help="How far behind late events are.")]
Partitions = Annotated[int, typer.Option(min=1, help="Partitions if created.")]
Bootstrap = Annotated[str | None, typer.Option()]


@generate_app.command()
def clicks(
    ctx: typer.Context,
    count: Count,
    topic: Annotated[str, typer.Option(help="Topic (created if missing).")] = "clicks",
    seed: Seed = 0,
    users: Annotated[int, typer.Option(min=1)] = 40,
    late_fraction: Fraction = 0.02,
    late_delay: LateDelay = "40m",
    out_of_order_fraction: Fraction = 0.1,
    duplicate_fraction: Fraction = 0.03,
    malformed_fraction: Fraction = 0.01,
    partitions: Partitions = 3,
    bootstrap_servers: Bootstrap = None,
) -> None:
    """Clickstream events (user_id, event_id, event_type, page, event_time)."""
    from dataclasses import replace

    from eventlake.generator.clicks import ClicksConfig, ClicksGenerator

    config = _stream_config(
        ClicksConfig,
        seed,
        late_fraction,
        late_delay,
        out_of_order_fraction,
        duplicate_fraction,
        malformed_fraction,
    )
    gen = ClicksGenerator(replace(config, users=users, active_users=min(4, users)))
    _produce(ctx, bootstrap_servers, topic, partitions, gen.records(count))


@generate_app.command()
def sensors(
    ctx: typer.Context,
    count: Count,
    topic: Annotated[str, typer.Option(help="Topic (created if missing).")] = "sensors",
    seed: Seed = 0,
    sensor_count: Annotated[int, typer.Option("--sensors", min=1)] = 8,
    late_fraction: Fraction = 0.02,
    late_delay: LateDelay = "12m",
    out_of_order_fraction: Fraction = 0.1,
    duplicate_fraction: Fraction = 0.03,
    malformed_fraction: Fraction = 0.01,
    partitions: Partitions = 3,
    bootstrap_servers: Bootstrap = None,
) -> None:
    """Sensor readings (sensor_id, temperature, event_time)."""
    from dataclasses import replace

    from eventlake.generator.sensors import SensorsConfig, SensorsGenerator

    config = _stream_config(
        SensorsConfig,
        seed,
        late_fraction,
        late_delay,
        out_of_order_fraction,
        duplicate_fraction,
        malformed_fraction,
    )
    gen = SensorsGenerator(replace(config, sensors=sensor_count))
    _produce(ctx, bootstrap_servers, topic, partitions, gen.records(count))


@generate_app.command()
def impressions(
    ctx: typer.Context,
    count: Count,
    topic: Annotated[str, typer.Option(help="Impressions topic.")] = "impressions",
    clicks_topic: Annotated[str, typer.Option(help="Clicks topic.")] = "ad_clicks",
    seed: Seed = 0,
    click_rate: Fraction = 0.3,
    late_fraction: Fraction = 0.02,
    late_delay: LateDelay = "40m",
    out_of_order_fraction: Fraction = 0.1,
    duplicate_fraction: Fraction = 0.03,
    malformed_fraction: Fraction = 0.01,
    partitions: Partitions = 3,
    bootstrap_servers: Bootstrap = None,
) -> None:
    """Ad impressions and the clicks on them, into two topics."""
    from dataclasses import replace

    from eventlake.generator.ads import CLICKS, AdsConfig, AdsGenerator

    config = _stream_config(
        AdsConfig,
        seed,
        late_fraction,
        late_delay,
        out_of_order_fraction,
        duplicate_fraction,
        malformed_fraction,
    )
    by_role: dict[str, list[GeneratedRecord]] = {CLICKS: [], "impressions": []}
    for role, record in AdsGenerator(replace(config, click_rate=click_rate)).stream(count):
        by_role[role].append(record)
    _produce(ctx, bootstrap_servers, topic, partitions, by_role["impressions"])
    _produce(ctx, bootstrap_servers, clicks_topic, partitions, by_role[CLICKS])
