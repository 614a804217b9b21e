"""The orders pipeline against an independent computation, on the real broker and Delta."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.config import Settings
from eventlake.connectors import DeltaInput, DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.generator import GeneratedRecord, OrdersConfig, OrdersGenerator, send
from eventlake.kafka import topic_offsets
from eventlake.pipelines import Pipeline
from eventlake.testing import consume_topic, read_delta, run_available_now, settings_for
from eventlake.validation.upgrade import upgrade_verdicts
from tests.integration.cli_helpers import run_cli, write_config
from tests.integration.orders_expected import (
    HALF_HOUR,
    HOUR,
    as_set,
    expected_gold,
    expected_silver,
    silver_frame,
)

pytestmark = pytest.mark.integration


def orders_settings(bootstrap: str, root: Path, topic: str, high: str, **params: Any) -> Settings:
    return settings_for(
        root, bootstrap, orders={"topic": topic, "high_value_topic": high, **params}, examples=True
    )


def late_dropped(settings: Settings) -> dict[str, int]:
    """One available-now run of orders: rows dropped by the watermark, per flow."""
    result = run_available_now("orders", settings)
    return {name: t.dropped_by_watermark for name, t in result.flows.items()}


def table(settings: Settings, layer: str, name: str) -> pd.DataFrame:
    return read_delta(settings.lake.table_path(layer, name)).to_pandas()


def test_orders_pipeline_matches_an_independent_computation(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic, high = make_topic(partitions=3, prefix="orders"), make_topic(prefix="high")
    settings = orders_settings(bootstrap, tmp_path, topic, high, max_offsets_per_trigger=50_000)
    gen = OrdersGenerator(
        OrdersConfig(
            seed=11, late_fraction=0.04, late_delay=timedelta(minutes=25),
            out_of_order_fraction=0.06, duplicate_fraction=0.05, malformed_fraction=0.05,
        )
    )  # fmt: skip

    # Phase 1, then phase 2 on the same checkpoints: phase 2's late orders meet the
    # watermark phase 1 left behind.
    phases: list[list[GeneratedRecord]] = []
    for count in (4000, 1500):
        records = list(gen.records(count))
        phases.append(records)
        send(bootstrap, topic, records)
        dropped = late_dropped(settings)
    exp = expected_silver(phases)
    total = sum(len(p) for p in phases)

    # Bronze: every record, every offset once.
    bronze = table(settings, "bronze", "orders")
    assert len(bronze) == total
    ends = topic_offsets(bootstrap, topic)
    assert sorted(zip(bronze["partition"], bronze["offset"], strict=True)) == sorted(
        (p, o) for p, end in ends.items() for o in range(end)
    )

    # Silver: the valid orders, once each, typed.
    silver = table(settings, "silver", "orders")
    assert len(silver) == len(exp.silver)
    assert set(silver["order_id"]) == set(exp.silver)
    cols = ["order_id", "user_id", "category", "region", "amount", "event_time"]
    assert as_set(silver, cols) == as_set(silver_frame(exp), cols)

    # Quarantine: exactly the malformed records, with the right reasons.
    quarantine = table(settings, "silver", "orders_quarantine")
    got = Counter(zip(quarantine["key"].where(quarantine["key"].notna(), None),
                      quarantine["reason"], strict=True))  # fmt: skip
    assert got == exp.quarantine
    assert quarantine["value"].notna().all()

    # Nothing lost: bronze = silver + quarantine + duplicates removed.
    assert len(bronze) == len(silver) + len(quarantine) + exp.duplicates_removed
    assert exp.duplicates_removed > 0

    # Gold: both window tables equal the independent computation for every closed window.
    revenue, dropped_tumbling = expected_gold(exp, HOUR, HOUR)
    got_revenue = table(settings, "gold", "revenue_hourly")
    rcols = ["window_start", "window_end", "category", "order_count", "total_amount"]
    assert len(got_revenue) > 0
    assert as_set(got_revenue, rcols) == as_set(revenue, rcols)

    sliding, dropped_sliding = expected_gold(exp, HOUR, HALF_HOUR)
    got_sliding = table(settings, "gold", "category_orders_sliding")
    scols = ["window_start", "window_end", "category", "order_count"]
    assert as_set(got_sliding, scols) == as_set(sliding, scols)
    # The late orders of phase 2 really met closed windows, and Spark reported the drops.
    assert dropped_tumbling + dropped_sliding > 0
    # Spark counts dropped rows after partial aggregation (per group and task), so its
    # metric is not the number of orders, but it is non-zero exactly when orders were dropped.
    assert (dropped["orders.category_sliding"] > 0) == (dropped_sliding > 0)
    assert (dropped["orders.revenue_hourly"] > 0) == (dropped_tumbling > 0)

    # high_value_orders: exactly the silver orders over 1000 (no crash: no duplicates).
    records = consume_topic(bootstrap, high)
    want_high = {oid for oid, o in exp.silver.items() if o["amount"] > 1000}
    assert want_high
    assert sorted(k for k, _ in records) == sorted(want_high)
    for key, value in records:
        order = json.loads(value)
        assert order["order_id"] == key
        assert order["amount"] == exp.silver[key]["amount"]


def test_silver_reads_the_topic_not_bronze(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """silver is one batch from Kafka: run alone, it holds every valid order once, with
    each order's Kafka coordinates, while bronze holds nothing."""
    topic, high = make_topic(partitions=2, prefix="orders-silver"), make_topic(prefix="high")
    settings = orders_settings(bootstrap, tmp_path, topic, high)
    records = list(OrdersGenerator(OrdersConfig(
        seed=3, duplicate_fraction=0.05, malformed_fraction=0.05)).records(600))  # fmt: skip
    send(bootstrap, topic, records)

    result = run_available_now("orders", settings, flows=["silver"])

    assert set(result.flows) == {"orders.silver"}
    bronze = settings.lake.table_path("bronze", "orders").path
    assert not bronze.exists() or len(table(settings, "bronze", "orders")) == 0
    exp = expected_silver([records])
    silver = table(settings, "silver", "orders")
    assert sorted(silver["order_id"]) == sorted(exp.silver)
    ends = topic_offsets(bootstrap, topic)
    assert all(0 <= o < ends[p] for p, o in zip(silver["partition"], silver["offset"],
                                                 strict=True))  # fmt: skip
    assert set(silver["topic"]) == {topic}


