"""The user module test_spark_cluster.py runs on a cluster with ``--module``: a Python UDF
defined here, which executors can only unpickle once this file is shipped to them, and
eventlake's JVM de-duplication, whose class executors load from the jar eventlake gives
Spark."""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline
from eventlake.state import drop_duplicates_within_watermark

shipped = Pipeline("shipped")


def where_it_ran() -> str:
    """The Python that ran the UDF, and where it imported eventlake and this module from."""
    import eventlake

    here = os.path.abspath
    return f"{sys.executable}|{here(eventlake.__file__)}|{here(__file__)}|{os.getpid()}"


def shout(value: str | None) -> str | None:
    return None if value is None else value.upper()


@shipped.flow(input=KafkaInput(), output=DeltaOutput("silver", "shouted"))
def shouted(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Each record's value upper-cased by a Python UDF, with where the UDF ran."""
    # Executors unpickle these lambdas by importing this module for shout and where_it_ran.
    shouted = F.udf(lambda v: shout(v), "string")
    origin = F.udf(lambda _: where_it_ran(), "string")
    value = F.col("value").cast("string")
    return df.select("offset", shouted(value).alias("shouted"), origin(value).alias("origin"))


@shipped.flow(input=KafkaInput(), output=DeltaOutput("silver", "first_values"))
def first_values(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Each value's first record within an hour of Kafka time."""
    records = df.select(F.col("value").cast("string").alias("value"), "offset", "timestamp")
    watermarked = ctx.with_watermark(records, "timestamp", "1 hour")
    return drop_duplicates_within_watermark(watermarked, ["value"])
