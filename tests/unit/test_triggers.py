from __future__ import annotations

import pytest

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.triggers import parse_trigger


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("available-now", {"availableNow": True}),
        ("availableNow", {"availableNow": True}),
        ("once", {"once": True}),
        ("10 seconds", {"processingTime": "10 seconds"}),
        ("500ms", {"processingTime": "500 milliseconds"}),
        ("2 minutes", {"processingTime": "2 minutes"}),
        ("continuous", {"continuous": "1 seconds"}),
        ("continuous:5 seconds", {"continuous": "5 seconds"}),
    ],
)
def test_parse(spec: str, expected: dict[str, object]) -> None:
    assert parse_trigger(spec) == expected


def test_unknown_trigger_says_what_is_accepted() -> None:
    with pytest.raises(EventlakeError) as info:
        parse_trigger("sometimes")
    assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
    assert "available-now" in str(info.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15m", 900), ("90s", 90), ("2h", 7200), ("1.5 hours", 5400), ("15 minutes", 900),
     ("500ms", 0.5), ("250 milliseconds", 0.25), ("1 hour", 3600)],
)  # fmt: skip
def test_generator_durations(text: str, seconds: float) -> None:
    from eventlake.cli.generate import parse_duration

    assert parse_duration(text) == seconds


def test_unknown_duration_is_an_error() -> None:
    from eventlake.cli.generate import parse_duration

    with pytest.raises(EventlakeError) as info:
        parse_duration("soon")
    assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
