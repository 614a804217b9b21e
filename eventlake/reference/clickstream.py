"""The clickstream pipeline: clicks -> silver (typed, de-duplicated) -> windows and sessions.

Input: JSON events ``user_id``, ``event_id``, ``event_type``, ``page``, ``event_time``.

- ``clicks``: valid events, typed and de-duplicated by ``event_id`` within the watermark
  (silver/clicks). An event at or behind the watermark when it is processed is dropped
  here (Spark's watermark; "late dropped" in the progress line), so no table below counts
  it.
- ``quarantine``: records that are not valid events, raw, with the reason
  (silver/clicks_quarantine).
- ``user_clicks_5min``: clicks (``event_type = 'click'``) per user and tumbling window,
  written once per window when the watermark passes its end (gold/user_clicks_5min).
- ``user_sessions``: sessions per user with ``session_window`` and an inactivity gap
  (gold/user_sessions).
- ``user_sessions_custom``: the same sessions with ``transformWithState``, plus distinct
  pages and first/last page (gold/user_sessions_custom).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from eventlake.connectors.delta import DeltaInput, DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.durations import duration_ms
from eventlake.pipelines import Pipeline, PipelineParams, SparkInterval
from eventlake.state import sessions_with_state
from eventlake.transforms import checked_events, deduplicated_events, quarantine_rows
from eventlake.transforms.windows import flatten_window, windowed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext


class ClickstreamParams(PipelineParams):
    topic: str | None = "clicks"
    watermark: SparkInterval = Field(
        default="10 minutes", description="How late an event may be and still count."
    )
    window: SparkInterval = Field(default="5 minutes", description="Tumbling click window.")
    session_gap: SparkInterval = Field(default="30 minutes", description="Inactivity gap.")


clickstream = Pipeline(
    "clickstream",
    params=ClickstreamParams,
    description="Kafka clicks -> silver (dedup) + quarantine -> 5-minute clicks, sessions",
)

CLICK_FIELDS = {
    "event_id": "string",
    "user_id": "string",
    "event_type": "string",
    "page": "string",
    "event_time": "timestamp",
}


@clickstream.flow(input=KafkaInput(), output=DeltaOutput("silver", "clicks"))
def clicks(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Valid events, typed, de-duplicated by event_id within the watermark."""
    p = ctx.typed(ClickstreamParams)
    records = kafka_records(df)
    return deduplicated_events(ctx, records, CLICK_FIELDS, time="event_time", keys=["event_id"],
                               delay=p.watermark, decoder=p.json_decoder)  # fmt: skip


@clickstream.flow(input=KafkaInput(), output=DeltaOutput("silver", "clicks_quarantine"))
def quarantine(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Records that are not valid events: raw value, Kafka coordinates, reason."""
    decoder = ctx.params.json_decoder
    return quarantine_rows(checked_events(kafka_records(df), CLICK_FIELDS, decoder=decoder))


@clickstream.flow(
    input=DeltaInput("silver", "clicks"), output=DeltaOutput("gold", "user_clicks_5min")
)
def user_clicks_5min(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Clicks per user and tumbling window; each window written once, when it closes."""
    from pyspark.sql import functions as F

    p = ctx.typed(ClickstreamParams)
    # Clicks are counted, not filtered first: Spark would push such a filter below the
    # watermark, which would then follow click events only.
    counts = (
        windowed(ctx, df, "event_time", p.watermark, p.window, "user_id")
        .agg(F.count_if(F.col("event_type") == "click").alias("clicks"))
        .where(F.col("clicks") > 0)
    )
    return flatten_window(counts)


@clickstream.flow(input=DeltaInput("silver", "clicks"), output=DeltaOutput("gold", "user_sessions"))
def user_sessions(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Sessions per user (session_window); each written once, when the watermark passes
    its end."""
    from pyspark.sql import functions as F

    p = ctx.typed(ClickstreamParams)
    sessions = (
        ctx.with_watermark(df, "event_time", p.watermark)
        .groupBy(F.session_window("event_time", p.session_gap).alias("session"), "user_id")
        .agg(F.count("*").alias("events"))
    )
    return sessions.select(
        F.col("session.start").alias("session_start"),
        F.col("session.end").alias("session_end"),
        "user_id",
        "events",
    )


@clickstream.flow(
    input=DeltaInput("silver", "clicks"), output=DeltaOutput("gold", "user_sessions_custom")
)
def user_sessions_custom(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The sessions of user_sessions, with transformWithState: adds distinct pages and the
    first and last page."""
    p = ctx.typed(ClickstreamParams)
    return sessions_with_state(
        ctx.with_watermark(df, "event_time", p.watermark),
        key="user_id",
        time="event_time",
        page="page",
        gap_ms=duration_ms(p.session_gap),
    )
