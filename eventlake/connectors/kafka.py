"""Kafka: topics as an input, an output and a fan-out target.

Topics are named by config key (``pipelines.<p>.topic``, ``.topics.<role>`` or a key the
declaration names), so the same flow reads another topic on another cluster unchanged.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, TypeVar

from eventlake.connectors.base import BatchContext, Input, Output, Prepare, Target
from eventlake.connectors.capabilities import (
    Guarantee,
    InputCapabilities,
    OutputCapabilities,
    TriggerKind,
)
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.triggers import is_real_time

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Producer
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.checkpoints import CheckpointLog
    from eventlake.context import FlowConfig, FlowContext
    from eventlake.scope import RunScope


@dataclass(frozen=True)
class KafkaInput(Input):
    """Topic ``pipelines.<p>.topic`` (or ``.topics.<role>``); offsets are tracked in the
    flow's checkpoint.

    With ``pattern=True`` that config value is a Java regex and the flow reads every topic
    it matches, including topics created while it runs (Spark's ``subscribePattern``).
    Spark 4.2 matches a regex found anywhere in the name: ``orders`` also reads
    ``orders-archive``; anchor it (``^orders-(eu|us)$``) for whole names.

    Where a new checkpoint starts, from the pipeline's params: ``starting_timestamp`` (the
    first record at or after that time in every partition), else
    ``starting_offsets_by_timestamp`` (Spark's JSON of epoch milliseconds per partition),
    else ``starting_offsets`` (``earliest``, ``latest`` or Spark's JSON of offsets per
    partition, -2 earliest and -1 latest). ``starting_timestamp_strategy`` says what a
    partition with no record that late does: ``error`` (Spark's default) or ``latest``.
    A checkpoint that exists resumes where it stopped.

    ``max_offsets_per_trigger`` bounds each micro-batch so a backlog after an outage is
    worked off in steps of bounded memory; ``auto`` (the default) sizes that step when the
    run starts as ``max_bytes_per_trigger`` over the mean record size at the topic's tail,
    so a backlog is a few large batches, not hundreds of small ones; ``fail_on_data_loss``
    as in Spark.
    """

    role: str | None = None
    pattern: bool = False
    capabilities = InputCapabilities(
        triggers=frozenset(TriggerKind),
        batch_read=True,
        verify=True,
        idle_heartbeats=True,
        offset_limits=True,
        retention_loss=True,
    )

    def options(self, flow: FlowConfig) -> dict[str, str]:
        """The Spark Kafka source options this input reads with."""
        p = flow.params
        opts = {
            "kafka.fetch.max.wait.ms": str(FETCH_MAX_WAIT_MS),
            **flow.settings.kafka.spark_options(),
            ("subscribePattern" if self.pattern else "subscribe"): flow.topic(self.role),
            "startingOffsets": p.starting_offsets,
            "failOnDataLoss": str(p.fail_on_data_loss).lower(),
        }
        if p.starting_timestamp is not None:
            opts["startingTimestamp"] = str(epoch_millis(p.starting_timestamp))
        elif p.starting_offsets_by_timestamp is not None:
            opts["startingOffsetsByTimestamp"] = p.starting_offsets_by_timestamp
        if p.starting_timestamp is not None or p.starting_offsets_by_timestamp is not None:
            opts["startingOffsetsByTimestampStrategy"] = p.starting_timestamp_strategy
        if isinstance(p.max_offsets_per_trigger, int):
            opts["maxOffsetsPerTrigger"] = str(p.max_offsets_per_trigger)
        return opts

    def replay(self, ctx: FlowContext, log: CheckpointLog, last: int) -> DataFrame:
        """Every record up to where batch ``last`` ended (verify judges each by its
        partition and offset against the batches' ranges)."""
        return self.read_through(ctx, log.source_offsets(last, 0))

    def read_through(self, ctx: FlowContext, ends: dict[str, dict[str, int]]) -> DataFrame:
        """As a batch, every record up to the end offsets ``ends`` (topic -> partition ->
        offset)."""
        import json

        opts = {k: v for k, v in self.options(ctx).items() if k != "maxOffsetsPerTrigger"}
        opts["endingOffsets"] = json.dumps(
            {t: {str(p): int(o) for p, o in parts.items()} for t, parts in ends.items()}
        )
        return ctx.spark.read.format("kafka").options(**opts).load()

    def read(self, ctx: FlowContext) -> DataFrame:
        opts = self.options(ctx)
        if is_real_time(ctx.trigger):  # records stream through: no batch bound, no split
            opts.pop("maxOffsetsPerTrigger", None)
            return ctx.spark.readStream.format("kafka").options(**opts).load()
        facts = ctx.run.service(TopicFacts)
        if ctx.params.max_offsets_per_trigger == "auto":
            size = facts.record_bytes(ctx, self.topics(ctx))
            opts["maxOffsetsPerTrigger"] = str(auto_max_offsets(ctx, size))
        tasks = ctx.params.min_partitions
        if tasks == "auto":
            cores = ctx.spark.sparkContext.defaultParallelism
            tasks = balanced_tasks(facts.partitions(ctx, self.topics(ctx)), cores)
        if tasks is not None:
            opts["minPartitions"] = str(tasks)
        return ctx.spark.readStream.format("kafka").options(**opts).load()

    def preflight(self, flow: FlowConfig, trigger: str, run: RunScope) -> None:
        """The topics' record size and partition count, where ``auto`` params need them."""
        if is_real_time(trigger):
            return
        sizes = flow.params.max_offsets_per_trigger == "auto"
        splits = flow.params.min_partitions == "auto"
        if not (sizes or splits):
            return
        facts, topics = run.service(TopicFacts), self.topics(flow)
        if sizes:
            facts.record_bytes(flow, topics)
        if splits:
            facts.partitions(flow, topics)

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        opts = {k: v for k, v in self.options(ctx).items() if not _starts_or_bounds(k)}
        opts.update(startingOffsets="earliest", endingOffsets="latest")
        return ctx.spark.read.format("kafka").options(**opts).load()

    def describe(self, flow: FlowConfig | None = None) -> str:
        key = f"topics.{self.role}" if self.role else "topic"
        name = flow.topic(self.role) if flow is not None else key
        return f"kafka:/{name}/" if self.pattern else f"kafka:{name}"

    def topics(self, flow: FlowConfig) -> list[str]:
        """The topic, or with ``pattern`` the topics on the broker that match it now."""
        if not self.pattern:
            return [flow.topic(self.role)]
        from eventlake.kafka.admin import list_topics

        kafka = flow.settings.kafka
        regex = re.compile(flow.topic(self.role))
        found = list_topics(kafka.bootstrap_servers, options=kafka.client_options())
        return sorted(t for t in found if regex.search(t))


def _starts_or_bounds(option: str) -> bool:
    return option.startswith("startingOffsets") or option in (
        "startingTimestamp",
        "maxOffsetsPerTrigger",
    )


def epoch_millis(when: datetime) -> int:
    """Milliseconds since the epoch; a time without a zone is UTC."""
    aware = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    return int(aware.timestamp() * 1000)


#: How long a fetch at the end of a partition waits for records. The consumer sends its
#: next fetch as it returns records; at the end of a partition that fetch waits in the
#: broker, and the next batch's first read waits for it: Kafka's 500 ms default added up
#: to half a second to each caught-up batch.
FETCH_MAX_WAIT_MS = 50

#: The record size assumed for an empty topic: about 245K records a batch at 256 MiB.
ASSUMED_RECORD_BYTES = 1024
#: Bytes a Kafka row costs beyond its key and value: topic, partition, offset, timestamp.
SPARK_ROW_OVERHEAD = 64


def balanced_tasks(partitions: int, cores: int) -> int | None:
    """Spark's ``minPartitions`` for a batch of ``partitions`` Kafka partitions on
    ``cores``: None when a task per partition keeps every core busy to the end (as many
    partitions as a multiple of the cores), else their least common multiple, so that
    Spark (which splits each partition's range into round(share x minPartitions) tasks)
    cuts every partition into as many equal tasks and each core runs as many."""
    import math

    if partitions <= 0 or cores <= 1 or partitions % cores == 0:
        return None
    return math.lcm(partitions, cores)


def auto_max_offsets(flow: FlowConfig, record_bytes: float | None) -> int:
    """``max_bytes_per_trigger`` over the mean record size ``record_bytes`` (else an
    assumed size) plus Spark's row overhead, at least 1,000 records."""
    per_record = (record_bytes or ASSUMED_RECORD_BYTES) + SPARK_ROW_OVERHEAD
    return max(1_000, int(flow.params.max_bytes_per_trigger // per_record))


_A = TypeVar("_A")


class TopicFacts:
    """What the broker says of a run's topics, asked once per run (a run service): the
    mean record size that sizes a batch (``max_offsets_per_trigger: auto``) and the
    partition count that splits one (``min_partitions: auto``).

    The run's pre-flight asks while the JVM starts (:meth:`KafkaInput.preflight`), and
    flows reading the same topics share one answer; a broker that cannot be reached
    or fails to answer gives None (an assumed size) and 0 partitions.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sizes: dict[tuple[str, tuple[str, ...]], float | None] = {}
        self._partitions: dict[tuple[str, tuple[str, ...]], int] = {}

    def record_bytes(self, flow: FlowConfig, topics: list[str]) -> float | None:
        """Mean key + value bytes at the tail of ``topics``; None when unknown."""
        from eventlake.kafka.admin import mean_record_bytes

        return self._ask(self._sizes, flow, topics, mean_record_bytes, None)

    def partitions(self, flow: FlowConfig, topics: list[str]) -> int:
        """The partitions of ``topics`` together; 0 when unknown."""
        from eventlake.kafka.admin import partition_count

        return self._ask(self._partitions, flow, topics, partition_count, 0)

    def _ask(
        self,
        answers: dict[tuple[str, tuple[str, ...]], _A],
        flow: FlowConfig,
        topics: list[str],
        probe: Callable[..., _A],
        unknown: _A,
    ) -> _A:
        from confluent_kafka import KafkaException

        kafka = flow.settings.kafka
        key = (kafka.bootstrap_servers, tuple(sorted(topics)))
        with self._lock:
            if key not in answers:
                answer = unknown
                # Planning without a broker (`eventlake validate` offline) assumes at once,
                # and a probe that fails is no reason to stop.
                if _any_reachable(kafka.bootstrap_servers):
                    with contextlib.suppress(KafkaException):
                        answer = probe(
                            kafka.bootstrap_servers, topics,
                            options=kafka.client_options(), timeout=5.0,
                        )  # fmt: skip
                answers[key] = answer
            return answers[key]

    def close(self) -> None:
        """Nothing to release: the probes' clients are closed as they answer."""


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

    Columns: ``key``, ``value`` (UTF-8 text; bytes that are not UTF-8 become U+FFFD, so
    every reader of the table can decode it), ``topic``, ``partition``, ``offset``,
    ``kafka_timestamp`` (broker/producer time) and ``ingested_at`` (when the row was read:
    :func:`eventlake.transforms.clock.processing_time`).
    """
    from pyspark.sql import functions as F

    from eventlake.transforms.clock import processing_time

    return raw.select(
        F.make_valid_utf8(F.col("key").cast("string")).alias("key"),
        F.make_valid_utf8(F.col("value").cast("string")).alias("value"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        processing_time(raw.sparkSession).alias("ingested_at"),
    )


@dataclass(frozen=True)
class _TopicByParam:
    #: The param naming the topic; None routes each row by its own ``topic`` column.
    topic_param: str | None = None

    def _topic(self, flow: FlowConfig) -> str | None:
        return flow.param(self.topic_param) if self.topic_param is not None else None

    def describe(self, flow: FlowConfig | None = None) -> str:
        if self.topic_param is None:
            return "kafka:<topic column>"
        return f"kafka:{self._topic(flow) if flow else self.topic_param}"

    def topics(self, flow: FlowConfig) -> list[str]:
        topic = self._topic(flow)
        return [topic] if topic is not None else []

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        from eventlake.kafka.admin import topic_records

        kafka = flow.settings.kafka
        return {
            f"kafka:{topic}": topic_records(
                kafka.bootstrap_servers, topic, options=kafka.client_options()
            )
            for topic in self.topics(flow)
        }

    def _check_columns(self, flow: FlowConfig, columns: list[str]) -> None:
        needed = ["value"] if self.topic_param is not None else ["value", "topic"]
        missing = [c for c in needed if c not in columns]
        if missing:
            where = self.describe(flow)
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"rows for {where} have no {' or '.join(repr(c) for c in missing)} column "
                f"(they have {', '.join(columns)}).",
                expected="a 'value' column (string or binary), an optional 'key'"
                + ("" if self.topic_param else ", and a 'topic' column naming each row's topic"),
                fix="select those columns in the transform"
                + ("" if self.topic_param else ", or name the topic with topic_param"),
            )

    def _options(self, flow: FlowConfig) -> dict[str, str]:
        topic = self._topic(flow)
        opts = flow.settings.kafka.spark_options()
        return {**opts, "topic": topic} if topic is not None else opts


@dataclass(frozen=True)
class KafkaOutput(_TopicByParam, Output):
    """Write ``key``/``value`` rows to the topic named by ``pipelines.<p>.<topic_param>``,
    or, without ``topic_param``, each row to the topic its ``topic`` column names.

    Delivery guarantee: at-least-once. Spark's Kafka sink has no transactions: a batch
    that fails, or a driver that crashes after some records were sent, is replayed whole
    on restart, so consumers may see a record twice. De-duplicate downstream by key (e.g.
    ``order_id``) or with an idempotent consumer.
    """

    capabilities = OutputCapabilities(
        guarantee=Guarantee.AT_LEAST_ONCE,
        output_modes=frozenset({"append", "update"}),
        triggers=frozenset(TriggerKind),
    )

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        self._check_columns(ctx, schema.names)

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        return writer.format("kafka").options(**self._options(ctx)).start()


@dataclass(frozen=True)
class ToKafka(_TopicByParam, Target):
    """Send the batch's ``key``/``value`` rows to ``pipelines.<p>.<topic_param>``, or,
    without ``topic_param``, each row to the topic its ``topic`` column names.

    Delivery guarantee: at-least-once. Kafka has no way to tie the records to the batch
    id: a batch replayed after a crash (or retried after another target failed) is sent
    again. No key is lost; consumers de-duplicate by key.
    """

    prepare: Prepare | None = None
    guarantee = Guarantee.AT_LEAST_ONCE

    def target_id(self, flow: FlowConfig) -> str:
        return self.describe(flow)

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        rows = self.rows(df, batch)
        self._check_columns(batch.ctx, rows.columns)
        rows.write.format("kafka").options(**self._options(batch.ctx)).save()


@dataclass(frozen=True)
class ToKafkaExactlyOnce(_TopicByParam, Target):
    """Send the batch's ``key``/``value`` rows to ``pipelines.<p>.<topic_param>`` in one
    Kafka transaction that also records the batch as done.

    Delivery guarantee: exactly-once for consumers reading with
    ``isolation.level=read_committed``. The transaction holds the batch's records and a
    commit mark: the offset ``batch id + 1`` (with the checkpoint id and batch id as
    metadata) of the consumer group :meth:`group` on partition 0 of the topic, sent with
    ``send_offsets_to_transaction``. Both commit together or not at all. Before writing,
    the target reads the mark; a batch at or below it is skipped (the run died after
    Kafka's commit and before Spark's). The producer's ``transactional.id`` is that same
    name, stable for the flow, target and checkpoint: a restarted run's
    ``init_transactions`` fences the dead run's producer and aborts its open transaction,
    so read_committed consumers never see those records (read_uncommitted ones do).

    The producer (and the consumer that reads the mark) is opened once when the query
    starts and closed when it stops; after a failed batch it is dropped and the next
    batch opens a new one (whose ``init_transactions`` aborts anything left open).

    Limits: the records go through one producer on the driver (``toLocalIterator``), so a
    batch must fit a transaction (``transaction_timeout_ms``, at most the broker's
    ``transaction.max.timeout.ms``) and throughput is one producer's. An open transaction
    of a run that is never restarted holds read_committed consumers back until that
    timeout aborts it. A new checkpoint is a new scope: its batches are written again.
    Rows route by ``topic_param`` only (the mark needs a known topic).
    """

    prepare: Prepare | None = None
    transaction_timeout_ms: int = 60_000
    guarantee = Guarantee.EXACTLY_ONCE

    def __post_init__(self) -> None:
        if self.topic_param is None:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                "ToKafkaExactlyOnce() was given no topic_param.",
                expected="the param naming the topic, where the batch's commit mark is kept",
                fix="pass it, ToKafkaExactlyOnce('out_topic'); route by a topic column with "
                "ToKafka() (at-least-once)",
            )

    def target_id(self, flow: FlowConfig) -> str:
        return f"kafka-eo:{self._topic(flow)}"

    def group(self, batch: BatchContext) -> str:
        """The consumer group holding the mark, also the producer's ``transactional.id``."""
        import hashlib

        scope = batch.app_id(self.target_id(batch.ctx))
        return f"eventlake-txn-{hashlib.sha256(scope.encode()).hexdigest()[:24]}"

    def open(self, ctx: FlowContext) -> None:
        ctx.run.open_resource(ctx.query_name, self.target_id(ctx), _Transactions(ctx, self))

    def _transactions(self, batch: BatchContext) -> _Transactions:
        return batch.ctx.run.held(batch.flow, self.target_id(batch.ctx), _Transactions,
                                  lambda: _Transactions(batch.ctx, self))  # fmt: skip

    def committed_batch(self, batch: BatchContext) -> int | None:
        """The last batch id whose transaction committed in this scope, or None."""
        from confluent_kafka import TopicPartition

        consumer = self._transactions(batch).consumer(batch)
        [mark] = consumer.committed([TopicPartition(self._mark_topic(batch), 0)], timeout=30)
        return mark.offset - 1 if mark.offset > 0 else None

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        import json

        from confluent_kafka import KafkaException, TopicPartition

        from eventlake.kafka.admin import send_waiting

        done = self.committed_batch(batch)
        if done is not None and done >= batch.batch_id:
            return
        topic = self._mark_topic(batch)
        rows = self.rows(df, batch)
        self._check_columns(batch.ctx, rows.columns)
        transactions = self._transactions(batch)
        producer = transactions.producer(batch)
        producer.begin_transaction()
        try:
            has_key = "key" in rows.columns
            for row in rows.select(*(["key"] if has_key else []), "value").toLocalIterator():
                key = row["key"] if has_key else None
                send_waiting(producer, topic, _bytes(key), _bytes(row["value"]))
            mark = json.dumps({"checkpoint": batch.stream_id, "batch": batch.batch_id})
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, 0, batch.batch_id + 1, metadata=mark)],
                transactions.consumer(batch).consumer_group_metadata(),
                30,
            )
            producer.commit_transaction(self.transaction_timeout_ms / 1000)
        except BaseException:
            with contextlib.suppress(KafkaException):  # a fenced producer cannot abort
                producer.abort_transaction(30)
            transactions.close()  # a failed or fenced producer is not used again
            raise

    def _mark_topic(self, batch: BatchContext) -> str:
        topic = self._topic(batch.ctx)
        assert topic is not None  # __post_init__ requires topic_param
        return topic


class _Transactions:
    """The transactional producer of one :class:`ToKafkaExactlyOnce` in one query, and the
    consumer (same group, ``read_committed``) that reads its commit mark; each made on
    first use, the producer fencing any earlier one of its ``transactional.id``."""

    def __init__(self, ctx: FlowContext, target: ToKafkaExactlyOnce) -> None:
        self.options = ctx.settings.kafka.client_options()
        self.target = target
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None

    def producer(self, batch: BatchContext) -> Producer:
        from confluent_kafka import Producer

        if self._producer is None:
            timeout_ms = self.target.transaction_timeout_ms
            producer = Producer({**self.options, "transactional.id": self.target.group(batch),
                                 "linger.ms": 5, "transaction.timeout.ms": timeout_ms})  # fmt: skip
            producer.init_transactions(30)  # fences an earlier producer, aborts its open txn
            self._producer = producer
        return self._producer

    def consumer(self, batch: BatchContext) -> Consumer:
        from confluent_kafka import Consumer

        if self._consumer is None:
            self._consumer = Consumer({**self.options, "group.id": self.target.group(batch),
                                       "isolation.level": "read_committed",
                                       "enable.auto.commit": False})  # fmt: skip
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        self._consumer = self._producer = None


def _bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    return str(value).encode()
