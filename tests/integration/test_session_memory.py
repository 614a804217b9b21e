"""eventlake's Spark session does not keep a read's buffers: reading a large Parquet file
(as downstream flows and table maintenance read compacted tables) leaves the JVM's direct
memory where it was, instead of growing by the size of the largest column chunk read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

ROWS = 400_000  # one file, one row group: its hash column's chunk is about 26 MB


def _direct_bytes(spark: SparkSession) -> int:
    jvm = spark._jvm
    assert jvm is not None
    pool_class = jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean")
    pools = jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(pool_class)
    return sum(int(p.getMemoryUsed()) for p in pools if p.getName() == "direct")


def test_reading_a_large_file_leaves_direct_memory_where_it_was(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "wide")
    digest = F.sha2(F.col("id").cast("string"), 256).alias("digest")
    spark.range(ROWS).select("id", digest).coalesce(1).write.format("delta").save(path)
    chunk = sum(f.stat().st_size for f in Path(path).glob("*.parquet"))
    assert chunk > 20 * 2**20  # incompressible hex: the file is the column chunk, nearly

    before = _direct_bytes(spark)
    for _ in range(3):
        table = spark.read.format("delta").load(path)
        row = table.agg(F.count("*").alias("n"), F.countDistinct("digest").alias("d")).head()
        assert row is not None
        assert (row["n"], row["d"]) == (ROWS, ROWS)
    grown = _direct_bytes(spark) - before
    # Parquet's vectored reads through NIO keep a buffer of the chunk's size in each task
    # thread: with Spark 4.2's defaults this grew by 52 MiB.
    assert grown < 8 * 2**20, f"grew {grown >> 20} MiB reading a {chunk >> 20} MiB file"
