"""The foreachBatch sink kit: batch-level writers that make replays harmless.

Spark's ``foreachBatch`` calls a function with each micro-batch and its id. After a crash
the query re-runs the last planned batch with the same id and the same input, so a
writer that records the id atomically with its write (a Delta transaction id, a commit
table row) can skip a batch it has already written: exactly-once end to end. Writers that
cannot (Kafka) are at-least-once, and say so.

A :class:`ForeachBatchSink` runs one or more writers on each batch (fan-out): the batch is
read from the source once, cached when more than one read follows and always released,
and a failure in any writer fails the batch, so the whole batch is retried and the
writers that had already succeeded skip it.
"""

from __future__ import annotations

import json
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

#: Test hook: ``<writer>:<batch id>`` kills this process group right after that writer
#: has written that batch, before Spark records the batch as committed.
CRASH_HOOK_ENV = "EVENTLAKE_TEST_CRASH_AFTER"


@dataclass(frozen=True)
class BatchContext:
    """What a writer knows about the batch it writes."""

    flow: str
    batch_id: int
    #: The checkpoint's query id: stable across restarts, new when the checkpoint is new.
    stream_id: str
    spark: SparkSession

    def app_id(self, writer: str) -> str:
        """The idempotency scope of ``writer`` in this flow and checkpoint.

        Batch ids restart at 0 with a new checkpoint; keying by the checkpoint's query id
        keeps a fresh checkpoint from having its batches skipped as already written.
        """
        return f"{self.flow}/{writer}/{self.stream_id}"


#: Turns the batch into what a writer writes (a projection, a MERGE source, ...).
Prepare = Callable[["DataFrame", BatchContext], "DataFrame"]


class BatchWriter(ABC):
    """Writes one micro-batch somewhere. Subclasses state their delivery guarantee."""

    #: Names the writer in idempotency keys, errors and the crash hook; unique per flow.
    name: str
    #: Applied to the batch before the write; None writes the batch as it is.
    prepare: Prepare | None = None
    #: How many times :meth:`write` scans the batch (the sink caches when the total > 1).
    reads: int = 1

    @abstractmethod
    def write(self, df: DataFrame, batch: BatchContext) -> None: ...

    def source(self, df: DataFrame, batch: BatchContext) -> DataFrame:
        """The rows this writer writes: ``prepare`` applied to the batch."""
        return self.prepare(df, batch) if self.prepare is not None else df

    def describe(self) -> str:
        return self.name


def stream_id(checkpoint: Path) -> str:
    """The query id Spark wrote to ``<checkpoint>/metadata`` when the checkpoint was new."""
    try:
        return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise EventlakeError(
            ErrorCode.SINK_WRITE_FAILED,
            f"cannot read the query id from {checkpoint / 'metadata'}: {exc}",
            expected="the metadata file Spark writes when a query first starts",
            fix="do not edit checkpoint folders by hand; use a new checkpoint folder",
        ) from exc


def _crash() -> None:
    """Die now, with the JVM: the process group when this process leads one."""
    if os.getpgid(0) == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class BatchHandler:
    """The function Spark calls with each batch: runs every writer, in order."""

    def __init__(self, writers: Sequence[BatchWriter], flow: str, checkpoint: Path) -> None:
        names = [w.name for w in writers]
        if len(set(names)) != len(names):
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"flow '{flow}' has two batch writers with one name: {names}.",
                expected="a distinct name per writer (it scopes the writer's idempotency)",
                fix="pass name=... to the writers",
            )
        self.writers = tuple(writers)
        self.flow = flow
        self.checkpoint = checkpoint
        self._stream_id: str | None = None
        self._crash_after = os.environ.get(CRASH_HOOK_ENV)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self._stream_id is None:
            self._stream_id = stream_id(self.checkpoint)
        batch = BatchContext(self.flow, batch_id, self._stream_id, df.sparkSession)
        cache = sum(w.reads for w in self.writers) > 1
        if cache:
            df = df.persist()
        try:
            for writer in self.writers:
                try:
                    writer.write(df, batch)
                except EventlakeError:
                    raise
                except Exception as exc:
                    raise EventlakeError(
                        ErrorCode.SINK_WRITE_FAILED,
                        f"writer '{writer.describe()}' of flow '{self.flow}' failed on batch "
                        f"{batch_id}: {exc}",
                        expected="every writer of the batch to succeed",
                        fix="fix the cause and run again: the batch is retried whole, and "
                        "writers that already wrote it skip it",
                    ) from exc
                if self._crash_after == f"{writer.name}:{batch_id}":
                    _crash()
        finally:
            if cache:
                df.unpersist()


@dataclass(frozen=True)
class ForeachBatchSink(Sink):
    """Hand each micro-batch to ``writers`` (one, or several for a fan-out).

    Delivery guarantee: that of its weakest writer. Each writer's docstring states its
    own; a batch counts as done (Spark's commit log) only after every writer returned.
    Output modes: all three; the writers see each batch as Spark's mode defines it.
    """

    writers: tuple[BatchWriter, ...]
    output_modes = frozenset({"append", "update", "complete"})

    def _bind(
        self, writer: DataStreamWriter, *, query_name: str, checkpoint: Path
    ) -> DataStreamWriter:
        # The handler keys idempotency by the checkpoint's query id.
        return writer.foreachBatch(BatchHandler(self.writers, query_name, checkpoint))

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        return writer.start()
