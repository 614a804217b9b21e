"""Produce -> visible in Delta latency, at half the sustainable rate.

Two flows of one pipeline run continuously (trigger ``0 seconds``: a batch starts as soon
as the last ends) while a producer sends events at a steady rate, their event time the
wall clock:

- ``bronze``: every record as received. Latency of a row: the moment the commit that
  added it appeared in the table's log (:class:`Watcher`) minus its Kafka producer timestamp.
- ``windows``: counts per user in 2-second tumbling windows, watermark 0. A window can
  be written at the earliest when an event past its end arrives; its latency is the moment
  it is visible minus that earliest moment (window end).

The sustainable rate is the bronze flow's catch-up rate over a 200,000-record backlog
(available-now, the shipped defaults); the measurement runs at half of it, on the events
produced after ``WARMUP_SECONDS`` at that rate.

``python -m bench.latency BOOTSTRAP ROOT`` prints one JSON line; :func:`measure_latency`
runs it in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench.fresh import in_fresh_process
from eventlake.connectors.delta import DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.pipelines import Pipeline
from eventlake.storage import Location
from eventlake.transforms.windows import flatten_window, windowed

UTC = timezone.utc  # datetime.UTC is Python 3.11+

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext

BACKLOG = 200_000
#: Long enough for ~150 commits of the bronze table: one Delta log checkpoint (every 100
#: commits) falls inside the measurement.
SECONDS = 120
#: Events at the measured rate before the measured ones (their latencies are left out).
WARMUP_SECONDS = 15
REAL_TIME_SECONDS = 60
WINDOW = "2 seconds"
REAL_TIME_RATE = 500
T = TypeVar("T")

latency = Pipeline("latency", description="bronze and 2-second windows, for latency")


@latency.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every record as received."""
    return kafka_records(df)


