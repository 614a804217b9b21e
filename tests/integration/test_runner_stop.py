"""A graceful stop lets the running batch commit: no offsets entry is left without its commit."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from eventlake.checkpoints import CheckpointLog
from eventlake.connectors import DeltaOutput, RateInput
from eventlake.pipelines import Pipeline, runner
from eventlake.pipelines.runner import end_after_current_batch, stop_queries
from eventlake.run import run_pipeline
from eventlake.testing import settings_for, wait_until

pytestmark = pytest.mark.integration


def _logged(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("[0-9]*")}


def test_graceful_stop_finishes_the_running_batch(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, str]] = []
    marked = threading.Event()

    def mark(q: StreamingQuery) -> Any | None:
        thread = end_after_current_batch(q)
        marked.set()
        return thread

    monkeypatch.setattr(runner, "end_after_current_batch", mark)

    def slow(df: DataFrame, batch_id: int) -> None:
        seen.append((batch_id, "start"))
        if batch_id == 1:  # still running when the stop comes; it ends only after that
            assert marked.wait(timeout=60)
        seen.append((batch_id, "end"))

    checkpoint = tmp_path / "cp"
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 5).load()
        .writeStream.foreachBatch(slow).option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="1 second").start()
    )  # fmt: skip
    try:
        wait_until(lambda: (1, "start") in seen, timeout=60, what="batch 1 to start")
        assert query.status["isTriggerActive"]
        stop_queries([query], graceful=True)
    finally:
        query.stop()
    assert query.exception() is None
    assert marked.is_set()
    # Batch 1 was running when the stop came: it ran to its end and committed, and no
    # batch started after it.
    assert seen[-1] == (1, "end")
    assert _logged(checkpoint / "offsets") == _logged(checkpoint / "commits") == {"0", "1"}


def test_idle_query_stops_without_waiting_for_its_next_trigger(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 1).load()
        .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="10 minutes").start()
    )  # fmt: skip
    try:
        wait_until(lambda: query.lastProgress is not None, timeout=60, what="the first batch")
        wait_until(lambda: not query.status["isTriggerActive"], timeout=30, what="idle")
        marks: list[object] = []

        def spy(q: StreamingQuery) -> object:
            marks.append(end_after_current_batch(q))
            return marks[-1]

        monkeypatch.setattr(runner, "end_after_current_batch", spy)
        started = time.monotonic()
        runner.stop_queries([query], graceful=True)
        assert time.monotonic() - started < 10
        assert marks == [marks[0]]
        assert marks[0] is not None  # the Spark internals it relies on are there
    finally:
        query.stop()
    assert not query.isActive
    assert _logged(tmp_path / "cp" / "offsets") == _logged(tmp_path / "cp" / "commits")


def test_runner_finishes_a_batch_that_a_stop_cut_short(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = Pipeline("ticks")

    @ticks.flow(name="slow", input=RateInput(rows_per_second=4),
                output=DeltaOutput("bronze", "ticks"), trigger="1 second")  # fmt: skip
    def slow(ctx: Any, df: DataFrame) -> DataFrame:
        pause = F.udf(lambda v: time.sleep(0.25) or v, "long")
        return df.select("timestamp", pause("value").alias("value"))

    settings = settings_for(tmp_path)
    checkpoint = ticks.configs(settings)["slow"].checkpoint
    cut: list[int | None] = []

    def abrupt(queries: list[StreamingQuery], *, graceful: bool = False) -> None:
        # Spark's own stop(), in the middle of a batch whose offsets are logged.
        for query in queries:

            def mid_batch(query: StreamingQuery = query) -> bool:
                processing = query.status["message"] == "Processing new data"
                return processing and CheckpointLog(checkpoint).in_flight is not None

            wait_until(mid_batch, timeout=60, interval=0.01, what="a batch in flight")
            query.stop()
        cut.append(CheckpointLog(checkpoint).in_flight)

    monkeypatch.setattr(runner, "stop_queries", abrupt)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            run_pipeline(ticks, settings, stop=stop)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    wait_until(lambda: CheckpointLog(checkpoint).last_committed is not None, timeout=120,
               what="a first commit")  # fmt: skip
    stop.set()
    worker.join(timeout=180)
    assert not worker.is_alive()
    assert errors == []

    log = CheckpointLog(checkpoint)
    assert cut[0] is not None  # the stop did leave a batch in flight ...
    assert log.in_flight is None  # ... and the runner completed it
    assert log.last_committed == cut[0]
    assert spark.read.format("delta").load(str(tmp_path / "lake" / "bronze" / "ticks")).count() > 0
