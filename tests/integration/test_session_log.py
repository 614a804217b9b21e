"""What the driver JVM writes to the run's log file: warnings, less Spark's per-batch noise,
at the start of the file after a rotation."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.operations.log_rotation import LogRotation, rotated
from eventlake.scope import BatchMemo
from eventlake.testing import wait_until

pytestmark = pytest.mark.integration

SPARK_RELEASE_WARNING = (
    "RDD {} was locally checkpointed, its lineage has been truncated and cannot be "
    "recomputed after unpersisting"
)


def _jvm_log(spark: SparkSession) -> Path:
    """The file the driver JVM's stderr (its log4j console) is written to."""
    jvm = spark._jvm
    assert jvm is not None
    pid = jvm.java.lang.ProcessHandle.current().pid()
    return Path(os.readlink(f"/proc/{pid}/fd/2"))


def test_released_batch_memos_leave_no_warning_in_the_log(spark: SparkSession) -> None:
    log = _jvm_log(spark)
    start = log.stat().st_size
    memo = BatchMemo()
    first = memo.get("flow", "rows", ("stream", 0), lambda: spark.range(10))
    assert first.count() == 10
    rdd = first._jdf.logicalPlan().rdd()
    assert rdd.isLocallyCheckpointed()

    second = memo.get("flow", "rows", ("stream", 1), lambda: spark.range(5))  # releases the first
    assert second.count() == 5
    assert not rdd.getStorageLevel().useMemory()  # released: Spark logged its warning
    memo.close()
    # Spark's exact words, through its own logger; then a warning that must get through.
    jvm = spark._jvm
    assert jvm is not None
    logger = jvm.org.apache.logging.log4j.LogManager.getLogger(
        "org.apache.spark.rdd.MapPartitionsRDD"
    )
    logger.warn(SPARK_RELEASE_WARNING.format(rdd.id()))
    marker = f"eventlake test warning {uuid.uuid4()}"
    logger.warn(marker)

    def written() -> str | None:
        with log.open(errors="replace") as f:
            f.seek(start)
            text = f.read()
        return text if marker in text else None

    text = wait_until(written, timeout=30, what="the marker warning in the JVM's log")
    assert "was locally checkpointed" not in text


def test_the_jvm_writes_at_the_start_of_its_rotated_log(spark: SparkSession) -> None:
    """The JVM keeps its log open: after a rotation it writes at the emptied file's start
    (not at its old offset after a hole), and what it wrote before is in ``<log>.1``."""
    log = _jvm_log(spark)
    jvm = spark._jvm
    assert jvm is not None
    logger = jvm.org.apache.logging.log4j.LogManager.getLogger("eventlake.test.rotation")
    before = f"eventlake test before the rotation {uuid.uuid4()}"
    logger.warn(before)
    wait_until(lambda: before in log.read_text(errors="replace"), timeout=30,
               what="the first marker in the JVM's log")  # fmt: skip
    size = log.stat().st_size
    rotation = LogRotation(log, max_bytes=size - 1, keep=2, check_seconds=0.1)
    rotation.start()
    try:
        wait_until(lambda: rotation.rotations == 1, timeout=30, what="the log rotated")
    finally:
        rotation.close()
    after = f"eventlake test after the rotation {uuid.uuid4()}"
    logger.warn(after)

    def written() -> bytes | None:
        text = log.read_bytes()
        return text if after.encode() in text else None

    text = wait_until(written, timeout=30, what="the second marker in the JVM's log")
    assert b"\0" not in text  # no hole where the old content was
    assert len(text) < size
    assert before.encode() not in text
    assert before in rotated(log, 1).read_text(errors="replace")
