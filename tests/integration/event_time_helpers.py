"""Running the event-time reference pipelines in-process, one available-now run at a time."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pandas as pd
from confluent_kafka import Consumer

from eventlake.config import Settings
from eventlake.kafka import topic_offsets
from eventlake.kafka.admin import produce
from eventlake.testing import read_delta, unique_name


def send_events(bootstrap: str, topic: str, key: str, events: Iterable[dict[str, Any]]) -> None:
    produce(bootstrap, topic, ((str(e.get(key)), json.dumps(e)) for e in events))


def table(settings: Settings, layer: str, name: str) -> pd.DataFrame:
    return read_delta(settings.lake.table_path(layer, name)).to_pandas()


def rows(df: pd.DataFrame, *columns: str) -> set[tuple[Any, ...]]:
    """The table as a set of tuples; timestamps as 'HH:MM' text when on the minute, null
    timestamps as None."""

    def cell(v: Any) -> Any:
        if v is pd.NaT:
            return None
        if isinstance(v, (pd.Timestamp, datetime)):
            return v.strftime("%H:%M") if v.second == 0 and v.microsecond == 0 else v.isoformat()
        return v

    return {tuple(cell(r[c]) for c in columns) for _, r in df.iterrows()}


def at(hhmmss: str, day: str = "2026-03-01") -> str:
    """Event time text for a worked example: ``at("12:01:30")``."""
    return f"{day}T{hhmmss}Z"


def read_records(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, value) of every record of the topic, read back from Kafka."""
    total = sum(topic_offsets(bootstrap, topic).values())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    out: list[tuple[int, int, bytes | None]] = []
    try:
        while len(out) < total:
            msg = consumer.poll(10)
            assert msg is not None, f"read {len(out)} of {total} records"
            if msg.error() is None:
                out.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return out


def read_topic(
    bootstrap: str, topic: str, fields: tuple[str, ...], time: str
) -> list[tuple[int, int, dict[str, Any] | None]]:
    """(partition, offset, event or None when it is not a valid event with ``fields``) for
    every record of the topic, read back from Kafka."""
    return [(p, o, _valid(v, fields, time)) for p, o, v in read_records(bootstrap, topic)]


def _valid(value: bytes | None, fields: tuple[str, ...], time: str) -> dict[str, Any] | None:
    try:
        event = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(event, dict) or any(not str(event.get(f) or "").strip() for f in fields):
        return None
    try:
        pd.Timestamp(event[time])
    except ValueError:
        return None
    return event


def as_rows(df: pd.DataFrame, columns: list[str]) -> set[tuple[Any, ...]]:
    """Rows as tuples, timestamps as naive UTC datetimes."""

    def cell(v: Any) -> Any:
        if isinstance(v, pd.Timestamp):
            return (v.tz_convert(None) if v.tzinfo else v).to_pydatetime()
        return v

    return {tuple(cell(r[c]) for c in columns) for _, r in df.iterrows()}
