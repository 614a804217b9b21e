"""The fixed cost of a micro-batch: 1,000-row batches of a stateless and a stateful flow.

Each flow reads a topic preloaded with ``BATCHES`` x 1,000 records, 1,000 per batch
(available-now), into Delta; the first batches (JVM warm-up, table creation) are left out
and the median of the rest is reported, with Spark's own split of a batch's time
(``durationMs``) and the part of ``addBatch`` that is Delta's commit.

``python -m bench.batch_cost BOOTSTRAP ROOT [--set key=value ...]`` prints one JSON line;
:func:`measure_batch_cost` runs it in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.fresh import in_fresh_process
from eventlake.connectors.delta import DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.monitoring import ProgressListener
from eventlake.pipelines import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext

BATCH_ROWS = 1_000
BATCHES = 30
WARMUP = 10
PARTS = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets")

cost = Pipeline("cost", description="1,000-row batches: stateless and stateful")


@cost.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
def stateless(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every record as received (bronze)."""
    return kafka_records(df)


@cost.flow(input=KafkaInput(), output=DeltaOutput("gold", "events_agg"))
def stateful(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The golden query: a watermarked sliding-window count."""
    from bench.golden import golden_counts

    return golden_counts(ctx, df, ctx.params.json_decoder)


def _run(bootstrap: str, root: Path, overrides: list[str]) -> dict[str, Any]:
    from bench.golden import events
    from eventlake.config.loader import load_settings
    from eventlake.kafka import create_topic, produce
    from eventlake.run import run_pipeline

    topic = f"cost-{int(time.time())}"
    create_topic(bootstrap, topic, partitions=3)
    produce(bootstrap, topic, ((k, v) for k, v, _ in events(BATCHES * BATCH_ROWS, seed=7)))
    config = root / "cost.yaml"
    root.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps(
            {
                "kafka": {"bootstrap_servers": bootstrap},
                "lake": {"root": str(root / "lake")},
                "checkpoints": {"root": str(root / "checkpoints")},
                "pipelines": {"cost": {"topic": topic, "max_offsets_per_trigger": BATCH_ROWS}},
            }
        )
    )
    settings = load_settings(config, overrides)
    out: dict[str, Any] = {}
    for flow in ("stateless", "stateful"):
        listener = Recorder(show=False)
        try:
            run_pipeline(cost, settings, trigger="available-now", flows=[flow], listener=listener)
        finally:
            listener.close()
        data = [p for p in listener.progress if p["numInputRows"] > 0][WARMUP:]
        out[flow] = {
            "batches_measured": len(data),
            "rows_per_batch": statistics.median(p["numInputRows"] for p in data),
            "median_seconds": round(
                statistics.median(p["durationMs"]["triggerExecution"] for p in data) / 1000, 3
            ),
            "parts_ms": {
                part: statistics.median(p["durationMs"].get(part, 0) for p in data)
                for part in PARTS
            },
        }
    return out


class Recorder(ProgressListener):
    """The progress listener eventlake runs with, keeping every event's JSON too."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.progress: list[dict[str, Any]] = []

    def onQueryProgress(self, event: Any) -> None:
        self.progress.append(json.loads(event.progress.json))
        super().onQueryProgress(event)


def measure_batch_cost(
    bootstrap: str, root: Path, overrides: list[str] | None = None
) -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    sets = [a for o in overrides or [] for a in ("--set", o)]
    title = "## The fixed cost of a 1,000-row micro-batch"
    result = in_fresh_process("bench.batch_cost", bootstrap, str(root), *sets, title=title)
    if "error" in result:
        return result
    lines = [
        title,
        "",
        f"Median over the batches after the first {WARMUP} (JVM warm-up, table creation; "
        f"{BATCHES * BATCH_ROWS:,} records at max_offsets_per_trigger={BATCH_ROWS}, "
        "available-now), Kafka -> Delta; the parts in ms:",
        "",
        "| flow | batches | batch (s) | " + " | ".join(PARTS) + " |",
        "|---|---|---|" + "---|" * len(PARTS),
    ]
    for flow, r in result.items():
        parts = " | ".join(str(r["parts_ms"][p]) for p in PARTS)
        lines.append(f"| {flow} | {r['batches_measured']} | {r['median_seconds']} | {parts} |")
    result["markdown"] = lines
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("root", type=Path)
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    print(json.dumps(_run(args.bootstrap, args.root, args.overrides)))


if __name__ == "__main__":
    main()
