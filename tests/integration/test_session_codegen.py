"""eventlake's Spark session keeps the generated code of more plans than Spark's 100: a
streaming run plans every flow's micro-batch again, and a plan whose classes are still
compiled skips Janino, class loading and the JIT that follows a new class."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest

from eventlake.session import CODEGEN_CACHE_DEFAULT, CODEGEN_CACHE_ENTRIES
from eventlake.testing import codegen_compilations

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

#: Plans of two generated classes each: more classes than Spark's default cache holds.
PLANS = 60
SPARK_DEFAULT_ENTRIES = 100


def _run_plans(spark: SparkSession, factor: int) -> list[int]:
    plans = (spark.range(1).selectExpr(f"id * {factor} + {i} AS v") for i in range(PLANS))
    return [plan.head()["v"] for plan in plans]


def test_plans_asked_for_again_reuse_their_compiled_code(spark: SparkSession) -> None:
    assert spark.conf.get(CODEGEN_CACHE_ENTRIES) == CODEGEN_CACHE_DEFAULT
    factor = random.randrange(10**6, 10**7)  # code no earlier test compiled
    before = codegen_compilations(spark)
    assert _run_plans(spark, factor) == list(range(PLANS))
    first = codegen_compilations(spark) - before
    assert first > SPARK_DEFAULT_ENTRIES  # the working set is larger than Spark's cache

    before = codegen_compilations(spark)
    assert _run_plans(spark, factor) == list(range(PLANS))
    second = codegen_compilations(spark) - before
    # With Spark's 100 entries, least recently used first, the same loop compiled most
    # classes again (96 of 120).
    assert second < PLANS // 10, f"{second} compiles when asked again (first pass {first})"
