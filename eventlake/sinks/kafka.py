"""Kafka sink: ``key``/``value`` rows to a topic (fixed, or per row from a ``topic`` column)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventlake.config import KafkaSettings
from eventlake.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class KafkaSink(Sink):
    """Write each row as a Kafka record: ``value`` (text/binary), optional ``key``.

    Delivery guarantee: at-least-once. Spark's Kafka sink has no transactions: a batch
    that fails or a driver that crashes after some records were sent replays the whole
    batch on restart, so consumers may see a record twice. De-duplicate downstream by
    key (e.g. ``order_id``) or with an idempotent consumer. Without ``topic`` each row
    must carry a ``topic`` column.
    """

    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    topic: str | None = None
    output_modes = frozenset({"append", "update"})

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        writer = writer.format("kafka").options(**self.kafka.spark_options())
        if self.topic:
            writer = writer.option("topic", self.topic)
        return writer.start()
