"""Delta Lake: tables as an input, the native streaming output, and fan-out targets
(append and MERGE), all exactly-once; plus the one way eventlake creates a table."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.connectors.base import (
    BatchContext,
    Guarantee,
    Input,
    Output,
    Prepare,
    TableRef,
    Target,
)

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig, FlowContext


def ddl_schema(ddl: str) -> StructType:
    """The struct a DDL column list (``"id STRING, ts TIMESTAMP"``) describes."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def ensure_delta_table(
    spark: SparkSession,
    path: Path | str,
    schema: StructType | str,
    partition_by: tuple[str, ...] = (),
) -> None:
    """Create an empty Delta table at ``path`` with ``schema`` (a struct or DDL) unless a
    Delta table is there already."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, str(path)):
        return
    struct = ddl_schema(schema) if isinstance(schema, str) else schema
    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(struct)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    builder.execute()


@dataclass(frozen=True)
class _LakeTable:
    layer: str
    name: str

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"delta:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        return {self.describe(flow): delta_row_count(flow.table_path(self.layer, self.name))}


def delta_row_count(path: Path) -> int | None:
    """Rows in the Delta table's current version, from its log's file statistics (read
    with delta-rs, no Spark); None when there is no table at ``path``."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        files = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    except TableNotFoundError:
        return None
    return int(pa.compute.sum(files.column("num_records")).as_py() or 0)


@dataclass(frozen=True)
class DeltaInput(_LakeTable, Input):
    """Stream the appends of the Delta table ``<lake.root>/<layer>/<table>``; the
    checkpoint records the table version read.

    The pipeline's ``max_files_per_trigger`` bounds each micro-batch (Delta's default is
    1000 files). The table must only receive appends (updates or deletes upstream stop
    the stream).
    """

    def read(self, ctx: FlowContext) -> DataFrame:
        reader = ctx.spark.readStream.format("delta")
        if ctx.params.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(ctx.params.max_files_per_trigger))
        return reader.load(str(ctx.table_path(self.layer, self.name)))

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        return ctx.spark.read.format("delta").load(str(ctx.table_path(self.layer, self.name)))


@dataclass(frozen=True)
class DeltaOutput(_LakeTable, Output):
    """Append each micro-batch to the Delta table ``<lake.root>/<layer>/<table>``.

    Delivery guarantee: exactly-once. A batch commits when its Delta transaction commits;
    that commit records the query id and batch id (a Delta ``SetTransaction``). After a
    crash the query restarts from its checkpoint and replays the last planned batch with
    the same id and offsets; Delta sees that id already committed and skips the write, so
    no row is lost or duplicated. Requires a checkpoint owned by this flow alone.
    Output modes: append and complete (complete overwrites the table each batch).
    """

    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    guarantee = Guarantee.EXACTLY_ONCE
    output_modes = frozenset({"append", "complete"})

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        ensure_delta_table(ctx.spark, path, schema, self.partition_by)

    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        writer = writer.format("delta")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.merge_schema:
            writer = writer.option("mergeSchema", "true")
        return writer.start(str(ctx.table_path(self.layer, self.name)))


TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@contextmanager
def delta_transaction(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Tag every Delta commit made inside with ``(app_id, version)``, then untag.

    Delta records the pair in the commit and skips a later write of the same table with
    the same app id and a version not above the recorded one. This is how MERGE and other
    DML become idempotent; DataFrame writes can take the ``txnAppId``/``txnVersion``
    options instead. ``spark`` must be the batch's own session (``df.sparkSession`` in
    foreachBatch): each streaming query runs on a clone, so flows never see each other's.
    """
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


@dataclass(frozen=True)
class ToDelta(_LakeTable, Target):
    """Append the batch to ``<layer>/<table>``.

    Delivery guarantee: exactly-once. The append commits with ``txnAppId`` (this flow,
    target and checkpoint) and ``txnVersion`` (the batch id); a replay of the batch after
    a crash finds that pair in the table's log and writes nothing. With ``prepare``, give
    the written columns as ``schema`` (DDL) so the table exists before the first batch.
    """

    prepare: Prepare | None = None
    schema: str | None = None
    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    guarantee = Guarantee.EXACTLY_ONCE

    def target_id(self, flow: FlowConfig) -> str:
        return f"delta:{self.layer}/{self.name}"

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        if self.prepare is not None and self.schema is None:
            return
        path = ctx.table_path(self.layer, self.name)
        ensure_delta_table(ctx.spark, path, self.schema or schema, self.partition_by)

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        writer = (
            self.rows(df, batch)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", batch.app_id(self.target_id(batch.ctx)))
            .option("txnVersion", str(batch.batch_id))
        )
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.merge_schema:
            writer = writer.option("mergeSchema", "true")
        writer.save(str(batch.ctx.table_path(self.layer, self.name)))


#: Builds the MERGE of ``source`` into ``target``; the fan-out executes it.
MergeBuilder = Callable[["DeltaTable", "DataFrame", BatchContext], "DeltaMergeBuilder"]


@dataclass(frozen=True)
class MergeDelta(_LakeTable, Target):
    """MERGE the batch (or what ``prepare`` makes of it) into ``<layer>/<table>``.

    ``build(target, source, batch)`` returns the merge; ``schema`` (DDL) creates the table
    when it does not exist.

    Delivery guarantee: exactly-once. The MERGE commits as one Delta transaction tagged
    with this flow's app id and the batch id (:func:`delta_transaction`); a replay of the
    batch after a crash is skipped by Delta.
    """

    build: MergeBuilder
    schema: str
    prepare: Prepare | None = None
    partition_by: tuple[str, ...] = ()
    guarantee = Guarantee.EXACTLY_ONCE

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"merge:{self.layer}/{self.name}"

    def target_id(self, flow: FlowConfig) -> str:
        return f"merge:{self.layer}/{self.name}"

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        ensure_delta_table(ctx.spark, path, self.schema, self.partition_by)

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        from delta.tables import DeltaTable

        source = self.rows(df, batch)
        path = batch.ctx.table_path(self.layer, self.name)
        ensure_delta_table(batch.spark, path, self.schema, self.partition_by)
        app_id = batch.app_id(self.target_id(batch.ctx))
        with delta_transaction(batch.spark, app_id, batch.batch_id):
            target = DeltaTable.forPath(batch.spark, str(path))
            self.build(target, source, batch).execute()
