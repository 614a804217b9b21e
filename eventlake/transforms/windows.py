"""Window helpers: Delta needs top-level columns, not the ``window`` struct."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def flatten_window(df: DataFrame, column: str = "window") -> DataFrame:
    """Replace struct ``window`` by ``window_start`` and ``window_end`` (first columns)."""
    from pyspark.sql import functions as F

    rest = [c for c in df.columns if c != column]
    return df.select(
        F.col(f"{column}.start").alias("window_start"),
        F.col(f"{column}.end").alias("window_end"),
        *rest,
    )
