"""The marked-commit protocol: each micro-batch one Delta commit whose ``userMetadata``
names the writer and the batch, so a replayed batch finds its commit and writes nothing.

The log is read directly, a file or two a batch, instead of Delta's ``txnAppId`` check,
which rebuilds the table's snapshot state (a few Spark jobs) on every batch. A
``SetTransaction`` of one of the writer's ids (how earlier versions and Delta's own
streaming sink recorded batches) counts as a mark too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.storage import Location, Storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventlake.connectors.delta.log_checkpoints import LogCheckpoints

#: Key of eventlake's mark in a Delta commit's ``userMetadata``: ``{"app": id, "batch": n}``.
BATCH_MARK = "eventlake_batch"
#: A batch's commit is searched for back to this long before the batch was planned.
CLOCK_SLACK_MS = 5 * 60 * 1000
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
LAST_CHECKPOINT = "_last_checkpoint"


def log_file(log: Location, version: int, kind: str = "json") -> Location:
    """The file of ``version`` in the ``_delta_log`` folder ``log``: its commit (``json``)
    or Delta's checksum of the table after it (``crc``)."""
    return log / f"{version:020d}.{kind}"


def commit_versions(names: Sequence[str]) -> list[int]:
    """The commit versions among the file names of a ``_delta_log`` folder."""
    return [int(m.group(1)) for m in map(COMMIT_FILE.match, names) if m]


#: A file of a ``_delta_log`` folder that belongs to one version: the commit, Delta's
#: checksum, a checkpoint (or a part of one), and the hidden ``.<file>.crc`` checksum that
#: Hadoop's local filesystem writes beside each (``_staged_commits``, ``_last_checkpoint``
#: and temporary files do not match).
VERSION_FILE = re.compile(
    r"^(\.?)(\d{20})\.(json|crc|checkpoint(?:\.\d{10}\.\d{10})?\.parquet)(\.crc)?$"
)


def orphaned_log_files(names: Sequence[str]) -> list[str]:
    """The files of a ``_delta_log`` folder (its ``names``) left over from versions older
    than its oldest commit: Delta's checksums and Hadoop's hidden checksums of files no
    longer there. A cleanup that removes only commits and checkpoints (delta-rs's) leaves
    three such files a commit on a local filesystem. Commits, checkpoints, anything of a
    version whose commit is still there and files being written never match."""
    versions = commit_versions(names)
    if not versions:
        return []
    oldest = min(versions)
    old = [(name, m) for name, m in zip(names, map(VERSION_FILE.match, names), strict=True)
           if m is not None and int(m.group(2)) < oldest]  # fmt: skip
    # Delta's "N.crc", then Hadoop's ".<file>.crc" whose file is gone or going.
    orphans = [name for name, m in old if not m.group(1) and m.group(3) == "crc" and not m.group(4)]
    kept = set(names) - set(orphans)
    orphans += [name for name, m in old if m.group(1) and m.group(4) and name[1:-4] not in kept]
    return orphans


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
    log_checkpoints: LogCheckpoints | None = None,
) -> bool:
    """Write micro-batch ``batch_id`` to the Delta table at ``path`` unless it is there.

    The commit carries ``{"eventlake_batch": {"app": app_ids[0], "batch": batch_id}}`` as
    its ``userMetadata``. Before writing, the commits made since the batch was planned (its
    checkpoint's offsets entry) are read for that mark, or a ``SetTransaction`` of one of
    ``app_ids``: a replay after a crash finds its own commit and writes nothing. With
    ``log_checkpoints`` (the run's service), the table's log checkpoint may then come due.
    Returns whether it wrote.
    """
    if batch_committed(path, app_ids=app_ids, batch_id=batch_id, checkpoint=checkpoint):
        return False
    mark = batch_mark(app_ids[0], batch_id)
    writer = df.write.format("delta").mode(mode).option("userMetadata", mark)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    writer.save(str(path))
    if log_checkpoints is not None:
        log_checkpoints.after_commit(df.sparkSession, path)
    return True


