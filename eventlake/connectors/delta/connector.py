"""Delta Lake as a connector: tables as an input, an output and fan-out targets (append
and MERGE), all exactly-once through the marked-commit protocol (:mod:`.commits`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import (
    REPLAYED_BATCH,
    BatchContext,
    BatchFunction,
    Input,
    Output,
    Prepare,
    TableRef,
    Target,
)
from eventlake.connectors.capabilities import Guarantee, InputCapabilities, OutputCapabilities
from eventlake.connectors.delta.commits import batch_committed, marked_commits, write_once
from eventlake.connectors.delta.log_checkpoints import log_checkpoints
from eventlake.connectors.delta.maintenance import (
    maintenance,
    merge_guard,
    sink_committed,
    table_settings,
)
from eventlake.connectors.delta.replay import replayed_files
from eventlake.connectors.delta.tables import (
    DELETION_VECTORS_PROPERTY,
    delta_row_count,
    enable_change_feed,
    ensure_delta_table,
    path_identifier,
    sink_checkpoint_interval,
    table_property,
)

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.checkpoints import CheckpointLog
    from eventlake.context import FlowConfig, FlowContext

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class DeltaInput(_LakeTable, Input):
    """Stream the Delta table ``<lake.root>/<layer>/<table>``; the checkpoint records the
    table version read.

    A new checkpoint starts with the table as it is now (read as one snapshot), or at
    ``starting_version`` (an int, or ``"latest"``) or ``starting_timestamp`` (a date or
    timestamp string): then only the changes committed from there on are read. The
    pipeline's ``max_files_per_trigger`` bounds each micro-batch (Delta's default is 1000
    files).

    By default the table must only receive appends: an UPDATE, DELETE or MERGE upstream
    stops the stream. ``skip_change_commits=True`` reads only the appends and skips every
    commit that changes or deletes rows (their rows are never read, so a MERGE's updates
    are lost to this flow).

    ``change_feed=True`` reads the table's change data feed instead: every inserted,
    updated and deleted row with ``_change_type`` (``insert``, ``update_preimage``,
    ``update_postimage``, ``delete``), ``_commit_version`` and ``_commit_timestamp``. The
    table's ``delta.enableChangeDataFeed`` is switched on when the flow is planned, before
    any query starts (a table property commit); without a starting version the stream
    begins with the current rows as inserts.
    """

    starting_version: int | str | None = None
    starting_timestamp: str | None = None
    skip_change_commits: bool = False
    change_feed: bool = False
    capabilities = InputCapabilities(batch_read=True, verify=True)

    def __post_init__(self) -> None:
        from eventlake.errors import ErrorCode, EventlakeError

        problem = None
        if self.starting_version is not None and self.starting_timestamp is not None:
            problem = "sets both starting_version and starting_timestamp"
        elif isinstance(self.starting_version, str) and self.starting_version != "latest":
            problem = f"has starting_version '{self.starting_version}'"
        elif self.change_feed and self.skip_change_commits:
            problem = "sets both change_feed and skip_change_commits"
        if problem:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"DeltaInput('{self.layer}', '{self.name}') {problem}.",
                expected="one of starting_version (an int or 'latest') or starting_timestamp; "
                "change_feed reads every change, so it skips none",
                fix="keep one of them",
            )

    def describe(self, flow: FlowConfig | None = None) -> str:
        base = super().describe(flow)
        return f"{base} (change feed)" if self.change_feed else base

    def read(self, ctx: FlowContext) -> DataFrame:
        path = str(ctx.table_path(self.layer, self.name))
        reader = ctx.spark.readStream.format("delta")
        if ctx.params.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(ctx.params.max_files_per_trigger))
        if self.starting_version is not None:
            reader = reader.option("startingVersion", str(self.starting_version))
        if self.starting_timestamp is not None:
            reader = reader.option("startingTimestamp", self.starting_timestamp)
        if self.skip_change_commits:
            reader = reader.option("skipChangeCommits", "true")
        if self.change_feed:
            enable_change_feed(ctx.spark, path)
            reader = reader.option("readChangeFeed", "true")
        service = maintenance(ctx)
        if service is not None:  # its VACUUM keeps what this flow may replay
            service.add_reader(ctx.table_path(self.layer, self.name), ctx.checkpoint)
        return reader.load(path)

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        return ctx.spark.read.format("delta").load(str(ctx.table_path(self.layer, self.name)))

    def replay(self, ctx: FlowContext, log: CheckpointLog, last: int) -> DataFrame:
        """The table's rows that batches 0..``last`` read, each with the batch that read
        it (:data:`REPLAYED_BATCH`), from the table versions and file positions the
        checkpoint's offsets name (:func:`replayed_files`)."""
        from pyspark.sql import functions as F

        if self.change_feed or self.skip_change_commits:
            raise NotImplementedError("a change feed or skipped change commits")
        path = ctx.table_path(self.layer, self.name)
        start = self.starting_version if isinstance(self.starting_version, int) else None
        ends = [log.source_offsets(n, 0) for n in range(last + 1)]
        files, version = replayed_files(path, ends, start)
        read_by = ctx.spark.createDataFrame(
            [(name, batch) for name, batch in files.items()],
            f"_eventlake_file STRING, {REPLAYED_BATCH} INT",
        )
        table = ctx.spark.read.format("delta").option("versionAsOf", version).load(str(path))
        named = table.withColumn(
            "_eventlake_file", F.regexp_extract(F.col("_metadata.file_path"), r"[^/]+$", 0)
        )
        return named.join(F.broadcast(read_by), "_eventlake_file").drop("_eventlake_file")


