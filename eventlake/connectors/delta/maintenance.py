"""Keeping the Delta tables eventlake writes healthy: compaction (clustering, for clustered
tables) once small files pile up, VACUUM with a retention no reader of the run can need,
a log bounded by commits that keeps what every reader may replay, and what each table
looks like now. A service of the run (:class:`Maintenance`) does it
between batches; :func:`maintain_table` is the same work on demand (``eventlake maintain``).

Compaction commits are ``dataChange=false``: a Delta streaming reader skips them, so a
downstream flow reads no row twice, and the marks of the marked-commit protocol stay in
the log where a replayed batch looks for them.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventlake.connectors.delta.commits import commit_versions, newest_version
from eventlake.connectors.delta.tables import open_delta_rs, path_identifier
from eventlake.durations import duration_ms
from eventlake.errors import describe
from eventlake.scope import DueWork

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import SparkSession

    from eventlake.config.model import MaintenanceSettings
    from eventlake.context import FlowConfig, FlowContext
    from eventlake.storage import Location

log = logging.getLogger(__name__)

#: The event table of expectation counts, under ``lake.root``.
EXPECTATIONS_TABLE = ("_eventlake", "expectations")
#: How long a run's end waits for maintenance under way or due (seconds): a stop under
#: systemd (90 s to stop by default) must not wait on a compaction.
DRAIN_SECONDS = 30.0
#: Spark refuses a VACUUM retention under 7 days unless told the caller checked it.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
#: How many tasks list a table's folders for VACUUM.
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
#: Files from this size up are left alone by OPTIMIZE (Delta's default: 1 GB, so every
#: compaction would rewrite the whole table until its files reach 1 GB each).
_OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
#: Delta lists a version's files in its checksum (``N.crc``) while the table has at most
#: this many before and after the commit (Delta's default: 50), carrying the list forward
#: commit by commit. A commit that takes the table under it from over it lists none, so
#: the next commit builds the list from the whole snapshot state: a few Spark jobs
#: (about 2 s on 2 cores) in the writer's next batch after nearly every compaction.
FILES_IN_CHECKSUM = "spark.databricks.delta.allFilesInCrc.thresholdNumFiles"
FILES_IN_CHECKSUM_DEFAULT = 50
#: eventlake's sessions set it to this: a table that maintenance compacts at 64 small
#: files stays under it, so every commit lists the files, a compaction's too when a
#: writer's commit raced it, and no writer's batch rebuilds the list. A checksum listing
#: 250 files of 10 columns is about 180 KB; an append took as long as with 50.
FILES_LISTED = 256
#: The margin kept over what a reader of the run needs (ms): clocks of writers and of
#: this process may differ by that much.
_READER_MARGIN_MS = 60 * 1000
#: Until a table's small files together would fill a file of ``small_file_bytes``, a
#: compaction rewrites only the files under this fraction of it (the batches' own files):
#: its earlier output is not rewritten again at every compaction.
FRESH_FRACTION = 16


@dataclass(frozen=True)
class TableFiles:
    """A Delta table's current data files."""

    version: int
    files: int
    bytes: int
    small_files: int
    #: The small files' bytes together.
    small_files_bytes: int
    #: The table's id (its ``metaData``), which a streaming reader's offsets name.
    table_id: str = ""

    @property
    def small_ratio(self) -> float:
        return self.small_files / self.files if self.files else 0.0


@dataclass(frozen=True)
class Action:
    """One maintenance action on a table."""

    kind: str  # compact | vacuum | trim (the log)
    at_ms: int
    seconds: float
    detail: str
    error: str | None = None


@dataclass
class TableState:
    """What the run knows of one table it writes."""

    path: str
    table: str
    settings: MaintenanceSettings
    merge_target: bool = False
    #: The columns the table's files are laid out by (a MERGE target's key).
    layout_key: tuple[str, ...] = ()
    commits_since_check: int = 0
    #: When the table was last vacuumed (epoch ms); None: not known yet (its history says).
    last_vacuum_ms: int | None = None
    #: Bytes written per byte rewritten by its last compaction of small_file_bytes or more
    #: (:func:`packing_of`); None: not known yet (its history says).
    packing: float | None = None
    #: The table's version when its log's length was last looked at (None: not yet).
    log_looked_at: int | None = None


