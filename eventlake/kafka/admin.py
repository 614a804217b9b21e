"""Admin and producer helpers on confluent-kafka (librdkafka), the project's Python client."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from eventlake.errors import ErrorCode, EventlakeError

Record = tuple[str | bytes | None, str | bytes | None]


def _admin(
    bootstrap: str,
    *,
    quiet: bool = False,
    options: Mapping[str, str] | None = None,
    errors: list[KafkaError] | None = None,
) -> AdminClient:
    conf: dict[str, Any] = {**(options or {}), "bootstrap.servers": bootstrap}
    if quiet:
        # Probes expect "connection refused" while a broker starts; failures are raised.
        conf["log_level"] = 0
    if errors is not None:
        conf["error_cb"] = errors.append
    return AdminClient(conf)


def list_topics(
    bootstrap: str, *, timeout: float = 10.0, options: Mapping[str, str] | None = None
) -> set[str]:
    """Names of the topics on the cluster; EL-KAFKA-007 if it refuses the login,
    EL-KAFKA-003 if it does not answer."""
    errors: list[KafkaError] = []
    admin = _admin(bootstrap, quiet=True, options=options, errors=errors)
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        admin.poll(0)  # serves the error callbacks queued meanwhile
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            raise EventlakeError(
                ErrorCode.KAFKA_AUTHENTICATION_FAILED,
                f"the Kafka broker at {bootstrap} refused the login: {refused[0].str()}",
            ) from None
        raise EventlakeError(
            ErrorCode.KAFKA_UNREACHABLE,
            f"no Kafka broker answered at {bootstrap} within {timeout:.0f}s ({exc}).",
        ) from None
    return {name for name in meta.topics if not name.startswith("__")}


def wait_for_broker(bootstrap: str, *, timeout: float = 60.0) -> None:
    """Block until the broker answers a metadata request, or raise EL-KAFKA-003."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            list_topics(bootstrap, timeout=2.0)
            return
        except EventlakeError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


def create_topic(
    bootstrap: str,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int | None = None,
    config: Mapping[str, str] | None = None,
    exist_ok: bool = False,
    timeout: float = 30.0,
) -> bool:
    """Create a topic through the admin API; returns False when it existed and exist_ok.

    Without ``replication_factor`` the brokers' ``default.replication.factor`` applies
    (1 on one embedded broker, 3 on an embedded cluster).
    """
    topic = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=-1 if replication_factor is None else replication_factor,
        config=dict(config or {}),
    )
    admin = _admin(bootstrap)  # keep a reference: a collected client cancels its futures
    future = admin.create_topics([topic], operation_timeout=timeout)[name]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        err = exc.args[0]
        exists = isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS
        if exists and exist_ok:
            return False
        raise EventlakeError(
            ErrorCode.KAFKA_ADMIN_FAILED,
            f"could not create topic '{name}' with {partitions} partition(s) on {bootstrap}: {exc}",
            expected="a reachable broker and a topic name not yet in use",
            fix="check `eventlake kafka status`; pick another name or delete the old topic",
        ) from None
    _wait_for_partitions(admin, name, partitions, timeout)
    return True


def upsert_scram_user(
    bootstrap: str, user: str, password: str, *, timeout: float = 30.0,
    options: Mapping[str, str] | None = None,
) -> None:  # fmt: skip
    """Create or update a SCRAM-SHA-512 login on the cluster (the admin API; no command
    line ever holds the password)."""
    # confluent-kafka exports these without declaring them (no __all__ entry).
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    upsert = UserScramCredentialUpsertion(user, info, password.encode())
    admin = _admin(bootstrap, options=options)
    try:
        admin.alter_user_scram_credentials([upsert])[user].result(timeout=timeout)
    except KafkaException as exc:
        raise EventlakeError(
            ErrorCode.KAFKA_ADMIN_FAILED,
            f"could not set the SCRAM login of '{user}' on {bootstrap}: {exc}",
            expected="a reachable broker with SCRAM-SHA-512 enabled",
            fix="check the broker's sasl.enabled.mechanisms and that you may alter users",
        ) from None