def batch_mark(app_id: str, batch_id: int) -> str:
    """The ``userMetadata`` of the commit of micro-batch ``batch_id`` by ``app_id``."""
    return json.dumps({BATCH_MARK: {"app": app_id, "batch": batch_id}})


def batch_committed(
    path: Location, *, app_ids: Sequence[str], batch_id: int, checkpoint: Location
) -> bool:
    """Whether micro-batch ``batch_id`` of one of ``app_ids`` is committed to the Delta
    table at ``path``: the commits since ``checkpoint`` planned the batch are searched."""
    from eventlake.checkpoints import CheckpointLog

    try:
        since = CheckpointLog(checkpoint).planned_ms(batch_id) - CLOCK_SLACK_MS
    except FileNotFoundError:
        since = 0  # a batch no stream planned (handed to a writer directly): every commit
    newest = newest_marked_batch(path, app_ids, since)
    return newest is not None and newest >= batch_id


@contextmanager
def marked_commits(spark: SparkSession, app_id: str, batch_id: int) -> Iterator[None]:
    """Mark every Delta commit made inside as micro-batch ``batch_id`` of ``app_id``
    (:func:`batch_mark` as the session's ``userMetadata``), then unmark.

    For DML such as MERGE, which take no writer options. ``spark`` must be the batch's own
    session (``df.sparkSession`` in foreachBatch): each streaming query runs on a clone, so
    flows never see each other's marks.
    """
    spark.conf.set(USER_METADATA_CONF, batch_mark(app_id, batch_id))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA_CONF)


def newest_marked_batch(path: Location, app_ids: Sequence[str], since_ms: int) -> int | None:
    """The newest batch id one of ``app_ids`` committed to the Delta table at ``path`` in
    the commits made at or after ``since_ms`` (epoch ms), or None."""
    from eventlake.storage import filesystem

    log = path / "_delta_log"
    storage = filesystem(log)
    newest = newest_version(storage, log)
    if newest is None:
        return None
    for version in range(newest, -1, -1):
        commit = log_file(log, version)
        try:
            actions = [json.loads(line) for line in storage.read_text(commit).splitlines() if line]
        except FileNotFoundError:
            return None  # removed by log cleanup: older than anything searched for
        except ValueError as exc:  # retrying reads the same bytes: nothing a restart fixes
            raise EventlakeError(
                ErrorCode.DELTA_LOG_CORRUPT,
                f"{commit} is not a Delta log entry (a line is not JSON: {exc}); the table "
                f"{path} cannot be read or written safely.",
            ) from None
        batch, timestamp = _batch_of(actions, app_ids)
        if batch is not None:
            return batch
        if timestamp is not None and timestamp < since_ms:
            return None
    return None


def last_checkpoint_version(storage: Storage, log: Location) -> int | None:
    """The version ``_last_checkpoint`` names in the Delta log folder ``log``: the newest
    log checkpoint as of its writing (None without one, or unreadable)."""
    try:
        return int(json.loads(storage.read_text(log / LAST_CHECKPOINT))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def newest_version(storage: Storage, log: Location, start: int | None = None) -> int | None:
    """The newest commit version in the Delta log folder ``log``, None when it has none.

    The folder is not listed: it holds every commit of the log's retention (7 days at a
    10-second trigger is 60,000 commits, and a listing on an object store is a request per
    thousand). Commits after the newest checkpoint are numbered without gaps and log
    cleanup keeps them, so from ``start`` (by default the version ``_last_checkpoint``
    names, 0 without one) the search steps forward, doubling while a commit exists, then
    halves back: a few file lookups. A log that breaks that rule (the starting commit gone)
    is listed instead.
    """
    if start is None:
        start = last_checkpoint_version(storage, log) or 0

    def exists(version: int) -> bool:
        return storage.exists(log_file(log, version))

    if not exists(start):
        return max(commit_versions(storage.list_names(log)), default=None)
    low, step = start, 1
    while exists(low + step):
        low, step = low + step, step * 2
    high = low + step
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if exists(middle) else (low, middle)
    return low


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
