"""The one duration grammar: a number and a unit, for watermarks, windows, triggers and
generator options ("10 minutes", "15m", "500ms", "1.5 hours"); and epoch milliseconds as
an instant."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator

from eventlake.errors import ErrorCode, EventlakeError

_MS_PER_UNIT = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_ALIASES = {
    **dict.fromkeys(("ms", "msec", "millisecond", "milliseconds"), "millisecond"),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "second"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "minute"),
    **dict.fromkeys(("h", "hour", "hours"), "hour"),
    **dict.fromkeys(("d", "day", "days"), "day"),
    **dict.fromkeys(("w", "week", "weeks"), "week"),
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
EXAMPLES = "'10 minutes', '90s', '15m', '2h', '500ms'"


@dataclass(frozen=True)
class Duration:
    """A parsed duration: ``amount`` as written and a unit spelled as Spark spells it."""

    amount: str
    unit: str

    @property
    def ms(self) -> int:
        return int(Decimal(self.amount) * _MS_PER_UNIT[self.unit])

    @property
    def seconds(self) -> float:
        return self.ms / 1000

    def spark(self) -> str:
        """The text Spark takes for watermarks, windows and triggers: ``"10 minutes"``."""
        return f"{self.amount} {self.unit}" + ("" if self.amount == "1" else "s")


def parse_duration(text: str, *, what: str = "duration", whole: bool = False) -> Duration:
    """Parse ``text``; ``whole`` refuses fractions (Spark's interval text needs whole units).

    Raises EL-CONFIG-004 naming ``what`` when the text is not a duration.
    """
    match = _DURATION.match(text.lower())
    unit = _ALIASES.get(match.group(2)) if match else None
    if match is None or unit is None or (whole and "." in match.group(1)):
        kind = "a whole number" if whole else "a number"
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            f"{what} '{text}' is not understood.",
            expected=f"{kind} and a unit (ms, s, m, h, d, w or their names): {EXAMPLES}",
            fix="write the duration with one of those units",
        )
    return Duration(match.group(1), unit)


def duration_ms(text: str) -> int:
    """Milliseconds in ``text``: ``duration_ms("30 minutes") == 1_800_000``."""
    return parse_duration(text).ms


def _spark_interval(value: str) -> str:
    try:
        return parse_duration(value, what="interval", whole=True).spark()
    except EventlakeError as exc:
        raise ValueError(f"{exc.what} Write {exc.expected}") from None


#: A duration config key for watermarks and windows, kept as Spark's text ("10 minutes").
SparkInterval = Annotated[str, AfterValidator(_spark_interval)]


def utc_instant(ms: int) -> datetime:
    """The instant ``ms`` milliseconds after the epoch, in UTC, exact to the millisecond."""
    return datetime.fromtimestamp(ms // 1000, timezone.utc) + timedelta(milliseconds=ms % 1000)
