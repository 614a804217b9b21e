"""The soak report's hour-by-hour table: per hour, a trend and the level it ends at."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.soak import HOURLY_MIN_MINUTES, _hourly_lines, hourly

MIB = 2**20


def _samples(minutes: int, jvm_mib: Callable[[int], float]) -> list[dict[str, Any]]:
    return [{"minute": m, "jvm_rss_bytes": jvm_mib(m) * MIB,
             "jvm_committed": {"Total": 1000 * MIB, "Code": 200 * MIB}}
            for m in range(1, minutes + 1)]  # fmt: skip


def test_each_hour_has_its_own_trend_and_last_ten_minutes() -> None:
    # 2 MiB a minute in the first hour (120 MiB an hour), then level at 1,120 MiB.
    samples = _samples(150, lambda m: 1000 + 2 * min(m, 60))
    hours = hourly(samples)
    assert [h["minutes"] for h in hours] == [[1, 60], [61, 120], [121, 150]]
    jvm = [h["measures"]["jvm_rss_bytes"] for h in hours]
    assert jvm[0] == {"mib_per_hour": 120.0, "last_mib": 1111.0}  # mean of 1,102..1,120
    assert jvm[1] == {"mib_per_hour": 0.0, "last_mib": 1120.0}
    assert jvm[2] == {"mib_per_hour": 0.0, "last_mib": 1120.0}
    assert hours[0]["measures"]["Code"] == {"mib_per_hour": 0.0, "last_mib": 200.0}
    # Measures a sample lacks are left out, not reported as zero.
    assert "driver_rss_anon_bytes" not in hours[0]["measures"]


def test_a_short_last_part_hour_is_left_out() -> None:
    hours = hourly(_samples(60 + HOURLY_MIN_MINUTES - 1, lambda m: 1000))
    assert [h["minutes"] for h in hours] == [[1, 60]]


def test_markdown_has_a_column_per_hour() -> None:
    lines = _hourly_lines(hourly(_samples(130, lambda m: 1000 + m)))
    assert "| measure | 1-60 | 61-120 |" in lines
    assert "| JVM RSS | +60.0 (1,055.5) | +60.0 (1,115.5) |" in lines
    assert _hourly_lines([]) == []
