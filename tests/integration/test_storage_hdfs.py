"""eventlake's own files on a real HDFS (a MiniDFSCluster), through Spark's Hadoop client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.checkpoints import CheckpointLog, Fingerprint, read_fingerprint, write_fingerprint
from eventlake.config.loader import settings_from_dict
from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.connectors.kafka import kafka_records
from eventlake.context import FlowContext
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.kafka import produce
from eventlake.pipelines import Pipeline
from eventlake.processes import free_port
from eventlake.storage import Location, filesystem
from eventlake.storage.hadoop import HadoopStorage
from eventlake.testing import run_available_now, unique_name
from eventlake.testing.hdfs import EmbeddedHdfs

pytestmark = pytest.mark.integration


def test_hadoop_storage_round_trip_on_hdfs(
    spark: SparkSession, hdfs: EmbeddedHdfs, tmp_path: Path
) -> None:
    root = Location(f"{hdfs.uri}/{unique_name('fs')}")
    fs = filesystem(root)
    assert isinstance(fs, HadoopStorage)
    assert fs.list_names(root) == []
    assert not fs.exists(root)
    fs.write_text(root / "a" / "b.json", '{"n": 1}')
    fs.write_text(root / "a" / "b.json", '{"n": 2}')  # replaced, not refused
    assert fs.read_text(root / "a" / "b.json") == '{"n": 2}'
    assert fs.list_names(root / "a") == ["b.json"]
    assert fs.is_dir(root / "a")
    assert fs.is_file(root / "a" / "b.json")
    assert not fs.is_file(root / "a")
    assert fs.size(root) == len('{"n": 2}')
    assert fs.modified(root / "a" / "b.json") is not None
    assert fs.modified(root / "none") is None
    with pytest.raises(FileNotFoundError):
        fs.read_text(root / "none")
    # A folder copied to the local disk, without Hadoop's .crc files.
    fs.copy_to_local(root / "a", tmp_path / "copy")
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["b.json"]
    assert (tmp_path / "copy" / "b.json").read_text() == '{"n": 2}'
    # What Spark wrote is read by eventlake: the URI Spark sees is the one we list.
    spark.range(3).write.format("delta").save(str(root / "t"))
    assert "_delta_log" in fs.list_names(root / "t")
    fs.delete(root)
    assert not fs.exists(root)


def test_a_streaming_checkpoint_on_hdfs_is_read_by_the_checkpoint_log(
    spark: SparkSession, hdfs: EmbeddedHdfs
) -> None:
    root = Location(f"{hdfs.uri}/{unique_name('cp')}")
    checkpoint = root / "cp"
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .writeStream.format("delta").option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start(str(root / "table"))
    )  # fmt: skip
    query.awaitTermination(120)
    log = CheckpointLog(checkpoint)
    assert log.planned == log.committed
    assert log.last_committed is not None
    assert log.in_flight is None
    # The fingerprint is written once; a later start records only what it may change
    # (sink, output mode, watermarks). Read back from HDFS.
    mark = Fingerprint("p.f", "rate", "delta", "append", ())
    write_fingerprint(checkpoint, mark)
    write_fingerprint(checkpoint, Fingerprint("other", "x", "y", "update", ("d",), ("ts 5",)))
    assert read_fingerprint(checkpoint) == {
        "flow": "p.f",
        "source": "rate",
        "sink": "y",
        "output_mode": "update",
        "stateful": [],
        "watermarks": ["ts 5"],
    }


def test_an_unreachable_filesystem_is_el_storage_001(spark: SparkSession) -> None:
    where = Location(f"hdfs://127.0.0.1:{free_port()}/lake")
    # The client retries a refused connection; keep it short for the test.
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    conf.set("ipc.client.connect.max.retries", "0")
    try:
        with pytest.raises(EventlakeError) as raised:
            filesystem(where).exists(where)
    finally:
        conf.unset("ipc.client.connect.max.retries")
    assert raised.value.code == ErrorCode.STORAGE_UNAVAILABLE
    assert str(where) in str(raised.value)


def test_a_sink_table_on_hdfs_gets_its_log_checkpoints_from_spark(
    spark: SparkSession, hdfs: EmbeddedHdfs, bootstrap: str, make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:  # fmt: skip
    topic = make_topic(partitions=1)
    pipeline = Pipeline(unique_name("hdfs_ckpt").replace("-", "_"))

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
    def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return kafka_records(df)

    root = Location(f"{hdfs.uri}/{unique_name('lake')}")
    params = {"topic": topic, "max_offsets_per_trigger": 1}
    settings = settings_from_dict({
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": str(root), "log_checkpoint_commits": 3},
        "checkpoints": {"root": str(tmp_path / "checkpoints")},
        "spark": {"master": "local[2]"},
        "pipelines": {pipeline.name: params},
    })  # fmt: skip
    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(7)])

    run_available_now(pipeline, settings)

    log = root / "bronze" / "events" / "_delta_log"
    names = filesystem(log).list_names(log)
    checkpoints = sorted(int(n[:20]) for n in names if n.endswith(".checkpoint.parquet"))
    assert checkpoints  # versions 0-7: one at 3 or later, by Delta's checkpoint through Spark
    assert checkpoints[0] >= 3
    assert "_last_checkpoint" in names
    table = spark.read.format("delta").load(str(root / "bronze" / "events"))
    assert sorted(r.key for r in table.select("key").collect()) == [f"k{i}" for i in range(7)]
