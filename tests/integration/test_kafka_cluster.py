"""A 3-broker KRaft cluster: topics get 3 copies with min.insync.replicas 2, and a flow
reading it keeps going while the leader of a partition is SIGKILLed and restarted,
losing and duplicating nothing in Delta."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, PartitionMetadata, ResourceType
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.connectors.kafka import kafka_records
from eventlake.context import FlowContext
from eventlake.kafka import EmbeddedKafkaCluster, create_topic, produce
from eventlake.pipelines import Pipeline
from eventlake.testing import read_delta, running_pipeline, settings_for, unique_name, wait_until

pytestmark = pytest.mark.integration
RECORDS, CHUNK = 3000, 100

replicated = Pipeline("replicated")


@replicated.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every record as received."""
    return kafka_records(df)


def _rows(path: Path) -> int:
    return read_delta(path).num_rows if (path / "_delta_log").is_dir() else 0


def test_replicated_topics_and_a_flow_that_outlives_a_broker(
    spark: SparkSession, kafka_cluster: EmbeddedKafkaCluster, tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = unique_name("replicated")
    create_topic(bootstrap, topic, partitions=3)
    admin = AdminClient({"bootstrap.servers": bootstrap})

    partitions: dict[int, PartitionMetadata] = {}

    def all_partitions_seen() -> bool:
        # Each call may ask a different broker, one that has not yet applied the topic's
        # metadata, so the answer checked is the answer kept.
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        partitions.clear()
        if found is not None and found.error is None:
            partitions.update(found.partitions)
        return len(partitions) == 3 and all(p.leader > 0 for p in partitions.values())

    wait_until(all_partitions_seen, timeout=30, what="the topic and its leaders on a broker")
    assert [len(p.replicas) for p in partitions.values()] == [3, 3, 3]
    resource = ConfigResource(ResourceType.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["min.insync.replicas"].value == "2"
    victim = kafka_cluster.nodes[partitions[0].leader - 1]

    settings = settings_for(tmp_path, bootstrap, replicated={"topic": topic})
    table = tmp_path / "lake" / "bronze" / "events"
    sent = threading.Event()

    def producer() -> None:
        for start in range(0, RECORDS, CHUNK):
            produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(start, start + CHUNK)])
        sent.set()

    with running_pipeline(replicated, settings, trigger="1 second"):
        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        wait_until(lambda: _rows(table) > 0, timeout=120, what="a first batch in Delta")
        pid = victim.status().pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not victim.status().running, timeout=30, what="the broker to die")
        at_kill = _rows(table)
        # Partition 0's leader is gone: its records now come from another replica.
        wait_until(lambda: _rows(table) > at_kill, timeout=120, what="batches without it")
        victim.start()
        wait_until(sent.is_set, timeout=180, what="every record acknowledged")
        wait_until(lambda: _rows(table) >= RECORDS, timeout=120, what="every record in Delta")
    thread.join(10)

    keys = read_delta(table).column("key").to_pylist()
    assert len(keys) == RECORDS
    assert set(keys) == {f"k{i}" for i in range(RECORDS)}
    assert victim.status().running
