from __future__ import annotations

import pytest

from eventlake.durations import duration_ms, parse_duration
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.triggers import is_finite, is_micro_batch, is_real_time, parse_trigger


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("available-now", {"availableNow": True}),
        ("availableNow", {"availableNow": True}),
        ("once", {"once": True}),
        ("10 seconds", {"processingTime": "10 seconds"}),
        ("500ms", {"processingTime": "500 milliseconds"}),
        ("2 minutes", {"processingTime": "2 minutes"}),
        ("continuous", {"continuous": "1 second"}),
        ("continuous:5 seconds", {"continuous": "5 seconds"}),
        ("real-time", {"realTime": "1 minute"}),
        ("real-time:30s", {"realTime": "30 seconds"}),
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
def test_one_duration_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text).seconds == seconds
    assert duration_ms(text) == seconds * 1000


@pytest.mark.parametrize(
    ("text", "expected"),
    [("10 minutes", "10 minutes"), ("15m", "15 minutes"), ("1 hour", "1 hour"),
     ("2h", "2 hours"), ("500ms", "500 milliseconds"), ("1  week", "1 week")],
)  # fmt: skip
def test_spark_text(text: str, expected: str) -> None:
    assert parse_duration(text).spark() == expected


def test_unknown_duration_is_an_error() -> None:
    for bad in ("soon", "10 fortnights", "-1 s", ""):
        with pytest.raises(EventlakeError) as info:
            parse_duration(bad, what="--late-delay")
        assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
        assert "--late-delay" in info.value.what
    with pytest.raises(EventlakeError, match="whole number"):
        parse_duration("1.5 hours", whole=True)


def test_trigger_kinds() -> None:
    assert is_real_time("real-time:1 minute")
    assert not is_real_time("10 seconds")
    kinds = ("10 seconds", "available-now", "continuous", "real-time")
    assert [is_micro_batch(t) for t in kinds] == [True, True, False, False]
    assert not is_finite("real-time")