@dataclass
class Failures:
    """A table's failed maintenance actions in one run: how many of each kind, and the
    last one."""

    counts: dict[str, int] = field(default_factory=dict)
    last: Action | None = None

    def record(self) -> dict[str, Any]:
        """What the status record and the metrics show: ``counts`` by kind, and ``last``
        (kind, epoch seconds, error)."""
        last = self.last
        shown = None if last is None else {"kind": last.kind, "at": last.at_ms / 1000,
                                           "error": last.error}  # fmt: skip
        return {"counts": dict(self.counts), "last": shown}


@dataclass(frozen=True)
class Maintained:
    """What one pass of maintenance found and did: the table's files before and after."""

    table: str
    before: TableFiles | None
    after: TableFiles | None
    actions: list[Action]


def table_settings(ctx: FlowConfig, layer: str, table: str) -> MaintenanceSettings:
    """The maintenance settings of ``layer/table`` as the flow ``ctx`` writes it."""
    return ctx.settings.maintenance.for_table(f"{layer}/{table}", ctx.params.maintenance)


def maintenance(ctx: FlowContext) -> Maintenance | None:
    """The run's maintenance service, or None when ``maintenance.enabled`` is false."""
    if not ctx.settings.maintenance.enabled:
        return None
    root = ctx.settings.checkpoints.root
    return ctx.run.service(Maintenance, lambda: Maintenance(ctx.spark, root))


def sink_committed(
    ctx: FlowContext,
    layer: str,
    table: str,
    *,
    merge_target: bool = False,
    layout_key: tuple[str, ...] = (),
) -> None:
    """A sink of ``ctx`` committed to ``layer/table``: the run's maintenance may look at it
    (``layout_key``: the columns a compaction lays its files out by)."""
    service = maintenance(ctx)
    if service is not None:
        path = ctx.table_path(layer, table)
        settings = table_settings(ctx, layer, table)
        service.after_commit(path, f"{layer}/{table}", settings, merge_target=merge_target,
                             layout_key=layout_key)  # fmt: skip


@contextmanager
def merge_guard(ctx: FlowContext, path: Location) -> Iterator[None]:
    """Held around a MERGE into ``path``: the run's compaction of the table waits."""
    service = maintenance(ctx)
    if service is None:
        yield
        return
    with service.table_lock(path):
        yield


def table_files(spark: SparkSession | None, path: Location, small_bytes: int) -> TableFiles | None:
    """The table's data files now (delta-rs for a local table, Spark's snapshot for a
    URI); None when there is no table."""
    if path.is_local:
        from deltalake.exceptions import TableNotFoundError

        try:
            return _files_of(open_delta_rs(path), small_bytes)
        except TableNotFoundError:
            return None
    assert spark is not None
    from delta.tables import DeltaTable as SparkDeltaTable
    from pyspark.sql import functions as F

    if not SparkDeltaTable.isDeltaTable(spark, str(path)):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, jvm.org.apache.hadoop.fs.Path(str(path))
    )
    snapshot = delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    from pyspark.sql import DataFrame

    files = DataFrame(snapshot.allFiles().toDF(), spark)
    is_small = F.col("size") < small_bytes
    row = files.agg(
        F.count("*").alias("n"),
        F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
        F.sum(F.when(is_small, 1).otherwise(0)).alias("small"),
        F.sum(F.when(is_small, F.col("size")).otherwise(0)).alias("small_bytes"),
    ).head()
    assert row is not None
    return TableFiles(int(snapshot.version()), int(row["n"]), int(row["bytes"]),
                      int(row["small"] or 0), int(row["small_bytes"] or 0),
                      str(snapshot.metadata().id()))  # fmt: skip


#: After compacting a table, the service rests as long as the compaction took (at most
#: this many seconds) before the next table: tables fed by one input come due together,
#: and back to back their compactions held a core for tens of seconds under the batches.
REST_SECONDS_MAX = 15.0
#: Commits of a table's history read for its last maintenance.
HISTORY_COMMITS = 500
_MAINTENANCE_OPERATIONS = {"OPTIMIZE": "compact", "VACUUM END": "vacuum"}


