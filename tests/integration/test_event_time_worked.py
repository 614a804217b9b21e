"""Hand-worked examples for sessions, de-duplication and the two stream-stream joins: small
inputs, several available-now runs on one checkpoint (the watermark advances between
runs as in a live stream), and the exact tables expected after each run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from eventlake.config import Settings
from eventlake.testing import run_available_now, settings_for
from tests.integration.event_time_helpers import (
    at,
    rows,
    send_events,
    table,
)

pytestmark = pytest.mark.integration


def click(user: str, time: str, event_id: str, page: str = "/") -> dict[str, str]:
    return {"user_id": user, "event_id": event_id, "event_type": "click", "page": page,
            "event_time": at(time)}  # fmt: skip


# --- sessions -------------------------------------------------------------------------

SESSION_FLOWS = ["clicks", "user_sessions", "user_sessions_custom"]


def sessions(settings: Settings) -> set[tuple[object, ...]]:
    return rows(table(settings, "gold", "user_sessions"),
                "session_start", "session_end", "user_id", "events")  # fmt: skip


def custom_sessions(settings: Settings) -> set[tuple[object, ...]]:
    return rows(table(settings, "gold", "user_sessions_custom"), "session_start", "session_end",
                "user_id", "events", "pages", "first_page", "last_page")  # fmt: skip


def test_sessions_close_when_the_watermark_passes_their_end(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Seed 003's session example (u1: 5 events 12:00-12:15, u2: 2 events 12:05-12:08),
    30-minute gap, 10-minute watermark. A session ends ``gap`` after its last event, as
    Spark's session_window has it (the seed prints the last event time, 12:15, instead)."""
    topic = make_topic(prefix="sessions")
    settings = settings_for(tmp_path, bootstrap, clickstream=dict(topic=topic), examples=True)

    # Run 1: watermark after it 12:15 - 10 min = 12:05; both sessions are open.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:00:00", "e1", "/a"), click("u2", "12:05:00", "e2", "/a"),
        click("u1", "12:04:00", "e3", "/b"), click("u1", "12:07:00", "e4", "/a"),
        click("u2", "12:08:00", "e5", "/d"), click("u1", "12:11:00", "e6", "/c"),
        click("u1", "12:15:00", "e7", "/b"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=SESSION_FLOWS)
    assert sessions(settings) == set()
    assert custom_sessions(settings) == set()

    # Run 2: u3 at 12:50 moves the watermark to 12:40, past u2's end (12:08 + 30 = 12:38)
    # but not u1's (12:15 + 30 = 12:45).
    send_events(bootstrap, topic, "user_id", [click("u3", "12:50:00", "e8", "/x")])
    run_available_now("clickstream", settings, flows=SESSION_FLOWS)
    assert sessions(settings) == {("12:05", "12:38", "u2", 2)}
    assert custom_sessions(settings) == {("12:05", "12:38", "u2", 2, 2, "/a", "/d")}

    # Run 3: a u1 click at 12:20 comes behind the watermark (12:40): it is dropped and does
    # not extend u1's session. u3 at 13:00 moves the watermark to 12:50: u1's session closes.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:20:00", "e9", "/late"), click("u3", "13:00:00", "e10", "/y"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=SESSION_FLOWS)
    assert sessions(settings) == {("12:00", "12:45", "u1", 5), ("12:05", "12:38", "u2", 2)}
    assert custom_sessions(settings) == {
        ("12:00", "12:45", "u1", 5, 3, "/a", "/b"),
        ("12:05", "12:38", "u2", 2, 2, "/a", "/d"),
    }
    # u3's session (12:50-13:30) stays open until the watermark passes 13:30.


