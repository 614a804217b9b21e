"""State growth: one keyed flow (Kafka -> de-duplicated by key within a 7-day watermark ->
Delta, RocksDB state) with 100,000 and with 10,000,000 distinct keys held in its state.

For each size: a topic is loaded with that many distinct keys and the flow reads them all
(available-now, 1,000,000 records a batch), so its state holds every key. Then
:data:`BATCHES` batches of :data:`BATCH_ROWS` records each (nine in ten new keys, one in
ten a key already held) run in one query, and their batch times are compared; the first
:data:`SKIPPED` batches of that query (the state store being opened) are left out. A run
with :data:`WARMUP_KEYS` keys before both warms the JVM up.

``python -m bench.state_growth BOOTSTRAP ROOT`` prints one JSON line;
:func:`measure_state_growth` runs it in a fresh process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StreamingQueryListener

from bench.fresh import in_fresh_process
from bench.latency import percentiles
from eventlake.connectors.delta import DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.pipelines import Pipeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext

SIZES = (100_000, 10_000_000)
LOAD_BATCH = 1_000_000
BATCH_ROWS = 10_000
BATCHES = 20
SKIPPED = 2
#: A first run of this size warms the JVM up; its figures are left out.
WARMUP_KEYS = 20_000

keyed = Pipeline("state_growth", description="de-duplication by key: state of every key")


@keyed.flow(input=KafkaInput(), output=DeltaOutput("silver", "first_seen"))
def first_seen(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Each key's first record within 7 days of its Kafka timestamp."""
    records = kafka_records(df).select("key", "partition", "offset", "kafka_timestamp")
    watermarked = ctx.with_watermark(records, "kafka_timestamp", "7 days")
    return watermarked.dropDuplicatesWithinWatermark(["key"])


def state_bytes(checkpoints: Path) -> int:
    """Bytes of the state stores under ``checkpoints`` (a flow's checkpoint, or a root of
    several): the files under any ``state`` folder."""
    total = 0
    for folder, _dirs, names in os.walk(checkpoints):
        if "state" in Path(folder).relative_to(checkpoints).parts:
            for name in names:
                with contextlib.suppress(FileNotFoundError):  # a state file cleaned up meanwhile
                    total += (Path(folder) / name).stat().st_size
    return total


class OperatorTimings(StreamingQueryListener):
    """Per batch with rows, the de-duplication's state store timings (ms): looking up and
    inserting keys, removing expired ones (a scan of every key) and the commit."""

    KEYS = ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs")

    def __init__(self) -> None:
        self.by_batch: dict[int, dict[str, int]] = {}

    def onQueryStarted(self, event: Any) -> None: ...
    def onQueryIdle(self, event: Any) -> None: ...
    def onQueryTerminated(self, event: Any) -> None: ...

    def onQueryProgress(self, event: Any) -> None:
        ops = event.progress.stateOperators or []
        if ops and event.progress.numInputRows:
            self.by_batch[int(event.progress.batchId)] = {
                k: int(getattr(ops[0], k)) for k in self.KEYS
            }


