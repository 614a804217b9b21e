"""Stream-static join: a running orders flow picks up changes to the dimension table
reference/categories without a restart."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.generator import OrdersConfig, OrdersGenerator, send
from eventlake.pipelines.runner import RunResult
from eventlake.run import run_pipeline
from eventlake.testing import settings_for, wait_until
from tests.integration.event_time_helpers import table

pytestmark = pytest.mark.integration


def test_running_flow_joins_the_newest_dimension_version(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(prefix="orders")
    settings = settings_for(
        tmp_path, bootstrap, orders=dict(topic=topic, trigger="1 second"), examples=True
    )
    dims = str(settings.lake.table_path("reference", "categories"))
    v1 = [(c, "retail", 0.1) for c in ("books", "electronics", "garden", "grocery", "toys",
                                       "fashion")]  # fmt: skip
    schema = "category STRING, department STRING, margin_rate DOUBLE"
    spark.createDataFrame(v1, schema).write.format("delta").save(dims)
    gen = OrdersGenerator(OrdersConfig(seed=4))
    stop = threading.Event()
    result: list[RunResult] = []
    flows = ["bronze", "silver", "enriched"]
    runner = threading.Thread(
        target=lambda: result.append(run_pipeline("orders", settings, flows=flows, stop=stop))
    )
    runner.start()

    def departments(count: int) -> dict[str, str] | None:
        first_commit = "_delta_log/00000000000000000000.json"
        if not (settings.lake.table_path("gold", "orders_enriched").path / first_commit).exists():
            return None  # the run is still planning: the table is not created yet
        rows = table(settings, "gold", "orders_enriched")
        return (
            dict(zip(rows["order_id"], rows["department"], strict=True))
            if len(rows) >= count
            else None
        )

    try:
        first = list(gen.records(30))
        send(bootstrap, topic, first)
        seen = wait_until(lambda: departments(30), timeout=120, what="30 enriched orders")
        assert set(seen.values()) == {"retail"}

        # Change the dimension while the query runs: the next batches join the new version.
        v2 = [(c, "online", 0.2) for c, _, _ in v1]
        spark.createDataFrame(v2, schema).write.format("delta").mode("overwrite").save(dims)
        second = list(gen.records(30))
        send(bootstrap, topic, second)
        seen = wait_until(lambda: departments(60), timeout=120, what="60 enriched orders")
    finally:
        stop.set()
        runner.join(180)
    assert result, "the run did not end"
    assert {seen[r.key or ""] for r in first} == {"retail"}
    assert {seen[r.key or ""] for r in second} == {"online"}
