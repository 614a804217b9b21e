"""Kafka input and output options end to end on the real broker, read back from Delta and
from Kafka: topic patterns, starting offsets per partition and by timestamp, routing by a
``topic`` column."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, FanOut, KafkaInput, KafkaOutput, ToKafka
from eventlake.connectors import kafka_records as as_records
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.kafka import create_topic, produce
from eventlake.pipelines import Pipeline
from eventlake.testing import (
    consume_topic,
    read_delta,
    run_available_now,
    settings_for,
    unique_name,
)

pytestmark = pytest.mark.integration

HOUR_MS = 3_600_000


def _records(prefix: str, n: int) -> list[tuple[str, str]]:
    return [(f"{prefix}{i}", json.dumps({"id": f"{prefix}{i}"})) for i in range(n)]


def _bronze() -> Pipeline:
    """One flow: a Kafka input as the test declares it -> bronze/events."""
    return Pipeline(unique_name("kafka").replace("-", "_"))


def _land(pipeline: Pipeline, inp: KafkaInput) -> None:
    @pipeline.flow(input=inp, output=DeltaOutput("bronze", "events"))
    def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return as_records(df)


def _landed(root: Path) -> list[tuple[str, int, int]]:
    """(topic, partition, offset) of every row in bronze/events, sorted."""
    rows = read_delta(root / "lake" / "bronze" / "events").to_pylist()
    return sorted((r["topic"], r["partition"], r["offset"]) for r in rows)


def test_topic_pattern_reads_every_matching_topic(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    stem = unique_name("pat")
    topics = {name: f"{stem}-{name}" for name in ("eu", "us", "eu-archive")}
    for topic in topics.values():
        create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topics["eu"], _records("e", 7))
    produce(bootstrap, topics["us"], _records("u", 5))
    produce(bootstrap, topics["eu-archive"], _records("x", 3))
    pipeline = _bronze()
    _land(pipeline, KafkaInput(pattern=True))
    # Spark finds the regex anywhere in a name: anchored, eu-archive is left out.
    regex = f"^{stem}-(eu|us)$"

    result = run_available_now(pipeline, settings_for(tmp_path, bootstrap, **{
        pipeline.name: {"topic": regex}}))  # fmt: skip

    landed = _landed(tmp_path)
    assert len(landed) == 12
    assert {t for t, _, _ in landed} == {topics["eu"], topics["us"]}
    assert result.flows[f"{pipeline.name}.bronze"].input_rows == 12


def test_starting_offsets_per_partition(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, _records("a", 10), partition=0)
    produce(bootstrap, topic, _records("b", 6), partition=1)
    pipeline = _bronze()
    _land(pipeline, KafkaInput())
    # Partition 0 from offset 4, partition 1 from its earliest (-2).
    start = json.dumps({topic: {"0": 4, "1": -2}})

    run_available_now(pipeline, settings_for(tmp_path, bootstrap, **{
        pipeline.name: {"topic": topic, "starting_offsets": start}}))  # fmt: skip

    assert _landed(tmp_path) == [(topic, 0, o) for o in range(4, 10)] + [
        (topic, 1, o) for o in range(6)
    ]


def test_starting_offsets_latest_skips_the_backlog(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, _records("old", 8))
    pipeline = _bronze()
    _land(pipeline, KafkaInput())
    settings = settings_for(tmp_path, bootstrap, **{
        pipeline.name: {"topic": topic, "starting_offsets": "latest"}})  # fmt: skip

    run_available_now(pipeline, settings)  # a new checkpoint at the end: nothing read
    produce(bootstrap, topic, _records("new", 5))
    run_available_now(pipeline, settings)  # the checkpoint resumes: only the new records

    rows = read_delta(tmp_path / "lake" / "bronze" / "events").to_pylist()
    assert sorted(r["key"] for r in rows) == sorted(f"new{i}" for i in range(5))


def test_fail_on_data_loss(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = make_topic()
    produce(bootstrap, topic, _records("a", 5))
    pipeline = _bronze()
    _land(pipeline, KafkaInput())
    strict = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    run_available_now(pipeline, strict)  # the checkpoint is at offset 5
    produce(bootstrap, topic, _records("b", 5))
    # Retention removes offsets 5..7 before the flow read them.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 8)]).values():
        future.result(timeout=30)

    with pytest.raises(EventlakeError) as caught:
        run_available_now(pipeline, strict)
    assert caught.value.code == "EL-QUERY-001"
    lenient_params = {"topic": topic, "fail_on_data_loss": False, "data_loss_note": "a test"}
    lenient = settings_for(tmp_path, bootstrap, **{pipeline.name: lenient_params})
    run_available_now(pipeline, lenient)

    assert _landed(tmp_path) == [(topic, 0, o) for o in (*range(5), 8, 9)]


@pytest.mark.parametrize("by", ["starting_timestamp", "starting_offsets_by_timestamp"])
def test_starting_offsets_by_timestamp(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path, by: str
) -> None:
    topic = make_topic(partitions=2)
    now = int(time.time() * 1000)
    old, new = now - 3 * HOUR_MS, now - HOUR_MS
    produce(bootstrap, topic, _records("p0-old", 4), partition=0, timestamp_ms=old)
    produce(bootstrap, topic, _records("p0-new", 3), partition=0, timestamp_ms=new)
    produce(bootstrap, topic, _records("p1-old", 5), partition=1, timestamp_ms=old)
    middle = now - 2 * HOUR_MS
    params: dict[str, Any] = {"topic": topic}
    if by == "starting_timestamp":
        # Every partition from the middle; partition 1 has nothing that late: 'latest'
        # starts it at its end instead of failing the query.
        params |= {"starting_timestamp": middle / 1000, "starting_timestamp_strategy": "latest"}
        want = [(topic, 0, o) for o in range(4, 7)]
    else:
        params["starting_offsets_by_timestamp"] = json.dumps({topic: {"0": middle, "1": old}})
        want = [(topic, 0, o) for o in range(4, 7)] + [(topic, 1, o) for o in range(5)]
    pipeline = _bronze()
    _land(pipeline, KafkaInput())

    run_available_now(pipeline, settings_for(tmp_path, bootstrap, **{pipeline.name: params}))

    assert _landed(tmp_path) == want


def test_outputs_route_each_row_by_its_topic_column(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic()
    big, small = make_topic(prefix="big"), make_topic(prefix="small")
    big_batch, small_batch = make_topic(prefix="bigb"), make_topic(prefix="smallb")
    orders = [(f"o{i}", json.dumps({"id": f"o{i}", "amount": i * 10})) for i in range(20)]
    produce(bootstrap, source, orders)
    pipeline = _bronze()

    def routed(df: DataFrame, big_topic: str, small_topic: str) -> DataFrame:
        from pyspark.sql import functions as F

        amount = F.get_json_object(F.col("value").cast("string"), "$.amount").cast("int")
        topic = F.when(amount >= 100, F.lit(big_topic)).otherwise(F.lit(small_topic))
        return df.select("key", "value", topic.alias("topic"))

    @pipeline.flow(input=KafkaInput(), output=KafkaOutput())
    def stream(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return routed(df, big, small)

    @pipeline.flow(input=KafkaInput(), output=FanOut(ToKafka()))
    def batch(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return routed(df, big_batch, small_batch)

    run_available_now(pipeline, settings_for(tmp_path, bootstrap, **{
        pipeline.name: {"topic": source}}))  # fmt: skip

    want_big = {k for k, v in orders if json.loads(v)["amount"] >= 100}
    for big_topic, small_topic in ((big, small), (big_batch, small_batch)):
        assert sorted(k for k, _ in consume_topic(bootstrap, big_topic)) == sorted(want_big)
        small_keys = sorted(k for k, _ in consume_topic(bootstrap, small_topic))
        assert small_keys == sorted({k for k, _ in orders} - want_big)


def test_output_without_topic_column_or_param_is_refused(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source = make_topic()
    pipeline = _bronze()

    @pipeline.flow(input=KafkaInput(), output=KafkaOutput())
    def unrouted(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return df.select("key", "value")

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": source}})
    with pytest.raises(EventlakeError) as caught:
        run_available_now(pipeline, settings)
    assert caught.value.code == "EL-PIPELINE-002"
    assert "no 'topic' column" in caught.value.what
