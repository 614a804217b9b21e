"""Seed 002's golden query, the benchmark's workload, and what every variant must emit.

JSON events ``user_id``, ``event_id``, ``event_type``, ``page``, ``event_time`` are parsed
with ``from_json``, watermarked 10 minutes behind the newest event time, counted per user
in 10-minute windows sliding by 5 minutes, and appended to Delta when a window closes.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from eventlake.config.params import DEFAULT_JSON_DECODER, JsonDecoder
from eventlake.connectors.delta import DeltaOutput
from eventlake.connectors.kafka import KafkaInput
from eventlake.generator.clicks import EVENT_TYPES, PAGES
from eventlake.generator.events import DEFAULT_START, iso, to_json
from eventlake.pipelines import Pipeline
from eventlake.transforms import from_json_bytes, parse_json
from eventlake.transforms.windows import flatten_window, windowed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext

SCHEMA = "user_id STRING, event_id STRING, event_type STRING, page STRING, event_time TIMESTAMP"
FIELDS = ("user_id", "event_id", "event_type", "page", "event_time")
TEXT_SCHEMA = ", ".join(f"{name} STRING" for name in FIELDS)
WATERMARK = timedelta(minutes=10)
SIZE = timedelta(minutes=10)
SLIDE = timedelta(minutes=5)

golden = Pipeline("golden", description="Seed 002: JSON -> 10-min windows sliding 5 min -> Delta")


def parsed(df: DataFrame, decoder: JsonDecoder = DEFAULT_JSON_DECODER) -> DataFrame:
    """The events of Kafka rows: parsed with ``from_json`` (as seed 002 writes it), with
    ``from_json`` given the records' bytes (eventlake's default), or with eventlake's arrow
    decoder (text fields, the event time cast)."""
    from pyspark.sql import functions as F

    value = F.col("value").cast("string").alias("value")
    if decoder == "spark":
        return df.select(F.from_json(value, SCHEMA).alias("d")).select("d.*")
    if decoder == "bytes":
        return df.select(from_json_bytes(df.sparkSession, value, SCHEMA, {}).alias("d")).select(
            "d.*"
        )
    text = parse_json(df.select(value), TEXT_SCHEMA, decoder=decoder).select("data.*")
    return text.select(*FIELDS[:-1], F.col("event_time").cast("timestamp"))


def golden_counts(
    ctx: FlowContext, df: DataFrame, decoder: JsonDecoder = DEFAULT_JSON_DECODER
) -> DataFrame:
    """The golden query on Kafka rows: events per user and 10-minute window sliding 5."""
    from pyspark.sql import functions as F

    counts = windowed(
        ctx,
        parsed(df, decoder),
        "event_time",
        "10 minutes",
        "10 minutes",
        "user_id",
        slide="5 minutes",
    )
    return flatten_window(counts.agg(F.count("*").alias("events")))


@golden.flow(input=KafkaInput(), output=DeltaOutput("gold", "events_agg"))
def events_agg(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Events per user and sliding window, each written once, when the watermark passes it."""
    return golden_counts(ctx, df, ctx.params.json_decoder)


def events(n: int, seed: int = 1) -> Iterator[tuple[str, str, datetime]]:
    """``n`` in-order click events as ``(key, json, event_time)``, ~120 bytes each: the
    clickstream generator's shape, 1,000 users, about 20 events a second of event time."""
    rng = random.Random(seed)
    t = DEFAULT_START
    for i in range(n):
        t += timedelta(milliseconds=rng.randint(0, 100))
        user = f"u{rng.randrange(1000):04d}"
        event = {
            "user_id": user,
            "event_id": f"e{seed}-{i:08d}",
            "event_type": rng.choice(EVENT_TYPES),
            "page": rng.choice(PAGES),
            "event_time": iso(t),
        }
        yield user, to_json(event), t


Window = tuple[datetime, str]  # (window start, user_id)


@dataclass
class Expected:
    """The windows the final watermark closes, counted in Python from the produced events."""

    counts: dict[Window, int]
    watermark: datetime
    events: int
    #: Closed per user instead (Quix keeps a stream time per message key).
    per_key: dict[Window, int]
    newest_by_user: dict[str, datetime]

    @classmethod
    def of(cls, times_by_user: Iterable[tuple[str, datetime]]) -> Expected:
        counts: Counter[Window] = Counter()
        newest_by_user: dict[str, datetime] = {}
        n = 0
        for user, t in times_by_user:
            n += 1
            if t > newest_by_user.get(user, t - SIZE):
                newest_by_user[user] = t
            for start in window_starts(t):
                counts[(start, user)] += 1
        watermark = max(newest_by_user.values()) - WATERMARK
        closed = {w: c for w, c in counts.items() if w[0] + SIZE <= watermark}
        per_key = {
            w: c for w, c in counts.items() if w[0] + SIZE <= newest_by_user[w[1]] - WATERMARK
        }
        return cls(closed, watermark, n, per_key, newest_by_user)

    def closed(
        self, rows: Iterable[tuple[datetime, str, int]], *, per_key: bool = False
    ) -> dict[Window, int]:
        """The rows of windows closed by the final watermark (or by their user's own, with
        ``per_key``), as ``{(start, user): count}``."""
        if per_key:
            return {(s, u): c for s, u, c in rows if s + SIZE <= self.newest_by_user[u] - WATERMARK}
        return {(s, u): c for s, u, c in rows if s + SIZE <= self.watermark}


def window_starts(t: datetime) -> list[datetime]:
    """Starts of the sliding windows holding ``t`` (aligned to the epoch, as Spark and Flink)."""
    epoch = datetime(1970, 1, 1, tzinfo=t.tzinfo)
    slides = (t - epoch) // SLIDE
    last = epoch + slides * SLIDE
    return [s for s in (last - SLIDE, last) if s <= t < s + SIZE]
