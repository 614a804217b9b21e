"""The clickstream tables computed independently (plain Python, no Spark and none of
eventlake's transforms) from the records each micro-batch read, with Spark's watermark
rule applied batch by batch."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any

from eventlake.storage import Location
from eventlake.testing import read_delta
from eventlake.testing.watermark import by_batch, kafka_batches, not_late, watermarks
from tests.integration.event_time_helpers import as_rows

#: What makes a click valid (else it is quarantined), and its event time.
CLICK_FIELDS = ("event_id", "user_id", "event_type", "page", "event_time")


@dataclass(frozen=True)
class Click:
    partition: int
    offset: int
    event_id: str
    user_id: str
    event_type: str
    page: str
    event_time: datetime


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def kept_clicks(
    records: list[tuple[int, int, dict[str, Any] | None]], topic: str, checkpoint: Location,
    delay: timedelta,
) -> tuple[list[Click], datetime, list[datetime]]:  # fmt: skip
    """Valid clicks that survive the late rule and de-duplication, the final watermark, and
    the watermarks recomputed per batch (to compare with Spark's log)."""
    batches = kafka_batches(checkpoint)
    assert sum(any(a < b for a, b in k.ranges.values()) for k in batches) >= 4, "too few batches"
    valid = [
        Click(
            p,
            o,
            d["event_id"],
            d["user_id"],
            d["event_type"],
            d["page"],
            parse_time(d["event_time"]),
        )
        for p, o, d in records
        if d is not None
    ]
    grouped = by_batch(valid, batches, lambda c: (topic, c.partition, c.offset))
    seen: set[str] = set()
    kept = []
    for c in not_late(grouped, lambda c: c.event_time, delay):
        if c.event_id not in seen:
            seen.add(c.event_id)
            kept.append(c)
    wms = watermarks(grouped, lambda c: c.event_time, delay)
    newest = max(c.event_time for c in valid)
    return kept, newest - delay, wms


def clicks_5min(kept: list[Click], closed_by: datetime) -> set[tuple[Any, ...]]:
    counts: dict[tuple[datetime, str], int] = defaultdict(int)
    for c in kept:
        if c.event_type == "click":
            start = c.event_time.replace(minute=c.event_time.minute // 5 * 5, second=0,
                                         microsecond=0)  # fmt: skip
            counts[(start, c.user_id)] += 1
    five = timedelta(minutes=5)
    return {(s, s + five, u, n) for (s, u), n in counts.items() if s + five <= closed_by}


def sessions(kept: list[Click], gap: timedelta, closed_by: datetime) -> set[tuple[Any, ...]]:
    """(start, end, user, events, distinct pages, first page, last page) per closed session,
    computed without eventlake's session code: per user, events in time order; an event
    more than ``gap`` after the previous one starts a new session, which ends ``gap`` after
    its last event. Ties at the first (last) instant take the smallest (largest) page."""
    out = set()
    events = sorted((c.user_id, c.event_time, c.page) for c in kept)
    for user, rows in groupby(events, key=lambda e: e[0]):
        session: list[tuple[datetime, str]] = []
        for _, time, page in [*rows, (user, None, None)]:
            if session and (time is None or time > session[-1][0] + gap):
                start, end = session[0][0], session[-1][0] + gap
                if end <= closed_by:
                    firsts = [pg for t, pg in session if t == start]
                    lasts = [pg for t, pg in session if t == session[-1][0]]
                    out.add((start, end, user, len(session), len({pg for _, pg in session}),
                             min(firsts), max(lasts)))  # fmt: skip
                session = []
            if time is not None:
                session.append((time, page))
    return out


def assert_clickstream_tables(
    lake: Location | str, records: list[tuple[int, int, dict[str, Any] | None]],
    kept: list[Click], final_wm: datetime,
) -> None:  # fmt: skip
    """Every table the clickstream pipeline wrote under ``lake`` holds what it must, given
    the topic's ``records`` and what :func:`kept_clicks` made of them."""

    def table(layer: str, name: str) -> Any:
        return read_delta(Location(lake) / layer / name).to_pandas()

    silver = table("silver", "clicks")
    assert sorted(silver["event_id"]) == sorted(c.event_id for c in kept)
    # Each kept click as sent (a duplicate is the same event again, so which copy stays
    # does not show here).
    assert as_rows(silver, list(CLICK_FIELDS)) == {
        tuple(getattr(c, f) for f in CLICK_FIELDS) for c in kept
    }
    quarantine = table("silver", "clicks_quarantine")
    # Each record that is not a valid click, once, by its Kafka coordinates.
    assert sorted(zip(quarantine["partition"], quarantine["offset"], strict=True)) == sorted(
        (p, o) for p, o, d in records if d is None
    )
    assert set(quarantine["reason"]) <= {
        "invalid_json", "missing_event_id", "missing_user_id", "missing_event_time",
        "invalid_event_time",
    }  # fmt: skip
    windows = table("gold", "user_clicks_5min")
    assert as_rows(windows, ["window_start", "window_end", "user_id", "clicks"]) == clicks_5min(
        kept, final_wm
    )
    expected_sessions = sessions(kept, timedelta(minutes=30), final_wm)
    assert len(expected_sessions) >= 10
    plain = table("gold", "user_sessions")
    assert as_rows(plain, ["session_start", "session_end", "user_id", "events"]) == {
        s[:4] for s in expected_sessions
    }
    custom = table("gold", "user_sessions_custom")
    columns = ["session_start", "session_end", "user_id", "events", "pages", "first_page",
               "last_page"]  # fmt: skip
    assert as_rows(custom, columns) == expected_sessions
