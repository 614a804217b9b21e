"""Iceberg tables as an input and an output: declared like Delta's, refused when planned.

Maven Central has no Iceberg Spark runtime for Spark 4.2 (``iceberg-spark-runtime-4.2``);
the Spark 4.1 builds (1.11.0, 1.12.0) load on pyspark 4.2.0 and can create and append,
but fail when a table is read (in some sessions at creation too):
``IncompatibleClassChangeError`` (Spark 4.2 made ``connector.catalog.View`` a class
and ``CatalogManager`` an interface). A connector that can write tables it cannot read
back would be worse than none, so these raise EL-ICEBERG-001 when a flow using them is
planned, before any query starts. ``make iceberg-probe`` re-runs the check
(docs/iceberg.md has its output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from eventlake.connectors.base import Input, Output, TableRef
from eventlake.connectors.capabilities import Guarantee, InputCapabilities, OutputCapabilities
from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig, FlowContext

#: What `make iceberg-probe` found on pyspark 4.2.0 (docs/iceberg.md).
PROBED = (
    "iceberg-spark-runtime-4.1_2.13 1.12.0 and 1.11.0 can create and append to tables on "
    "Spark 4.2 but fail on every read (java.lang.IncompatibleClassChangeError: class "
    "org.apache.iceberg.spark.source.SparkView can not implement "
    "org.apache.spark.sql.connector.catalog.View, because it is not an interface), and no "
    "iceberg-spark-runtime-4.2_2.13 is on Maven Central"
)


@dataclass(frozen=True)
class _IcebergTable:
    """An Iceberg table ``<layer>.<table>`` in a Hadoop catalog under ``lake.root``."""

    layer: str
    name: str

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"iceberg:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)

    def _unavailable(self, flow: FlowConfig) -> NoReturn:
        raise EventlakeError(
            ErrorCode.ICEBERG_UNAVAILABLE,
            f"{self.describe(flow)} is an Iceberg table, and Iceberg does not run on "
            f"this Spark: {PROBED}.",
        )


@dataclass(frozen=True)
class IcebergInput(_IcebergTable, Input):
    """Stream the appends of the Iceberg table ``<layer>.<table>``.

    Refused with EL-ICEBERG-001 on Spark 4.2 (see the module docstring).
    """

    capabilities = InputCapabilities()

    def read(self, ctx: FlowContext) -> DataFrame:
        self._unavailable(ctx)


@dataclass(frozen=True)
class IcebergOutput(_IcebergTable, Output):
    """Append each micro-batch to the Iceberg table ``<layer>.<table>``.

    Delivery guarantee: exactly-once, as Iceberg's Spark sink records the query id and
    batch id in each snapshot's summary and skips a replayed batch. Refused with
    EL-ICEBERG-001 on Spark 4.2 (see the module docstring).
    """

    capabilities = OutputCapabilities(guarantee=Guarantee.EXACTLY_ONCE, late_rows=False)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        self._unavailable(ctx)

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        self._unavailable(ctx)
