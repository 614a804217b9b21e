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
REAL_TIME = "real-time"
#: Real-time mode's checkpoint interval when none is given (Spark's is 5 minutes): a crash
#: re-sends at most this much; each new interval pauses the stream for about a second.
REAL_TIME_DEFAULT = "1 minute"
_AVAILABLE_NOW_SPELLINGS = (AVAILABLE_NOW, "availablenow", "available_now")
FINITE = (*_AVAILABLE_NOW_SPELLINGS, ONCE)


def parse_trigger(spec: str) -> dict[str, object]:
    """Keyword arguments for ``DataStreamWriter.trigger`` from a trigger spec.

    ``available-now`` processes all input available at start (in batches bounded by the
    source's rate limits, closing windows with no-data batches) and stops; ``once`` is the
    deprecated single-batch form; ``N seconds`` is a processing-time trigger;
    ``continuous`` or ``continuous:N seconds`` is continuous processing; ``real-time`` or
    ``real-time:N seconds`` is Spark's real-time mode (stateless Kafka -> Kafka flows; N is
    how often it checkpoints, not a latency).
    """
    text = spec.strip().lower()
    if text in _AVAILABLE_NOW_SPELLINGS:
        return {"availableNow": True}
    if text == ONCE:
        return {"once": True}
    if text.startswith(REAL_TIME):
        interval = text.partition(":")[2].strip() or REAL_TIME_DEFAULT
        return {"realTime": _interval(interval, spec)}
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
    if "realTime" in kwargs:
        # pyspark 4.2's typing overloads of trigger() leave out realTime.
        return writer.trigger(realTime=str(kwargs["realTime"]))  # type: ignore[call-overload,no-any-return]
    return writer.trigger(processingTime=str(kwargs["processingTime"]))


def _interval(text: str, spec: str) -> str:
    try:
        return parse_duration(text).spark()
    except EventlakeError:
        raise EventlakeError(
            ErrorCode.CONFIG_INVALID_VALUE,
            f"trigger '{spec}' is not a trigger eventlake knows.",
            expected="available-now, once, continuous, real-time, or an interval like '10 seconds'",
            fix="use one of those forms, e.g. --trigger '30 seconds'",
        ) from None


def is_real_time(spec: str) -> bool:
    """True for Spark's real-time mode (``real-time`` or ``real-time:N seconds``)."""
    return spec.strip().lower().startswith(REAL_TIME)


def is_micro_batch(spec: str) -> bool:
    """True for triggers whose batches have offsets fixed before they run (not continuous
    processing, not real-time mode)."""
    text = spec.strip().lower()
    return not (text.startswith(CONTINUOUS) or text.startswith(REAL_TIME))
