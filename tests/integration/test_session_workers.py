"""Python workers (UDFs, transformWithState) run in the driver's own environment."""

from __future__ import annotations

import sys

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

pytestmark = pytest.mark.integration


def test_python_udf_workers_use_the_driver_interpreter(spark: SparkSession) -> None:
    # No type hints: with them, pyspark 4.2 tries to infer an Arrow UDF and warns.
    which = F.udf(lambda _: __import__("sys").executable, "string")
    row = spark.range(1).select(which("id").alias("python")).first()
    assert row is not None
    assert row["python"] == sys.executable
