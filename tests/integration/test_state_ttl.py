"""Why the custom sessions keep no state TTL: Spark 4.2 refuses TTL for a processor in
event-time mode. If a later Spark accepts it, this test fails and the sessions processor
should add TTL as a second bound next to its timers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

pytestmark = pytest.mark.integration


class _WithTtl(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        handle.getListState("open_sessions", "start_ms LONG", ttlDurationMs=60_000)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        return iter(())

    def close(self) -> None:
        pass


def test_spark_refuses_state_ttl_in_event_time_mode(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    event = {"user_id": "u1", "event_time": "2026-03-01T12:00:00Z"}
    (source / "a.json").write_text(json.dumps(event) + "\n")
    events = (
        spark.readStream.schema("user_id STRING, event_time TIMESTAMP")
        .json(str(source))
        .withWatermark("event_time", "10 minutes")
    )
    out = events.groupBy("user_id").transformWithState(
        statefulProcessor=_WithTtl(),
        outputStructType="user_id STRING",
        outputMode="Append",
        timeMode="EventTime",
    )
    query = (
        out.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        with pytest.raises(StreamingQueryException) as info:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL" in str(info.value)
