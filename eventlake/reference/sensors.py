"""The sensors pipeline: readings -> silver (typed, de-duplicated) -> sliding-window
statistics, final (append) and live (update mode, upserted).

Input: JSON readings ``sensor_id``, ``temperature``, ``event_time``.

- ``readings``: valid readings, de-duplicated by (``sensor_id``, ``event_time``) within the
  watermark (silver/sensor_readings). A reading at or behind the watermark when it is
  processed is dropped here.
- ``quarantine``: records that are not valid readings (silver/sensor_readings_quarantine).
- ``stats_sliding``: per sensor and sliding window: readings, average, min and max
  temperature, written once per window when the watermark passes its end
  (gold/sensor_stats_sliding).
- ``stats_live``: the same statistics in update mode, upserted by (``sensor_id``,
  ``window_start``) with an exactly-once MERGE, so the table always holds the latest value
  of every window, open ones included (gold/sensor_stats_live).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from eventlake.connectors.delta import DeltaInput, DeltaOutput, MergeDelta
from eventlake.connectors.fanout import FanOut
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.pipelines import Pipeline, PipelineParams, SparkInterval
from eventlake.transforms import checked_events, deduplicated_events, quarantine_rows
from eventlake.transforms.windows import flatten_window, windowed

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame

    from eventlake.connectors import BatchContext
    from eventlake.pipelines import FlowContext


class SensorsParams(PipelineParams):
    topic: str | None = "sensors"
    watermark: SparkInterval = Field(default="5 minutes", description="Allowed lateness.")
    window: SparkInterval = "5 minutes"
    slide: SparkInterval = "1 minute"


sensors = Pipeline(
    "sensors",
    params=SensorsParams,
    description="Kafka sensor readings -> silver (dedup) + quarantine -> sliding statistics",
)

READING_FIELDS = {"sensor_id": "string", "temperature": "double", "event_time": "timestamp"}
STATS_DDL = (
    "window_start TIMESTAMP, window_end TIMESTAMP, sensor_id STRING, readings BIGINT, "
    "avg_temperature DOUBLE, min_temperature DOUBLE, max_temperature DOUBLE"
)


@sensors.flow(input=KafkaInput(), output=DeltaOutput("silver", "sensor_readings"))
def readings(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Valid readings, typed, de-duplicated by sensor and event time within the watermark."""
    p = ctx.typed(SensorsParams)
    records = kafka_records(df)
    keys = ["sensor_id", "event_time"]
    return deduplicated_events(ctx, records, READING_FIELDS, time="event_time", keys=keys,
                               delay=p.watermark, decoder=p.json_decoder)  # fmt: skip


@sensors.flow(input=KafkaInput(), output=DeltaOutput("silver", "sensor_readings_quarantine"))
def quarantine(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Records that are not valid readings: raw value, Kafka coordinates, reason."""
    decoder = ctx.params.json_decoder
    return quarantine_rows(checked_events(kafka_records(df), READING_FIELDS, decoder=decoder))


def sliding_stats(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Readings, average, min and max temperature per sensor and sliding window."""
    from pyspark.sql import functions as F

    p = ctx.typed(SensorsParams)
    stats = windowed(ctx, df, "event_time", p.watermark, p.window, "sensor_id", slide=p.slide).agg(
        F.count("*").alias("readings"),
        F.avg("temperature").alias("avg_temperature"),
        F.min("temperature").alias("min_temperature"),
        F.max("temperature").alias("max_temperature"),
    )
    return flatten_window(stats)


@sensors.flow(
    input=DeltaInput("silver", "sensor_readings"),
    output=DeltaOutput("gold", "sensor_stats_sliding"),
)
def stats_sliding(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Sliding-window statistics per sensor; each window written once, when it closes."""
    return sliding_stats(ctx, df)


def upsert_window(target: DeltaTable, source: DataFrame, batch: BatchContext) -> DeltaMergeBuilder:
    return (
        target.alias("t")
        .merge(source.alias("s"), "t.sensor_id = s.sensor_id AND t.window_start = s.window_start")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
    )


@sensors.flow(
    input=DeltaInput("silver", "sensor_readings"),
    output=FanOut(MergeDelta("gold", "sensor_stats_live", upsert_window, STATS_DDL)),
    output_mode="update",
)
def stats_live(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Sliding-window statistics in update mode, upserted: open windows' latest values."""
    return sliding_stats(ctx, df)
