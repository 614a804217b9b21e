"""The two write-ahead logs of a micro-batch checkpoint.

Spark writes ``offsets/N`` when it plans batch N (the input range, fixed from then on) and
``commits/N`` once the sink has taken the batch. A batch with an offsets entry and no
commit is *in flight*: the query stopped or died inside it, and its next start re-runs
exactly that range before anything new.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _batches(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


@dataclass(frozen=True)
class CheckpointLog:
    root: Path

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

    def _entry(self, batch: int) -> list[str]:
        return (self.root / "offsets" / str(batch)).read_text().splitlines()

    def watermark_ms(self, batch: int) -> int:
        """The event-time watermark batch ``batch`` ran with (0: none yet)."""
        meta: dict[str, Any] = json.loads(self._entry(batch)[1])
        return int(meta.get("batchWatermarkMs", 0))

    def source_offsets(self, batch: int, source: int = 0) -> Any:
        """Where source number ``source`` ends in batch ``batch``, as Spark logged it
        (Kafka: ``{topic: {partition: next offset}}``)."""
        return json.loads(self._entry(batch)[2 + source])
