"""Quix Streams: the golden query as a hopping window count (runs in the bench-only venv).

``python quix.py BOOTSTRAP TOPIC OUT``: one process; it stops when no message came for
3 s, and its query time ends at the last message. Windows are emitted when closed
(``final()``); Quix keys them by the message key (the user id) and closes a user's window
when that user's newer events pass its end plus the grace.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from datetime import datetime
from typing import Any

from quixstreams import Application


def event_time(value: Any, headers: Any, timestamp: float, timestamp_type: Any) -> int:
    return int(datetime.fromisoformat(value["event_time"]).timestamp() * 1000)


def main() -> None:
    bootstrap, topic_name, out = sys.argv[1], sys.argv[2], sys.argv[3]
    app = Application(
        broker_address=bootstrap,
        consumer_group=f"quix-bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        state_dir=f"{out}/state",
        loglevel=logging.WARNING,
    )
    t0 = time.perf_counter()
    topic = app.topic(topic_name, value_deserializer="json", timestamp_extractor=event_time)
    rows: list[dict[str, Any]] = []
    seen = 0
    last = t0

    def count_in(value: Any) -> None:
        nonlocal seen, last
        seen += 1
        last = time.perf_counter()

    def collect(value: Any, key: Any, timestamp: int, headers: Any) -> None:
        rows.append(
            {
                "start": value["start"],
                "user_id": key.decode() if isinstance(key, bytes) else key,
                "events": value["value"],
            }
        )

    sdf = app.dataframe(topic).update(count_in)
    sdf = sdf.hopping_window(duration_ms=600_000, step_ms=300_000, grace_ms=600_000).count().final()
    sdf.update(collect, metadata=True)
    app.run(timeout=3)
    query_s = last - t0
    path = f"{out}/events_agg.jsonl"
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(
        json.dumps(
            {
                "rows_in": seen,
                "batches": None,
                "query_seconds": round(query_s, 2),
                "output": path,
                "format": "jsonl",
            }
        )
    )


if __name__ == "__main__":
    main()
