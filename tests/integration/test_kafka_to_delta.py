"""Kafka -> Delta append on the real broker and real Delta, read back by Spark and delta-rs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.context import FlowContext
from eventlake.kafka import produce, topic_offsets
from eventlake.pipelines import Pipeline
from eventlake.testing import delta_version, read_delta, run_available_now, settings_for

pytestmark = pytest.mark.integration

EVENTS = 10_000


ingest = Pipeline("ingest")


@ingest.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return kafka_records(df)


def _run_bronze(root: Path, bootstrap: str, topic: str) -> int:
    """One available-now run; the rows it read."""
    params = {"topic": topic, "max_offsets_per_trigger": 4_000}
    result = run_available_now(ingest, settings_for(root, bootstrap, ingest=params))
    totals = result.flows.get("ingest.bronze")  # no batch ran: no progress, no totals
    return totals.input_rows if totals else 0


def test_10k_events_land_exactly_once(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], lake: Path
) -> None:
    topic = make_topic(partitions=3)
    events = [
        {"order_id": f"o-{i:05d}", "amount": i % 997, "event_time": "2026-01-01T00:00:00Z"}
        for i in range(EVENTS)
    ]
    produce(bootstrap, topic, ((e["order_id"], json.dumps(e)) for e in events))
    ends = topic_offsets(bootstrap, topic)
    assert sum(ends.values()) == EVENTS
    root = lake.parent
    table = root / "lake" / "bronze" / "orders"

    written = _run_bronze(root, bootstrap, topic)
    assert written == EVENTS

    # Spark's view.
    df = spark.read.format("delta").load(str(table))
    assert df.count() == EVENTS
    assert {"key", "value", "topic", "partition", "offset", "kafka_timestamp"} <= set(df.columns)
    spark_keys = {r["key"] for r in df.select("key").collect()}
    assert spark_keys == {e["order_id"] for e in events}

    # delta-rs, an independent reader of the same table.
    arrow = read_delta(table)
    assert arrow.num_rows == EVENTS
    assert set(arrow.column("key").to_pylist()) == {e["order_id"] for e in events}
    assert {json.loads(v)["order_id"] for v in arrow.column("value").to_pylist()} == spark_keys
    assert set(arrow.column("topic").to_pylist()) == {topic}
    # Every offset of every partition exactly once: 0..end-1, no gap, no repeat.
    pairs = sorted(
        zip(arrow.column("partition").to_pylist(), arrow.column("offset").to_pylist(), strict=True)
    )
    assert pairs == sorted((p, o) for p, end in ends.items() for o in range(end))

    # Restarting on the same checkpoint with no new input writes nothing.
    version = delta_version(table)
    assert _run_bronze(root, bootstrap, topic) == 0
    assert read_delta(table).num_rows == EVENTS
    assert delta_version(table) == version

    # New input after the restart: exactly the new records are added.
    produce(bootstrap, topic, ((f"n-{i}", json.dumps({"order_id": f"n-{i}"})) for i in range(25)))
    assert _run_bronze(root, bootstrap, topic) == 25
    assert read_delta(table).num_rows == EVENTS + 25


def test_session_uses_jars_by_path_not_packages(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.jars.packages") is None
    jars = (conf.get("spark.jars") or "").split(",")
    assert any("delta-spark_4.2_2.13" in j for j in jars)
    assert all(Path(j).is_file() for j in jars)
    assert (
        spark.conf.get("spark.sql.streaming.stateStore.providerClass")
        == "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    )
