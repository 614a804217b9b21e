"""eventlake.testing's topic readers against the real broker: every record with the
coordinates and timestamp the producer's delivery reports gave it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Message, Producer

from eventlake.testing import consume_records, consume_topic

pytestmark = pytest.mark.integration


def test_consume_records_gives_each_records_partition_offset_and_timestamp(
    bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(partitions=2, prefix="consume")
    producer = Producer({"bootstrap.servers": bootstrap})
    delivered: list[tuple[int, int, str | None, str | None, int]] = []

    def report(err: object, msg: Message) -> None:
        assert err is None, err
        key, value = msg.key(), msg.value()
        delivered.append((msg.partition(), msg.offset(), key and key.decode(),
                          value and value.decode(), msg.timestamp()[1]))  # fmt: skip

    at = 1_767_225_600_000  # 2026-01-01, epoch ms
    sent = [("k1", "one", 0, at), (None, "no key", 1, at + 1500), ("k2", None, 1, at + 2250),
            ("k1", "ünïcode", 0, at + 3000)]  # fmt: skip
    for key, value, partition, ts in sent:
        producer.produce(topic, key=key, value=value, partition=partition, timestamp=ts,
                         on_delivery=report)  # fmt: skip
    assert producer.flush(30) == 0

    got = consume_records(bootstrap, topic)
    assert sorted((r.partition, r.offset, r.key, r.value, r.timestamp_ms) for r in got) == sorted(
        delivered
    )
    assert Counter((r.key, r.value, r.timestamp_ms) for r in got) == Counter(
        (k, v, ts) for k, v, _p, ts in sent
    )
    # consume_topic: the same records as text, a missing key or value as "".
    assert sorted(consume_topic(bootstrap, topic)) == sorted(
        (k or "", v or "") for k, v, *_ in sent
    )
