"""Delta Lake: tables as an input, the native streaming output, and fan-out targets
(append and MERGE), all exactly-once; plus the one way eventlake creates a table."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlake.connectors.base import (
    BatchContext,
    BatchFunction,
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
    from eventlake.storage import Location

log = logging.getLogger(__name__)


def ddl_schema(ddl: str) -> StructType:
    """The struct a DDL column list (``"id STRING, ts TIMESTAMP"``) describes."""
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    return schema


def ensure_delta_table(
    spark: SparkSession,
    path: Location | Path | str,
    schema: StructType | str,
    partition_by: tuple[str, ...] = (),
    checkpoint_interval: int | None = None,
) -> None:
    """Create an empty Delta table at ``path`` with ``schema`` (a struct or DDL) unless a
    Delta table is there already; ``checkpoint_interval`` sets its
    ``delta.checkpointInterval`` (else the session's default)."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, str(path)):
        return
    struct = ddl_schema(schema) if isinstance(schema, str) else schema
    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(struct)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    if checkpoint_interval is not None:
        builder = builder.property(CHECKPOINT_INTERVAL, str(checkpoint_interval))
    builder.execute()


def sink_checkpoint_interval(ctx: FlowConfig) -> int | None:
    """The ``delta.checkpointInterval`` eventlake creates a sink's table with:
    :data:`NO_INLINE_CHECKPOINTS` when it writes the table's log checkpoints itself
    (``lake.log_checkpoint_commits`` > 0), else the session's default."""
    return NO_INLINE_CHECKPOINTS if ctx.settings.lake.log_checkpoint_commits else None


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


def delta_row_count(path: Location | Path) -> int | None:
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
        return reader.load(path)

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        return ctx.spark.read.format("delta").load(str(ctx.table_path(self.layer, self.name)))


CHANGE_FEED = "delta.enableChangeDataFeed"


def enable_change_feed(spark: SparkSession, path: str) -> None:
    """Switch on the change data feed of the Delta table at ``path`` unless it is on."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    properties = table.detail().select("properties").head()
    if properties is not None and (properties[0] or {}).get(CHANGE_FEED) == "true":
        return
    quoted = path.replace("`", "``")
    spark.sql(f"ALTER TABLE delta.`{quoted}` SET TBLPROPERTIES ({CHANGE_FEED} = true)")


@dataclass(frozen=True)
class DeltaOutput(_LakeTable, Output):
    """Append each micro-batch to the Delta table ``<lake.root>/<layer>/<table>``.

    Delivery guarantee: exactly-once. A batch commits when its Delta transaction commits;
    the commit carries the flow's id and the batch id (:func:`write_once`). After a crash
    the query restarts from its checkpoint and replays the last planned batch with the
    same id and offsets; the table's log shows that batch committed and the write is
    skipped, so no row is lost or duplicated. Requires a checkpoint owned by this flow
    alone. Output modes: append and complete (complete overwrites the table each batch).
    """

    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    guarantee = Guarantee.EXACTLY_ONCE
    output_modes = frozenset({"append", "complete"})

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(ctx)
        ensure_delta_table(ctx.spark, path, schema, self.partition_by, interval)

    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        return self._start_in_mode(writer, ctx, "append")

    def _start_in_mode(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        return writer.foreachBatch(_DeltaBatches(self, ctx, output_mode)).start()


class _DeltaBatches(BatchFunction):
    """:class:`DeltaOutput`'s ``foreachBatch`` function: each batch written once."""

    def __init__(self, output: DeltaOutput, ctx: FlowContext, output_mode: str) -> None:
        super().__init__(ctx.query_name)
        self.output, self.ctx = output, ctx
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
            log_checkpoint_commits=self.ctx.settings.lake.log_checkpoint_commits,
        )


#: Key of eventlake's mark in a Delta commit's ``userMetadata``: ``{"app": id, "batch": n}``.
BATCH_MARK = "eventlake_batch"
#: A batch's commit is searched for back to this long before the batch was planned.
CLOCK_SLACK_MS = 5 * 60 * 1000
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(\.[^.]+)*\.(parquet|json)$")
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
#: The ``delta.checkpointInterval`` of a table whose log checkpoints eventlake writes
#: (:class:`LogCheckpoints`): Delta's inline checkpoint never comes due.
NO_INLINE_CHECKPOINTS = 2**31 - 1
_OWN_LOG_OPTION = "fs.eventlake.logCheckpoints"


