"""Iceberg on Spark 4.2: a flow reading or writing an Iceberg table is refused before any
query starts, with EL-ICEBERG-001 naming what fails, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import DeltaInput, DeltaOutput, IcebergInput, IcebergOutput
from eventlake.context import FlowContext
from eventlake.errors import ConnectorError
from eventlake.pipelines import Pipeline
from eventlake.testing import run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration


def _as_is(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return df


@pytest.mark.parametrize("side", ["output", "input"])
def test_iceberg_flows_are_refused_with_a_coded_error(
    spark: SparkSession, tmp_path: Path, side: str
) -> None:
    source = tmp_path / "lake" / "bronze" / "source"
    spark.range(3).write.format("delta").save(str(source))
    pipeline = Pipeline(unique_name("ice").replace("-", "_"))
    if side == "output":
        pipeline.flow(name="f", input=DeltaInput("bronze", "source"),
                      output=IcebergOutput("silver", "copy"))(_as_is)  # fmt: skip
    else:
        pipeline.flow(name="f", input=IcebergInput("silver", "copy"),
                      output=DeltaOutput("gold", "copy"))(_as_is)  # fmt: skip

    with pytest.raises(ConnectorError) as caught:
        run_available_now(pipeline, settings_for(tmp_path))

    error = caught.value
    assert error.code == "EL-ICEBERG-001"
    assert "iceberg:silver/copy" in error.what
    assert "IncompatibleClassChangeError" in error.what
    assert "DeltaOutput" in (error.fix or "")
    assert not (tmp_path / "checkpoints" / pipeline.name).exists()  # no query started
    assert not any((tmp_path / "lake").glob("*/copy"))
