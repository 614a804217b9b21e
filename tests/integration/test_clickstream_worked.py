"""Seed 003 section 3's worked examples on the clickstream pipeline: several available-now
runs on one checkpoint, so the watermark advances between them as in a live stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.testing import run_available_now, settings_for
from tests.integration.event_time_helpers import (
    at,
    rows,
    send_events,
    table,
)

pytestmark = pytest.mark.integration
FLOWS = ["clicks", "user_clicks_5min"]


def click(
    user: str, time: str, event_id: str, page: str = "/", kind: str = "click"
) -> dict[str, str]:
    return {"user_id": user, "event_id": event_id, "event_type": kind, "page": page,
            "event_time": at(time)}  # fmt: skip


def test_seed_windowed_counts_late_click_not_counted(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(prefix="clicks")
    settings = settings_for(tmp_path, bootstrap, clickstream=dict(topic=topic), examples=True)

    def gold() -> set[tuple[object, ...]]:
        windows = table(settings, "gold", "user_clicks_5min")
        return rows(windows, "window_start", "window_end", "user_id", "clicks")

    # Batch 1: events 1-3. Watermark after it: 12:04:50 - 10 min = 11:54:50. No window closes.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:01:30", "e1"), click("u2", "12:02:10", "e2"), click("u1", "12:04:50", "e3"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=FLOWS)
    assert gold() == set()

    # Batch 2: events 4-5; watermark 12:09 - 10 min = 11:59. [12:00, 12:05) still open.
    send_events(bootstrap, topic, "user_id", [click("u1", "12:06:00", "e4"),
                                               click("u2", "12:09:00", "e5")])  # fmt: skip
    run_available_now("clickstream", settings, flows=FLOWS)
    assert gold() == set()

    # The late click (11:58) arrives with the watermark at 11:59: dropped from the count.
    send_events(bootstrap, topic, "user_id", [click("u1", "11:58:00", "e6")])
    result = run_available_now("clickstream", settings, flows=FLOWS)
    assert result.flows["clickstream.clicks"].dropped_by_watermark == 1
    assert gold() == set()
    # Not gone: the row as the flow had it at the watermark, with the one that dropped it.
    late = table(settings, "silver", "clicks_late")
    assert len(late) == 1
    assert json.loads(late["row"][0])["event_id"] == "e6"
    assert rows(late, "event_time", "watermark") == {("11:58", "11:59")}

    # Later events move the watermark to 12:15 - 10 min = 12:05: [12:00, 12:05) closes,
    # in this run's closing no-data batch; no further input is needed.
    send_events(bootstrap, topic, "user_id", [click("u2", "12:15:00", "e7")])
    run_available_now("clickstream", settings, flows=FLOWS)
    assert gold() == {("12:00", "12:05", "u1", 2), ("12:00", "12:05", "u2", 1)}

    # Past 12:20 the [12:05, 12:10) window closes too; the late click never appears.
    send_events(bootstrap, topic, "user_id", [click("u1", "12:21:00", "e8")])
    run_available_now("clickstream", settings, flows=FLOWS)
    assert gold() == {
        ("12:00", "12:05", "u1", 2),
        ("12:00", "12:05", "u2", 1),
        ("12:05", "12:10", "u1", 1),
        ("12:05", "12:10", "u2", 1),
    }
    silver = table(settings, "silver", "clicks")
    assert "e6" not in set(silver["event_id"])
