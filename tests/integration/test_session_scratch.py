"""The driver JVM keeps its temporary files, and Spark its local files (RocksDB's working
copies of state among them), in the process's scratch folder, not /tmp."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventlake.scratch import LOCK
from eventlake.testing import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def test_the_jvm_and_a_stateful_query_keep_their_files_in_the_scratch_folder(
    spark: SparkSession, tmp_path: Path
) -> None:
    jvm = spark._jvm
    assert jvm is not None
    java_tmp = Path(jvm.System.getProperty("java.io.tmpdir"))
    folder = java_tmp.parent
    assert java_tmp.name == "tmp"
    # This process's claim (whichever test's settings started the session chose its root).
    assert folder.parent.name == "scratch"
    assert folder.name.startswith(f"{os.getpid()}-")
    local_dir = Path(spark.sparkContext.getConf().get("spark.local.dir"))
    assert local_dir == folder / "spark"
    # Spark's own folders are there: the block manager's, and files it unpacked.
    assert any(p.name.startswith("blockmgr-") for p in local_dir.iterdir())
    assert any(java_tmp.iterdir())
    # This process holds the folder's lock (its JVM too): no other claim takes it.
    fd = os.open(folder / LOCK, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)

    stream = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 50).load()
    query = (
        stream.withWatermark("timestamp", "10 seconds").dropDuplicates(["value"])
        .writeStream.format("noop").trigger(processingTime="1 second")
        .option("checkpointLocation", str(tmp_path / "cp")).start()
    )  # fmt: skip
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 1, timeout=120,
                   what="two batches of the de-duplication")  # fmt: skip
        # RocksDB's working copy of each state partition: its SST and manifest files.
        stores = [p for p in local_dir.rglob("StateStoreId(opId=0*") if p.is_dir()]
        assert stores, sorted(str(p) for p in local_dir.rglob("*"))[:20]
        assert any(f.name.startswith("MANIFEST-") for s in stores for f in s.rglob("*"))
    finally:
        query.stop()