def _one(bootstrap: str, root: Path, keys: int) -> dict[str, Any]:
    from eventlake.config.loader import settings_from_dict
    from eventlake.kafka import create_topic, produce
    from eventlake.monitoring import ProgressListener
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    topic = f"state-{keys}"
    create_topic(bootstrap, topic, partitions=3)

    def settings(max_offsets: int) -> Any:
        return settings_from_dict({
            "kafka": {"bootstrap_servers": bootstrap},
            "lake": {"root": str(root / topic / "lake")},
            "checkpoints": {"root": str(root / topic / "checkpoints")},
            "pipelines": {"state_growth": {"topic": topic,
                                           "max_offsets_per_trigger": max_offsets}},
        })  # fmt: skip

    t0 = time.perf_counter()
    produce(bootstrap, topic, ((f"k{i:010d}", "x") for i in range(keys)))
    produced = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_pipeline(keyed, settings(LOAD_BATCH), trigger="available-now")
    loaded = time.perf_counter() - t0

    def batch(i: int) -> list[tuple[str, str]]:
        new = [(f"n{i * BATCH_ROWS + j:010d}", "x") for j in range(BATCH_ROWS * 9 // 10)]
        held = [(f"k{(i * 7919 + j * 104729) % keys:010d}", "x") for j in range(BATCH_ROWS // 10)]
        return new + held

    produce(bootstrap, topic, (r for i in range(BATCHES) for r in batch(i)))
    progress: list[Any] = []
    listener = ProgressListener(show=False)
    listener.observers.append(progress.append)
    timings = OperatorTimings()
    spark = get_spark(settings(BATCH_ROWS))
    spark.streams.addListener(timings)
    try:
        run_pipeline(keyed, settings(BATCH_ROWS), trigger="available-now", listener=listener)
    finally:
        listener.close()
        spark.streams.removeListener(timings)
    batches = sorted({p.batch_id: p for p in progress if p.input_rows}.values(),
                     key=lambda p: p.batch_id)  # fmt: skip
    measured = batches[SKIPPED:]
    seconds = [p.batch_duration_ms / 1000 for p in measured]
    ms = [timings.by_batch[p.batch_id] for p in measured if p.batch_id in timings.by_batch]
    last = batches[-1]
    checkpoint = settings(BATCH_ROWS).checkpoints.for_flow("state_growth", "first_seen").path
    return {
        "keys": keys,
        "produce_seconds": round(produced, 1),
        "load_seconds": round(loaded, 1),
        "batches": len(measured),
        "rows_per_batch": statistics.median(p.input_rows for p in measured),
        "batch_seconds": {**percentiles(seconds), "mean": round(statistics.fmean(seconds), 3)},
        "state_rows": last.state_rows,
        "state_memory_bytes": last.state_bytes,
        "state_disk_bytes": state_bytes(checkpoint),
        # Summed over the operator's tasks (one per state partition), per batch: median.
        "state_ms": {k: statistics.median(m[k] for m in ms) for k in OperatorTimings.KEYS}
        if ms
        else {},
    }


def _run(bootstrap: str, root: Path, sizes: tuple[int, ...]) -> dict[str, Any]:
    from eventlake.config.loader import settings_from_dict
    from eventlake.session import get_spark

    get_spark(settings_from_dict({"kafka": {"bootstrap_servers": bootstrap}}))
    _one(bootstrap, root, WARMUP_KEYS)  # the JVM's first batches: not either size's
    runs = [_one(bootstrap, root, n) for n in sizes]
    small, large = runs[0]["batch_seconds"], runs[-1]["batch_seconds"]
    return {"runs": runs, "p50_ratio": round(large["p50"] / small["p50"], 2),
            "p99_ratio": round(large["p99"] / small["p99"], 2)}  # fmt: skip


def measure_state_growth(bootstrap: str, root: Path) -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    title = "## State growth: a de-duplicating flow with 100,000 and 10,000,000 keys"
    r = in_fresh_process("bench.state_growth", bootstrap, str(root), title=title,
                         show_stderr=True)  # fmt: skip
    if "error" in r:
        return r
    lines = [
        title,
        "",
        f"`dropDuplicatesWithinWatermark` on the Kafka key (RocksDB state, the shipped "
        f"settings), its state loaded with every key first; then {BATCHES} batches of "
        f"{BATCH_ROWS:,} records (9 in 10 new keys) in one query, the first {SKIPPED} left "
        "out.",
        "",
        "| keys in state | load (s) | batch p50 (s) | batch p99 (s) | state rows "
        "| state memory (MiB) | state on disk (MiB) | state: updates / removals / commit "
        "(ms, p50) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in r["runs"]:
        b = run["batch_seconds"]
        lines.append(
            f"| {run['keys']:,} | {run['load_seconds']} | {b['p50']} | {b['p99']} "
            f"| {run['state_rows']:,} | {run['state_memory_bytes'] / 2**20:.1f} "
            f"| {run['state_disk_bytes'] / 2**20:.1f} | {_timings(run.get('state_ms'))} |"
        )
    lines += ["", f"10M keys against 100K: batch p50 {r['p50_ratio']}x, p99 {r['p99_ratio']}x."]
    r["markdown"] = lines
    return r


def _timings(ms: dict[str, float] | None) -> str:
    if not ms:
        return "-"
    return " / ".join(f"{ms[k]:g}" for k in OperatorTimings.KEYS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("root", type=Path)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.sizes.split(","))
    print(json.dumps(_run(args.bootstrap, args.root, sizes)))


if __name__ == "__main__":
    main()
