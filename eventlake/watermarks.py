"""The watermarks a flow declares, and the one rule that judges a row late.

A flow declares a watermark with :meth:`FlowContext.with_watermark
<eventlake.context.FlowContext.with_watermark>` (eventlake's helpers ``windowed`` and
``deduplicated_events`` call it). Each build of the flow's transform gets a
:class:`WatermarkRecorder` of its own on its context, which records every watermark (the
frame it received, its column and delay, the frame it gave back and the grouping applied
to that frame): nothing in pyspark is patched, and two builds on two threads share
nothing. The late keeper, ``verify`` and the lateness report read the recorder.

Spark's rule, pinned by eventlake's tests: batch N runs with watermark ``W[N]`` = the
newest event time seen in batches before N minus the delay (never moving back). A
stateful operator in batch N drops a row at or behind ``W[N-1]``; for a window
aggregation, a window (one row per window it falls in) that ended at or before it; for a
session window with a fixed gap, a row whose event time plus the gap is at or before it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eventlake.durations import duration_ms
from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, GroupedData

    from eventlake.checkpoints import BatchRead

#: Added by :func:`flag_late`: whether the row (for windows: the row in that window) is late.
LATE = "_eventlake_late"
#: Added by :func:`flag_late` for window aggregations: the window of the row.
WINDOW = "_eventlake_window"
#: A threshold no event time is at or behind (a query's first batch drops nothing).
NO_WATERMARK = -(2**62)
SESSION_WINDOW = re.compile(r"session_window\((?P<col>[^,]+),\s*'?(?P<gap>\d[^')]*)'?\)")

#: Replaces the frame a watermark receives (``verify`` keeps only rows on time).
Rewrite = Callable[["DataFrame", str, str], "DataFrame"]


class Watermarking(Protocol):
    """What declares a watermark: a flow's context (``FlowContext.with_watermark``)."""

    def with_watermark(self, df: DataFrame, column: str, delay: str) -> DataFrame: ...


@dataclass
class WatermarkCall:
    """One watermark a transform declared: the frame it watermarked, its result, and the
    columns that result was grouped by (if it was)."""

    before: DataFrame
    column: str
    delay: str
    after: DataFrame
    grouping: tuple[Any, ...] = ()


class WatermarkRecorder:
    """The watermarks one build of a flow's transform declares, in order.

    With ``rewrite``, the frame each watermark receives is first replaced by
    ``rewrite(frame, column, delay)``.
    """

    def __init__(self, rewrite: Rewrite | None = None) -> None:
        self.rewrite = rewrite
        self._lock = threading.Lock()
        self._calls: list[WatermarkCall] = []

    @property
    def calls(self) -> list[WatermarkCall]:
        with self._lock:
            return list(self._calls)

    def watermark(
        self, df: DataFrame, column: str, delay: str, apply: Callable[[DataFrame], DataFrame]
    ) -> DataFrame:
        """``apply(df)`` (the watermarked frame), recorded; the grouping the result is given
        next (``groupBy``/``groupby`` on it) is recorded too."""
        before = self.rewrite(df, column, delay) if self.rewrite is not None else df
        after = apply(before)
        call = WatermarkCall(before, column, delay, after)
        with self._lock:
            self._calls.append(call)
        _record_grouping(after, call)
        return after


def _record_grouping(df: DataFrame, call: WatermarkCall) -> None:
    """Record on ``call`` the columns ``df`` (this instance only) is grouped by."""
    group = df.groupBy

    def grouped(*cols: Any) -> GroupedData:
        call.grouping = cols
        return group(*cols)

    df.groupBy = grouped  # type: ignore[method-assign]
    df.groupby = grouped  # type: ignore[method-assign]


def late_threshold_ms(batches: Sequence[BatchRead], n: int) -> int:
    """The watermark batch ``n`` (an index of ``batches``, in order) judges its rows
    against: the one batch ``n - 1`` ran with (:data:`NO_WATERMARK` for the first)."""
    return batches[n - 1].watermark_ms if n > 0 else NO_WATERMARK


def _text(col: Any) -> str:
    return str(col).removeprefix("Column<'").removesuffix("'>")


def sliding(mark: WatermarkCall) -> bool:
    """Whether ``mark``'s rows are aggregated by a sliding window (several per row)."""
    texts = [_text(c) for c in mark.grouping if _text(c).startswith("window(")]
    args = [a.strip().strip("'") for a in texts[0][len("window(") :].split(",")] if texts else []
    return len(args) >= 3 and args[1] != args[2]


def flag_late(mark: WatermarkCall, df: DataFrame, threshold: Column, where: str = "") -> DataFrame:
    """``df`` (rows at ``mark``'s watermark) with :data:`LATE`: whether the operator after
    the watermark drops it when the late-events watermark is ``threshold`` (epoch ms).

    For an aggregation by ``window(...)`` each row comes once per window it falls in, with
    that window in :data:`WINDOW` (once per row for a tumbling window).
    """
    from pyspark.sql import functions as F

    texts = [_text(c) for c in mark.grouping]
    window = next((c for c, t in zip(mark.grouping, texts, strict=True)
                   if t.startswith("window(")), None)  # fmt: skip
    session = next((t for t in texts if t.startswith("session_window(")), None)
    event_ms = F.unix_millis(F.col(mark.column))
    if window is not None:
        windowed = df.withColumn(WINDOW, window)
        return windowed.withColumn(LATE, F.unix_millis(F.col(f"{WINDOW}.end")) <= threshold)
    if session is not None:
        found = SESSION_WINDOW.match(session)
        if found is None:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"{where}: its session gap ({session}) is not a fixed duration.",
                expected="session_window(column, 'N minutes') to judge its late rows",
                fix="use a fixed gap (or, for kept late rows, declare keep_late=False)",
            )
        gap = duration_ms(found.group("gap").strip())
        return df.withColumn(LATE, event_ms + F.lit(gap) <= threshold)
    return df.withColumn(LATE, event_ms <= threshold)
