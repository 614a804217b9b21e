"""What every generator yields, and pacing records into Kafka at a rate."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from eventlake.kafka.admin import produce


@dataclass(frozen=True)
class GeneratedRecord:
    """One Kafka record and the truth about it, for tests and summaries.

    ``kind``: valid, late, out_of_order, duplicate or malformed. ``reason``: for a
    malformed record, the quarantine reason it must get. ``data``: the event, when valid.
    """

    key: str | None
    value: str | None
    kind: str
    reason: str | None = None
    data: dict[str, Any] | None = None


def paced(
    records: Iterable[GeneratedRecord], rate: float, seconds: float
) -> Iterator[GeneratedRecord]:
    """Yield about ``rate`` records per second for ``seconds`` seconds of wall time."""
    start = time.monotonic()
    for i, record in enumerate(records):
        due = start + i / rate
        if due - start >= seconds:
            return
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield record


def send(bootstrap: str, topic: str, records: Iterable[GeneratedRecord]) -> Counter[str]:
    """Produce records (waiting for every ack) and count them by kind."""
    kinds: Counter[str] = Counter()

    def pairs() -> Iterator[tuple[str | None, str | None]]:
        for r in records:
            kinds[r.kind] += 1
            yield r.key, r.value

    produce(bootstrap, topic, pairs())
    return kinds
