"""The clickstream tables computed independently (plain Python + pandas) from the records
each micro-batch read, with Spark's watermark rule applied batch by batch."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from eventlake.state.sessions import Session, merge_sessions
from eventlake.testing.watermark import by_batch, kafka_batches, not_late, watermarks

MS = timedelta(milliseconds=1)
EPOCH = datetime(1970, 1, 1)


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
    records: list[tuple[int, int, dict[str, Any] | None]], topic: str, checkpoint: Path,
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
    """(start, end, user, events, distinct pages, first page, last page) per closed session."""
    gap_ms = int(gap / MS)
    by_user: dict[str, list[Session]] = defaultdict(list)
    for c in kept:
        by_user[c.user_id].append(Session.event(int((c.event_time - EPOCH) / MS), c.page))
    out = set()
    for user, events in by_user.items():
        for s in merge_sessions(events, gap_ms):
            end = EPOCH + s.end_ms(gap_ms) * MS
            if end <= closed_by:
                start = EPOCH + s.start_ms * MS
                out.add((start, end, user, s.events, len(s.pages), s.first_page, s.last_page))
    return out