@dataclass(frozen=True)
class DeltaOutput(_LakeTable, Output):
    """Append each micro-batch to the Delta table ``<lake.root>/<layer>/<table>``.

    Delivery guarantee: exactly-once. A batch commits when its Delta transaction commits;
    the commit carries the flow's id and the batch id (:func:`write_once`). After a crash
    the query restarts from its checkpoint and replays the last planned batch with the
    same id and offsets; the table's log shows that batch committed and the write is
    skipped, so no row is lost or duplicated. Requires a checkpoint owned by this flow
    alone. Output modes: append and complete (complete overwrites the table each batch).
    The table is created empty before the flow starts; when no flow of the pipeline reads
    it, while the flow's query starts (its first batch waits for it).
    """

    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    capabilities = OutputCapabilities(
        guarantee=Guarantee.EXACTLY_ONCE,
        output_modes=frozenset({"append", "complete"}),
        quarantine=True,
        deferred_creation=True,
    )

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(ctx)
        kept = table_settings(ctx, self.layer, self.name).log_retention
        ensure_delta_table(ctx.spark, path, schema, self.partition_by, interval, log_retention=kept)

    def partition_columns(self) -> tuple[str, ...]:
        return self.partition_by

    def as_targets(self) -> tuple[Target, ...]:
        return (ToDelta(self.layer, self.name, partition_by=self.partition_by,
                        merge_schema=self.merge_schema),)  # fmt: skip

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        return writer.foreachBatch(_DeltaBatches(self, ctx, output_mode)).start()


class _DeltaBatches(BatchFunction):
    """:class:`DeltaOutput`'s ``foreachBatch`` function: each batch written once."""

    def __init__(self, output: DeltaOutput, ctx: FlowContext, output_mode: str) -> None:
        super().__init__(ctx)
        self.output = output
        self.mode = "overwrite" if output_mode == "complete" else "append"
        self._ids: tuple[str, ...] | None = None

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        from eventlake.checkpoints import stream_id

        if self._ids is None:
            query = stream_id(self.ctx.checkpoint)
            # The query id alone: what Delta's streaming sink, DeltaOutput's before, recorded.
            own = f"{self.ctx.query_name}/delta:{self.output.layer}/{self.output.name}/{query}"
            self._ids = (own, query)
        out = self.output
        write_once(
            df,
            self.ctx.table_path(out.layer, out.name),
            app_ids=self._ids,
            batch_id=batch_id,
            checkpoint=self.ctx.checkpoint,
            mode=self.mode,
            partition_by=out.partition_by,
            merge_schema=out.merge_schema,
            log_checkpoints=log_checkpoints(self.ctx),
        )
        sink_committed(self.ctx, out.layer, out.name)


