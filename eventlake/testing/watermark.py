"""Replaying a Kafka-fed query's micro-batches: which records each batch read, and the
watermark rule Spark applied, so a test can compute the expected result batch by batch.

Spark's rule, pinned by eventlake's tests: batch N runs with watermark ``W[N]`` = the
newest event time seen in batches before N minus the delay (never moving back). A
stateful operator in batch N drops a row at or behind ``W[N-1]``, the watermark of the
batch before (so a row is judged against the watermark in force when it arrived), and
evicts and emits state with ``W[N]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from eventlake.checkpoints import CheckpointLog
from eventlake.storage import Location

R = TypeVar("R")
EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class KafkaBatch:
    batch_id: int
    #: The watermark the batch ran with, as logged by Spark.
    watermark: datetime
    #: ``(topic, partition) -> (first offset, end offset)`` read by the batch.
    ranges: dict[tuple[str, int], tuple[int, int]]

    def holds(self, topic: str, partition: int, offset: int) -> bool:
        first, end = self.ranges.get((topic, partition), (0, 0))
        return first <= offset < end


def kafka_batches(checkpoint: Location | Path, source: int = 0) -> list[KafkaBatch]:
    """Every planned batch of a query reading Kafka (source number ``source``)."""
    log = CheckpointLog(Location(checkpoint))
    done: dict[tuple[str, int], int] = {}
    batches = []
    for batch in log.planned:
        ends = {
            (topic, int(p)): int(end)
            for topic, parts in log.source_offsets(batch, source).items()
            for p, end in parts.items()
        }
        ranges = {tp: (done.get(tp, 0), end) for tp, end in ends.items()}
        done.update(ends)
        wm = EPOCH + timedelta(milliseconds=log.watermark_ms(batch))
        batches.append(KafkaBatch(batch, wm, ranges))
    return batches


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
