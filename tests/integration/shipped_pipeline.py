"""The user module test_spark_cluster.py runs on a cluster with ``--module``: a Python UDF
defined here, which executors can only unpickle once this file is shipped to them."""

from __future__ import annotations

import os
import sys

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline

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
