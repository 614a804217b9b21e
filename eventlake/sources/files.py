"""Files source: new files of a folder (json, csv, parquet) with an explicit schema."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.sources.base import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILE_FORMATS = ("json", "csv", "parquet")


@dataclass(frozen=True)
class FileSource(Source):
    """Stream new files dropped into ``path``; the checkpoint lists the files already read.

    ``schema`` is a DDL string (``"id STRING, ts TIMESTAMP"``): streams never infer one.
    """

    path: Path
    format: str
    schema: str
    max_files_per_trigger: int | None = None
    options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.format not in FILE_FORMATS:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"file format '{self.format}' is not supported.",
                expected=", ".join(FILE_FORMATS),
                fix="use one of those formats",
            )

    def read_stream(self, spark: SparkSession) -> DataFrame:
        reader = spark.readStream.format(self.format).schema(self.schema)
        if self.format == "csv":
            reader = reader.option("header", "true")
        if self.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        for key, value in self.options:
            reader = reader.option(key, value)
        return reader.load(str(self.path))
