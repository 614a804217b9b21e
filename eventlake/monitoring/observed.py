"""Counts Spark collects inside a query's batches (``DataFrame.observe``) for the metrics:
rows a flow writes and rows it quarantines. They arrive with each batch's progress."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

OUTPUT = "eventlake_output_rows"
QUARANTINE = "eventlake_quarantined_rows"
#: Each expectation's passed and failed rows (``eventlake.pipelines.expectations``).
EXPECTATIONS = "eventlake_expectations"


def count_output(df: DataFrame) -> DataFrame:
    """``df`` counting, per batch, the rows it hands to the flow's output."""
    from pyspark.sql import functions as F

    return df.observe(OUTPUT, F.count(F.lit(1)).alias("rows"))


def count_quarantined(df: DataFrame, reason: str | None = None) -> DataFrame:
    """``df`` counting, per batch, its quarantined rows: those with ``reason`` set, or
    every row when ``reason`` is None. A batch DataFrame is returned as it is."""
    from pyspark.sql import functions as F

    if not df.isStreaming:
        return df
    rows = F.count(F.lit(1)) if reason is None else F.count_if(F.col(reason).isNotNull())
    # Names must be unique within a query: a flow may quarantine two inputs.
    return df.observe(f"{QUARANTINE}_{uuid.uuid4().hex[:12]}", rows.alias("rows"))


def observed_counts(metrics: Mapping[str, Any] | None) -> tuple[int | None, int]:
    """(output rows or None when not observed, quarantined rows) of one batch's progress."""
    output, quarantined = None, 0
    for name, row in (metrics or {}).items():
        if name == EXPECTATIONS:
            continue
        value = int(row[0] or 0) if row is not None and len(row) else 0
        if name == OUTPUT:
            output = value
        elif name.startswith(QUARANTINE):
            quarantined += value
    return output, quarantined


def expectation_counts(metrics: Mapping[str, Any] | None) -> tuple[tuple[str, int, int], ...]:
    """(name, passed, failed) per expectation of the flow, from one batch's metrics."""
    row = (metrics or {}).get(EXPECTATIONS)
    if row is None:
        return ()
    values = row.asDict() if hasattr(row, "asDict") else dict(row)
    names = [k.removesuffix(".passed") for k in values if k.endswith(".passed")]
    return tuple(
        (n, int(values.get(f"{n}.passed") or 0), int(values.get(f"{n}.failed") or 0)) for n in names
    )
