"""Replaying a Kafka-fed query's micro-batches: which records each batch read, and the
watermark rule Spark applied, so a test can compute the expected result batch by batch.

The rule here is written in plain Python on purpose: tests compare eventlake's late-row
judgement (``eventlake.watermarks``) and Spark's drops with it, so it must not be computed
by the code under test. The batches come from the checkpoint's offsets log
(``CheckpointLog.batch_reads``), the one walk of it.

Spark's rule, pinned by eventlake's tests: batch N runs with watermark ``W[N]`` = the
newest event time seen in batches before N minus the delay (never moving back). A
stateful operator in batch N drops a row at or behind ``W[N-1]``, the watermark of the
batch before (so a row is judged against the watermark in force when it arrived), and
evicts and emits state with ``W[N]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from eventlake.checkpoints import BatchRead, CheckpointLog
from eventlake.storage import Location

R = TypeVar("R")
EPOCH = datetime(1970, 1, 1)


class KafkaBatch(BatchRead):
    """A batch's Kafka offset ranges and its watermark as a time."""

    @property
    def watermark(self) -> datetime:
        """The watermark the batch ran with, as logged by Spark."""
        return EPOCH + timedelta(milliseconds=self.watermark_ms)


def kafka_batches(checkpoint: Location | Path, source: int = 0) -> list[KafkaBatch]:
    """Every planned batch of a query reading Kafka (source number ``source``)."""
    return [
        KafkaBatch(r.batch_id, r.watermark_ms, r.ranges)
        for r in CheckpointLog(Location(checkpoint)).batch_reads(source)
    ]


def by_batch(
    records: Iterable[R], batches: list[KafkaBatch], where: Callable[[R], tuple[str, int, int]]
) -> list[list[R]]:
    """Records grouped by the batch that read them (``where`` gives topic, partition,
    offset); records no batch read are left out."""
    grouped: list[list[R]] = [[] for _ in batches]
    for record in records:
        topic, partition, offset = where(record)
        for i, batch in enumerate(batches):
            if batch.holds(topic, partition, offset):
                grouped[i].append(record)
                break
    return grouped


def watermarks(
    batches: list[list[R]], event_time: Callable[[R], datetime], delay: timedelta
) -> list[datetime]:
    """``W[N]`` for each batch, computed from the records alone (compare with the log)."""
    out, newest, wm = [], None, EPOCH
    for rows in batches:
        out.append(wm)
        times = [event_time(r) for r in rows]
        if times:
            newest = max([*times, newest] if newest else times)
            wm = max(wm, newest - delay)
    return out


def not_late(
    batches: list[list[R]], event_time: Callable[[R], datetime], delay: timedelta
) -> list[R]:
    """The records a stateful operator keeps: those after ``W[N-1]`` in their batch N."""
    wms = watermarks(batches, event_time, delay)
    kept: list[R] = []
    for n, rows in enumerate(batches):
        threshold = wms[n - 1] if n else EPOCH
        kept.extend(r for r in rows if n == 0 or event_time(r) > threshold)
    return kept