def table_report(
    path: Location,
    table: str,
    settings: MaintenanceSettings,
    reader: TableReader | None = None,
) -> dict[str, Any]:
    """What ``eventlake status``, the dashboard and the metrics show of a table: its files,
    bytes, small files, and its last compaction and VACUUM (from its history; a local
    table's, read with delta-rs; a URI's files are not counted here). ``reader`` (a run's)
    reads only what changed since its last look."""
    report: dict[str, Any] = {"table": table, "path": str(path), "files": None, "bytes": None,
                              "small_files": None, "small_ratio": None,
                              "last_compact": None, "last_vacuum": None}  # fmt: skip
    if not path.is_local:
        return report
    looked = (reader or TableReader()).look(path, settings.small_file_bytes)
    if looked is None:
        return report
    files, maintained = looked
    report.update(files=files.files, bytes=files.bytes, small_files=files.small_files,
                  small_ratio=round(files.small_ratio, 3), version=files.version)  # fmt: skip
    for kind, commit in maintained.items():
        metrics = commit.get("operationMetrics") or {}
        if kind == "compact":
            what = f"{metrics.get('numRemovedFiles')} files into {metrics.get('numAddedFiles')}"
            zorder = (commit.get("operationParameters") or {}).get("zOrderBy") or "[]"
            what += _zordered(json.loads(zorder) if isinstance(zorder, str) else zorder)
        else:
            what = f"{metrics.get('numDeletedFiles')} files removed"
        report[f"last_{kind}"] = {"at": int(commit["timestamp"]) / 1000, "version":
                                  commit.get("version"), "did": what}  # fmt: skip
    return report


def recent_history(path: Location) -> list[dict[str, Any]]:
    """A local table's last :data:`HISTORY_COMMITS` commits, newest first (delta-rs); none
    for a table that is not local."""
    if not path.is_local:
        return []
    return list(open_delta_rs(path).history(HISTORY_COMMITS))


def _maintenance_in(
    commits: Iterable[dict[str, Any]], found: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``found`` with the newest compaction and VACUUM among ``commits`` (newest first)."""
    newer: dict[str, dict[str, Any]] = {}
    for commit in commits:
        kind = _MAINTENANCE_OPERATIONS.get(str(commit.get("operation")))
        if kind is not None:
            newer.setdefault(kind, commit)
            if len(newer) == len(_MAINTENANCE_OPERATIONS):
                break
    return {**found, **newer}


class TableReader:
    """A run's view of the local tables it reports on: each table's delta-rs snapshot,
    brought up to date by reading only the commits since the last look, and the
    maintenance commits found so far (so a VACUUM a day ago is still shown after more than
    :data:`HISTORY_COMMITS` commits). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[Any, dict[str, dict[str, Any]]]] = {}

    def look(
        self, path: Location, small_bytes: int
    ) -> tuple[TableFiles, dict[str, dict[str, Any]]] | None:
        """The table's files now and its last maintenance by kind; None: no table."""
        from deltalake.exceptions import TableNotFoundError

        from eventlake.storage import filesystem

        with self._lock:
            kept = self._tables.pop(str(path), None)
            table: Any = None
            found: dict[str, dict[str, Any]] = {}
            seen: int | None = None
            if kept is not None:
                seen = int(kept[0].version())
                # None, or older than what was seen: the table was removed or replaced.
                newest = newest_version(filesystem(path), path / "_delta_log", start=seen)
                if newest is not None and newest >= seen:
                    try:
                        kept[0].update_incremental()
                        table, found = kept
                    except Exception as e:  # unreadable now: read it afresh
                        log.debug("reading %s afresh: %s", path, e)
            if table is None:
                try:
                    table, seen = open_delta_rs(path), None
                except TableNotFoundError:
                    return None
            version = int(table.version())
            if seen is None:
                found = _maintenance_in(table.history(HISTORY_COMMITS), {})
            elif version > seen:
                found = _maintenance_in(table.history(min(version - seen, HISTORY_COMMITS)), found)
            self._tables[str(path)] = (table, found)
            return _files_of(table, small_bytes), found


