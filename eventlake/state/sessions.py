"""User sessions with ``transformWithState``: the same sessions as Spark's
``session_window`` (an event opens or extends a session that ends ``gap`` after its last
event), plus the session's distinct page count and its first and last page.

State per user is the list of open sessions (events can arrive out of order, so a user
can have more than one open session until the watermark settles them). Each open
session has an event-time timer at its end; when the watermark passes it, the session is
written and forgotten, so state holds only sessions the watermark has not closed.

No state TTL: Spark 4.2 refuses TTL in event-time mode
(``STATEFUL_PROCESSOR_INCORRECT_TIME_MODE_TO_ASSIGN_TTL``; TTL counts processing time),
and the timers already bound the state by event time. What they cannot do is close
sessions while the watermark stands still: see "When a source goes idle" in the README.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.stateful_processor import (
        ExpiredTimerInfo,
        StatefulProcessorHandle,
        TimerValues,
    )

#: One open session, as kept in state (times in epoch milliseconds).
STATE_SCHEMA = (
    "start_ms LONG, last_ms LONG, events LONG, first_page STRING, last_page STRING, "
    "pages ARRAY<STRING>"
)
#: What the processor emits per closed session.
SESSION_OUTPUT = (
    "user_id STRING, start_ms LONG, end_ms LONG, events LONG, pages INT, "
    "first_page STRING, last_page STRING"
)


@dataclass(frozen=True)
class Session:
    start_ms: int
    last_ms: int
    events: int
    first_page: str
    last_page: str
    pages: tuple[str, ...]

    def end_ms(self, gap_ms: int) -> int:
        return self.last_ms + gap_ms

    def merge(self, other: Session) -> Session:
        first = (
            self
            if (self.start_ms, self.first_page) <= (other.start_ms, other.first_page)
            else other
        )
        last = self if (self.last_ms, self.last_page) >= (other.last_ms, other.last_page) else other
        return Session(
            start_ms=first.start_ms,
            last_ms=last.last_ms,
            events=self.events + other.events,
            first_page=first.first_page,
            last_page=last.last_page,
            pages=tuple(sorted(set(self.pages) | set(other.pages))),
        )

    @classmethod
    def event(cls, ts_ms: int, page: str) -> Session:
        return cls(ts_ms, ts_ms, 1, page, page, (page,))

    @classmethod
    def from_state(cls, row: tuple[Any, ...]) -> Session:
        start, last, events, first_page, last_page, pages = row
        return cls(int(start), int(last), int(events), first_page, last_page, tuple(pages))

    def to_state(self) -> tuple[Any, ...]:
        return (self.start_ms, self.last_ms, self.events, self.first_page, self.last_page,
                list(self.pages))  # fmt: skip


def merge_sessions(sessions: Iterable[Session], gap_ms: int) -> list[Session]:
    """Merge sessions (or single events) whose ``[start, last + gap]`` spans touch, as
    Spark's session_window does; the result is ordered by start."""
    merged: list[Session] = []
    for s in sorted(sessions, key=lambda s: (s.start_ms, s.last_ms)):
        if merged and s.start_ms <= merged[-1].end_ms(gap_ms):
            merged[-1] = merged[-1].merge(s)
        else:
            merged.append(s)
    return merged


class SessionProcessor(StatefulProcessor):
    """Input rows: ``ts_ms`` (event time in ms) and ``page``, grouped by user."""

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = gap_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.open = handle.getListState("open_sessions", STATE_SCHEMA)

    def _load(self) -> list[Session]:
        return [Session.from_state(t) for t in self.open.get()] if self.open.exists() else []

    def _save(self, sessions: list[Session], fired: int | None = None) -> None:
        """Keep ``sessions`` with one timer at each end. ``fired``: the timer being handled,
        which Spark deletes itself once the handler returns."""
        ends = {s.end_ms(self.gap_ms) for s in sessions}
        timers = {int(t) for t in self.handle.listTimers()} - {fired}
        for timer in timers - ends:
            self.handle.deleteTimer(timer)
        for end in ends - timers:
            self.handle.registerTimer(end)
        if sessions:
            self.open.put([s.to_state() for s in sessions])
        else:
            self.open.clear()

    def handleInputRows(
        self, key: Any, rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Any]:
        events = [Session.event(int(r.ts_ms), r.page) for r in rows]
        self._save(merge_sessions([*self._load(), *events], self.gap_ms))
        return iter(())

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Any]:
        from pyspark.sql import Row

        expiry = expiredTimerInfo.getExpiryTimeInMs()
        sessions = self._load()
        closed = [s for s in sessions if s.end_ms(self.gap_ms) <= expiry]
        self._save([s for s in sessions if s.end_ms(self.gap_ms) > expiry], fired=expiry)
        for s in closed:
            yield Row(
                user_id=key[0],
                start_ms=s.start_ms,
                end_ms=s.end_ms(self.gap_ms),
                events=s.events,
                pages=len(s.pages),
                first_page=s.first_page,
                last_page=s.last_page,
            )

    def close(self) -> None:
        pass


def sessions_with_state(
    events: DataFrame, *, key: str, time: str, page: str, gap_ms: int
) -> DataFrame:
    """Closed sessions per ``key`` of a watermarked stream, with ``transformWithState``:
    ``<key>``, ``session_start``, ``session_end``, ``events``, ``pages``, ``first_page``,
    ``last_page``; each session written once, when the watermark passes its end."""
    from pyspark.sql import functions as F

    rows = events.select(
        F.col(key).alias("user_id"),
        F.unix_millis(F.col(time)).alias("ts_ms"),
        F.col(page).alias("page"),
        F.col(time),
    )
    out = rows.groupBy("user_id").transformWithState(
        statefulProcessor=SessionProcessor(gap_ms),
        outputStructType=SESSION_OUTPUT,
        outputMode="Append",
        timeMode="EventTime",
    )
    return out.select(
        F.timestamp_millis("start_ms").alias("session_start"),
        F.timestamp_millis("end_ms").alias("session_end"),
        F.col("user_id").alias(key),
        "events",
        "pages",
        "first_page",
        "last_page",
    )
