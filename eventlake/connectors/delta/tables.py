"""Delta tables as eventlake creates and reads them without a query: the one way a table
is created, its row count from the log, its change data feed switch."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.durations import duration_ms

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig
    from eventlake.storage import Location

#: Whether Rust libraries capture a backtrace in their errors; read once, at the first.
RUST_LIB_BACKTRACE = "RUST_LIB_BACKTRACE"


def plain_delta_rs_errors() -> None:
    """delta-rs's errors without a backtrace, unless ``RUST_LIB_BACKTRACE`` asks for one.

    With ``RUST_BACKTRACE=1`` in the environment, each delta-rs error carries a backtrace
    that is resolved as the error is raised: the process parses native debug info and
    keeps it, about 30 MiB for the rest of the run (a maintenance read that raced a commit
    did this in a soak). A panic still prints its backtrace (``RUST_BACKTRACE``)."""
    os.environ.setdefault(RUST_LIB_BACKTRACE, "0")


#: The options of the jemalloc built into delta-rs (deltalake's Rust code allocates from
#: it), read once, at its first allocation.
DELTA_RS_MALLOC_CONF = "_RJEM_MALLOC_CONF"
#: One arena, no per-thread caches: delta-rs reads a table's log on dozens of I/O threads,
#: and jemalloc's defaults (four arenas per core, a cache per thread) held 12 MiB more of
#: the driver for the reads eventlake makes, at the same CPU time. Freed pages are still
#: given back after jemalloc's 10 s (giving them back at once cost 45% more CPU).
LEAN_DELTA_RS_MALLOC = "narenas:1,tcache:false"


def lean_delta_rs_allocator() -> None:
    """delta-rs's allocator set for a long-lived process that reads tables now and then
    (:data:`LEAN_DELTA_RS_MALLOC`), unless ``_RJEM_MALLOC_CONF`` is set; effective when
    called before deltalake is first used."""
    os.environ.setdefault(DELTA_RS_MALLOC_CONF, LEAN_DELTA_RS_MALLOC)


#: What delta-rs says when its listing of ``_delta_log`` caught a commit's checksum but
#: not the commit itself, which was being written as it listed.
_CHECKSUM_AHEAD = "is newer than log segment version"
#: Seconds :func:`open_delta_rs` waits before each further read of such a table.
REREAD_PAUSES = (0.05, 0.2, 0.5)


def open_delta_rs(path: Location | Path | str) -> DeltaTable:
    """The delta-rs table at ``path``, at its newest version.

    A read that lists the log while a writer commits can see the new commit's checksum
    file without the commit (directory listings are not snapshots), which delta-rs refuses
    as a kernel error; the table is then read again, after :data:`REREAD_PAUSES`. Other
    errors (:class:`deltalake.exceptions.TableNotFoundError` among them) are raised."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    for pause in REREAD_PAUSES:
        try:
            return DeltaTable(str(path))
        except DeltaError as exc:
            if _CHECKSUM_AHEAD not in str(exc):
                raise
        time.sleep(pause)
    return DeltaTable(str(path))