def _orders_reading_bronze() -> Pipeline:
    """``orders``' bronze and silver as shipped until 11-30: silver read bronze/orders."""
    from eventlake.reference.orders import OrdersParams, bronze, valid_orders

    old = Pipeline("orders", params=OrdersParams)
    old.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))(bronze)

    @old.flow(input=DeltaInput("bronze", "orders"), output=DeltaOutput("silver", "orders"))
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return valid_orders(ctx, df)

    return old


def test_upgrading_silver_from_bronze_to_the_topic(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A silver checkpoint of the old shape cannot resume (EL-V006); the README's way over
    (bronze's end offsets from `checkpoint show`, `checkpoint reset`, `starting_offsets`)
    continues silver where it was: every order once, none lost."""
    from eventlake.pipelines.loader import load_pipelines

    topic, high = make_topic(partitions=2, prefix="orders-upgrade"), make_topic(prefix="high")
    gen = OrdersGenerator(OrdersConfig(seed=8, malformed_fraction=0.05))
    before, after = list(gen.records(300)), list(gen.records(200))
    send(bootstrap, topic, before)
    old_settings = orders_settings(bootstrap, tmp_path, topic, high)
    run_available_now(_orders_reading_bronze(), old_settings)
    assert sorted(table(old_settings, "silver", "orders")["order_id"]) == sorted(
        expected_silver([before]).silver
    )

    shipped = load_pipelines(examples=True).get("orders")
    found = {v.flow: v for v in upgrade_verdicts(shipped, old_settings, spark)}
    assert found["orders.silver"].outcome == "cannot resume"
    why = "; ".join(found["orders.silver"].reasons)
    assert f"reads kafka:{topic}" in why
    assert "bronze/orders" in why
    assert found["orders.bronze"].outcome == "resumes safely"
    with pytest.raises(EventlakeError) as refused:
        run_available_now("orders", old_settings, flows=["bronze", "silver"])
    assert "EL-V006" in str(refused.value)

    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path,
                       orders={"topic": topic, "high_value_topic": high})  # fmt: skip
    shown = run_cli("--config", str(cfg), "checkpoint", "show", "orders.bronze", "--no-state",
                    "--format", "json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    last = [b for b in json.loads(shown.stdout)["batches"] if b["committed"]][-1]
    ends = last["sources"][0]["offset"]
    assert ends == {topic: {str(p): o for p, o in topic_offsets(bootstrap, topic).items()}}
    reset = run_cli("--config", str(cfg), "checkpoint", "reset", "orders.silver", "--yes")
    assert reset.returncode == 0, reset.stderr

    send(bootstrap, topic, after)
    settings = orders_settings(bootstrap, tmp_path, topic, high, starting_offsets=json.dumps(ends))
    run_available_now("orders", settings, flows=["bronze", "silver"])
    assert len(table(settings, "bronze", "orders")) == len(before) + len(after)
    silver = table(settings, "silver", "orders")
    assert sorted(silver["order_id"]) == sorted(expected_silver([before, after]).silver)


def test_validation_reasons(spark: SparkSession) -> None:
    from eventlake.reference.orders import checked_orders

    good = {"order_id": "a", "user_id": "u", "category": "books", "region": "r",
            "amount": 12.5, "event_time": "2026-01-01T00:00:00Z"}  # fmt: skip

    def variant(**changes: Any) -> str:
        order = {**good, **changes}
        return json.dumps({k: v for k, v in order.items() if v is not ...})

    cases = [
        (variant(), None),
        (None, "null_value"),
        ("{not json", "invalid_json"),
        ("[1, 2]", "invalid_json"),
        (variant(order_id=...), "missing_order_id"),
        (variant(order_id="  "), "missing_order_id"),
        (variant(event_time=...), "missing_event_time"),
        (variant(event_time="yesterday"), "invalid_event_time"),
        (variant(amount="lots"), "invalid_amount"),
        (variant(amount=-1), "invalid_amount"),
        (variant(amount=...), "invalid_amount"),
        (variant(category=""), "empty_category"),
        (variant(category=...), "empty_category"),
        (variant(amount="7", event_time="2026-01-01T00:00:00.123+02:00"), None),
    ]
    df = spark.createDataFrame([(v,) for v, _ in cases], "value string")
    got = [r["reason"] for r in checked_orders(df).select("reason").collect()]
    assert got == [reason for _, reason in cases]