def test_sessions_merge_when_an_out_of_order_event_bridges_the_gap(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Two sessions of one user, 35 minutes apart, become one when an event between them
    arrives before the watermark closes the first."""
    topic = make_topic(prefix="sessions")
    settings = settings_for(tmp_path, bootstrap, clickstream=dict(topic=topic), examples=True)

    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:00:00", "e1", "/a"), click("u1", "12:35:00", "e2", "/b"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=SESSION_FLOWS)  # watermark 12:25
    assert sessions(settings) == set()

    # 12:28 is behind the newest event but ahead of the watermark. It falls inside the
    # first session (which would end at 12:30) and its own end, 12:58, reaches 12:35.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:28:00", "e3", "/c"), click("u2", "13:30:00", "e4", "/z"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=SESSION_FLOWS)  # watermark 13:20
    assert sessions(settings) == {("12:00", "13:05", "u1", 3)}
    assert custom_sessions(settings) == {("12:00", "13:05", "u1", 3, 3, "/a", "/b")}


# --- de-duplication -------------------------------------------------------------------


def test_dedup_within_a_30_minute_watermark(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Seed 003's dedup example: e1, e2, e1 -> two rows; a duplicate is suppressed while
    the watermark keeps its first copy in state (30 minutes past its event time), and
    passes once the first copy has been evicted."""
    topic = make_topic(prefix="dedup")
    settings = settings_for(
        tmp_path, bootstrap, clickstream=dict(topic=topic, watermark="30 minutes"), examples=True
    )

    def silver() -> list[tuple[str, str, str]]:
        """Every row, so that a duplicate would show."""
        clicks = table(settings, "silver", "clicks")
        times = clicks["event_time"].dt.strftime("%H:%M")
        return sorted(zip(clicks["event_id"], times, clicks["page"], strict=True))

    # Run 1: e1 twice in one batch. Watermark after it: 12:01 - 30 min = 11:31.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:00:00", "e1"), click("u2", "12:01:00", "e2"), click("u1", "12:00:00", "e1"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=["clicks"])
    assert silver() == [("e1", "12:00", "/"), ("e2", "12:01", "/")]

    # Run 2: a producer retry re-sends e1 stamped 12:20, 20 minutes after the original,
    # inside its dedup horizon (12:00 + 30 min): suppressed.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:20:00", "e1", "/retry"), click("u3", "12:20:00", "e3"),
    ])  # fmt: skip
    run_available_now("clickstream", settings, flows=["clicks"])
    assert silver() == [("e1", "12:00", "/"), ("e2", "12:01", "/"), ("e3", "12:20", "/")]

    # Run 3: e4 at 13:10 moves the watermark to 12:40, past e1's horizon (12:30): e1 leaves
    # the state.
    send_events(bootstrap, topic, "user_id", [click("u4", "13:10:00", "e4")])
    run_available_now("clickstream", settings, flows=["clicks"])

    # Run 4: e1 again, stamped 12:45 (45 minutes after the original): no longer a duplicate
    # Spark can see. A copy of e2 with its original time (12:01) is behind the watermark:
    # dropped as late, not written.
    send_events(bootstrap, topic, "user_id", [
        click("u1", "12:45:00", "e1", "/again"), click("u2", "12:01:00", "e2"),
    ])  # fmt: skip
    result = run_available_now("clickstream", settings, flows=["clicks"])
    assert result.flows["clickstream.clicks"].dropped_by_watermark == 1
    assert silver() == [
        ("e1", "12:00", "/"),
        ("e1", "12:45", "/again"),
        ("e2", "12:01", "/"),
        ("e3", "12:20", "/"),
        ("e4", "13:10", "/"),
    ]


# --- joins ----------------------------------------------------------------------------

JOIN_FLOWS = ["impressions", "clicks", "attributed", "outcome"]


def impression(iid: str, user: str, ad: str, time: str) -> dict[str, str]:
    return {"impression_id": iid, "user_id": user, "ad_id": ad, "impression_time": at(time)}


def ad_click(cid: str, user: str, ad: str, time: str) -> dict[str, str]:
    return {"click_id": cid, "user_id": user, "ad_id": ad, "click_time": at(time)}


