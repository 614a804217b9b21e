"""The console output prints each batch where the run prints its progress (Python's
stdout), not into the JVM's log file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import ConsoleOutput, FilesInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline
from eventlake.testing import run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration


def test_console_output_prints_each_batch(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.csv").write_text("id,page\nu1,/home\nu2,/cart\nu1,/pay\n")
    pipeline = Pipeline(unique_name("console").replace("-", "_"))

    @pipeline.flow(
        input=FilesInput("inbox", "csv", "id STRING, page STRING"),
        output=ConsoleOutput(),
        output_mode="complete",
    )
    def pages(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return df.groupBy("id").count().orderBy("id")

    run_available_now(pipeline, settings_for(tmp_path))

    out = capsys.readouterr().out
    assert "Batch: 0" in out
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table == ["| id|count|", "| u1|    2|", "| u2|    1|"]
