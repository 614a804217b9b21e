"""Delta Lake: the native streaming append sink, and batch writers (append, MERGE)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sinks.base import Sink
from eventlake.sinks.batch import BatchContext, BatchWriter, Prepare

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class DeltaAppendSink(Sink):
    """Append each micro-batch to the Delta table at ``path``.

    Delivery guarantee: exactly-once. A batch commits when its Delta transaction commits;
    that commit records the query id and batch id (a Delta ``SetTransaction``). After a
    crash the query restarts from its checkpoint and replays the last planned batch with
    the same id and offsets; Delta sees that id already committed and skips the write, so
    no row is lost or duplicated. Requires a checkpoint owned by this query alone.
    Output modes: append and complete (complete overwrites the table each batch).
    """

    path: Path
    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    output_modes = frozenset({"append", "complete"})

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        writer = writer.format("delta")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.merge_schema:
            writer = writer.option("mergeSchema", "true")
        return writer.start(str(self.path))


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
class DeltaBatchAppend(BatchWriter):
    """Append the batch to the Delta table at ``path``.

    Delivery guarantee: exactly-once. The append commits with ``txnAppId`` (this flow,
    writer and checkpoint) and ``txnVersion`` (the batch id); a replay of the batch after
    a crash finds that pair in the table's log and writes nothing.
    """

    path: Path
    name: str = "delta"
    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    prepare: Prepare | None = None

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        writer = (
            self.source(df, batch)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", batch.app_id(self.name))
            .option("txnVersion", str(batch.batch_id))
        )
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.merge_schema:
            writer = writer.option("mergeSchema", "true")
        writer.save(str(self.path))


#: Builds the MERGE of ``source`` into ``target``; the writer executes it.
MergeBuilder = Callable[["DeltaTable", "DataFrame", BatchContext], "DeltaMergeBuilder"]


@dataclass(frozen=True)
class DeltaMerge(BatchWriter):
    """MERGE the batch (or what ``prepare`` makes of it) into the Delta table at ``path``.

    Delivery guarantee: exactly-once. The MERGE commits as one Delta transaction tagged
    with this flow's app id and the batch id (:func:`delta_transaction`); a replay of the
    batch after a crash is skipped by Delta. The table is created from ``schema`` (DDL)
    when it does not exist.
    """

    path: Path
    build: MergeBuilder
    schema: str
    name: str = "merge"
    prepare: Prepare | None = None
    partition_by: tuple[str, ...] = ()

    def ensure(self, spark: SparkSession) -> None:
        from delta.tables import DeltaTable

        if DeltaTable.isDeltaTable(spark, str(self.path)):
            return
        builder = DeltaTable.createIfNotExists(spark).location(str(self.path))
        builder = builder.addColumns(_struct(spark, self.schema))
        if self.partition_by:
            builder = builder.partitionedBy(*self.partition_by)
        builder.execute()

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        from delta.tables import DeltaTable

        source = self.source(df, batch)
        self.ensure(batch.spark)
        with delta_transaction(batch.spark, batch.app_id(self.name), batch.batch_id):
            target = DeltaTable.forPath(batch.spark, str(self.path))
            self.build(target, source, batch).execute()


def _struct(spark: SparkSession, ddl: str) -> StructType:
    from pyspark.sql.types import StructType

    schema = spark.createDataFrame([], ddl).schema
    assert isinstance(schema, StructType)
    return schema
