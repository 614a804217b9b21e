"""Spark interval text ("10 minutes") as numbers, for code that needs milliseconds."""

from __future__ import annotations

_MS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}


def interval_ms(text: str) -> int:
    """Milliseconds in a validated Spark interval such as ``"30 minutes"``."""
    number, unit = text.split()
    return int(number) * _MS[unit.rstrip("s")]