def _files_of(table: Any, small_bytes: int) -> TableFiles:
    """A delta-rs table's data files at its loaded version."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes")
    small_sizes = pc.filter(sizes, pc.less(sizes, small_bytes))
    total = int(pc.sum(sizes).as_py() or 0)
    small_total = int(pc.sum(small_sizes).as_py() or 0)
    return TableFiles(int(table.version()), len(sizes), total, len(small_sizes), small_total,
                      str(table.metadata().id))  # fmt: skip


def maintenance_session(spark: SparkSession) -> SparkSession:
    """A session of its own for maintenance: no batch's commit marks reach its commits."""
    return spark.newSession()


def listing_parallelism(spark: SparkSession) -> str | None:
    """How many tasks Spark's VACUUM lists a table's folders in: as many as there are
    cores (Spark's default, 10,000 tasks, keeps 2 cores busy for over a minute); None when
    the session sets its own."""
    if spark.conf.get(_LISTING_PARALLELISM, None) is not None:
        return None
    return str(max(spark.sparkContext.defaultParallelism, 1))


def compact(
    spark: SparkSession,
    path: Location,
    layout_key: tuple[str, ...] = (),
    small_bytes: int | None = None,
    files: TableFiles | None = None,
) -> Compacted:
    """OPTIMIZE the table: a ``dataChange=false`` commit. A clustered table is clustered;
    one that is not, with a ``layout_key``, is Z-ordered by it (less its partition
    columns); otherwise only files under ``small_bytes`` are rewritten, so a compaction's
    work stays bounded however large the table grows. ``files``: the table's files now.

    A compaction that brings the table under :data:`FILES_IN_CHECKSUM` files leaves the
    file list in its checksum (from the state it read anyway, or from the checksum of a
    writer's commit that came in between); when that commit listed none, the new
    snapshot's state is built here, so the writers' next batches do not build it."""
    from delta.tables import DeltaTable

    spark.sparkContext.setLocalProperty("spark.job.description", f"eventlake: compact {path}")
    table = DeltaTable.forPath(spark, str(path))
    zorder = zorder_columns(table, layout_key) if layout_key else ()
    optimize = table.optimize()
    min_size = str(small_bytes) if small_bytes is not None else None
    listed = _files_in_checksum(spark)
    listing = str(files.files) if files is not None and _may_list(files, listed) else None
    with (
        _session_conf(spark, _OPTIMIZE_MIN_FILE_SIZE, min_size),
        _session_conf(spark, FILES_IN_CHECKSUM, listing),
    ):
        done = optimize.executeZOrderBy(*zorder) if zorder else optimize.executeCompaction()
        result = done.head()
    metrics = result["metrics"] if result is not None else None
    if metrics is None:
        return Compacted("nothing to compact")
    prepare_file_list(spark, path, listed)
    return Compacted(
        f"{metrics['numFilesRemoved']} files into {metrics['numFilesAdded']}{_zordered(zorder)}",
        int(metrics["filesAdded"]["totalSize"] or 0),
        int(metrics["filesRemoved"]["totalSize"] or 0),
    )


@dataclass(frozen=True)
class Compacted:
    """What a compaction did: its detail, the bytes it wrote and the bytes it rewrote."""

    detail: str
    written: int = 0
    rewritten: int = 0


def packing_of(history: Iterable[dict[str, Any]], small_bytes: int) -> float:
    """The packing of the newest compaction in ``history`` (newest first) that rewrote at
    least ``small_bytes``; 1.0 without one."""
    for commit in history:
        if commit.get("operation") == "OPTIMIZE":
            metrics = commit.get("operationMetrics") or {}
            written, rewritten = metrics.get("numAddedBytes"), metrics.get("numRemovedBytes")
            packing = _packing(int(written or 0), int(rewritten or 0), small_bytes)
            if packing is not None:
                return packing
    return 1.0


def _packing(written: int, rewritten: int, small_bytes: int) -> float | None:
    """Bytes written per byte rewritten (Parquet packs rows tighter in one file than in
    many), at most 1, of a compaction that rewrote ``small_bytes`` or more; else None."""
    return min(written / rewritten, 1.0) if written and rewritten >= small_bytes else None


