"""The two write-ahead logs of a micro-batch checkpoint.

Spark writes ``offsets/N`` when it plans batch N (the input range, fixed from then on) and
``commits/N`` once the sink has taken the batch. A batch with an offsets entry and no
commit is *in flight*: the query stopped or died inside it, and its next start re-runs
exactly that range before anything new.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.storage import Location, filesystem


def _batches(folder: Location) -> list[int]:
    return sorted(int(name) for name in filesystem(folder).list_names(folder) if name.isdigit())


_VERSION_LINE = re.compile(r"^v\d+$")

#: What Spark's CheckpointFileManager writes before it renames a log entry into place
#: (``.<batch>.<uuid>.tmp``), and the checksum a local filesystem writes beside it.
_UNFINISHED = re.compile(
    r"^\.\.?\d+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp(\.crc)?$"
)


def stream_id(checkpoint: Location | Path) -> str:
    """The query id Spark wrote to ``<checkpoint>/metadata`` when the checkpoint was new.

    Stable across restarts and new with a new checkpoint: it scopes every idempotency key.
    """
    try:
        metadata = Location(checkpoint) / "metadata"
        return str(json.loads(filesystem(metadata).read_text(metadata).splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise EventlakeError(
            ErrorCode.SINK_WRITE_FAILED,
            f"cannot read the query id from {checkpoint / 'metadata'}: {exc}",
            expected="the metadata file Spark writes when a query first starts",
            fix="do not edit checkpoint folders by hand; use a new checkpoint folder",
        ) from exc


def ensure_stream_id(checkpoint: Location | Path) -> str:
    """The checkpoint's query id; for a new checkpoint, one written now to
    ``<checkpoint>/metadata`` the way Spark writes it, which Spark then keeps (it only
    writes the file when there is none). For writers that need it before the query
    starts."""
    metadata = Location(checkpoint) / "metadata"
    fs = filesystem(metadata)
    if not fs.exists(metadata):
        fs.write_text(metadata, json.dumps({"id": str(uuid.uuid4())}) + "\n")
    return stream_id(checkpoint)


@dataclass(frozen=True)
class OffsetsEntry:
    """One planned batch's offsets entry, as Spark logged it."""

    #: When the batch was planned (epoch ms); a replay keeps the first plan's.
    planned_ms: int
    #: The event-time watermark the batch ran with (epoch ms; 0: none yet).
    watermark_ms: int
    #: Where each source ends (Kafka: ``{topic: {partition: next offset}}``; None for a
    #: source with no offset yet).
    sources: list[Any]


@dataclass(frozen=True)
class BatchRead:
    """What one planned micro-batch of a Kafka-fed query read, from its offsets entry."""

    batch_id: int
    #: The event-time watermark the batch ran with (epoch ms; 0: none yet).
    watermark_ms: int
    #: ``(topic, partition) -> (first offset, end offset)`` the batch read.
    ranges: dict[tuple[str, int], tuple[int, int]]

    def holds(self, topic: str, partition: int, offset: int) -> bool:
        first, end = self.ranges.get((topic, partition), (0, 0))
        return first <= offset < end


@dataclass(frozen=True)
class CheckpointLog:
    root: Location

    def __init__(self, root: Location | Path) -> None:
        object.__setattr__(self, "root", Location(root))

    @property
    def exists(self) -> bool:
        """Whether the query has planned a batch here (the checkpoint has an offsets log)."""
        return filesystem(self.root).is_dir(self.root / "offsets")

    @property
    def planned(self) -> list[int]:
        return _batches(self.root / "offsets")

    @property
    def committed(self) -> list[int]:
        return _batches(self.root / "commits")

    @property
    def last_committed(self) -> int | None:
        done = self.committed
        return done[-1] if done else None

    @property
    def in_flight(self) -> int | None:
        """The planned batch without a commit, if the query ended inside one."""
        planned = self.planned
        if not planned:
            return None
        last = planned[-1]
        return None if last == self.last_committed else last

    def discard_unfinished_start(self) -> list[str]:
        """Delete what a query killed while writing its first offsets entry left behind,
        and return the names deleted.

        Spark starts a query with no planned batch only over an empty ``offsets`` folder
        (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY otherwise), so the temporary file of
        that unfinished write would stop the flow at every start. Only Spark's temporary
        files go, and only while no batch is planned: once one is, Spark ignores them.
        """
        folder = self.root / "offsets"
        fs = filesystem(folder)
        names = fs.list_names(folder)
        if any(name.isdigit() for name in names):
            return []
        unfinished = [name for name in names if _UNFINISHED.match(name)]
        for name in unfinished:
            fs.delete(folder / name)
        return unfinished

    def entry(self, batch: int) -> OffsetsEntry:
        """Batch ``batch``'s offsets entry, read once; EL-CHECKPOINT-003 when the file is
        not what Spark writes (truncated, edited)."""
        entry = self.root / "offsets" / str(batch)
        lines = filesystem(entry).read_text(entry).splitlines()
        try:
            if not lines or not _VERSION_LINE.match(lines[0]):
                raise ValueError("its first line is not a log version such as v1")
            meta = json.loads(lines[1]) if len(lines) > 1 else None
            if not isinstance(meta, dict) or "batchTimestampMs" not in meta:
                raise ValueError("its second line is not the batch's metadata")
            ends = [json.loads(ln) if ln.strip() not in ("", "-") else None for ln in lines[2:]]
        except ValueError as exc:
            raise EventlakeError(
                ErrorCode.CHECKPOINT_CORRUPT,
                f"{entry} is not an offsets entry Spark wrote ({exc}): the checkpoint "
                f"{self.root} cannot resume.",
            ) from None
        return OffsetsEntry(
            int(meta["batchTimestampMs"]), int(meta.get("batchWatermarkMs", 0)), ends
        )

    def planned_ms(self, batch: int) -> int:
        """When batch ``batch`` was planned (epoch ms); a replay keeps the first plan's."""
        return self.entry(batch).planned_ms

    def watermark_ms(self, batch: int) -> int:
        """The event-time watermark batch ``batch`` ran with (0: none yet)."""
        return self.entry(batch).watermark_ms

    def sources(self, batch: int) -> list[Any]:
        """Where each source ends in batch ``batch``, as Spark logged it (Kafka:
        ``{topic: {partition: next offset}}``; None for a source with no offset yet)."""
        return self.entry(batch).sources

    def source_offsets(self, batch: int, source: int = 0) -> Any:
        """Where source number ``source`` ends in batch ``batch``, as Spark logged it."""
        return self.sources(batch)[source]

    def batch_reads(self, source: int = 0, through: int | None = None) -> list[BatchRead]:
        """Each planned batch (up to ``through``) with the Kafka offset ranges source
        number ``source`` read in it: from where the batch before ended (0 for the
        first) to where it ends."""
        done: dict[tuple[str, int], int] = {}
        reads = []
        for batch in self.planned:
            if through is not None and batch > through:
                break
            entry = self.entry(batch)
            ends = {
                (topic, int(p)): int(end)
                for topic, parts in (entry.sources[source] or {}).items()
                for p, end in parts.items()
            }
            ranges = {tp: (done.get(tp, 0), end) for tp, end in ends.items()}
            done.update(ends)
            reads.append(BatchRead(batch, entry.watermark_ms, ranges))
        return reads
