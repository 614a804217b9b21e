"""Delta log checkpoints of sink tables, written off the batch's path by a service of the
run (:class:`LogCheckpoints`)."""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventlake.connectors.delta.commits import (
    VERSION_FILE,
    commit_versions,
    last_checkpoint_version,
    newest_version,
    orphaned_log_files,
)
from eventlake.connectors.delta.tables import (
    CHECKPOINT_INTERVAL_PROPERTY,
    NO_INLINE_CHECKPOINTS,
    open_delta_rs,
)
from eventlake.scope import DueWork

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.context import FlowContext
    from eventlake.storage import Location, Storage

log = logging.getLogger(__name__)

_OWN_LOG_OPTION = "fs.eventlake.logCheckpoints"
#: How long a run's end waits for a log checkpoint under way (seconds).
DRAIN_SECONDS = 60.0
#: Leftover files removed after one cleanup at most: a log that gathered them for months
#: is cleared over several checkpoints, none of them long.
MAX_ORPHANS = 50_000


def remove_orphans(path: Location) -> int:
    """Remove what delta-rs's log cleanup of the local table at ``path`` left behind
    (:func:`orphaned_log_files`, at most :data:`MAX_ORPHANS`); how many were removed.

    Every Delta operation of Spark on a local or HDFS table lists the whole ``_delta_log``
    folder, so each file left there for good slows every read and commit of the table."""
    folder = path.path / "_delta_log"
    removed = 0
    for name in orphaned_log_files(os.listdir(folder))[:MAX_ORPHANS]:
        try:
            (folder / name).unlink()
            removed += 1
        except FileNotFoundError:
            pass
    if removed:
        log.info("removed %d leftover files from the log of %s", removed, path)
    return removed


#: A checkpoint file: one part, or part ``k`` of ``n``.
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


def complete_checkpoints(names: Sequence[str]) -> list[int]:
    """The versions among a ``_delta_log`` folder's file ``names`` with a whole checkpoint
    (a single file, or every part of a multi-part one)."""
    whole: set[int] = set()
    parts: dict[tuple[int, int], set[int]] = {}
    for m in filter(None, map(_CHECKPOINT_FILE.match, names)):
        version = int(m.group(1))
        if m.group(2) is None:
            whole.add(version)
        else:
            parts.setdefault((version, int(m.group(3))), set()).add(int(m.group(2)))
    whole.update(v for (v, count), seen in parts.items() if len(seen) == count)
    return sorted(whole)


def trim_start(names: Sequence[str], keep_commits: int, keep_from: int | None) -> int | None:
    """Where the log with file ``names`` may start so that it keeps its newest
    ``keep_commits`` commits and every commit from version ``keep_from`` on: the newest
    whole checkpoint at or before both, since a log must begin at a checkpoint to be read.
    None when the log cannot start later than it does."""
    versions = commit_versions(names)
    if not versions:
        return None
    cutoff = max(versions) - keep_commits + 1
    if keep_from is not None:
        cutoff = min(cutoff, keep_from)
    start = max((v for v in complete_checkpoints(names) if v <= cutoff), default=None)
    return start if start is not None and start > min(versions) else None


def trim_log(storage: Storage, log: Location, names: Sequence[str], start: int) -> str:
    """Remove every file of a version before ``start`` (:func:`trim_start`) from the
    ``_delta_log`` folder ``log`` (listed as ``names``), oldest first: a trim cut short
    leaves a log that still reads from its checkpoint at ``start``."""
    doomed = sorted(
        (int(m.group(2)), name)
        for name, m in zip(names, map(VERSION_FILE.match, names), strict=True)
        if m is not None and int(m.group(2)) < start
    )
    for _, name in doomed:
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by delta-rs's cleanup
            storage.delete(log / name)
    oldest = doomed[0][0] if doomed else start
    return f"{len(doomed)} log files of versions {oldest}-{start - 1} removed"


def log_checkpoints(ctx: FlowContext) -> LogCheckpoints | None:
    """The run's log-checkpoint service, or None when ``lake.log_checkpoint_commits`` is 0
    (Delta checkpoints inline)."""
    every = ctx.settings.lake.log_checkpoint_commits
    if every <= 0:
        return None
    return ctx.run.service(LogCheckpoints, lambda: LogCheckpoints(every))


class LogCheckpoints:
    """Writes the Delta log checkpoints of the tables eventlake's sinks commit to, on a
    thread of its own, once ``every`` commits have gone by since the table's newest
    checkpoint.

    Delta writes a checkpoint inside the commit that reaches the table's
    ``delta.checkpointInterval``: it rebuilds the snapshot from the log and writes it as
    Parquet, 3-5 s on 2 cores that the batch waits for (a latency spike every 100th batch).
    Sink tables eventlake creates carry :data:`NO_INLINE_CHECKPOINTS` instead, and this
    service checkpoints them (the checkpoint, ``_last_checkpoint``, then log cleanup) while
    the next batches run: with delta-rs for a local table, with Delta's own
    ``DeltaLog.checkpoint`` for a URI. Other tables keep Delta's inline checkpoints. A
    checkpoint only speeds up reading the log: one cut short by a crash is written again
    after the next commit. One per run; :meth:`close` lets one under way finish.
    """

    def __init__(self, every: int) -> None:
        self.every = every
        self._inline: set[str] = set()
        self._work: DueWork[tuple[SparkSession, Location]] = DueWork(
            "eventlake-log-checkpoints", self._checkpoint, DRAIN_SECONDS
        )

    def after_commit(self, spark: SparkSession, path: Location) -> None:
        """A sink committed to the table at ``path``: checkpoint it if it is due."""
        if str(path) not in self._inline:
            self._work.put(str(path), (spark, path))

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the due checkpoints; whether all are done."""
        return self._work.drain(timeout)

    def close(self) -> None:
        """Let the due checkpoints finish (bounded), then stop the thread."""
        self._work.close()

    def _checkpoint(self, _key: str, item: tuple[SparkSession, Location]) -> None:
        self._checkpoint_if_due(*item)

    def _checkpoint_if_due(self, spark: SparkSession, path: Location) -> None:
        from eventlake.storage import filesystem

        logdir = path / "_delta_log"
        storage = filesystem(logdir)
        checkpoint = last_checkpoint_version(storage, logdir) or 0
        newest = newest_version(storage, logdir, start=checkpoint)
        if newest is None or newest - checkpoint < self.every:
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
        table = open_delta_rs(path)
        interval = table.metadata().configuration.get(CHECKPOINT_INTERVAL_PROPERTY)
        if interval != str(NO_INLINE_CHECKPOINTS):
            return None
        table.create_checkpoint()
        table.cleanup_metadata()
        remove_orphans(path)
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
