from __future__ import annotations

import pandas as pd
import pytest

from eventlake.operations.lateness_report import lateness_of


def frame(rows: list[tuple[float, int, int, int]]) -> pd.DataFrame:
    """(event time s, arrival ms, partition, offset) per record."""
    return pd.DataFrame(rows, columns=["t", "a", "partition", "offset"])


def test_lateness_is_how_far_behind_the_newest_event_seen_before() -> None:
    # Arrival order: a (t=100), b (t=160), c (t=130, 30 s behind), d (t=400), e (t=100,
    # 300 s behind), f (t=401). Listed out of order: arrival decides.
    rows = frame([
        (400, 4, 0, 3), (100, 1, 0, 0), (130, 3, 0, 2), (160, 2, 0, 1),
        (100, 5, 0, 4), (401, 6, 0, 5),
    ])  # fmt: skip
    result = lateness_of(rows, "p.f", "event_time", "1 minute")
    assert result.records == 6
    assert result.quantiles["max"] == 300.0
    assert result.quantiles["p50"] == 0.0
    # 6 records: the 99% quantile (higher) is the largest, 300 s.
    assert result.keep_99 == 300
    assert result.keep_99_9 == 300
    assert result.configured_seconds == 60.0
    assert result.dropped == 1
    assert result.drop_rate == pytest.approx(1 / 6)
    hist = dict(result.histogram)
    assert hist[0.0] == 4  # on time: a, b, d, f
    assert hist[30.0] == 1  # 15 < 30 <= 30
    assert hist[300.0] == 1
    assert sum(hist.values()) == 6


def test_arrival_ties_are_broken_by_partition_then_offset() -> None:
    rows = frame([(50, 1, 1, 0), (100, 1, 0, 7), (90, 1, 0, 6)])
    # Order: p0/6 (90), p0/7 (100), p1/0 (50: 50 s behind 100).
    assert lateness_of(rows, "p.f", "t", "10 seconds").quantiles["max"] == 50.0


def test_no_records_measures_nothing() -> None:
    result = lateness_of(frame([]), "p.f", "t", "10 seconds")
    assert (result.records, result.dropped, result.keep_99) == (0, 0, 0)
