from __future__ import annotations

from eventlake.state.sessions import Session, merge_sessions

GAP = 30 * 60_000
MIN = 60_000


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
