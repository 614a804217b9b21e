"""Expectations on a flow: counts per expectation and batch in the event table, warn keeps
the row, drop removes it, quarantine moves it to <table>_quarantine, fail stops the flow
with EL-EXPECT-001 naming the expectation and the row."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.kafka import produce
from eventlake.pipelines import Pipeline, expect
from eventlake.testing import read_delta, run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration

ORDER = "order_id STRING, amount DOUBLE, currency STRING"


def _parsed(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return df.select(F.from_json(F.col("value").cast("string"), ORDER).alias("o")).select("o.*")


def _orders() -> list[dict[str, Any]]:
    good = [{"order_id": f"o{i}", "amount": 10.0 + i, "currency": "EUR"} for i in range(10)]
    return [
        *good,
        {"order_id": "neg1", "amount": -5.0, "currency": "EUR"},
        {"order_id": "zero", "amount": 0.0, "currency": "USD"},
        {"order_id": "gbp1", "amount": 7.0, "currency": "GBP"},
        {"order_id": "gbp2", "amount": 8.0, "currency": "GBP"},
        {"order_id": "nocur", "amount": 9.0, "currency": None},
        {"order_id": None, "amount": 11.0, "currency": "USD"},
    ]


def test_warn_drop_quarantine_and_the_event_table(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    orders = _orders()
    produce(bootstrap, topic, [(o["order_id"], json.dumps(o)) for o in orders])
    pipeline = Pipeline(unique_name("expect").replace("-", "_"))

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("silver", "orders"))
    @expect("has_id", "order_id IS NOT NULL")
    @expect("positive_amount", "amount > 0", on_violation="drop")
    @expect("known_currency", "currency IN ('EUR', 'USD')", on_violation="quarantine")
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return _parsed(df)

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    result = run_available_now(pipeline, settings)

    lake = tmp_path / "lake"
    positive = [o for o in orders if o["amount"] > 0]
    known = [o for o in positive if o["currency"] in ("EUR", "USD")]
    silver_rows = read_delta(lake / "silver" / "orders").to_pylist()
    assert sorted(str(r["order_id"]) for r in silver_rows) == sorted(
        str(o["order_id"]) for o in known
    )  # the row without an id is kept: has_id only warns
    quarantine = read_delta(lake / "silver" / "orders_quarantine").to_pylist()
    assert sorted((r["order_id"], r["failed_expectations"]) for r in quarantine) == [
        ("gbp1", ["known_currency"]), ("gbp2", ["known_currency"]), ("nocur", ["known_currency"])
    ]  # fmt: skip
    assert "failed_expectations" not in silver_rows[0]

    # Counted on every row of the transform's result, before any is dropped.
    events = read_delta(lake / "_eventlake" / "expectations").to_pylist()
    totals: Counter[tuple[str, str]] = Counter()
    for e in events:
        assert (e["pipeline"], e["flow"]) == (pipeline.name, "silver")
        totals[(e["expectation"], "passed")] += e["passed"]
        totals[(e["expectation"], "failed")] += e["failed"]
    n = len(orders)
    missing_id = sum(o["order_id"] is None for o in orders)
    not_positive = sum(o["amount"] <= 0 for o in orders)
    unknown = sum(o["currency"] not in ("EUR", "USD") for o in orders)
    failing = {"has_id": missing_id, "positive_amount": not_positive, "known_currency": unknown}
    assert totals == {
        **{(name, "passed"): n - bad for name, bad in failing.items()},
        **{(name, "failed"): bad for name, bad in failing.items()},
    }
    assert {e["on_violation"] for e in events if e["expectation"] == "known_currency"} == {
        "quarantine"
    }
    assert result.flows[f"{pipeline.name}.silver"].quarantined_rows == 3


def test_fail_stops_the_flow_naming_the_expectation_and_the_row(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    orders = _orders()
    bad = [o for o in orders if o["amount"] <= 0]
    produce(bootstrap, topic, [(o["order_id"], json.dumps(o)) for o in orders])
    pipeline = Pipeline(unique_name("expect").replace("-", "_"))

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("silver", "orders"))
    @expect("positive_amount", "amount > 0", on_violation="fail")
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return _parsed(df)

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("silver", "positioned"))
    @expect("positive_amount", "amount > 0", on_violation="fail")
    def positioned(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return df.select(F.from_json(F.col("value").cast("string"), ORDER).alias("o"),
                         "partition", "offset").select("o.*", "partition", "offset")  # fmt: skip

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("silver", "shown"))
    @expect("positive_amount", "amount > 0", on_violation="fail", show="*")
    def shown(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return _parsed(df)

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})

    def failure(flow: str) -> EventlakeError:
        with pytest.raises(EventlakeError) as caught:
            run_available_now(pipeline, settings, flows=[flow])
        assert caught.value.code == "EL-EXPECT-001"
        assert "'positive_amount' (amount > 0)" in caught.value.what
        return caught.value

    # By default no value of the row reaches the error (and so the logs): where it came
    # from when the frame knows, else nothing.
    hidden = failure("silver").what
    assert "its columns are not shown" in hidden
    assert not any(o["order_id"] in hidden for o in bad)
    at = failure("positioned").what
    assert '{"partition":0,"offset":' in at
    assert not any(o["order_id"] in at for o in bad)
    # show="*" opts into the whole row.
    whole = failure("shown").what
    assert any(json.dumps(o, separators=(",", ":")) in whole for o in bad), whole
    assert read_delta(tmp_path / "lake" / "silver" / "orders").num_rows == 0  # nothing committed
