"""Kafka: topics as an input, an output and a fan-out target.

Topics are named by config key (``pipelines.<p>.topic``, ``.topics.<role>`` or a key the
declaration names), so the same flow reads another topic on another cluster unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import BatchContext, Guarantee, Input, Output, Prepare, Target
from eventlake.triggers import is_real_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from eventlake.context import FlowConfig, FlowContext


@dataclass(frozen=True)
class KafkaInput(Input):
    """Topic ``pipelines.<p>.topic`` (or ``.topics.<role>``); offsets are tracked in the
    flow's checkpoint.

    The pipeline's ``starting_offsets`` applies only to a new checkpoint (``earliest``,
    ``latest`` or Spark's JSON form); ``max_offsets_per_trigger`` bounds each micro-batch so
    a backlog after an outage is worked off in steps of bounded memory; ``auto`` (the
    default) sizes that step when the run starts as ``max_bytes_per_trigger`` over the
    mean record size at the topic's tail, so a backlog is a few large batches, not
    hundreds of small ones; ``fail_on_data_loss`` as in Spark.
    """

    role: str | None = None

    def options(self, flow: FlowConfig) -> dict[str, str]:
        """The Spark Kafka source options this input reads with."""
        p = flow.params
        opts = {
            **flow.settings.kafka.spark_options(),
            "subscribe": flow.topic(self.role),
            "startingOffsets": p.starting_offsets,
            "failOnDataLoss": str(p.fail_on_data_loss).lower(),
        }
        if isinstance(p.max_offsets_per_trigger, int):
            opts["maxOffsetsPerTrigger"] = str(p.max_offsets_per_trigger)
        return opts

    def read(self, ctx: FlowContext) -> DataFrame:
        opts = self.options(ctx)
        if is_real_time(ctx.trigger):  # records stream through: Spark refuses a batch bound
            opts.pop("maxOffsetsPerTrigger", None)
        elif ctx.params.max_offsets_per_trigger == "auto":
            opts["maxOffsetsPerTrigger"] = str(auto_max_offsets(ctx, self.topics(ctx)))
        return ctx.spark.readStream.format("kafka").options(**opts).load()

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        opts = {k: v for k, v in self.options(ctx).items() if k != "maxOffsetsPerTrigger"}
        opts.update(startingOffsets="earliest", endingOffsets="latest")
        return ctx.spark.read.format("kafka").options(**opts).load()

    def describe(self, flow: FlowConfig | None = None) -> str:
        if flow is None:
            return f"kafka:{f'topics.{self.role}' if self.role else 'topic'}"
        return f"kafka:{flow.topic(self.role)}"

    def topics(self, flow: FlowConfig) -> list[str]:
        return [flow.topic(self.role)]


#: The record size assumed for an empty topic: about 245K records a batch at 256 MiB.
ASSUMED_RECORD_BYTES = 1024
#: Bytes a Kafka row costs beyond its key and value: topic, partition, offset, timestamp.
SPARK_ROW_OVERHEAD = 64


def auto_max_offsets(flow: FlowConfig, topics: list[str]) -> int:
    """``max_bytes_per_trigger`` over the topics' mean record size (Spark's row overhead
    included), at least 1,000 records."""
    from confluent_kafka import KafkaException

    from eventlake.kafka.admin import mean_record_bytes

    kafka = flow.settings.kafka
    size = None
    # Planning without a broker (`eventlake validate` offline) assumes the size at once.
    if _any_reachable(kafka.bootstrap_servers):
        try:
            size = mean_record_bytes(
                kafka.bootstrap_servers, topics, options=kafka.client_options(), timeout=5.0
            )
        except KafkaException:  # a probe that fails is no reason to stop: assume the size
            size = None
    per_record = (size or ASSUMED_RECORD_BYTES) + SPARK_ROW_OVERHEAD
    return max(1_000, int(flow.params.max_bytes_per_trigger // per_record))


def _any_reachable(bootstrap: str, timeout: float = 1.0) -> bool:
    """True when a TCP connection to one of the bootstrap servers opens."""
    import socket

    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


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


@dataclass(frozen=True)
class _TopicByParam:
    topic_param: str

    def _topic(self, flow: FlowConfig) -> str:
        return flow.param(self.topic_param)

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"kafka:{self._topic(flow) if flow else self.topic_param}"

    def topics(self, flow: FlowConfig) -> list[str]:
        return [self._topic(flow)]

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        from eventlake.kafka.admin import topic_records

        kafka = flow.settings.kafka
        topic = self._topic(flow)
        count = topic_records(kafka.bootstrap_servers, topic, options=kafka.client_options())
        return {self.describe(flow): count}


@dataclass(frozen=True)
class KafkaOutput(_TopicByParam, Output):
    """Write ``key``/``value`` rows to the topic named by ``pipelines.<p>.<topic_param>``.

    Delivery guarantee: at-least-once. Spark's Kafka sink has no transactions: a batch
    that fails, or a driver that crashes after some records were sent, is replayed whole
    on restart, so consumers may see a record twice. De-duplicate downstream by key (e.g.
    ``order_id``) or with an idempotent consumer.
    """

    guarantee = Guarantee.AT_LEAST_ONCE
    output_modes = frozenset({"append", "update"})

    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        writer = writer.format("kafka").options(**ctx.settings.kafka.spark_options())
        return writer.option("topic", self._topic(ctx)).start()


@dataclass(frozen=True)
class ToKafka(_TopicByParam, Target):
    """Send the batch's ``key``/``value`` rows to ``pipelines.<p>.<topic_param>``.

    Delivery guarantee: at-least-once. Kafka has no way to tie the records to the batch
    id: a batch replayed after a crash (or retried after another target failed) is sent
    again. No key is lost; consumers de-duplicate by key.
    """

    prepare: Prepare | None = None
    guarantee = Guarantee.AT_LEAST_ONCE

    def target_id(self, flow: FlowConfig) -> str:
        return f"kafka:{self._topic(flow)}"

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        kafka = batch.ctx.settings.kafka
        self.rows(df, batch).write.format("kafka").options(**kafka.spark_options()).option(
            "topic", self._topic(batch.ctx)
        ).save()
