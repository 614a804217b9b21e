"""upgrade-check: changed code against a flow's checkpoint. A compatible change resumes
safely, a new watermark delay resumes with changed results, a changed state key and a
removed operator cannot resume, and `run` refuses those with the same text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.config import Settings
from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.kafka import produce
from eventlake.pipelines import Pipeline
from eventlake.testing import read_delta, run_available_now, settings_for
from eventlake.validation import check_pipeline
from eventlake.validation.upgrade import upgrade_verdicts

pytestmark = pytest.mark.integration

EVENT = "order_id STRING, user_id STRING, ts TIMESTAMP"


def _orders(keys: list[str] | None, delay: str = "10 minutes", extra: bool = False) -> Pipeline:
    """The flow as coded in one release: dedup by ``keys`` (None: no dedup)."""
    pipeline = Pipeline("upgrading")

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("silver", "orders"))
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        e = F.from_json(F.col("value").cast("string"), EVENT).alias("e")
        rows = ctx.with_watermark(df.select(e).select("e.*"), "ts", delay)
        if extra:
            rows = rows.withColumn("channel", F.lit("web"))
        return rows.dropDuplicatesWithinWatermark(keys) if keys else rows

    return pipeline


def _verdict(spark: SparkSession, pipeline: Pipeline, settings: Settings) -> tuple[str, str]:
    [found] = upgrade_verdicts(pipeline, settings, spark)
    return found.outcome, "; ".join(found.reasons)


def test_upgrade_verdicts_and_run_refusing_what_cannot_resume(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    events = [{"order_id": f"o{i % 7}", "user_id": f"u{i % 3}", "ts": "2026-01-01T00:00:00Z"}
              for i in range(20)]  # fmt: skip
    produce(bootstrap, topic, [(e["order_id"], json.dumps(e)) for e in events])
    settings = settings_for(tmp_path, bootstrap, upgrading={"topic": topic})
    assert _verdict(spark, _orders(["order_id"]), settings) == ("new", "")
    run_available_now(_orders(["order_id"]), settings)
    assert read_delta(tmp_path / "lake" / "silver" / "orders").num_rows == 7

    assert _verdict(spark, _orders(["order_id"], extra=True), settings) == ("resumes safely", "")

    outcome, why = _verdict(spark, _orders(["order_id"], delay="20 minutes"), settings)
    assert outcome == "resumes, changes results"
    assert why == "watermark ts 10 minutes -> ts 20 minutes"

    outcome, why = _verdict(spark, _orders(["order_id", "user_id"]), settings)
    assert outcome == "cannot resume"
    assert why == "state key of dedupeWithinWatermark changed: (order_id) -> (order_id, user_id)"

    outcome, why = _verdict(spark, _orders(None), settings)
    assert outcome == "cannot resume"
    assert why.startswith("stateful operator dedupeWithinWatermark was removed")

    # run refuses the changed key before any query starts, with the same reasons.
    with pytest.raises(EventlakeError) as refused:
        run_available_now(_orders(["order_id", "user_id"]), settings)
    assert refused.value.code == "EL-VALIDATE-001"
    assert "EL-V006" in str(refused.value)
    assert "(order_id) -> (order_id, user_id)" in str(refused.value)
    assert "eventlake checkpoint reset upgrading.silver --yes" in str(refused.value)
    # A new watermark delay is a warning: the run goes ahead, and records the delay it
    # resumed with, so the warning is not given again and the old delay is now the change.
    run_available_now(_orders(["order_id"], delay="20 minutes"), settings)
    assert _verdict(spark, _orders(["order_id"], delay="20 minutes"), settings) == (
        "resumes safely",
        "",
    )
    outcome, why = _verdict(spark, _orders(["order_id"]), settings)
    assert (outcome, why) == (
        "resumes, changes results",
        "watermark ts 20 minutes -> ts 10 minutes",
    )
    _, report = check_pipeline(_orders(["order_id"], delay="20 minutes"), settings, spark)
    assert [f.code for f in report.findings if f.code == "EL-W110"] == []
    # What decides whether it can resume at all stays as the checkpoint was written.
    outcome, why = _verdict(spark, _orders(["order_id", "user_id"], delay="20 minutes"), settings)
    assert outcome == "cannot resume"
    assert why == "state key of dedupeWithinWatermark changed: (order_id) -> (order_id, user_id)"
