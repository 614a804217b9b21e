"""Trigger specs as users write them (``available-now``, ``10 seconds``...) -> Spark kwargs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlake.durations import parse_duration
from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql.streaming.readwriter import DataStreamWriter

AVAILABLE_NOW = "available-now"
ONCE = "once"
CONTINUOUS = "continuous"
_AVAILABLE_NOW_SPELLINGS = (AVAILABLE_NOW, "availablenow", "available_now")
FINITE = (*_AVAILABLE_NOW_SPELLINGS, ONCE)


def parse_trigger(spec: str) -> dict[str, object]:
    """Keyword arguments for ``DataStreamWriter.trigger`` from a trigger spec.

    ``available-now`` processes all input available at start (in batches bounded by the
    source's rate limits, closing windows with no-data batches) and stops; ``once`` is the
    deprecated single-batch form; ``N seconds`` is a processing-time trigger;
    ``continuous`` or ``continuous:N seconds`` is continuous processing.
    """
    text = spec.strip().lower()
    if text in _AVAILABLE_NOW_SPELLINGS:
        return {"availableNow": True}
    if text == ONCE:
        return {"once": True}
    if text.startswith(CONTINUOUS):
        interval = text.partition(":")[2].strip() or "1 second"
        return {"continuous": _interval(interval, spec)}
    return {"processingTime": _interval(text, spec)}


def is_finite(spec: str) -> bool:
    """True for triggers that end once the available input is processed."""
    return spec.strip().lower() in FINITE


def apply_trigger(writer: DataStreamWriter, spec: str) -> DataStreamWriter:
    """``writer`` with the trigger ``spec`` set."""
    kwargs = parse_trigger(spec)
    if "availableNow" in kwargs:
        return writer.trigger(availableNow=True)
    if "once" in kwargs:
        return writer.trigger(once=True)
    if "continuous" in kwargs:
        return writer.trigger(continuous=str(kwargs["continuous"]))
    return writer.trigger(processingTime=str(kwargs["processingTime"]))


def _interval(text: str, spec: str) -> str:
    try:
        return parse_duration(text).spark()
    except EventlakeError:
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            f"trigger '{spec}' is not a trigger eventlake knows.",
            expected="available-now, once, continuous, or an interval like '10 seconds'",
            fix="use one of those forms, e.g. --trigger '30 seconds'",
        ) from None