def write_once(
    df: DataFrame,
    path: Location,
    *,
    app_ids: Sequence[str],
    batch_id: int,
    checkpoint: Location,
    mode: str = "append",
    partition_by: Sequence[str] = (),
    merge_schema: bool = False,
    log_checkpoint_commits: int = 0,
) -> bool:
    """Write micro-batch ``batch_id`` to the Delta table at ``path`` unless it is there.

    The commit carries ``{"eventlake_batch": {"app": app_ids[0], "batch": batch_id}}`` as
    its ``userMetadata``. Before writing, the commits made since the batch was planned (its
    checkpoint's offsets entry) are read for that mark, or a Delta ``SetTransaction`` of
    one of ``app_ids`` (how earlier versions recorded batches): a replay after a crash
    finds its own commit and writes nothing. The log is read directly, a file or two a
    batch, instead of Delta's ``txnAppId`` check, which rebuilds the table's snapshot state
    (a few Spark jobs) on every batch. With ``log_checkpoint_commits``, the table's log
    checkpoint is then due to :data:`LOG_CHECKPOINTS`. Returns whether it wrote.
    """
    if batch_written(path, app_ids=app_ids, batch_id=batch_id, checkpoint=checkpoint):
        return False
    mark = batch_mark(app_ids[0], batch_id)
    writer = df.write.format("delta").mode(mode).option("userMetadata", mark)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    writer.save(str(path))
    LOG_CHECKPOINTS.after_commit(df.sparkSession, path, log_checkpoint_commits)
    return True


def batch_mark(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of the commit of micro-batch ``batch_id`` by ``app_id``."""
    return json.dumps({BATCH_MARK: {"app": app_id, "batch": batch_id}})


def batch_written(
    path: Location, *, app_ids: Sequence[str], batch_id: int, checkpoint: Location
) -> bool:
    """Whether micro-batch ``batch_id`` of one of ``app_ids`` is committed to the Delta
    table at ``path``: the commits since ``checkpoint`` planned the batch are searched."""
    from eventlake.checkpoints import CheckpointLog

    try:
        since = CheckpointLog(checkpoint).planned_ms(batch_id) - CLOCK_SLACK_MS
    except FileNotFoundError:
        since = 0  # a batch no stream planned (handed to a writer directly): every commit
    written = written_batch(path, app_ids, since)
    return written is not None and written >= batch_id


@contextmanager
def marked_commits(spark: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Mark every Delta commit made inside as micro-batch ``batch_id`` of ``app_id``
    (:func:`batch_mark` as the session's ``userMetadata``), then unmark.

    For DML such as MERGE, which take no writer options. ``spark`` must be the batch's own
    session (``df.sparkSession`` in foreachBatch): each streaming query runs on a clone, so
    flows never see each other's marks.
    """
    spark.conf.set(USER_METADATA, batch_mark(app_id, batch_id))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA)


def written_batch(path: Location, app_ids: Sequence[str], since_ms: int) -> int | None:
    """The newest batch id one of ``app_ids`` committed to the Delta table at ``path`` in
    the commits made at or after ``since_ms`` (epoch ms), or None."""
    from eventlake.storage import filesystem

    log = path / "_delta_log"
    storage = filesystem(log)
    if not storage.exists(log):
        return None
    versions = sorted(
        (int(m.group(1)) for m in map(_COMMIT_FILE.match, storage.list_names(log)) if m),
        reverse=True,
    )
    for version in versions:
        commit = log / f"{version:020d}.json"
        try:
            actions = [json.loads(line) for line in storage.read_text(commit).splitlines() if line]
        except FileNotFoundError:
            return None  # removed by log cleanup: older than anything searched for
        batch, timestamp = _batch_of(actions, app_ids)
        if batch is not None:
            return batch
        if timestamp is not None and timestamp < since_ms:
            return None
    return None


def _batch_of(
    actions: list[dict[str, Any]], app_ids: Sequence[str]
) -> tuple[int | None, int | None]:
    """A commit's batch id for ``app_ids`` (its mark, or a ``txn`` action) and timestamp."""
    batch: int | None = None
    timestamp: int | None = None
    for action in actions:
        txn = action.get("txn")
        if isinstance(txn, dict) and txn.get("appId") in app_ids:
            batch = int(txn["version"])
        info = action.get("commitInfo")
        if not isinstance(info, dict):
            continue
        timestamp = int(info["timestamp"]) if "timestamp" in info else timestamp
        try:
            meta = json.loads(info.get("userMetadata") or "null")
        except ValueError:
            continue
        mark = meta.get(BATCH_MARK) if isinstance(meta, dict) else None
        if isinstance(mark, dict) and mark.get("app") in app_ids:
            batch = int(mark["batch"])
    return batch, timestamp


