"""RocksDB state for a million keys, bounded by the watermark: state rows rise to one per
key and window, then fall back once the watermark passes the windows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eventlake.session import ROCKSDB_PROVIDER
from eventlake.testing import listening, wait_until

pytestmark = pytest.mark.integration
KEYS = 1_000_000


def test_million_key_aggregation_state_falls_back_after_the_watermark(
    spark: SparkSession, tmp_path: Path
) -> None:
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == ROCKSDB_PROVIDER
    source = tmp_path / "events"
    # File 1: a million distinct keys at 12:00. File 2: one key an hour later.
    spark.range(KEYS).select(
        F.concat(F.lit("k"), F.col("id")).alias("key"),
        F.lit("2026-01-01 12:00:00").cast("timestamp").alias("event_time"),
    ).coalesce(1).write.parquet(str(source / "a"))
    late = spark.createDataFrame([("late-key", "2026-01-01 13:00:00")], "key STRING, t STRING")
    late.select("key", F.col("t").cast("timestamp").alias("event_time")).write.parquet(
        str(source / "b")
    )

    with listening(spark) as listener:
        counts = (
            spark.readStream.schema("key STRING, event_time TIMESTAMP")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source / "*"))
            .withWatermark("event_time", "10 minutes")
            .groupBy(F.window("event_time", "5 minutes"), "key")
            .count()
        )
        query = (
            counts.writeStream.format("noop")
            .queryName("million_keys")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        wait_until(
            lambda: listener.snapshot().get("million_keys") or None,
            what="the last progress event",
        )
        wait_until(
            lambda: listener.snapshot()["million_keys"].batches == len(query.recentProgress),
            what="every progress event",
        )
    totals = listener.snapshot()["million_keys"]
    states = [int(p.stateOperators[0].numRowsTotal) for p in query.recentProgress]
    assert totals.peak_state_rows >= KEYS
    assert max(states) >= KEYS
    # The no-data batch after the late key moved the watermark to 12:50 evicts every
    # 12:00 window: what is left is the one open window.
    assert states[-1] == 1
    assert totals.state_rows == 1
