"""Files source -> files sink and memory sink, declared with the pipeline API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eventlake.connectors import FilesInput, FilesOutput, MemoryOutput
from eventlake.pipelines import Pipeline
from eventlake.testing import run_available_now, settings_for

pytestmark = pytest.mark.integration

SCHEMA = "id STRING, amount DOUBLE, ts TIMESTAMP"


def test_json_files_to_parquet_and_memory(spark: SparkSession, tmp_path: Path) -> None:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    for n in range(3):
        lines = [json.dumps({"id": f"{n}-{i}", "amount": i, "ts": "2026-01-01T00:00:00Z"})
                 for i in range(10)]  # fmt: skip
        (inbox / f"part-{n}.json").write_text("\n".join(lines) + "\n")

    files = Pipeline("files_demo")

    def doubled(ctx: Any, df: Any) -> Any:
        return df.selectExpr("id", "amount * 2 AS amount", "ts")

    files.flow(
        name="to_parquet",
        input=FilesInput("inbox", "json", SCHEMA),
        output=FilesOutput("out/parquet", "parquet"),
    )(doubled)
    files.flow(name="to_memory", input=FilesInput("inbox", "json", SCHEMA), output=MemoryOutput())(
        doubled
    )
    result = run_available_now(files, settings_for(tmp_path))
    assert result.flows["files_demo.to_parquet"].input_rows == 30

    out = spark.read.parquet(str(tmp_path / "lake" / "out" / "parquet"))
    assert out.count() == 30
    assert sorted(r["amount"] for r in out.collect()) == sorted([2.0 * i for i in range(10)] * 3)
    memory = spark.table("files_demo_to_memory")
    assert memory.count() == 30
    assert {r["id"] for r in memory.collect()} == {f"{n}-{i}" for n in range(3) for i in range(10)}