def test_click_attribution_inner_and_left_outer_joins(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """10-minute watermarks on both inputs, a click matches an impression of the same user
    and ad when impression_time <= click_time <= impression_time + 5 minutes. The inner
    join writes a match as soon as both sides are seen; the left outer join writes every
    impression once: with its click, or with nulls after the watermark (the smaller of
    the two inputs') passes impression_time + 5 minutes."""
    imp_topic, click_topic = make_topic(prefix="imp"), make_topic(prefix="clk")
    settings = settings_for(
        tmp_path,
        bootstrap,
        ads=dict(topics={"impressions": imp_topic, "clicks": click_topic}),
        examples=True,
    )

    def attributed() -> set[tuple[object, ...]]:
        return rows(table(settings, "silver", "ad_clicks_attributed"),
                    "click_id", "impression_id", "user_id", "ad_id")  # fmt: skip

    def outcome() -> set[tuple[object, ...]]:
        df = table(settings, "silver", "ad_impressions_outcome")
        assert df["impression_id"].is_unique, df
        return {tuple(None if pd.isna(v) else v for v in row)
                for row in rows(df, "impression_id", "click_id", "click_time")}  # fmt: skip

    # Run 1. c1 is 3 minutes after i1; c3 at the same instant as i3 (the bound is
    # inclusive); c2 is 7 minutes after i2 (too late to count); c4 is for another ad.
    send_events(bootstrap, imp_topic, "user_id", [
        impression("i1", "u1", "a1", "12:00:00"), impression("i2", "u2", "a1", "12:01:00"),
        impression("i3", "u1", "a2", "12:02:00"), impression("i4", "u3", "a1", "12:03:00"),
    ])  # fmt: skip
    send_events(bootstrap, click_topic, "user_id", [
        ad_click("c1", "u1", "a1", "12:03:00"), ad_click("c2", "u2", "a1", "12:08:00"),
        ad_click("c3", "u1", "a2", "12:02:00"), ad_click("c4", "u3", "a2", "12:04:00"),
    ])  # fmt: skip
    run_available_now("ads", settings, flows=JOIN_FLOWS)
    assert attributed() == {("c1", "i1", "u1", "a1"), ("c3", "i3", "u1", "a2")}
    # Watermark min(12:03, 12:08) - 10 min = 11:53: no match window has closed yet.
    assert outcome() == {("i1", "c1", "12:03"), ("i3", "c3", "12:02")}

    # Run 2. c7 (u2, 12:04) arrives after c2 but is still ahead of the watermark: it
    # matches i2. i5 and c5 move both watermarks to 12:10, past the windows of i2 (12:06)
    # and i4 (12:08): i4 is written with nulls; i2 is not, it has its click.
    send_events(bootstrap, imp_topic, "user_id", [impression("i5", "u4", "a1", "12:20:00")])
    send_events(bootstrap, click_topic, "user_id", [
        ad_click("c5", "u5", "a9", "12:20:00"), ad_click("c7", "u2", "a1", "12:04:00"),
    ])  # fmt: skip
    run_available_now("ads", settings, flows=JOIN_FLOWS)
    assert attributed() == {
        ("c1", "i1", "u1", "a1"),
        ("c3", "i3", "u1", "a2"),
        ("c7", "i2", "u2", "a1"),
    }
    assert outcome() == {
        ("i1", "c1", "12:03"),
        ("i2", "c7", "12:04"),
        ("i3", "c3", "12:02"),
        ("i4", None, None),
    }

    # Run 3. c8 would match i5 but is behind the clicks watermark (12:10): dropped. i6 and
    # c9 move the watermark to 12:30, past i5's window (12:25): i5 is written with nulls.
    send_events(bootstrap, imp_topic, "user_id", [impression("i6", "u6", "a3", "12:40:00")])
    send_events(bootstrap, click_topic, "user_id", [
        ad_click("c8", "u4", "a1", "12:09:00"), ad_click("c9", "u6", "a3", "12:40:00"),
    ])  # fmt: skip
    result = run_available_now("ads", settings, flows=JOIN_FLOWS)
    assert result.flows["ads.clicks"].dropped_by_watermark == 1
    assert len(attributed()) == 4  # c9 matches i6 at once
    assert ("c9", "i6", "u6", "a3") in attributed()
    assert outcome() == {
        ("i1", "c1", "12:03"),
        ("i2", "c7", "12:04"),
        ("i3", "c3", "12:02"),
        ("i4", None, None),
        ("i5", None, None),
        ("i6", "c9", "12:40"),
    }