def _wait_for_partitions(admin: AdminClient, name: str, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
        parts = topic.partitions if topic is not None and topic.error is None else {}
        if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
            return
        time.sleep(0.1)
    raise EventlakeError(
        ErrorCode.KAFKA_ADMIN_FAILED,
        f"topic '{name}' was created but its {partitions} partition(s) have no leader "
        f"after {timeout:.0f}s.",
        fix="look at the broker log (`eventlake kafka status` prints its folder)",
    )


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    *,
    options: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    partition: int | None = None,
    timestamp_ms: int | None = None,
) -> int:
    """Send ``(key, value)`` records with an idempotent producer, wait for every ack.

    ``partition`` sends every record to that partition (else the key's hash picks it);
    ``timestamp_ms`` gives every record that create time (else now).
    Returns the number of records acknowledged; raises EL-KAFKA-006 if any failed.
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": "lz4",
        # Transient warnings (coordinator still loading) are retried; failures are raised.
        "log_level": 3,
        **(options or {}),
    }
    producer = Producer(conf)
    failures: list[str] = []
    acked = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal acked
        if err is not None:
            failures.append(str(err))
        else:
            acked += 1

    placed: dict[str, Any] = {"timestamp": timestamp_ms or 0}
    if partition is not None:
        placed["partition"] = partition
    for key, value in records:
        send_waiting(producer, topic, key, value, on_delivery=on_delivery, **placed)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if failures or remaining:
        raise EventlakeError(
            ErrorCode.KAFKA_PRODUCE_FAILED,
            f"{len(failures)} record(s) failed and {remaining} were unacknowledged after "
            f"{timeout:.0f}s producing to '{topic}' at {bootstrap}"
            + (f"; first error: {failures[0]}" if failures else "")
            + ".",
        )
    return acked


def send_waiting(producer: Producer, topic: str, key: Any, value: Any, **extra: Any) -> None:
    """``producer.produce``, serving delivery callbacks while its local queue is full."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, **extra)
            return
        except BufferError:
            producer.poll(0.05)


def partition_bounds(
    bootstrap: str, topic: str, *, options: Mapping[str, str] | None = None, timeout: float = 10.0
) -> dict[int, tuple[int, int]] | None:
    """(start, end) offsets of each partition of ``topic``; None when it does not exist.

    Read with a consumer that joins no group and commits nothing."""
    from confluent_kafka import Consumer

    consumer = Consumer({**(options or {}), "bootstrap.servers": bootstrap,
                         "group.id": "eventlake-offsets"})  # fmt: skip
    try:
        meta = consumer.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            for p in meta.partitions
        }
    finally:
        consumer.close()


def partition_count(
    bootstrap: str,
    topics: Iterable[str],
    *,
    options: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> int:
    """The partitions of ``topics`` together (a topic that does not exist counts 0)."""
    admin = _admin(bootstrap, quiet=True, options=options)
    meta = admin.list_topics(timeout=timeout).topics
    return sum(len(meta[t].partitions) for t in topics if t in meta and meta[t].error is None)


def topic_offsets(bootstrap: str, topic: str, *, timeout: float = 10.0) -> dict[int, int]:
    """End offset (next offset to be written) of each partition of ``topic``."""
    bounds = partition_bounds(bootstrap, topic, timeout=timeout)
    if bounds is None:
        raise EventlakeError(
            ErrorCode.KAFKA_TOPIC_MISSING,
            f"topic '{topic}' does not exist on {bootstrap}.",
            fix=f"create it: `eventlake kafka create-topic {topic} --partitions N`",
        )
    return {p: high for p, (_low, high) in bounds.items()}


def topic_records(
    bootstrap: str, topic: str, *, options: Mapping[str, str] | None = None, timeout: float = 10.0
) -> int | None:
    """Records the topic holds now (end minus start offset, over its partitions); None
    when the topic does not exist. Transaction markers count as records."""
    bounds = partition_bounds(bootstrap, topic, options=options, timeout=timeout)
    return None if bounds is None else sum(high - low for low, high in bounds.values())


def mean_record_bytes(
    bootstrap: str,
    topics: Iterable[str],
    *,
    sample: int = 200,
    options: Mapping[str, str] | None = None,
    timeout: float = 10.0,
) -> float | None:
    """Mean key + value size of up to ``sample`` records from the tail of each partition.

    Reads by assignment and commits nothing, so no consumer group is created. None when
    the topics hold no records (or none could be read).
    """
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        **(options or {}),
        "bootstrap.servers": bootstrap,
        "group.id": "eventlake-size-probe",
        "enable.auto.commit": False,
    }
    consumer = Consumer(conf)
    try:
        wanted: list[TopicPartition] = []
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            meta = consumer.list_topics(topic=topic, timeout=timeout).topics.get(topic)
            for p in meta.partitions if meta is not None and meta.error is None else {}:
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout)
                except KafkaException:  # e.g. a leader moving: size from the other partitions
                    continue
                if high > low:
                    wanted.append(TopicPartition(topic, p, max(low, high - sample)))
                    ends[(topic, p)] = high
        if not wanted:
            return None
        consumer.assign(wanted)
        total = count = 0
        deadline = time.monotonic() + timeout

        def at_end() -> bool:  # by position: compaction and transaction markers leave gaps
            return all(
                tp.offset >= ends[(tp.topic, tp.partition)] for tp in consumer.position(wanted)
            )

        while not at_end() and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                if msg.error() is None:
                    total += len(msg.key() or b"") + len(msg.value() or b"")
                    count += 1
        return total / count if count else None
    finally:
        consumer.close()
