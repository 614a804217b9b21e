"""Processing time as a column whose generated code is the same at every micro-batch.

In a stream, Spark turns ``current_timestamp()`` into the batch's start time and writes it
into the generated code as a constant: each micro-batch of a flow using it compiles its
code anew (Janino, on the batch's path) and leaves one more class in the JVM until Spark's
codegen cache drops it. :func:`processing_time` asks the clock from the code instead, once
a row (``ProcessingTime.java``, in eventlake's jar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlake.jvm_code import own_class

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

CLOCK_CLASS = "eventlake.transforms.ProcessingTime"


def processing_time(spark: SparkSession) -> Column:
    """A TIMESTAMP column: when the task computed the row (EL-JARS-004 without eventlake's jar)."""
    from pyspark.sql.classic.column import Column

    assert spark._jvm is not None
    return Column(own_class(spark._jvm, CLOCK_CLASS).column())
