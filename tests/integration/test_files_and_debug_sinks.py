"""Files source -> files sink and memory sink, declared with the pipeline API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eventlake.config.loader import settings_from_dict
from eventlake.pipelines import FilesInput, FilesOutput, MemoryOutput, Pipeline
from eventlake.pipelines.plan import build_plan
from eventlake.pipelines.runner import run_plan

pytestmark = pytest.mark.integration

SCHEMA = "id STRING, amount DOUBLE, ts TIMESTAMP"


def test_json_files_to_parquet_and_memory(spark: SparkSession, tmp_path: Path) -> None:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    for n in range(3):
        lines = [json.dumps({"id": f"{n}-{i}", "amount": i, "ts": "2026-01-01T00:00:00Z"})
                 for i in range(10)]  # fmt: skip
        (inbox / f"part-{n}.json").write_text("\n".join(lines) + "\n")

    files = Pipeline("files_demo", register=False)

    def doubled(ctx: Any, df: Any) -> Any:
        return df.selectExpr("id", "amount * 2 AS amount", "ts")

    files.flow(
        name="to_parquet",
        source=FilesInput("inbox", "json", SCHEMA),
        sink=FilesOutput("out/parquet", "parquet"),
    )(doubled)
    files.flow(name="to_memory", source=FilesInput("inbox", "json", SCHEMA), sink=MemoryOutput())(
        doubled
    )
    settings = settings_from_dict(
        {"lake": {"root": str(tmp_path / "lake")},
         "checkpoints": {"root": str(tmp_path / "cp")}}
    )  # fmt: skip
    result = run_plan(build_plan(files, settings, spark, trigger="available-now"))
    assert result.flows["files_demo.to_parquet"].input_rows == 30

    out = spark.read.parquet(str(tmp_path / "lake" / "out" / "parquet"))
    assert out.count() == 30
    assert sorted(r["amount"] for r in out.collect()) == sorted([2.0 * i for i in range(10)] * 3)
    memory = spark.table("files_demo_to_memory")
    assert memory.count() == 30
    assert {r["id"] for r in memory.collect()} == {f"{n}-{i}" for n in range(3) for i in range(10)}
