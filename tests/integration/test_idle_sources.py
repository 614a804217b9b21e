"""Idle sources: with idle_timeout, a quiet topic no longer holds the last windows open.
Once the flow has processed every record and none arrived for idle_timeout, heartbeats
move its watermark to the clock minus the delay and the windows are written."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.checkpoints import CheckpointLog
from eventlake.kafka import produce
from eventlake.testing import read_delta, running_pipeline, settings_for, wait_until
from eventlake.validation.upgrade import upgrade_verdicts
from tests.integration.quiet_pipeline import quiet

pytestmark = pytest.mark.integration

IDLE_SECONDS = 8


def test_windows_close_when_the_topic_goes_quiet(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    # An hour ago, in two windows; the newest event holds the watermark at start + 7 min,
    # before either window ends, so without traffic neither would ever close.
    start = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    at = [start + timedelta(minutes=m) for m in (1, 2, 12)]
    produce(bootstrap, topic, [("u", json.dumps({"user": "u", "ts": t.isoformat()})) for t in at])
    produced = time.time()  # the newest record's arrival: idleness counts from here
    params = {"topic": topic, "trigger": "1 second", "idle_timeout": f"{IDLE_SECONDS} seconds"}
    settings = settings_for(tmp_path, bootstrap, quiet=params)
    table = tmp_path / "lake" / "gold" / "clicks_10min"
    log = CheckpointLog(tmp_path / "checkpoints" / "quiet" / "per_window")

    with running_pipeline(quiet, settings):
        wait_until(lambda: log.last_committed is not None, timeout=120, what="the first batch")
        data_done = time.time()
        assert read_delta(table).num_rows == 0  # the event-time watermark closed nothing
        wait_until(lambda: read_delta(table).num_rows >= 2, timeout=120, interval=0.1,
                   what="the windows closed by the idle watermark")  # fmt: skip
        closed = time.time()
    # The run's answer files, and their folder, went with it.
    assert not (Path(tempfile.gettempdir()) / f"eventlake-idle-{os.getpid()}").exists()
    closed_after, quiet_for = closed - data_done, closed - produced
    # Open until the input was quiet for idle_timeout; closed within a few 1-second batches
    # of when it was both quiet that long and processed.
    assert quiet_for >= IDLE_SECONDS, quiet_for
    assert closed - max(produced + IDLE_SECONDS, data_done) <= 15

    rows = read_delta(table).to_pylist()
    got = sorted((r["window"]["start"].replace(tzinfo=UTC), r["count"]) for r in rows)
    assert got == [(start, 2), (start + timedelta(minutes=10), 1)]
    # The heartbeat is a source of the query: dropping idle_timeout needs a new checkpoint.
    without = settings_for(tmp_path, bootstrap, quiet={"topic": topic, "trigger": "1 second"})
    [found] = upgrade_verdicts(quiet, without, spark)
    assert found.outcome == "cannot resume"
    assert "the query reads 1 source(s), its checkpoint has offsets of 2" in found.reasons
    # A checkpoint from before the heartbeat source, whose heartbeats were the rate
    # source's (a bare number in the offsets log), cannot resume with it either.
    entry = log.root / "offsets" / str(log.planned[-1])
    lines = entry.path.read_text().splitlines()
    lines = [ln if '"beats"' not in ln else "42" for ln in lines]
    entry.path.write_text("\n".join(lines) + "\n")
    [old] = upgrade_verdicts(quiet, settings, spark)
    assert old.outcome == "cannot resume"
    assert any("rate source" in r for r in old.reasons), old.reasons
    print(f"windows written {closed_after:.1f}s after the data batch, {quiet_for:.1f}s after "
          f"the newest record (idle_timeout {IDLE_SECONDS}s, trigger 1s)")  # fmt: skip


def test_a_flow_that_never_read_a_record_keeps_its_watermark_off_the_clock(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Started on an empty topic, the flow stays idle-proof: a backlog of hour-old events
    produced afterwards is processed, not dropped as late by a clock-driven watermark."""
    topic = make_topic()
    params = {"topic": topic, "trigger": "1 second", "idle_timeout": "2 seconds"}
    settings = settings_for(tmp_path, bootstrap, quiet=params)
    table = tmp_path / "lake" / "gold" / "clicks_10min"
    log = CheckpointLog(tmp_path / "checkpoints" / "quiet" / "per_window")
    start = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    at = [start + timedelta(minutes=m) for m in (1, 2, 12)]

    with running_pipeline(quiet, settings) as run:
        wait_until(lambda: log.last_committed is not None, timeout=120, what="the first batch")
        began = time.monotonic()
        # Three times idle_timeout on an empty topic: no heartbeat, no watermark.
        wait_until(lambda: time.monotonic() - began > 6 and log.last_committed is not None,
                   timeout=60, what="six quiet seconds")  # fmt: skip
        assert log.watermark_ms(log.planned[-1]) == 0
        produce(bootstrap, topic,
                [("u", json.dumps({"user": "u", "ts": t.isoformat()})) for t in at])  # fmt: skip
        wait_until(lambda: read_delta(table).num_rows >= 2, timeout=120,
                   what="the backlog's windows, closed once the topic is quiet again")  # fmt: skip
    assert run.result is not None
    dropped = run.result.flows["quiet.per_window"].dropped_by_watermark
    assert dropped == 0
    rows = read_delta(table).to_pylist()
    got = sorted((r["window"]["start"].replace(tzinfo=UTC), r["count"]) for r in rows)
    assert got == [(start, 2), (start + timedelta(minutes=10), 1)]