@dataclass(frozen=True)
class ToDelta(_LakeTable, Target):
    """Append the batch to ``<layer>/<table>``.

    Delivery guarantee: exactly-once. The append's commit carries this flow's, target's and
    checkpoint's id and the batch id (:func:`write_once`); a replay of the batch after a
    crash finds that commit in the table's log and writes nothing. With ``prepare``, give
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
        interval = sink_checkpoint_interval(ctx)
        kept = table_settings(ctx, self.layer, self.name).log_retention
        ensure_delta_table(ctx.spark, path, self.schema or schema, self.partition_by, interval,
                           log_retention=kept)  # fmt: skip

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        write_once(
            self.rows(df, batch),
            batch.ctx.table_path(self.layer, self.name),
            app_ids=(batch.app_id(self.target_id(batch.ctx)),),
            batch_id=batch.batch_id,
            checkpoint=batch.ctx.checkpoint,
            partition_by=self.partition_by,
            merge_schema=self.merge_schema,
            log_checkpoints=log_checkpoints(batch.ctx),
        )
        sink_committed(batch.ctx, self.layer, self.name)


#: Builds the MERGE of ``source`` into ``target``; the fan-out executes it.
MergeBuilder = Callable[["DeltaTable", "DataFrame", BatchContext], "DeltaMergeBuilder"]


@dataclass(frozen=True)
class MergeDelta(_LakeTable, Target):
    """MERGE the batch (or what ``prepare`` makes of it) into ``<layer>/<table>``.

    ``build(target, source, batch)`` returns the merge; ``schema`` (DDL) creates the table
    when it does not exist.

    Delivery guarantee: exactly-once. The MERGE commits as one Delta transaction marked
    with this flow's, target's and checkpoint's id and the batch id
    (:func:`marked_commits`); a replay of the batch after a crash finds that commit in the
    table's log (or the ``SetTransaction`` earlier versions wrote) and merges nothing.
    """

    build: MergeBuilder
    schema: str
    prepare: Prepare | None = None
    partition_by: tuple[str, ...] = ()
    #: The merge key the table's files are laid out by, so a MERGE reads the files of the
    #: keys it touches: a new unpartitioned table is liquid-clustered on it (the run's
    #: compaction clusters it); a partitioned table, or one created without clustering,
    #: cannot be clustered, and the compaction Z-orders it by these columns instead.
    cluster_by: tuple[str, ...] = ()
    #: Create the table with deletion vectors: the MERGE marks the rows it replaces
    #: instead of copying the rest of their files, so what it writes is what changed.
    #: For a table whose MERGEs touch a few rows of large files (an SCD2 history). A
    #: compaction also rewrites the files with over a twentieth of their rows marked
    #: (Delta's ``optimize.maxDeletedRowsRatio``). Readers need Delta's reader version 3
    #: (delta-rs: ``DeltaTable.scan``). A table created without them keeps its protocol.
    deletion_vectors: bool = False
    guarantee = Guarantee.EXACTLY_ONCE

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"merge:{self.layer}/{self.name}"

    def layout_keys(self) -> dict[TableRef, tuple[str, ...]]:
        return {(self.layer, self.name): self.cluster_by} if self.cluster_by else {}

    def target_id(self, flow: FlowConfig) -> str:
        return f"merge:{self.layer}/{self.name}"

    def clustering(self) -> tuple[str, ...]:
        """The liquid clustering a new table gets: none when it is partitioned (Delta
        allows one or the other; the compaction Z-orders it by :attr:`cluster_by`)."""
        return () if self.partition_by else self.cluster_by

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(ctx)
        kept = table_settings(ctx, self.layer, self.name).log_retention
        ensure_delta_table(ctx.spark, path, self.schema, self.partition_by, interval,
                           cluster_by=self.clustering(), log_retention=kept,
                           deletion_vectors=self.deletion_vectors)  # fmt: skip

    def open(self, ctx: FlowContext) -> None:
        """Warn when the table should have deletion vectors and was created without."""
        from delta.tables import DeltaTable

        path = str(ctx.table_path(self.layer, self.name))
        if not self.deletion_vectors or not DeltaTable.isDeltaTable(ctx.spark, path):
            return
        if table_property(ctx.spark, path, DELETION_VECTORS_PROPERTY) != "true":
            log.warning(
                "%s/%s was created without deletion vectors: each MERGE copies the rest of "
                "every file it touches. eventlake leaves its protocol as it is (deletion "
                "vectors need Delta reader version 3 of every reader); to turn them on: "
                "ALTER TABLE %s SET TBLPROPERTIES (%s = true)",
                self.layer, self.name, path_identifier(path), DELETION_VECTORS_PROPERTY,
            )  # fmt: skip

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        from delta.tables import DeltaTable

        source = self.rows(df, batch)
        path = batch.ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(batch.ctx)
        kept = table_settings(batch.ctx, self.layer, self.name).log_retention
        ensure_delta_table(batch.spark, path, self.schema, self.partition_by, interval,
                           cluster_by=self.clustering(), log_retention=kept,
                           deletion_vectors=self.deletion_vectors)  # fmt: skip
        app_id = batch.app_id(self.target_id(batch.ctx))
        checkpoint = batch.ctx.checkpoint
        if batch_committed(path, app_ids=(app_id,), batch_id=batch.batch_id, checkpoint=checkpoint):
            return
        with merge_guard(batch.ctx, path), marked_commits(batch.spark, app_id, batch.batch_id):
            target = DeltaTable.forPath(batch.spark, str(path))
            self.build(target, source, batch).execute()
        service = log_checkpoints(batch.ctx)
        if service is not None:
            service.after_commit(batch.spark, path)
        sink_committed(batch.ctx, self.layer, self.name, merge_target=True,
                       layout_key=self.cluster_by)  # fmt: skip
