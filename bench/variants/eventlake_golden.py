"""eventlake: the golden pipeline through ``run_pipeline``, as ``eventlake run`` runs it.

``python -m bench.variants.eventlake_golden CONFIG [--set key=value ...]``
"""

from __future__ import annotations

import argparse
import json
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
    from eventlake.pipelines.plan import ends
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    parser = argparse.ArgumentParser()
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = load_settings(args.config, args.overrides)
    main_at = time.time()
    registry = project_pipelines(settings, [GOLDEN])
    golden = registry.get("golden")
    # Query time starts with the session up, as in the other variants; the session is
    # started as run_pipeline starts it for this run (its collector: spark.gc).
    get_spark(settings, finite=ends(golden, golden.configs(settings), None, TRIGGER))
    session_at = time.time()
    t0 = time.perf_counter()
    result = run_pipeline(golden, settings, trigger=TRIGGER)
    query_s = time.perf_counter() - t0
    (totals,) = result.flows.values()
    out = settings.lake.table_path("gold", "events_agg")
    print(
        json.dumps(
            {
                "rows_in": totals.input_rows,
                "batches": totals.batches,
                "query_seconds": round(query_s, 2),
                "output": str(out),
                "format": "delta",
                # Epoch seconds, for bench.profile's timeline.
                "main_at": main_at,
                "session_at": session_at,
                "query_end_at": time.time(),
            }
        )
    )


if __name__ == "__main__":
    main()
