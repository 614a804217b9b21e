"""Kafka sink: ``key``/``value`` rows to a topic (fixed, or per row from a ``topic`` column)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventlake.config import KafkaSettings
from eventlake.sinks.base import Sink
from eventlake.sinks.batch import BatchContext, BatchWriter, Prepare

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
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


@dataclass(frozen=True)
class KafkaBatchWrite(BatchWriter):
    """Write the batch's ``key``/``value`` rows to ``topic`` (a batch writer for fan-outs).

    Delivery guarantee: at-least-once. Kafka has no way to tie the records to the batch
    id: a batch replayed after a crash (or retried after another writer of the fan-out
    failed) is sent again. No key is lost; consumers de-duplicate by key.
    """

    kafka: KafkaSettings
    topic: str
    name: str = "kafka"
    prepare: Prepare | None = None

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        rows = self.source(df, batch)
        rows.write.format("kafka").options(**self.kafka.spark_options()).option(
            "topic", self.topic
        ).save()
