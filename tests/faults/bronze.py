"""The pipeline most faults break things under: one flow, Kafka records to a Delta table."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline
from eventlake.testing import wait_until


def bronze_pipeline(name: str) -> Pipeline:
    """Pipeline ``name`` with flow ``bronze``: every record of ``topic`` into
    ``bronze/events``."""
    p = Pipeline(name)

    @p.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
    def bronze(ctx: Any, df: DataFrame) -> DataFrame:
        return kafka_records(df)

    return p


def caught_up(count: Callable[[], int], total: int, *, timeout: float, what: str) -> float:
    """Seconds until ``count()`` reaches ``total`` (waited on, not slept)."""
    began = time.monotonic()
    wait_until(lambda: count() >= total, timeout=timeout, what=what)
    return time.monotonic() - began


def assert_each_once(offsets: list[tuple[int, int]], total: int) -> None:
    """``total`` records in the table, each (partition, offset) once: nothing lost or
    duplicated."""
    assert len(offsets) == total
    assert len(set(offsets)) == total
