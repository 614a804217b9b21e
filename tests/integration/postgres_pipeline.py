"""The pipeline the PostgreSQL target's restart tests run (test_restarts.py,
connectors/test_postgres.py): JSON files from ``inbox`` upserted into PostgreSQL by ``id``,
and with ``delta`` also appended to ``silver/rows`` by a second flow."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaOutput, FanOut, FilesInput, ToPostgres
from eventlake.pipelines import Pipeline, PipelineParams

SCHEMA = "id STRING, amount DOUBLE"


class RowsParams(PipelineParams):
    pg_table: str = "rows"


def postgres_pipeline(name: str, *, delta: bool) -> Pipeline:
    """Flows ``to_postgres`` and, with ``delta``, ``to_delta``, reading the same files."""
    p = Pipeline(name, params=RowsParams)

    def same(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    inbox = FilesInput("inbox", "json", SCHEMA)
    if delta:
        p.flow(name="to_delta", input=inbox, output=DeltaOutput("silver", "rows"))(same)
    p.flow(name="to_postgres", input=inbox,
           output=FanOut(ToPostgres("pg_table", key=("id",))))(same)  # fmt: skip
    return p
