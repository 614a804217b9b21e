"""De-duplication within the watermark whose state is evicted by event-time timers.

Spark's ``dropDuplicatesWithinWatermark`` finds expired keys by reading every key in
its state store at every batch whose watermark moved, so its batches slow down as the
state grows (with 10 million keys in RocksDB a batch of 10,000 rows took 4.95x as long
as with 100,000: ``bench/results/state-growth.md``). :func:`drop_duplicates_within_watermark`
keeps the same rows with a JVM ``transformWithState`` processor
(``resources/java/FirstWithinWatermark.java``): each key's expiry is a timer, and Spark
finds the expired timers with a range scan of its timer index, so a batch reads only the
keys it receives and the keys that expire.

The rows kept are Spark's: a key's first row (any of them, when one batch has several)
is kept, and its later rows are dropped until the watermark reaches the first row's
event time plus the watermark's delay; rows behind the previous batch's watermark are
dropped as late. The state lives in the flow's checkpoint like Spark's own, in RocksDB
column families; switching between the two operators needs a new checkpoint, as any
change of a stateful operator does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jvm_code import own_class

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The column metadata Spark's ``withWatermark`` sets on its event-time column.
WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"
#: The JVM class :func:`drop_duplicates_within_watermark` calls (its jar: ``jvm_code``).
PROCESSOR_CLASS = "eventlake.state.FirstWithinWatermark"


def event_time_column(df: DataFrame) -> tuple[str, int]:
    """The frame's watermarked column and its delay in ms; EL-PIPELINE-002 unless exactly
    one column carries a watermark."""
    marked = [
        (f.name, int(f.metadata[WATERMARK_DELAY_KEY]))
        for f in df.schema.fields
        if WATERMARK_DELAY_KEY in f.metadata
    ]
    if len(marked) != 1:
        found = ", ".join(name for name, _ in marked) or "none"
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"drop_duplicates_within_watermark needs one watermarked column; found {found}.",
            expected="a frame with exactly one event-time column from withWatermark",
            fix="call ctx.with_watermark(df, column, delay) first, on one column",
        )
    return marked[0]


def drop_duplicates_within_watermark(df: DataFrame, keys: Sequence[str]) -> DataFrame:
    """``df.dropDuplicatesWithinWatermark(keys)`` whose batch time does not grow with the
    number of keys held: expired keys are found by event-time timers, not by a scan."""
    if isinstance(keys, str) or not keys:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"drop_duplicates_within_watermark got keys={keys!r}.",
            expected="a non-empty list of column names",
            fix='pass the key columns as a list, e.g. ["order_id"]',
        )
    from pyspark.sql import DataFrame

    if not df.isStreaming:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            "drop_duplicates_within_watermark got a batch frame: its timers and watermark "
            "exist on streams only (`eventlake verify` refuses such a flow, as it refuses "
            "Spark's dropDuplicatesWithinWatermark).",
            expected="a streaming frame with a watermark",
            fix="de-duplicate a batch frame with df.dropDuplicates(keys)",
        )
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"drop_duplicates_within_watermark: no column {', '.join(missing)} in the frame.",
            expected=f"key columns among {', '.join(df.columns)}",
            fix="name the key columns as the frame spells them",
        )
    column, delay_ms = event_time_column(df)
    spark = df.sparkSession
    jvm = spark._jvm
    assert jvm is not None
    processor = own_class(jvm, PROCESSOR_CLASS)
    return DataFrame(processor.apply(df._jdf, list(keys), column, delay_ms), spark)