def _files_in_checksum(spark: SparkSession) -> int:
    """How many files a table may have for the session's commits to list them in checksums."""
    return int(spark.conf.get(FILES_IN_CHECKSUM, None) or FILES_IN_CHECKSUM_DEFAULT)


def _may_list(files: TableFiles, listed: int) -> bool:
    """Whether a compaction of ``files`` may bring the table under ``listed`` files from
    over it: its files that are not small are fewer (the checksum of its commit then
    lists at most the table's files before it)."""
    return files.files > listed and files.files - files.small_files < listed


def prepare_file_list(spark: SparkSession, path: Location, listed: int) -> bool:
    """Build the snapshot state of the table's newest version when its checksum lists no
    files though the table has at most ``listed``: the next commit would build it on
    the writer's batch. Whether it was built."""
    from delta.tables import DeltaTable

    from eventlake.connectors.delta.commits import log_file, newest_version
    from eventlake.storage import filesystem

    log = path / "_delta_log"
    storage = filesystem(log)
    version = newest_version(storage, log)
    if version is None:
        return False
    try:
        checksum = json.loads(storage.read_text(log_file(log, version, "crc")))
    except (FileNotFoundError, ValueError):
        return False  # no checksum: Delta lists no files in the next one either
    if "allFiles" in checksum or int(checksum.get("numFiles", listed + 1)) > listed:
        return False
    DeltaTable.forPath(spark, str(path)).toDF().inputFiles()  # plans a scan: the state
    return True


def _zordered(columns: Iterable[str]) -> str:
    """What a compaction says of its Z-order (nothing when it had none)."""
    names = ", ".join(columns)
    return f", Z-ordered by {names}" if names else ""


