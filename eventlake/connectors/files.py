"""Files: new files of a folder as an input; micro-batches as files (json, csv, parquet)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import Input, Output
from eventlake.connectors.capabilities import Guarantee, InputCapabilities, OutputCapabilities
from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from eventlake.context import FlowConfig, FlowContext

FILE_FORMATS = ("json", "csv", "parquet")


def _check_format(fmt: str) -> None:
    if fmt not in FILE_FORMATS:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"file format '{fmt}' is not supported.",
            expected=", ".join(FILE_FORMATS),
            fix="use one of those formats",
        )


@dataclass(frozen=True)
class _Folder:
    path: str
    format: str

    def __post_init__(self) -> None:
        _check_format(self.format)

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"{self.format}:{self.path}"


@dataclass(frozen=True)
class FilesInput(_Folder, Input):
    """Stream new files dropped into ``path`` (relative paths are under the lake root);
    the checkpoint lists the files already read.

    ``schema`` is a DDL string (``"id STRING, ts TIMESTAMP"``): streams never infer one.
    CSV files have a header line. The pipeline's ``max_files_per_trigger`` bounds each
    micro-batch.
    """

    schema: str
    options: tuple[tuple[str, str], ...] = ()
    capabilities = InputCapabilities()

    def read(self, ctx: FlowContext) -> DataFrame:
        reader = ctx.spark.readStream.format(self.format).schema(self.schema)
        if self.format == "csv":
            reader = reader.option("header", "true")
        if ctx.params.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(ctx.params.max_files_per_trigger))
        for key, value in self.options:
            reader = reader.option(key, value)
        return reader.load(str(ctx.under_lake(self.path)))


@dataclass(frozen=True)
class FilesOutput(_Folder, Output):
    """Write each batch's rows as new files under ``path`` (relative: under the lake root).

    Delivery guarantee: exactly-once for readers that use the output's ``_spark_metadata``
    log (Spark, and ``spark.read`` on the folder): files of a batch become visible when
    the batch's log entry commits; files left by a crashed batch are never listed.
    Plain file listings (other tools) may see those orphan files. Append mode only.
    """

    format: str = "parquet"
    partition_by: tuple[str, ...] = ()
    capabilities = OutputCapabilities(guarantee=Guarantee.EXACTLY_ONCE)

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        writer = writer.format(self.format)
        if self.format == "csv":
            writer = writer.option("header", "true")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        return writer.start(str(ctx.under_lake(self.path)))
