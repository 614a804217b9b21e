"""State growth: one keyed flow (Kafka -> de-duplicated by key within a 7-day watermark ->
Delta, RocksDB state) with 100,000 and with 10,000,000 distinct keys held in its state, with
each of two operators: Spark's ``dropDuplicatesWithinWatermark`` (expired keys found by a
scan of every key) and eventlake's ``drop_duplicates_within_watermark`` (by timers).

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

from pyspark.sql.streaming.listener import StreamingQueryListener

from bench.fresh import in_fresh_process
from bench.latency import percentiles
from eventlake.connectors.delta import DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.pipelines import Pipeline
from eventlake.state.dedup import drop_duplicates_within_watermark

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
#: RocksDB's memory budget for all state stores (Spark's default is 500 MB). 10M keys of
#: timer state no longer fit 500 MB: past ~4M keys every lookup read its blocks from files
#: again and a batch of 1M keys took minutes. Both operators are measured with this one.
STATE_MEMORY_CONF = "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB"
STATE_MEMORY_MB = 2000

keyed = Pipeline("state_growth", description="de-duplication by key: state of every key")
timed = Pipeline("state_growth_timers", description="the same, expired keys found by timers")


def _watermarked(ctx: FlowContext, df: DataFrame) -> DataFrame:
    records = kafka_records(df).select("key", "partition", "offset", "kafka_timestamp")
    return ctx.with_watermark(records, "kafka_timestamp", "7 days")


@keyed.flow(input=KafkaInput(), output=DeltaOutput("silver", "first_seen"))
def first_seen(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Each key's first record within 7 days of its Kafka timestamp."""
    return _watermarked(ctx, df).dropDuplicatesWithinWatermark(["key"])


