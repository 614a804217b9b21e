"""Right and full outer stream-stream joins: unmatched rows are written once the
watermark shows no match can arrive; the matched row once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline
from eventlake.testing import read_delta, run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration

IMPRESSIONS = "imp_id STRING, imp_ad STRING, imp_time TIMESTAMP"
CLICKS = "click_id STRING, click_ad STRING, click_time TIMESTAMP"


def _write(folder: Path, rows: list[dict[str, str]]) -> None:
    folder.mkdir(parents=True)
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("how", "want"),
    [
        ("right_outer", {("i1", "c1"), (None, "c3")}),
        ("full_outer", {("i1", "c1"), ("i2", None), (None, "c3")}),
    ],
)
def test_outer_stream_stream_join(
    spark: SparkSession, tmp_path: Path, how: str, want: set[tuple[str | None, str | None]]
) -> None:
    inbox = tmp_path / "lake" / "inbox"
    _write(inbox / "impressions", [
        {"imp_id": "i1", "imp_ad": "A", "imp_time": "2026-01-01T00:00:00Z"},
        {"imp_id": "i2", "imp_ad": "B", "imp_time": "2026-01-01T00:05:00Z"},  # never clicked
        # Two hours later on both sides: the watermark moves past the rows above.
        {"imp_id": "i9", "imp_ad": "Z", "imp_time": "2026-01-01T02:00:00Z"},
    ])  # fmt: skip
    _write(inbox / "clicks", [
        {"click_id": "c1", "click_ad": "A", "click_time": "2026-01-01T00:03:00Z"},
        {"click_id": "c3", "click_ad": "C", "click_time": "2026-01-01T00:08:00Z"},  # no impression
        {"click_id": "c9", "click_ad": "Y", "click_time": "2026-01-01T02:00:00Z"},
    ])  # fmt: skip
    pipeline = Pipeline(unique_name("joins").replace("-", "_"))

    @pipeline.flow(
        input=FilesInput("inbox/impressions", "json", IMPRESSIONS),
        inputs={"clicks": FilesInput("inbox/clicks", "json", CLICKS)},
        output=DeltaOutput("gold", "attributed"),
    )
    def attributed(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        impressions = ctx.with_watermark(df, "imp_time", "5 minutes")
        clicks = ctx.with_watermark(ctx.stream("clicks"), "click_time", "5 minutes")
        condition = (F.col("imp_ad") == F.col("click_ad")) & F.col("click_time").between(
            F.col("imp_time"), F.col("imp_time") + F.expr("INTERVAL 10 MINUTES")
        )
        return impressions.join(clicks, condition, how).select("imp_id", "click_id")

    result = run_available_now(pipeline, settings_for(tmp_path))

    rows = read_delta(tmp_path / "lake" / "gold" / "attributed").to_pylist()
    got = [(r["imp_id"], r["click_id"]) for r in rows]
    assert sorted(got, key=str) == sorted(want, key=str)  # each once; i9 and c9 still wait
    assert result.flows[f"{pipeline.name}.attributed"].batches >= 2  # the no-data batch emits