#: The table property that sets how often Delta checkpoints a table's log inline.
CHECKPOINT_INTERVAL_PROPERTY = "delta.checkpointInterval"
#: The ``delta.checkpointInterval`` of a table whose log checkpoints eventlake writes
#: (:class:`~eventlake.connectors.delta.log_checkpoints.LogCheckpoints`): Delta's inline
#: checkpoint never comes due.
NO_INLINE_CHECKPOINTS = 2**31 - 1
CHANGE_FEED_PROPERTY = "delta.enableChangeDataFeed"
LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
DELETED_FILE_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
#: The table property that makes DELETE, UPDATE and MERGE mark the rows they replace in a
#: deletion vector instead of rewriting the rest of their file (readers need Delta's
#: reader version 3 with the ``deletionVectors`` feature).
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"
#: Delta's default ``delta.deletedFileRetentionDuration``: 7 days.
DELETED_FILE_RETENTION_MS = 7 * 24 * 3600 * 1000


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
    *,
    cluster_by: tuple[str, ...] = (),
    log_retention: str | None = None,
    deletion_vectors: bool = False,
) -> None:
    """Create an empty Delta table at ``path`` with ``schema`` (a struct or DDL) unless a
    Delta table is there already; ``checkpoint_interval`` sets its
    ``delta.checkpointInterval`` (else the session's default), ``cluster_by`` makes it a
    liquid-clustered table (OPTIMIZE clusters it), ``log_retention`` (a duration) sets
    ``delta.logRetentionDuration``, ``deletion_vectors`` turns on
    ``delta.enableDeletionVectors``."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, str(path)):
        return
    struct = ddl_schema(schema) if isinstance(schema, str) else schema
    builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(struct)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    if cluster_by:
        builder = builder.clusterBy(*cluster_by)
    if checkpoint_interval is not None:
        builder = builder.property(CHECKPOINT_INTERVAL_PROPERTY, str(checkpoint_interval))
    if log_retention is not None:
        builder = builder.property(LOG_RETENTION_PROPERTY, f"interval {log_retention}")
        if duration_ms(log_retention) < DELETED_FILE_RETENTION_MS:
            # Delta refuses a log retention shorter than this one (7 days by default).
            builder = builder.property(DELETED_FILE_RETENTION_PROPERTY, f"interval {log_retention}")
    if deletion_vectors:
        builder = builder.property(DELETION_VECTORS_PROPERTY, "true")
    builder.execute()


def sink_checkpoint_interval(ctx: FlowConfig) -> int | None:
    """The ``delta.checkpointInterval`` eventlake creates a sink's table with:
    :data:`NO_INLINE_CHECKPOINTS` when it writes the table's log checkpoints itself
    (``lake.log_checkpoint_commits`` > 0), else the session's default."""
    return NO_INLINE_CHECKPOINTS if ctx.settings.lake.log_checkpoint_commits else None


def delta_row_count(path: Location | Path) -> int | None:
    """Rows in the Delta table's current version (:func:`rows_of`, read with delta-rs, no
    Spark); None when there is no table at ``path``."""
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_delta_rs(path)
    except TableNotFoundError:
        return None
    return rows_of(table)


def rows_of(table: DeltaTable) -> int:
    """Rows in a delta-rs table's version, from its log's file statistics less the rows its
    deletion vectors mark."""
    import pyarrow as pa
    import pyarrow.compute as pc

    files = pa.table(table.get_add_actions(flatten=True))
    rows = int(pc.sum(files.column("num_records")).as_py() or 0)
    if has_deletion_vectors(table):
        kept = pa.table(table.deletion_vectors()).column("selection_vector")
        deleted = pc.invert(pc.list_flatten(kept))
        rows -= int(pc.sum(pc.cast(deleted, pa.int64())).as_py() or 0)
    return rows


def has_deletion_vectors(table: DeltaTable) -> bool:
    """Whether a delta-rs table's readers must apply deletion vectors."""
    features = table.protocol().reader_features or []
    return "deletionVectors" in features


def read_arrow(path: Location | Path | str) -> pa.Table:
    """The Delta table's current rows, read with delta-rs (no Spark). A table with
    deletion vectors is read by delta-rs's own engine (its pyarrow dataset refuses them)."""
    import pyarrow as pa

    table = open_delta_rs(path)
    if has_deletion_vectors(table):
        return pa.table(table.scan())
    return table.to_pyarrow_table()


def path_identifier(path: str) -> str:
    """The SQL name of the Delta table at ``path``: ``delta.`path```."""
    from eventlake.transforms.parsing import quoted

    return f"delta.{quoted(path)}"


def table_property(spark: SparkSession, path: str, key: str) -> str | None:
    """A table property of the Delta table at ``path`` (None when it is not set)."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).detail().select("properties").head()
    return (row[0] or {}).get(key) if row is not None else None


def enable_change_feed(spark: SparkSession, path: str) -> None:
    """Switch on the change data feed of the Delta table at ``path`` unless it is on."""
    if table_property(spark, path, CHANGE_FEED_PROPERTY) == "true":
        return
    table_name = path_identifier(path)
    spark.sql(f"ALTER TABLE {table_name} SET TBLPROPERTIES ({CHANGE_FEED_PROPERTY} = true)")
