"""Kafka -> Delta append on the real broker and real Delta, read back by Spark and delta-rs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.connectors.kafka import TopicFacts, auto_max_offsets
from eventlake.context import FlowContext
from eventlake.kafka import produce, topic_offsets
from eventlake.pipelines import Pipeline
from eventlake.pipelines.runner import preflight_inputs
from eventlake.scope import RunScope
from eventlake.testing import delta_version, read_delta, run_available_now, settings_for

pytestmark = pytest.mark.integration

EVENTS = 10_000


ingest = Pipeline("ingest")


@ingest.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return kafka_records(df)


def _run_bronze(root: Path, bootstrap: str, **params: object) -> tuple[int, int]:
    """One available-now run of the bronze flow: (batches with rows, rows read)."""
    result = run_available_now(ingest, settings_for(root, bootstrap, ingest=params))
    totals = result.flows.get("ingest.bronze")  # no batch ran: no progress, no totals
    return (totals.batches, totals.input_rows) if totals else (0, 0)


def _rows_read(root: Path, bootstrap: str, topic: str) -> int:
    """The rows one available-now run of at most 4,000 offsets a batch read."""
    return _run_bronze(root, bootstrap, topic=topic, max_offsets_per_trigger=4_000)[1]


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

    written = _rows_read(root, bootstrap, topic)
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

    # A sink table's log checkpoints are eventlake's, off the batch's path: Delta's inline
    # one never comes due.
    configuration = DeltaTable(str(table)).metadata().configuration
    assert configuration["delta.checkpointInterval"] == str(2**31 - 1)

    # Restarting on the same checkpoint with no new input writes nothing.
    version = delta_version(table)
    assert _rows_read(root, bootstrap, topic) == 0
    assert read_delta(table).num_rows == EVENTS
    assert delta_version(table) == version

    # New input after the restart: exactly the new records are added.
    produce(bootstrap, topic, ((f"n-{i}", json.dumps({"order_id": f"n-{i}"})) for i in range(25)))
    assert _rows_read(root, bootstrap, topic) == 25
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


def test_auto_batch_size_follows_record_bytes(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """``max_offsets_per_trigger: auto`` (the default) sizes a batch as
    ``max_bytes_per_trigger`` over the topic's key + value bytes plus 64 per row."""
    topic = make_topic(partitions=3)
    # Key "k0000" (5 bytes) + value of 195 bytes: 200 bytes a record, 264 with the overhead.
    produce(bootstrap, topic, ((f"k{i % 10_000:04d}", "v" * 195) for i in range(12_000)))
    flow = ingest.configs(settings_for(tmp_path, bootstrap, ingest={"topic": topic}))["bronze"]
    size = TopicFacts().record_bytes(flow, [topic])
    assert size == 200
    assert auto_max_offsets(flow, size) == (256 * 1024 * 1024) // 264

    # The default bound takes the whole 12,000-record backlog in one batch...
    assert _run_bronze(tmp_path / "auto", bootstrap, topic=topic) == (1, 12_000)
    # ... the old default of 10,000 offsets cut it in two...
    assert (
        _run_bronze(tmp_path / "fixed", bootstrap, topic=topic, max_offsets_per_trigger=10_000)[0]
        == 2
    )
    # ... and a byte budget of 5,000 such records bounds each batch to 5,000: three batches.
    budget = {"topic": topic, "max_bytes_per_trigger": 5_000 * 264}
    assert _run_bronze(tmp_path / "bytes", bootstrap, **budget) == (3, 12_000)


def test_a_run_asks_a_topics_record_size_and_partitions_once_in_its_preflight(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """The pre-flight (while the JVM starts) asks the broker what ``auto`` params need and
    the run keeps the answer: records produced after it do not change what the run plans
    with, and a new run asks again."""
    topic = make_topic(partitions=2)
    produce(bootstrap, topic, ((f"k{i % 10}", "v" * 98) for i in range(1_000)))  # 100 bytes
    configs = ingest.configs(settings_for(tmp_path, bootstrap, ingest={"topic": topic}))
    with RunScope() as run:
        preflight_inputs(ingest, configs, run)
        produce(bootstrap, topic, ((f"k{i % 10}", "v" * 998) for i in range(1_000)))  # the tail
        facts = run.service(TopicFacts)
        assert facts.record_bytes(configs["bronze"], [topic]) == 100
        assert facts.partitions(configs["bronze"], [topic]) == 2
    assert TopicFacts().record_bytes(configs["bronze"], [topic]) == 1_000


def test_min_partitions_auto_reads_three_partitions_in_six_tasks_on_two_cores(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """With ``min_partitions: auto`` on 2 cores, each of 3 partitions is read in 2 tasks:
    the stateless batch writes a file per task, and every record once."""
    topic = make_topic(partitions=3)
    produce(bootstrap, topic, ((f"k{i}", f"v{i}") for i in range(3_000)))
    ends = topic_offsets(bootstrap, topic)
    files = {}
    for tasks in ("auto", None):
        root = tmp_path / str(tasks)
        assert _run_bronze(root, bootstrap, topic=topic, min_partitions=tasks) == (1, 3_000)
        table = root / "lake" / "bronze" / "orders"
        files[tasks] = len(DeltaTable(str(table)).file_uris())
        arrow = read_delta(table)
        pairs = zip(arrow.column("partition").to_pylist(), arrow.column("offset").to_pylist(),
                    strict=True)  # fmt: skip
        assert sorted(pairs) == sorted((p, o) for p, end in ends.items() for o in range(end))
    assert files == {"auto": 6, None: 3}