@timed.flow(input=KafkaInput(), output=DeltaOutput("silver", "first_seen"))
def first_seen_by_timers(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The same rows, by eventlake's timer-evicted de-duplication."""
    return drop_duplicates_within_watermark(_watermarked(ctx, df), ["key"])


#: Each operator measured, by the name the results give it.
OPERATORS: dict[str, tuple[Pipeline, str]] = {
    "dropDuplicatesWithinWatermark": (keyed, "first_seen"),
    "drop_duplicates_within_watermark": (timed, "first_seen_by_timers"),
}


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


def _one(bootstrap: str, root: Path, keys: int, operator: str) -> dict[str, Any]:
    from eventlake.config.loader import settings_from_dict
    from eventlake.kafka import create_topic, produce
    from eventlake.monitoring import ProgressListener
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    pipeline, flow = OPERATORS[operator]
    topic = f"state-{flow}-{keys}-{os.getpid()}"
    create_topic(bootstrap, topic, partitions=3)

    def settings(max_offsets: int) -> Any:
        return settings_from_dict({
            "kafka": {"bootstrap_servers": bootstrap},
            "lake": {"root": str(root / topic / "lake")},
            "checkpoints": {"root": str(root / topic / "checkpoints")},
            "pipelines": {pipeline.name: {"topic": topic,
                                           "max_offsets_per_trigger": max_offsets}},
        })  # fmt: skip

    t0 = time.perf_counter()
    produce(bootstrap, topic, ((f"k{i:010d}", "x") for i in range(keys)))
    produced = time.perf_counter() - t0
    t0 = time.perf_counter()
    run_pipeline(pipeline, settings(LOAD_BATCH), trigger="available-now")
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
        run_pipeline(pipeline, settings(BATCH_ROWS), trigger="available-now", listener=listener)
    finally:
        listener.close()
        spark.streams.removeListener(timings)
    batches = sorted({p.batch_id: p for p in progress if p.input_rows}.values(),
                     key=lambda p: p.batch_id)  # fmt: skip
    measured = batches[SKIPPED:]
    seconds = [p.batch_duration_ms / 1000 for p in measured]
    ms = [timings.by_batch[p.batch_id] for p in measured if p.batch_id in timings.by_batch]
    last = batches[-1]
    checkpoint = settings(BATCH_ROWS).checkpoints.for_flow(pipeline.name, flow).path
    return {
        "operator": operator,
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


def _run(
    bootstrap: str, root: Path, sizes: tuple[int, ...], operators: list[str]
) -> dict[str, Any]:
    from eventlake.config.loader import settings_from_dict
    from eventlake.session import get_spark

    conf = {STATE_MEMORY_CONF: str(STATE_MEMORY_MB)}
    get_spark(settings_from_dict({"kafka": {"bootstrap_servers": bootstrap},
                                  "spark": {"conf": conf}}))  # fmt: skip
    for operator in operators:
        _one(bootstrap, root, WARMUP_KEYS, operator)  # the JVM's first batches: not measured
    result: dict[str, Any] = {"runs": [], "ratios": {}}
    for operator in operators:
        runs = [_one(bootstrap, root, n, operator) for n in sizes]
        small, large = runs[0]["batch_seconds"], runs[-1]["batch_seconds"]
        result["runs"] += runs
        result["ratios"][operator] = {"p50": round(large["p50"] / small["p50"], 2),
                                      "p99": round(large["p99"] / small["p99"], 2)}  # fmt: skip
    return result


TITLE = "## State growth: a de-duplicating flow with 100,000 and 10,000,000 keys"


def measure_state_growth(bootstrap: str, root: Path) -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    r = in_fresh_process("bench.state_growth", bootstrap, str(root), title=TITLE,
                         show_stderr=True)  # fmt: skip
    if "error" not in r:
        r["markdown"] = markdown(r)
    return r


def markdown(r: dict[str, Any]) -> list[str]:
    """The results' Markdown section."""
    lines = [
        TITLE,
        "",
        "De-duplication on the Kafka key within a 7-day watermark (RocksDB state, the "
        f"shipped settings but a {STATE_MEMORY_MB} MB RocksDB budget), by Spark's "
        "`dropDuplicatesWithinWatermark` and by eventlake's `drop_duplicates_within_watermark` "
        "(event-time timers). Each flow's state is loaded with every key first; then "
        f"{BATCHES} batches of {BATCH_ROWS:,} records (9 in 10 new keys) in one query, the "
        f"first {SKIPPED} left out.",
        "",
        "| operator | keys in state | load (s) | batch p50 (s) | batch p99 (s) | state rows "
        "| state memory (MiB) | state on disk (MiB) | state: updates / removals / commit "
        "(ms, p50) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in r["runs"]:
        b = run["batch_seconds"]
        lines.append(
            f"| `{run['operator']}` | {run['keys']:,} | {run['load_seconds']} | {b['p50']} "
            f"| {b['p99']} | {run['state_rows']:,} | {run['state_memory_bytes'] / 2**20:.1f} "
            f"| {run['state_disk_bytes'] / 2**20:.1f} | {_timings(run.get('state_ms'))} |"
        )
    lines.append("")
    for operator, ratio in r["ratios"].items():
        lines.append(f"- `{operator}`: 10M keys against 100K, batch p50 {ratio['p50']}x, "
                     f"p99 {ratio['p99']}x.")  # fmt: skip
    return lines


def write_results(r: dict[str, Any]) -> None:
    """``bench/results/state-growth.json`` and ``.md``, with the machine."""
    from bench.run import RESULTS, machine, machine_line

    r = {"machine": machine(), "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **r}
    (RESULTS / "state-growth.json").write_text(json.dumps(r, indent=1) + "\n")
    title, *section = markdown(r)
    text = [title, "", machine_line(r), *section]
    (RESULTS / "state-growth.md").write_text("\n".join(text) + "\n")


def _timings(ms: dict[str, float] | None) -> str:
    if not ms:
        return "-"
    return " / ".join(f"{ms[k]:g}" for k in OperatorTimings.KEYS)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("root", type=Path)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--operators", default=",".join(OPERATORS))
    parser.add_argument("--write", action="store_true", help="write bench/results/state-growth.*")
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.sizes.split(","))
    r = _run(args.bootstrap, args.root, sizes, args.operators.split(","))
    if args.write:
        write_results(r)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
