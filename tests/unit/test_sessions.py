from __future__ import annotations

from eventlake.state.sessions import Session, merge_sessions

GAP = 30 * 60_000
MIN = 60_000
T0 = 1_772_366_400_000  # 2026-03-01T12:00:00Z


def test_events_within_the_gap_form_one_session_in_any_arrival_order() -> None:
    events = [Session.event(t * MIN, p) for t, p in ((14, "/c"), (0, "/a"), (5, "/b"),
                                                     (5, "/a"))]  # fmt: skip
    (s,) = merge_sessions(events, GAP)
    assert (s.start_ms, s.end_ms(GAP), s.events) == (0, 44 * MIN, 4)
    assert (s.first_page, s.last_page, s.pages) == ("/a", "/c", ("/a", "/b", "/c"))


def test_a_gap_splits_and_a_bridging_event_merges() -> None:
    a, b = Session.event(0, "/a"), Session.event(40 * MIN, "/b")
    assert len(merge_sessions([a, b], GAP)) == 2
    # An event at 20 minutes touches both: one session, as session_window gives.
    (s,) = merge_sessions([a, b, Session.event(20 * MIN, "/m")], GAP)
    assert (s.start_ms, s.last_ms, s.events) == (0, 40 * MIN, 3)
    # Spans that touch exactly at the end merge too.
    assert len(merge_sessions([a, Session.event(GAP, "/x")], GAP)) == 1


def test_state_round_trip() -> None:
    s = merge_sessions([Session.event(0, "/a"), Session.event(MIN, "/b")], GAP)[0]
    assert Session.from_state(s.to_state()) == s


def test_processor_keeps_one_timer_per_open_session_and_writes_each_once() -> None:
    """SessionProcessor under pyspark's TwsTester (event time, no Spark): a timer at each
    open session's end; the watermark passing it writes the session once. The handler
    never deletes the timer being fired: Spark deletes that one after the handler and
    logs a warning for a timer that is already gone."""
    from pyspark.sql import Row
    from pyspark.sql.streaming.tws_tester import TwsTester

    from eventlake.state.sessions import SessionProcessor

    tester = TwsTester(SessionProcessor(GAP), timeMode="EventTime",
                       eventTimeExtractor=lambda r: int(r.ts_ms))  # fmt: skip
    deleted: list[int] = []
    delete = tester.handle.deleteTimer

    def recording_delete(expiry_ms: int) -> None:
        deleted.append(expiry_ms)
        delete(expiry_ms)

    tester.handle.deleteTimer = recording_delete  # type: ignore[method-assign]

    def at(minute: int) -> int:
        return T0 + minute * MIN

    def timers() -> list[int]:
        return sorted(tester.handle._timers.listTimers("u1"))

    def event(minute: int, page: str) -> Row:
        return Row(ts_ms=at(minute), page=page)

    assert tester.test("u1", [event(0, "/a"), event(40, "/b")]) == []
    assert timers() == [at(30), at(70)]
    # 20 minutes bridges the two: one session, one timer at its end.
    assert tester.test("u1", [event(20, "/m")]) == []
    assert timers() == [at(70)]
    assert deleted == [at(30)]
    assert tester.test("u1", [event(100, "/c")]) == []
    assert timers() == [at(70), at(130)]

    closed = tester.setWatermark(at(80))
    assert [(r.start_ms, r.end_ms, r.events, r.pages, r.first_page, r.last_page)
            for r in closed] == [(at(0), at(70), 3, 3, "/a", "/b")]  # fmt: skip
    assert timers() == [at(130)]
    assert deleted == [at(30)]  # the fired timer is left to Spark
    assert [s[0] for s in tester.peekListState("open_sessions", "u1")] == [at(100)]
    assert tester.setWatermark(at(130))[0].end_ms == at(130)
    assert tester.peekListState("open_sessions", "u1") == []
    assert timers() == []
    assert deleted == [at(30)]
