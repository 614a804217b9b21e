"""eventlake: the golden pipeline through ``run_pipeline``, as ``eventlake run`` runs it.

``python -m bench.variants.eventlake_golden CONFIG [--set key=value ...]``
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import yaml

GOLDEN = Path(__file__).resolve().parents[1] / "golden.py"
TRIGGER = "available-now"


def write_config(
    config: Path, bootstrap: str, topic: str, root: Path, spark_conf: dict[str, str] | None = None
) -> Path:
    """An eventlake config for the golden pipeline on ``topic``, lake and checkpoints under
    ``root``."""
    data: dict[str, object] = {
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "pipelines": {"golden": {"topic": topic}},
    }
    if spark_conf:
        data["spark"] = {"conf": spark_conf}
    config.write_text(yaml.safe_dump(data))
    return config


def main() -> None:
    from eventlake.config.loader import load_settings
    from eventlake.pipelines.loader import project_pipelines
    from eventlake.run import run_pipeline

    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = load_settings(args.config, args.overrides)
    main_at = time.time()
    registry = project_pipelines(settings, [GOLDEN])
    golden = registry.get("golden")
    # run_pipeline starts the session itself, on a thread of its own while its pre-flight
    # asks the broker (as `eventlake run` does); query time starts when the session is up.
    up = SessionUp()
    result = run_pipeline(golden, settings, trigger=TRIGGER)
    query_end_at = time.time()
    session_at = up.at()
    (totals,) = result.flows.values()
    out = settings.lake.table_path("gold", "events_agg")
    print(
        json.dumps(
            {
                "rows_in": totals.input_rows,
                "batches": totals.batches,
                "query_seconds": round(query_end_at - session_at, 2),
                "output": str(out),
                "format": "delta",
                # Epoch seconds, for bench.profile's timeline.
                "main_at": main_at,
                "session_at": session_at,
                "query_end_at": query_end_at,
            }
        )
    )


class SessionUp:
    """When the process's SparkSession came up, seen from a thread that looks every 5 ms:
    the session is started inside run_pipeline, which reports no time of its own."""

    def __init__(self) -> None:
        self._seen: float | None = None
        self._done = threading.Event()
        threading.Thread(target=self._watch, name="bench-session-up", daemon=True).start()

    def _watch(self) -> None:
        from pyspark.sql import SparkSession

        while not self._done.wait(0.005):
            if SparkSession._instantiatedSession is not None:
                self._seen = time.time()
                return

    def at(self) -> float:
        """The time the session was first seen (the run has ended, so it was)."""
        self._done.set()
        assert self._seen is not None, "the run ended without a SparkSession"
        return self._seen


if __name__ == "__main__":
    main()