class LogCheckpoints:
    """Writes the Delta log checkpoints of the tables eventlake's sinks commit to, on a
    thread of its own, once ``lake.log_checkpoint_commits`` commits have gone by since the
    table's newest checkpoint.

    Delta writes a checkpoint inside the commit that reaches the table's
    ``delta.checkpointInterval``: it rebuilds the snapshot from the log and writes it as
    Parquet, 3-5 s on 2 cores that the batch waits for (a latency spike every 100th batch).
    Sink tables eventlake creates carry :data:`NO_INLINE_CHECKPOINTS` instead, and this
    thread checkpoints them (the checkpoint, ``_last_checkpoint``, then log cleanup) while
    the next batches run: with delta-rs for a local table, with Delta's own
    ``DeltaLog.checkpoint`` for a URI. Other tables keep Delta's inline checkpoints. A
    checkpoint only speeds up reading the log: one cut short by a crash is written again
    after the next commit.
    """

    def __init__(self) -> None:
        self._due: dict[str, tuple[SparkSession, Location, int]] = {}
        self._inline: set[str] = set()
        self._busy = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def after_commit(self, spark: SparkSession, path: Location, every: int) -> None:
        """The sink committed to the table at ``path``: checkpoint it if ``every`` (> 0)
        commits have gone by since its newest checkpoint."""
        if every <= 0 or str(path) in self._inline:
            return
        with self._cond:
            self._due[str(path)] = (spark, path, every)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="eventlake-log-checkpoints", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the due checkpoints; whether all are done."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._due and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._due))
                key = next(iter(self._due))
                spark, path, every = self._due.pop(key)
                self._busy = True
            try:
                self._checkpoint_if_due(spark, path, every)
            except Exception as e:  # a stopped session, a dropped table
                log.warning("Delta log checkpoint of %s failed: %s", path, e)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _checkpoint_if_due(self, spark: SparkSession, path: Location, every: int) -> None:
        from eventlake.storage import filesystem

        logdir = path / "_delta_log"
        names = filesystem(logdir).list_names(logdir)
        commits = [int(m.group(1)) for m in map(_COMMIT_FILE.match, names) if m]
        checkpoints = [int(m.group(1)) for m in map(_CHECKPOINT_FILE.match, names) if m]
        if not commits or max(commits) - max(checkpoints, default=0) < every:
            return
        if path.is_local:
            try:
                version = self._checkpoint_with_delta_rs(path)
            except Exception as e:  # a table feature delta-rs does not write
                log.info("delta-rs did not checkpoint %s (%s); Spark will", path, e)
                version = self._checkpoint_with_spark(spark, path)
        else:
            version = self._checkpoint_with_spark(spark, path)
        if version is None:
            self._inline.add(str(path))
        else:
            log.info("Delta log checkpoint of %s at version %d", path, version)

    @staticmethod
    def _checkpoint_with_delta_rs(path: Location) -> int | None:
        """A local table's checkpoint and log cleanup by delta-rs: tens of milliseconds,
        where Spark's takes seconds of the cores the batches run on."""
        from deltalake import DeltaTable

        table = DeltaTable(str(path))
        interval = table.metadata().configuration.get(CHECKPOINT_INTERVAL)
        if interval != str(NO_INLINE_CHECKPOINTS):
            return None
        table.create_checkpoint()
        table.cleanup_metadata()
        return table.version()

    @staticmethod
    def _checkpoint_with_spark(spark: SparkSession, path: Location) -> int | None:
        """Delta's own checkpoint (then ``_last_checkpoint`` and log cleanup), through
        Spark's Hadoop filesystems and credentials: any URI."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        none = jvm.scala.Option.empty()
        # A DeltaLog of its own (an option no filesystem reads keys it apart in Delta's
        # cache): the sink's commits never wait on a snapshot this thread is computing.
        options = jvm.java.util.HashMap()
        options.put(_OWN_LOG_OPTION, "true")
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            spark._jsparkSession,
            jvm.org.apache.hadoop.fs.Path(str(path)),
            jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(options),
        )
        snapshot = delta_log.update(False, none, none)
        if delta_log.checkpointInterval(snapshot.metadata()) != NO_INLINE_CHECKPOINTS:
            return None
        spark.sparkContext.setLocalProperty(
            "spark.job.description", f"eventlake: Delta log checkpoint of {path}"
        )
        delta_log.checkpoint(snapshot, none)
        return int(snapshot.version())


#: The process's one :class:`LogCheckpoints`.
LOG_CHECKPOINTS = LogCheckpoints()


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
        ensure_delta_table(ctx.spark, path, self.schema or schema, self.partition_by, interval)

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        write_once(
            self.rows(df, batch),
            batch.ctx.table_path(self.layer, self.name),
            app_ids=(batch.app_id(self.target_id(batch.ctx)),),
            batch_id=batch.batch_id,
            checkpoint=batch.ctx.checkpoint,
            partition_by=self.partition_by,
            merge_schema=self.merge_schema,
            log_checkpoint_commits=batch.ctx.settings.lake.log_checkpoint_commits,
        )


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
    guarantee = Guarantee.EXACTLY_ONCE

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"merge:{self.layer}/{self.name}"

    def target_id(self, flow: FlowConfig) -> str:
        return f"merge:{self.layer}/{self.name}"

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        path = ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(ctx)
        ensure_delta_table(ctx.spark, path, self.schema, self.partition_by, interval)

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        from delta.tables import DeltaTable

        source = self.rows(df, batch)
        path = batch.ctx.table_path(self.layer, self.name)
        interval = sink_checkpoint_interval(batch.ctx)
        ensure_delta_table(batch.spark, path, self.schema, self.partition_by, interval)
        app_id = batch.app_id(self.target_id(batch.ctx))
        checkpoint = batch.ctx.checkpoint
        if batch_written(path, app_ids=(app_id,), batch_id=batch.batch_id, checkpoint=checkpoint):
            return
        with marked_commits(batch.spark, app_id, batch.batch_id):
            target = DeltaTable.forPath(batch.spark, str(path))
            self.build(target, source, batch).execute()
        every = batch.ctx.settings.lake.log_checkpoint_commits
        LOG_CHECKPOINTS.after_commit(batch.spark, path, every)
