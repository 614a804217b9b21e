"""Faults on real components: HDFS (a MiniDFSCluster's NameNode and DataNode, one JVM)
SIGKILLed under a running flow whose lake and checkpoints are on it, kept away, then
restarted on the same port and storage. The flow rides it out or restarts by itself, and
the Delta table on HDFS ends with every record once. The recovery time, from HDFS's
restart to the table holding every record, is printed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.config import RestartSettings
from eventlake.config.loader import settings_from_dict
from eventlake.kafka import produce
from eventlake.testing import running_pipeline, unique_name, wait_until
from eventlake.testing.hdfs import EmbeddedHdfs
from tests.faults.bronze import assert_each_once, bronze_pipeline, caught_up

pytestmark = pytest.mark.integration

OUTAGE = 10.0


def test_hdfs_restarted_under_a_flow_whose_lake_and_checkpoints_are_on_it(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    topic = make_topic(partitions=2, prefix="hdfs-fault")
    hdfs = EmbeddedHdfs(tmp_path / "hdfs")
    hdfs.start()
    root = f"{hdfs.uri}/{unique_name('lake')}"
    settings = settings_from_dict({
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": f"{root}/lake"},
        "checkpoints": {"root": f"{root}/checkpoints"},
        "spark": {"master": "local[2]"},
        "pipelines": {"on_hdfs": {"topic": topic}},
    }).model_copy(update={"restart": RestartSettings(max_delay="10 seconds")})  # fmt: skip
    table = f"{root}/lake/bronze/events"

    def offsets() -> list[tuple[int, int]]:
        try:
            rows = spark.read.format("delta").load(table).select("partition", "offset").collect()
        except Exception:  # not yet created, or HDFS still leaving safe mode
            return []
        return sorted((r.partition, r.offset) for r in rows)

    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(300)])
    try:
        with running_pipeline(bronze_pipeline("on_hdfs"), settings, trigger="2 seconds") as run:
            wait_until(lambda: len(offsets()) == 300, timeout=120,
                       what="the first records in bronze on HDFS")  # fmt: skip
            pid = hdfs.process.pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: hdfs.process.pid() is None, timeout=30,
                       what="HDFS gone")  # fmt: skip
            produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(300, 600)])
            time.sleep(OUTAGE)  # the fault itself: HDFS stays away this long
            hdfs.start(format=False)
            produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(600, 900)])
            recovery = caught_up(lambda: len(offsets()), 900, timeout=300,
                                 what="every record in bronze after HDFS came back")  # fmt: skip
        assert_each_once(offsets(), 900)
    finally:
        hdfs.stop()
    assert run.result is not None
    restarts = run.result.restarts.get("on_hdfs.bronze", 0)
    with capsys.disabled():
        print(
            f"\n[fault] HDFS (NameNode + DataNode) away {OUTAGE:.0f} s: bronze caught up "
            f"{recovery:.1f} s after it came back, {restarts} restart(s) of the flow"
        )
