"""The progress listener on a real query: each batch's rows, state, watermark and observed
counts arrive as Spark reported them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from eventlake.monitoring.observed import count_output, count_quarantined
from eventlake.monitoring.progress import BatchProgress
from eventlake.pipelines.runner import ran_a_batch
from eventlake.testing import listening, wait_until

pytestmark = pytest.mark.integration

#: Rows per file; the query reads one file a batch. Every third row is "bad".
FILES = (5, 7, 11)


def test_each_batch_reaches_the_listener_with_its_counts(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "events"
    start = 0
    for n, rows in enumerate(FILES):
        frame = spark.range(start, start + rows).select(
            F.col("id"),
            (F.lit(f"2026-01-01 12:0{n}:00").cast("timestamp")).alias("event_time"),
            (F.col("id") % 3 == 0).alias("bad"),
        )
        frame.coalesce(1).write.parquet(str(source / f"f{n}"))
        start += rows
    bad = [sum(1 for i in range(sum(FILES[:n]), sum(FILES[: n + 1])) if i % 3 == 0)
           for n in range(len(FILES))]  # fmt: skip

    seen: list[BatchProgress] = []
    with listening(spark) as listener:
        listener.observers.append(seen.append)
        stream = (
            spark.readStream.schema("id LONG, event_time TIMESTAMP, bad BOOLEAN")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source / "*"))
            .withWatermark("event_time", "1 minute")
            .dropDuplicatesWithinWatermark(["id"])
        )
        counted = count_quarantined(count_output(stream).where("bad"))
        query = (
            counted.writeStream.format("noop")
            .queryName("progress_counts")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        wait_until(
            lambda: len([p for p in seen if p.input_rows]) == len(FILES) or None,
            what="a progress event for each file's batch",
        )

    with_rows = [p for p in seen if p.input_rows]
    assert [p.query for p in with_rows] == ["progress_counts"] * len(FILES)
    assert [p.input_rows for p in with_rows] == list(FILES)
    assert [p.output_rows for p in with_rows] == list(FILES)
    assert [p.quarantined_rows for p in with_rows] == bad
    # As the query itself recorded each batch.
    recorded = {p["batchId"]: p for p in query.recentProgress}
    for p in seen:
        spark_side = recorded[p.batch_id]
        assert p.state_rows == spark_side["stateOperators"][0]["numRowsTotal"]
        assert p.watermark == (spark_side["eventTime"].get("watermark") if p.batch_id else None)
        assert p.batch_duration_ms == spark_side["batchDuration"]
        assert p.phases_ms == spark_side["durationMs"]
        assert "addBatch" in p.phases_ms
    assert with_rows[-1].watermark == "2026-01-01T12:00:00.000Z"  # 12:01, less 1 minute
    assert [p.operators[0][0] for p in with_rows] == ["dedupeWithinWatermark"] * len(FILES)
    totals = listener.snapshot()["progress_counts"]
    assert totals.input_rows == sum(FILES)
    assert totals.quarantined_rows == sum(bad)


def test_a_trigger_that_ran_nothing_is_in_last_progress_but_never_reaches_the_listener(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Why the runner waits only for batches that ran (``ran_a_batch``): a restart with
    nothing new records an idle trigger in ``lastProgress`` that no listener receives, and
    waiting for it cost every such run the wait's whole timeout."""
    source, checkpoint = tmp_path / "events", tmp_path / "checkpoint"
    spark.range(4).coalesce(1).write.parquet(str(source))

    def run(name: str, folder: Path, path: Path) -> StreamingQuery:
        query = (
            spark.readStream.schema("id LONG").parquet(str(path))
            .writeStream.format("noop").queryName(name)
            .option("checkpointLocation", str(folder))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        assert query.awaitTermination(300)
        return query

    seen: list[BatchProgress] = []
    with listening(spark) as listener:
        listener.observers.append(seen.append)
        first = run("ran_then_idle", checkpoint, source)
        assert first.lastProgress["batchId"] == 0
        assert ran_a_batch(first.lastProgress)
        again = run("ran_then_idle", checkpoint, source)  # the same checkpoint, nothing new
        idle = again.lastProgress
        assert idle["batchId"] == 1
        assert idle["numInputRows"] == 0
        assert not ran_a_batch(idle)
        # The listener bus delivers in order: once a later query's batch has arrived, the
        # idle trigger would have too.
        marker = tmp_path / "marker"
        spark.range(1).write.parquet(str(marker))
        run("after_the_idle_trigger", tmp_path / "marker-checkpoint", marker)
        wait_until(lambda: any(p.query == "after_the_idle_trigger" for p in seen) or None,
                   what="the later query's batch at the listener")  # fmt: skip
    assert [(p.query, p.batch_id) for p in seen] == [
        ("ran_then_idle", 0), ("after_the_idle_trigger", 0),
    ]  # fmt: skip
    assert listener.snapshot()["ran_then_idle"].last_batch_id == 0
