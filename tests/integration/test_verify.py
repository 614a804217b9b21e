"""verify: a flow's output recomputed in batch from its input as of the last committed
batch. A correct windowed flow verifies clean, with the late click Spark dropped left out
too; an update-mode count appended to a table (a real bug) is caught, row by row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.errors import EventlakeError
from eventlake.kafka import produce
from eventlake.operations.verify import verify_flow
from eventlake.testing import read_delta, run_available_now, settings_for
from tests.integration import verify_pipeline
from tests.integration.cli_helpers import run_cli, write_config
from tests.integration.verify_pipeline import clicks

pytestmark = pytest.mark.integration


def _clicks(*events: tuple[str, str]) -> list[tuple[str, str]]:
    return [(u, json.dumps({"user": u, "ts": f"2026-01-01T{t}:00Z"})) for u, t in events]


def test_verify_clean_flow_and_the_rows_of_a_broken_one(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    settings = settings_for(tmp_path, bootstrap, verified={"topic": topic}, examples=True)
    produce(bootstrap, topic, _clicks(("a", "00:01"), ("a", "00:04"), ("b", "00:08"),
                                      ("a", "00:30")))  # fmt: skip
    run_available_now(clicks, settings)
    # 00:02 arrives after the watermark passed 00:25: Spark drops it as late. 00:22 is
    # behind it too, but its window [00:20, 00:30) is open: Spark counts it.
    produce(bootstrap, topic, _clicks(("b", "00:02"), ("c", "00:22"), ("a", "00:33"),
                                      ("b", "01:00")))  # fmt: skip
    run_available_now(clicks, settings)
    windows = read_delta(tmp_path / "lake" / "gold" / "clicks_10min").to_pylist()
    assert sorted((r["user"], r["count"]) for r in windows) == [
        ("a", 2), ("a", 2), ("b", 1), ("c", 1)
    ]  # fmt: skip

    good = verify_flow(clicks, "per_window", settings, spark)
    assert good.ok, good
    assert (good.expected_rows, good.output_rows, good.late_rows) == (4, 4, 1)

    with pytest.raises(EventlakeError) as refused:
        verify_flow(clicks, "per_window_direct", settings, spark)
    assert refused.value.code == "EL-PIPELINE-002"
    assert "DataFrame.withWatermark" in refused.value.what
    assert "ctx.with_watermark" in (refused.value.fix or "")

    bad = verify_flow(clicks, "per_user", settings, spark)
    assert not bad.ok
    assert (bad.missing_count, bad.unexpected_count) == (0, 2)
    # Batch 0 appended a:3, b:1; batch 2 appended a:4, b:3, c:1: the first two are stale.
    assert sorted((r["user"], r["count"]) for r in bad.unexpected) == [("a", 3), ("b", 1)]

    # The command a user runs: exit 1 and the rows in the output.
    module = Path(verify_pipeline.__file__)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, verified={"topic": topic})
    cli = run_cli("--config", str(cfg), "verify", "verified.per_user", "--module", str(module))
    assert cli.returncode == 1, cli.stderr
    assert "2 row(s) in the output, not recomputed" in cli.stdout


def test_verify_a_medallions_delta_reading_flows(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """orders' revenue_hourly reads silver, a Delta table: verify replays the files each
    batch read, by table version and file position, judges late rows by the batch that
    read them, and finds it clean; what it cannot judge is refused, saying why."""
    from datetime import timedelta

    from eventlake.generator import OrdersConfig, OrdersGenerator, send

    topic = make_topic(partitions=2, prefix="verify-orders")
    records = list(OrdersGenerator(OrdersConfig(
        seed=5, late_fraction=0.06, late_delay=timedelta(minutes=25),
        out_of_order_fraction=0.05, duplicate_fraction=0.03, malformed_fraction=0.02,
    )).records(800))  # fmt: skip
    params = {"topic": topic, "high_value_topic": "unused", "max_offsets_per_trigger": 150,
              "max_files_per_trigger": 1}  # fmt: skip
    settings = settings_for(tmp_path, bootstrap, orders=params, examples=True)
    flows = ["bronze", "silver", "revenue_hourly", "category_sliding"]
    send(bootstrap, topic, records[:400])
    run_available_now("orders", settings, flows=flows)
    send(bootstrap, topic, records[400:])
    run_available_now("orders", settings, flows=flows)

    from eventlake.pipelines.loader import load_pipelines

    orders = load_pipelines(examples=True).get("orders")
    revenue = verify_flow(orders, "revenue_hourly", settings, spark)
    assert revenue.ok, revenue
    assert revenue.expected_rows == revenue.output_rows > 0
    assert revenue.late_rows > 0  # late orders the silver -> gold batches dropped, left out
    # silver's dropDuplicatesWithinWatermark runs on streams only: refused, saying so.
    with pytest.raises(EventlakeError) as streams_only:
        verify_flow(orders, "silver", settings, spark)
    assert streams_only.value.code == "EL-PIPELINE-002"
    assert "dropDuplicatesWithinWatermark" in streams_only.value.what
    with pytest.raises(EventlakeError) as refused:
        verify_flow(orders, "category_sliding", settings, spark)
    assert refused.value.code == "EL-PIPELINE-002"
    assert "sliding window" in refused.value.what
