"""Window helpers: Delta needs top-level columns, not the ``window`` struct."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData

    from eventlake.watermarks import Watermarking


def windowed(
    ctx: Watermarking,
    df: DataFrame,
    time: str,
    delay: str,
    size: str,
    *keys: str,
    slide: str | None = None,
) -> GroupedData:
    """``df`` watermarked on ``time`` by ``delay`` (``ctx.with_watermark``), grouped by a
    window of ``size`` (sliding by ``slide``, else tumbling) and ``keys``: aggregate it,
    then :func:`flatten_window`.

    In append mode each window is written once, when the watermark passes its end.
    """
    from pyspark.sql import functions as F

    window = F.window(time, size, slide) if slide else F.window(time, size)
    return ctx.with_watermark(df, time, delay).groupBy(window, *keys)


def flatten_window(df: DataFrame, column: str = "window") -> DataFrame:
    """Replace struct ``window`` by ``window_start`` and ``window_end`` (first columns)."""
    from pyspark.sql import functions as F

    rest = [c for c in df.columns if c != column]
    return df.select(
        F.col(f"{column}.start").alias("window_start"),
        F.col(f"{column}.end").alias("window_end"),
        *rest,
    )