@contextmanager
def _session_conf(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """``key`` set to ``value`` in the session's conf inside (None: left as it is), then
    back to what it was (unset when it was not set)."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def zorder_columns(table: DeltaTable, layout_key: tuple[str, ...]) -> tuple[str, ...]:
    """The columns to Z-order ``table`` by: none when it is liquid-clustered (OPTIMIZE
    clusters it), else ``layout_key`` less the partition columns (Delta refuses those)."""
    detail = table.detail().select("clusteringColumns", "partitionColumns").head()
    if detail is None or detail["clusteringColumns"]:
        return ()
    partitions = set(detail["partitionColumns"] or ())
    return tuple(c for c in layout_key if c not in partitions)


def vacuum(spark: SparkSession, path: Location, retention_ms: int) -> str:
    """VACUUM the files no version newer than ``retention_ms`` ago needs (delta-rs for a
    local table, in milliseconds; Spark's for a URI, a table delta-rs does not write or
    one with deletion vectors: delta-rs leaves the deletion vectors a later DML replaced).
    Returns what it did."""
    hours = max(retention_ms / 3_600_000, 0.0)
    if path.is_local:
        done = _vacuum_with_delta_rs(path, hours)
        if done is not None:
            return done
    spark.sparkContext.setLocalProperty("spark.job.description", f"eventlake: vacuum {path}")
    # The retention was computed for the run's readers: Delta's check would refuse it.
    with (
        _session_conf(spark, _RETENTION_CHECK, "false"),
        _session_conf(spark, _LISTING_PARALLELISM, listing_parallelism(spark)),
    ):
        spark.sql(f"VACUUM {path_identifier(str(path))} RETAIN {hours:.4f} HOURS").collect()
    from delta.tables import DeltaTable as SparkDeltaTable

    last = SparkDeltaTable.forPath(spark, str(path)).history(1).head()
    metrics = (last["operationMetrics"] or {}) if last is not None else {}
    return f"{metrics.get('numDeletedFiles', '?')} files removed (retention {hours:.1f} h)"


def _vacuum_with_delta_rs(path: Location, hours: float) -> str | None:
    """VACUUM a local table with delta-rs; None when delta-rs cannot (a table feature it
    does not write, or deletion vectors)."""
    from eventlake.connectors.delta.tables import has_deletion_vectors

    whole = math.ceil(hours)  # delta-rs takes whole hours: rounded up, never less
    try:
        table = open_delta_rs(path)
        if has_deletion_vectors(table):
            return None
        removed = table.vacuum(
            retention_hours=whole, enforce_retention_duration=False, dry_run=False
        )
    except Exception as exc:  # a table feature delta-rs does not write
        log.info("delta-rs did not vacuum %s (%s); Spark will", path, exc)
        return None
    return f"{len(removed)} files removed (retention {whole} h)"


def vacuumed_ms(history: Iterable[dict[str, Any]]) -> int:
    """When the last VACUUM in ``history`` (newest first) ended (epoch ms); 0 without one
    (a table that is not local has none here: it is vacuumed on the run's first look)."""
    vacuumed = _maintenance_in(history, {}).get("vacuum")
    return int(vacuumed["timestamp"]) if vacuumed is not None else 0


def commit_time_ms(path: Location, version: int) -> int | None:
    """When ``version`` of the table was committed, from its log entry; None once the
    entry is gone."""
    from eventlake.connectors.delta.commits import log_file
    from eventlake.storage import filesystem

    entry = log_file(path / "_delta_log", version)
    try:
        text = filesystem(entry).read_text(entry)
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        info = json.loads(line).get("commitInfo") if line else None
        if isinstance(info, dict) and "timestamp" in info:
            return int(info["timestamp"])
    return None


def reader_versions(
    path: Location, checkpoints: Iterable[Location], table_id: str | None = None
) -> list[int]:
    """The oldest table version each reading checkpoint may still replay from. A replay of
    its newest planned batch starts where the batch before it ended, so the older of the
    two newest offsets entries counts (a Delta source offset's ``reservoirVersion``; for
    a batch of the starting snapshot, the snapshot's version). With ``table_id``, only
    the offsets of that table count."""
    from eventlake.checkpoints import CheckpointLog

    versions = []
    for checkpoint in checkpoints:
        log_ = CheckpointLog(checkpoint)
        for batch in log_.planned[-2:]:
            for source in log_.entry(batch).sources:
                if not isinstance(source, dict) or "reservoirVersion" not in source:
                    continue
                if table_id is None or source.get("reservoirId") == table_id:
                    versions.append(int(source["reservoirVersion"]))
    return versions


def project_checkpoints(root: Location) -> list[Location]:
    """The flows' checkpoints under a ``checkpoints.root`` (``<pipeline>/<flow>``) that
    have planned a batch: every pipeline of the project, running or not."""
    from eventlake.storage import filesystem

    storage = filesystem(root)
    found = []
    for pipeline in storage.list_names(root):
        for flow in storage.list_names(root / pipeline):
            if storage.is_dir(root / pipeline / flow / "offsets"):
                found.append(root / pipeline / flow)
    return found


def table_id(spark: SparkSession, path: Location) -> str:
    """The Delta table's id (its ``metaData``), which a streaming reader's offsets name."""
    if path.is_local:
        return str(open_delta_rs(path).metadata().id)
    detail = spark.sql(f"DESCRIBE DETAIL {path_identifier(str(path))}").first()
    assert detail is not None
    return str(detail["id"])


def bound_log(
    spark: SparkSession,
    path: Location,
    keep_commits: int,
    readers: Iterable[Location],
    *,
    dry_run: bool = False,
    known_id: str = "",
) -> Action | None:
    """Trim the table's log to its newest ``keep_commits`` commits (back to a checkpoint),
    keeping every commit a reading checkpoint (``readers``) may replay; None when there is
    nothing to remove. ``known_id``: the table's id when the caller has read it."""
    from eventlake.connectors.delta.log_checkpoints import trim_log, trim_start
    from eventlake.storage import filesystem

    log_ = path / "_delta_log"
    storage = filesystem(log_)
    names = storage.list_names(log_)
    if len(commit_versions(names)) <= keep_commits:
        return None
    needed = reader_versions(path, readers, known_id or table_id(spark, path))
    start = trim_start(names, keep_commits, min(needed, default=None))
    if start is None:
        return None
    planned = f"would remove the log before version {start}"
    return _act("trim", dry_run, lambda: trim_log(storage, log_, names, start), planned)


def safe_retention_ms(path: Location, configured_ms: int, readers: Iterable[Location]) -> int:
    """A VACUUM retention that keeps what every reader of the run may replay: at least
    ``configured_ms``, and back to the oldest version a reader's checkpoint names (with a
    minute's margin)."""
    now = int(time.time() * 1000)
    retention = configured_ms
    for version in reader_versions(path, readers):
        committed = commit_time_ms(path, version)
        if committed is None:
            continue  # its log entry is gone: older than log retention, nothing to keep
        retention = max(retention, now - committed + _READER_MARGIN_MS)
    return retention


def maintain_table(
    spark: SparkSession,
    state: TableState,
    *,
    readers: Iterable[Location] = (),
    checkpoints_root: Location | None = None,
    force: bool = False,
    dry_run: bool = False,
    lock: threading.Lock | None = None,
) -> Maintained:
    """Compact the table when it holds ``compact_min_files`` small files (``force``: when it
    holds two), VACUUM it when ``vacuum_interval`` has gone by (``force``: now), and trim
    its log to ``log_retention_commits`` commits every tenth of that many (``force``: now;
    :func:`bound_log`, keeping what ``readers`` and the checkpoints under
    ``checkpoints_root`` may replay).

    A compaction rewrites every small file once they would fill a file of
    ``small_file_bytes`` together (or when ``force``d); until then only the files under
    :data:`FRESH_FRACTION` of that size, so each batch's bytes are rewritten about twice
    before they rest in a full-size file, not at every compaction until then. "Would
    fill" counts their bytes as packed as the table's last such full compaction packed
    them: merged small files shrink (bronze's by about a sixth), and a file that came out
    under ``small_file_bytes`` would still be small, rewritten whole at each compaction
    until it grew past it."""
    from eventlake.storage import Location

    path = Location(state.path)
    settings = state.settings
    done: list[Action] = []
    before = after = table_files(spark, path, settings.small_file_bytes)
    if before is None:
        return Maintained(state.table, None, None, done)
    if state.last_vacuum_ms is None or state.packing is None:  # the table's first look
        history = recent_history(path)
        state.last_vacuum_ms = vacuumed_ms(history)
        state.packing = packing_of(history, settings.small_file_bytes)
    threshold = 2 if force else settings.compact_min_files
    if before.small_files >= threshold:
        small = settings.small_file_bytes
        if force or before.small_files_bytes * state.packing >= small:
            limit, planned = small, f"would compact {before.small_files} small files"
        else:
            limit = max(small // FRESH_FRACTION, 1)
            planned = f"would compact the files under {limit:,} bytes"

        def compact_table() -> str:
            did = _locked(lock, lambda: compact(spark, path, state.layout_key, limit, before))
            state.packing = _packing(did.written, did.rewritten, small) or state.packing
            return did.detail

        done.append(_act("compact", dry_run, compact_table, planned))
        if not dry_run:
            after = table_files(spark, path, settings.small_file_bytes)
    now = int(time.time() * 1000)
    if force or now - state.last_vacuum_ms >= duration_ms(settings.vacuum_interval):
        retention = safe_retention_ms(path, duration_ms(settings.vacuum_retention), readers)
        planned = f"would vacuum with a retention of {retention / 3_600_000:.1f} h"
        done.append(_act("vacuum", dry_run, lambda: vacuum(spark, path, retention), planned))
        if not dry_run:
            state.last_vacuum_ms = now
    keep = settings.log_retention_commits
    looked = state.log_looked_at
    if keep > 0 and (force or looked is None or before.version - looked >= max(keep // 10, 1)):
        readers = [*readers, *(project_checkpoints(checkpoints_root) if checkpoints_root else [])]
        try:
            trimmed = bound_log(spark, path, keep, readers, dry_run=dry_run,
                                known_id=before.table_id)  # fmt: skip
        except Exception as exc:  # an unreadable reader's checkpoint: looked at again later
            log.warning("trimming the log of %s failed: %s", path, exc)
            trimmed = Action("trim", now, 0.0, "failed", error=describe(exc))
        done += [trimmed] if trimmed is not None else []
        if not dry_run:
            state.log_looked_at = before.version
    return Maintained(state.table, before, after, done)


def _locked(lock: threading.Lock | None, work: Callable[[], Compacted]) -> Compacted:
    if lock is None:
        return work()
    with lock:
        return work()


def _act(kind: str, dry_run: bool, work: Callable[[], str], planned: str) -> Action:
    started = time.monotonic()
    at = int(time.time() * 1000)
    if dry_run:
        return Action(kind, at, 0.0, planned)
    try:
        detail = work()
    except Exception as exc:  # a stopped session, a concurrent commit: tried again later
        log.warning("%s failed: %s", kind, exc)
        return Action(kind, at, time.monotonic() - started, "failed", error=describe(exc))
    return Action(kind, at, time.monotonic() - started, detail)


class Maintenance:
    """The run's table maintenance: after each commit of a sink, the table's small files
    are counted now and then, and a table that is due is compacted and vacuumed on a
    thread of its own while the next batches run, one table at a time, resting as long as
    a compaction took before the next (:data:`REST_SECONDS_MAX` at most).

    Appends never conflict with a compaction. A MERGE does (it reads the files a
    compaction replaces), so a MERGE target's writer holds :meth:`table_lock` around its
    MERGE and the compaction takes it too: the flow's next batch waits at most for one
    compaction, never fails on one. The service works on a session of its own, so a
    batch's commit marks never reach its commits. One per run; :meth:`close` lets the
    work under way finish.
    """

    def __init__(self, spark: SparkSession, checkpoints_root: Location | None = None) -> None:
        self._spark = maintenance_session(spark)
        self._checkpoints_root = checkpoints_root
        self._tables: dict[str, TableState] = {}
        self._readers: dict[str, set[str]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._failures: dict[str, Failures] = {}
        self._lock = threading.Lock()
        self._work: DueWork[None] = DueWork("eventlake-maintenance", self._maintain, DRAIN_SECONDS)

    def table_lock(self, path: Location) -> threading.Lock:
        """The lock a MERGE into ``path`` holds, so no compaction runs under it."""
        with self._lock:
            return self._locks.setdefault(str(path), threading.Lock())

    def add_reader(self, path: Location, checkpoint: Location) -> None:
        """A flow of the run streams the table at ``path`` from ``checkpoint``."""
        with self._lock:
            self._readers.setdefault(str(path), set()).add(str(checkpoint))

    def after_commit(
        self,
        path: Location,
        table: str,
        settings: MaintenanceSettings,
        *,
        merge_target: bool,
        layout_key: tuple[str, ...] = (),
    ) -> None:
        """A sink committed to ``path``: every few commits the table is looked at."""
        if not settings.enabled:
            return
        key = str(path)
        with self._lock:
            state = self._tables.setdefault(key, TableState(key, table, settings))
            state.settings, state.merge_target = settings, state.merge_target or merge_target
            state.layout_key = layout_key or state.layout_key
            state.commits_since_check += 1
            if state.commits_since_check < max(settings.compact_min_files // 4, 1):
                return
            state.commits_since_check = 0
        self._work.put(key, None)

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for due tables; whether all are done."""
        return self._work.drain(timeout)

    def close(self) -> None:
        self._work.close()

    def _maintain(self, key: str, _item: None) -> float:
        """Maintain one table; returns the seconds to rest before the next."""
        from eventlake.storage import Location

        with self._lock:
            state = self._tables[key]
            readers = [Location(r) for r in self._readers.get(key, ())]
            lock = self._locks.get(key) if state.merge_target else None
        worked = 0.0
        done = maintain_table(self._spark, state, readers=readers, lock=lock,
                              checkpoints_root=self._checkpoints_root)  # fmt: skip
        for action in done.actions:
            log.info("%s %s: %s (%.1f s)", action.kind, state.table, action.detail, action.seconds)
            worked += action.seconds if action.kind == "compact" else 0.0
            if action.error is not None:
                with self._lock:
                    failed = self._failures.setdefault(state.table, Failures())
                    failed.counts[action.kind] = failed.counts.get(action.kind, 0) + 1
                    failed.last = action
        return min(worked, REST_SECONDS_MAX)

    def failures(self) -> dict[str, dict[str, Any]]:
        """Per table (``layer/name``) that had any, its failed actions in this run
        (:meth:`Failures.record`): the tables' histories hold only what succeeded."""
        with self._lock:
            return {table: failed.record() for table, failed in self._failures.items()}
