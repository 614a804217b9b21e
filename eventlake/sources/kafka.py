"""Kafka source: subscribe to topics with starting offsets and backpressure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventlake.config import KafkaSettings
from eventlake.sources.base import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class KafkaSource(Source):
    """Read ``topics`` from Kafka; offsets are tracked in the query's checkpoint.

    ``starting_offsets`` applies only to a new checkpoint (``earliest``, ``latest`` or
    Spark's JSON form). ``max_offsets_per_trigger`` bounds each micro-batch so that a
    backlog after an outage is worked off in steps instead of one huge batch.
    """

    topics: tuple[str, ...]
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    extra_options: tuple[tuple[str, str], ...] = ()

    def options(self) -> dict[str, str]:
        opts = {
            **self.kafka.spark_options(),
            "subscribe": ",".join(self.topics),
            "startingOffsets": self.starting_offsets,
            "failOnDataLoss": str(self.fail_on_data_loss).lower(),
        }
        if self.max_offsets_per_trigger is not None:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        opts.update(dict(self.extra_options))
        return opts

    def read_stream(self, spark: SparkSession) -> DataFrame:
        return spark.readStream.format("kafka").options(**self.options()).load()


def kafka_records(raw: DataFrame) -> DataFrame:
    """Kafka rows as received, as text: the bronze shape.

    Columns: ``key``, ``value`` (UTF-8 text), ``topic``, ``partition``, ``offset``,
    ``kafka_timestamp`` (broker/producer time) and ``ingested_at`` (processing time).
    """
    from pyspark.sql import functions as F

    return raw.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        F.current_timestamp().alias("ingested_at"),
    )
