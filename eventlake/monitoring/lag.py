"""Kafka lag of a flow: how far its processed offsets trail each partition's end.

Offsets come from the query (its live progress, or its checkpoint's last committed
batch) and the partition ends from the broker. Seconds behind is now minus the timestamp
of the oldest record not yet processed, read by assignment: nothing is committed and no
consumer group is joined, so no group appears on the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from eventlake.config import KafkaSettings

#: ``{topic: {partition: next offset to process}}``, Spark's Kafka offset form.
Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    #: The next offset the flow will process.
    processed: int
    #: The partition's end: the offset the next record written will get.
    latest: int
    records: int
    #: Now minus the timestamp of the oldest unprocessed record; 0 when none is waiting.
    seconds: float


def parse_kafka_offsets(data: Any) -> Offsets:
    """Spark's Kafka offsets (``{"t": {"0": 12}}``, text or parsed) as ints; {} otherwise."""
    import json

    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            return {}
    if not isinstance(data, dict):
        return {}
    out: Offsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            return {}  # another source's offset (Delta's has scalar fields)
        try:
            out[str(topic)] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            return {}
    return out


def _consumer(kafka: KafkaSettings) -> Consumer:
    # librdkafka wants a group.id; a group exists on the broker only after a join or a
    # commit, and this consumer only assigns partitions and never commits.
    return Consumer({
        **kafka.client_options(),
        "group.id": "eventlake-lag-probe",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "log_level": 0,
    })  # fmt: skip


def kafka_lag(
    kafka: KafkaSettings,
    topics: list[str],
    processed: Mapping[str, Mapping[int, int]] | None,
    *,
    starting: str = "earliest",
    timeout: float = 10.0,
    now: float | None = None,
) -> list[PartitionLag]:
    """Lag of each partition of ``topics``, given the flow's ``processed`` offsets.

    A partition the flow has no offset for yet starts where a new checkpoint would:
    ``starting`` ``earliest`` (the log start) or ``latest`` (the end: no lag).
    """
    consumer = _consumer(kafka)
    try:
        lags: list[PartitionLag] = []
        waiting: list[TopicPartition] = []
        for topic in topics:
            meta = consumer.list_topics(topic=topic, timeout=timeout).topics.get(topic)
            if meta is None or meta.error is not None:
                continue
            done = (processed or {}).get(topic, {})
            for p in sorted(meta.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout)
                position = done.get(p, high if starting == "latest" else low)
                # Records deleted by retention can no longer be processed: not lag.
                position = max(position, low)
                lags.append(PartitionLag(topic, p, position, high, max(0, high - position), 0.0))
                if high > position:
                    waiting.append(TopicPartition(topic, p, position))
        oldest = _timestamps(consumer, waiting, timeout)
        at = time.time() if now is None else now
        return [
            PartitionLag(
                lag.topic, lag.partition, lag.processed, lag.latest, lag.records,
                max(0.0, at - oldest[(lag.topic, lag.partition)])
                if (lag.topic, lag.partition) in oldest else 0.0,
            )
            for lag in lags
        ]  # fmt: skip
    finally:
        consumer.close()


def record_timestamps(
    kafka: KafkaSettings, wanted: list[TopicPartition], timeout: float
) -> dict[tuple[str, int], float]:
    """The timestamp (seconds) of the first record at or after each wanted offset, read by
    assignment (nothing committed, no group joined)."""
    consumer = _consumer(kafka)
    try:
        return _timestamps(consumer, wanted, timeout)
    finally:
        consumer.close()


def _timestamps(
    consumer: Consumer, wanted: list[TopicPartition], timeout: float
) -> dict[tuple[str, int], float]:
    """The timestamp (seconds) of the first record at or after each wanted offset."""
    if not wanted:
        return {}
    found: dict[tuple[str, int], float] = {}
    consumer.assign(wanted)
    deadline = time.monotonic() + timeout
    try:
        while len(found) < len(wanted) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=len(wanted) * 4, timeout=0.2):
                if msg.error() is not None:
                    continue
                key = (str(msg.topic()), int(msg.partition() or 0))
                if key not in found:
                    _kind, ms = msg.timestamp()
                    found[key] = ms / 1000.0
                    consumer.pause([TopicPartition(*key)])
    except KafkaException:
        pass  # seconds stay unknown (0) for the partitions not read
    return found