@latency.flow(input=KafkaInput(), output=DeltaOutput("gold", "windows"))
def windows(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Events per user in 2-second windows, written when the watermark passes the end."""
    from pyspark.sql import functions as F

    from bench.golden import parsed

    counts = windowed(ctx, parsed(df), "event_time", "0 seconds", WINDOW, "user_id")
    return flatten_window(counts.agg(F.count("*").alias("events")))


def percentiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {"count": 0}
    q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
    return {"count": len(values), "p50": round(q[49], 3), "p99": round(q[98], 3),
            "max": round(values[-1], 3)}  # fmt: skip


def _event(i: int, now: datetime) -> tuple[str, str]:
    user = f"u{i % 50:04d}"
    ts = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return user, json.dumps({"user_id": user, "event_id": f"l{i}", "event_type": "click",
                             "page": "/", "event_time": ts})  # fmt: skip


def paced(
    rate: float, begin: float, until: float, record: Callable[[int, float], T]
) -> Iterator[T]:
    """``record(i, wall)`` for i = 0, 1, ...: the i-th when the wall clock reaches
    ``begin + i / rate``, until it reaches ``until``."""
    i = 0
    while (now := time.time()) < until:
        due = begin + i / rate
        if due > now:
            time.sleep(due - now)
        yield record(i, time.time())
        i += 1


#: How often a watcher looks for a table's next version.
WATCH_SECONDS = 0.02


class Watcher(threading.Thread):
    """Records when each new version of a local Delta table became visible: the moment its
    commit file ``_delta_log/<version>.json`` exists. Delta writes it with an atomic rename,
    and a reader sees the version from then on.

    One ``stat`` a look: reading the log with delta-rs 50 times a second cost 0.25 of a core
    for the medallion's three tables, on the 2 cores the flows it measures run on.
    """

    def __init__(self, path: Location) -> None:
        super().__init__(daemon=True)
        if not path.is_local:
            raise ValueError(f"the watcher reads local tables only, not {path}")
        self.path = path
        self.versions: list[tuple[int, float]] = []
        self.done = threading.Event()

    def run(self) -> None:
        log = self.path.path / "_delta_log"
        seen = -1
        while not self.done.is_set():
            while (log / f"{seen + 1:020d}.json").exists():
                seen += 1
                self.versions.append((seen, time.time()))
            time.sleep(WATCH_SECONDS)


#: Commits that rewrite rows without changing them (the run's table maintenance).
REWRITES = frozenset({"OPTIMIZE"})


def rows_by_version(
    path: Location, columns: list[str], log: Location | None = None
) -> dict[int, list[dict[str, Any]]]:
    """Each version's appended rows: the files its commit adds, read from the table's log
    once (a compaction's rewritten files, and a file added again with a deletion vector,
    are not new rows). ``log``: a folder holding copies of the commits instead of the
    table's ``_delta_log`` (which the run's maintenance trims)."""
    from urllib.parse import unquote

    import pyarrow.parquet as pq

    from eventlake.connectors.delta.commits import commit_versions, log_file

    table, log = path.path, log or path / "_delta_log"
    out: dict[int, list[dict[str, Any]]] = {}
    known: set[str] = set()
    for version in sorted(commit_versions(os.listdir(log.path))):
        text = log_file(log, version).path.read_text()
        actions = [json.loads(line) for line in text.splitlines() if line]
        operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a),
                         None)  # fmt: skip
        new = [a["add"]["path"] for a in actions if "add" in a and a["add"]["path"] not in known]
        known.update(new)
        out[version] = [] if operation in REWRITES else [
            row for f in sorted(new)
            for row in pq.read_table(table / unquote(f), columns=columns).to_pylist()
        ]  # fmt: skip
    return out


def _run(
    bootstrap: str, root: Path, backlog_n: int = BACKLOG, seconds: int = SECONDS
) -> dict[str, Any]:
    from bench.golden import events
    from eventlake.config.loader import settings_from_dict
    from eventlake.kafka import create_topic, produce
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    def settings(topic: str, name: str) -> Any:
        return settings_from_dict({
            "kafka": {"bootstrap_servers": bootstrap},
            "lake": {"root": str(root / name / "lake")},
            "checkpoints": {"root": str(root / name / "checkpoints")},
            "pipelines": {"latency": {"topic": topic}},
        })  # fmt: skip

    # 1. The sustainable rate: the bronze flow catching up a backlog with the defaults.
    backlog = "latency-backlog"
    create_topic(bootstrap, backlog, partitions=3)
    produce(bootstrap, backlog, ((k, v) for k, v, _ in events(backlog_n, seed=3)))
    get_spark(settings(backlog, "backlog"))  # the session's start is not the flow's rate
    t0 = time.perf_counter()
    run_pipeline(latency, settings(backlog, "backlog"), trigger="available-now", flows=["bronze"])
    sustainable = backlog_n / (time.perf_counter() - t0)
    rate = sustainable / 2

    # 2. Each flow alone, a producer at half that rate for ``seconds``.
    lat = {flow: _live(flow, bootstrap, settings, rate, seconds) for flow in ("bronze", "windows")}
    # 3. Real-time mode, Kafka -> Kafka: the shipped alerts pipeline.
    lat["real_time"] = _real_time(bootstrap, root, REAL_TIME_RATE, min(seconds, REAL_TIME_SECONDS))
    return {
        "sustainable_rows_per_second": round(sustainable),
        "rate": round(rate),
        "seconds": seconds,
        "warmup_seconds": WARMUP_SECONDS,
        "bronze": percentiles(lat["bronze"]),
        "windows": percentiles(lat["windows"]),
        "real_time_rate": REAL_TIME_RATE,
        "real_time_seconds": min(seconds, REAL_TIME_SECONDS),
        "real_time": percentiles(lat["real_time"]),
    }


def _live(flow: str, bootstrap: str, settings: Any, rate: float, seconds: int) -> list[float]:
    """Latencies (s) of ``flow`` running alone while events are produced at ``rate``."""
    from eventlake.kafka import create_topic, produce
    from eventlake.run import run_pipeline

    topic = f"latency-{flow}"
    create_topic(bootstrap, topic, partitions=3)
    live = settings(topic, flow)
    path = live.lake.table_path(
        *(("bronze", "events") if flow == "bronze" else ("gold", "windows"))
    )
    watcher = Watcher(path)
    watcher.start()
    stop = threading.Event()
    runner = threading.Thread(
        target=run_pipeline,
        args=(latency, live),
        kwargs={"trigger": "0 seconds", "stop": stop, "flows": [flow]},
    )
    runner.start()
    # The query starts and takes its first (slow) batches before the measurement.
    produce(bootstrap, topic, [_event(-1, datetime.now(UTC))])
    deadline = time.time() + 120
    while len(watcher.versions) < 2 and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(5)
    # The same rate before the measured events: the JVM compiles the batch's code paths
    # under load (the first seconds at 8-9k events/s run 1.5-2 s batches), as a
    # benchmark's warm-up rounds do.
    warm = time.time()
    start = warm + WARMUP_SECONDS

    events = paced(rate, warm, start + seconds, lambda i, _wall: _event(i, datetime.now(UTC)))
    produce(bootstrap, topic, events)
    # An event past every window's end closes the last ones; then wait for them.
    time.sleep(3)
    produce(bootstrap, topic, [_event(10**9, datetime.now(UTC) + timedelta(seconds=2))])
    time.sleep(10)
    stop.set()
    runner.join()
    watcher.done.set()
    watcher.join()
    visible = dict(watcher.versions)
    rows = rows_by_version(path, ["kafka_timestamp" if flow == "bronze" else "window_end"])
    if flow == "bronze":
        return [
            visible[v] - r["kafka_timestamp"].timestamp()
            for v, batch in rows.items()
            for r in batch
            if v in visible and r["kafka_timestamp"].timestamp() >= start
        ]
    ends = [
        (v, r["window_end"].replace(tzinfo=UTC).timestamp()) for v, b in rows.items() for r in b
    ]
    return [
        visible[v] - end for v, end in ends if v in visible and start + 2 <= end <= start + seconds
    ]


def _real_time(bootstrap: str, root: Path, rate: float, seconds: int) -> list[float]:
    """Latencies (s) from producing an order over the threshold to consuming its alert,
    with the alerts pipeline in real-time mode (one input partition)."""
    from confluent_kafka import Consumer, Producer

    from eventlake.config.loader import settings_from_dict
    from eventlake.kafka import create_topic, produce
    from eventlake.run import run_pipeline

    orders, alerts = "rt-orders", "rt-alerts"
    create_topic(bootstrap, orders, partitions=1)
    create_topic(bootstrap, alerts, partitions=1)
    settings = settings_from_dict({
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": str(root / "rt" / "lake")},
        "checkpoints": {"root": str(root / "rt" / "checkpoints")},
        "project": {"examples": True},  # alerts is one of eventlake's examples
        "pipelines": {"alerts": {"topic": orders, "alerts_topic": alerts, "threshold": 0}},
    })  # fmt: skip
    stop = threading.Event()
    runner = threading.Thread(target=run_pipeline, args=("alerts", settings), kwargs={"stop": stop})
    runner.start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "rt-bench",
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 5})  # fmt: skip
    consumer.subscribe([alerts])
    latencies: list[float] = []
    warm_until = 0.0

    def order(i: int) -> tuple[str, str]:
        return f"o{i}", json.dumps({"order_id": f"o{i}", "amount": 1, "sent_at": time.time()})

    def drain(timeout: float) -> None:
        for msg in consumer.consume(num_messages=1000, timeout=timeout):
            value = msg.value()
            if msg.error() is None and value is not None:
                sent = json.loads(value)["sent_at"]
                if sent >= warm_until:
                    latencies.append(time.time() - sent)

    # Warm up until an alert comes back, then measure.
    deadline = time.time() + 180
    while not latencies and time.time() < deadline:
        produce(bootstrap, orders, [order(-1)])
        drain(1.0)
    warm_until = time.time()
    latencies.clear()
    start, i = time.time(), 0
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    while (now := time.time()) < start + seconds:
        due = start + i / rate
        if due > now:
            drain(min(due - now, 0.01))
            continue
        producer.produce(orders, key=f"o{i}", value=order(i)[1])
        producer.poll(0)
        i += 1
    producer.flush(10)
    end = time.time() + 10
    while len(latencies) < i and time.time() < end:
        drain(0.2)
    stop.set()
    runner.join()
    consumer.close()
    return latencies


def measure_latency(bootstrap: str, root: Path) -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    title = "## Latency: produce -> visible in Delta, seconds"
    r = in_fresh_process("bench.latency", bootstrap, str(root), title=title)
    if "error" in r:
        return r
    b, w, rt = r["bronze"], r["windows"], r["real_time"]
    r["markdown"] = [
        title,
        "",
        f"{r['rate']} events/s for {r['seconds']} s, after {r['warmup_seconds']} s "
        "at that rate to warm up: half the sustainable "
        f"{r['sustainable_rows_per_second']} rows/s (bronze catch-up, shipped defaults); "
        "trigger `0 seconds`.",
        "",
        "| flow | rows | p50 | p99 | max |",
        "|---|---|---|---|---|",
        f"| bronze (stateless) | {b.get('count')} | {b.get('p50')} | {b.get('p99')} "
        f"| {b.get('max')} |",
        f"| 2-second windows, from window end | {w.get('count')} | {w.get('p50')} | "
        f"{w.get('p99')} | {w.get('max')} |",
        "",
        f"Real-time mode, Kafka -> Kafka (the `alerts` pipeline, {r['real_time_rate']} "
        f"orders/s for {r['real_time_seconds']} s, one partition): produce -> consumed by a "
        "plain consumer, seconds:",
        "",
        "| flow | rows | p50 | p99 | max |",
        "|---|---|---|---|---|",
        f"| alerts.big_orders (real-time) | {rt.get('count')} | {rt.get('p50')} | "
        f"{rt.get('p99')} | {rt.get('max')} |",
    ]
    return r


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("root", type=Path)
    parser.add_argument("--backlog", type=int, default=BACKLOG)
    parser.add_argument("--seconds", type=int, default=SECONDS)
    args = parser.parse_args()
    print(json.dumps(_run(args.bootstrap, args.root, args.backlog, args.seconds)))


if __name__ == "__main__":
    main()
