"""`eventlake generate orders ...`: reproducible test events into Kafka."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import typer

from eventlake.cli.state import CliState
from eventlake.durations import parse_duration
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.generator import GeneratedRecord, OrdersConfig, OrdersGenerator, paced, send
from eventlake.generator.events import DEFAULT_START, EventStreamConfig
from eventlake.kafka import create_topic

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
        start=first if first.tzinfo else first.replace(tzinfo=timezone.utc),
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

    config = CdcConfig(seed=seed, users=users, snapshot=snapshot, delete_fraction=delete_fraction,
                       out_of_order_fraction=out_of_order_fraction,
                       duplicate_fraction=duplicate_fraction,
                       malformed_fraction=malformed_fraction)  # fmt: skip
    records = CdcGenerator(config).records(count)
    if rate is not None:
        records = paced(records, rate, seconds=float("inf"))
    _produce(ctx, bootstrap_servers, topic, partitions, records)


def _produce(ctx: typer.Context, bootstrap_servers: str | None, topic: str, partitions: int,
             records: Iterable[GeneratedRecord]) -> None:  # fmt: skip
    state: CliState = ctx.obj
    bootstrap = bootstrap_servers or state.settings().kafka.bootstrap_servers
    create_topic(bootstrap, topic, partitions=partitions, exist_ok=True)
    kinds = send(bootstrap, topic, records)
    detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
    typer.echo(f"produced {sum(kinds.values())} records to '{topic}' on {bootstrap} ({detail})")


# The event-stream commands (clicks, sensors, impressions) share their options: each is
# declared once here, and every command's signature is built from this list.
_CONFIG_OPTIONS = ("seed", "late_fraction", "late_delay", "out_of_order_fraction",
                   "duplicate_fraction", "malformed_fraction")  # fmt: skip


def _option(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                             default=default)  # fmt: skip


Count = Annotated[int, typer.Option(min=1, help="Number of events.")]
Seed = Annotated[int, typer.Option(help="Same seed, same records.")]
LateDelay = Annotated[str, typer.Option(help="How far behind late events are.")]
Partitions = Annotated[int, typer.Option(min=1, help="Partitions if created.")]
Bootstrap = Annotated[str | None, typer.Option()]


def _stream_options(topic: str, topic_help: str, late_delay: str) -> list[inspect.Parameter]:
    return [
        _option("count", Count),
        _option("topic", Annotated[str, typer.Option(help=topic_help)], topic),
        _option("seed", Seed, 0),
        _option("late_fraction", Fraction, 0.02),
        _option("late_delay", LateDelay, late_delay),
        _option("out_of_order_fraction", Fraction, 0.1),
        _option("duplicate_fraction", Fraction, 0.03),
        _option("malformed_fraction", Fraction, 0.01),
        _option("partitions", Partitions, 3),
        _option("bootstrap_servers", Bootstrap, None),
    ]


#: Makes the records from the config and the command's own options, and produces them.
Emit = Callable[[typer.Context, Any, dict[str, Any]], None]


def _stream_command(
    name: str, config: type[EventStreamConfig], emit: Emit, *, topic: str, late_delay: str,
    topic_help: str = "Topic (created if missing).", own: tuple[inspect.Parameter, ...] = (),
) -> Callable[..., None]:  # fmt: skip
    """Register ``generate <name>`` with the shared stream options plus ``own``."""

    def command(ctx: typer.Context, **options: Any) -> None:
        shared = {k: options.pop(k) for k in _CONFIG_OPTIONS}
        shared["late_delay"] = timedelta(
            seconds=parse_duration(shared["late_delay"], what="--late-delay").seconds
        )
        emit(ctx, config(**shared), options)

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                  annotation=typer.Context)  # fmt: skip
    params = [ctx_param, *_stream_options(topic, topic_help, late_delay), *own]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__name__ = name
    command.__doc__ = emit.__doc__
    return generate_app.command(name)(command)


def _emit_clicks(ctx: typer.Context, config: Any, options: dict[str, Any]) -> None:
    """Clickstream events (user_id, event_id, event_type, page, event_time)."""
    from eventlake.generator.clicks import ClicksGenerator

    users = options["users"]
    gen = ClicksGenerator(replace(config, users=users, active_users=min(4, users)))
    _produce_stream(ctx, options, gen.records(options["count"]))


def _emit_sensors(ctx: typer.Context, config: Any, options: dict[str, Any]) -> None:
    """Sensor readings (sensor_id, temperature, event_time)."""
    from eventlake.generator.sensors import SensorsGenerator

    gen = SensorsGenerator(replace(config, sensors=options["sensor_count"]))
    _produce_stream(ctx, options, gen.records(options["count"]))


def _emit_impressions(ctx: typer.Context, config: Any, options: dict[str, Any]) -> None:
    """Ad impressions and the clicks on them, into two topics."""
    from eventlake.generator.ads import CLICKS, AdsGenerator

    by_role: dict[str, list[GeneratedRecord]] = {CLICKS: [], "impressions": []}
    generator = AdsGenerator(replace(config, click_rate=options["click_rate"]))
    for role, record in generator.stream(options["count"]):
        by_role[role].append(record)
    _produce_stream(ctx, options, by_role["impressions"])
    _produce_stream(ctx, {**options, "topic": options["clicks_topic"]}, by_role[CLICKS])


def _produce_stream(
    ctx: typer.Context, options: dict[str, Any], records: Iterable[GeneratedRecord]
) -> None:
    topic, partitions = options["topic"], options["partitions"]
    _produce(ctx, options["bootstrap_servers"], topic, partitions, records)


def _register_stream_commands() -> None:
    from eventlake.generator.ads import AdsConfig
    from eventlake.generator.clicks import ClicksConfig
    from eventlake.generator.sensors import SensorsConfig

    _stream_command("clicks", ClicksConfig, _emit_clicks, topic="clicks", late_delay="40m",
                    own=(_option("users", Annotated[int, typer.Option(min=1)], 40),))  # fmt: skip
    sensors = Annotated[int, typer.Option("--sensors", min=1)]
    _stream_command("sensors", SensorsConfig, _emit_sensors, topic="sensors", late_delay="12m",
                    own=(_option("sensor_count", sensors, 8),))  # fmt: skip
    clicks_topic = _option("clicks_topic", Annotated[str, typer.Option(help="Clicks topic.")],
                           "ad_clicks")  # fmt: skip
    _stream_command(
        "impressions", AdsConfig, _emit_impressions, topic="impressions", late_delay="40m",
        topic_help="Impressions topic.", own=(clicks_topic, _option("click_rate", Fraction, 0.3)),
    )  # fmt: skip


_register_stream_commands()
