"""What a user of a medallion sees: the shipped ``orders`` pipeline, all seven flows
running, while a producer sends orders at a steady rate.

- ``bronze``: produce -> the order's row visible in ``bronze/orders`` (a watcher looks for
  the table's next commit file; a row's latency is the moment its version became visible
  minus its Kafka producer timestamp).
- ``silver``: produce -> visible in ``silver/orders`` (a silver row carries its Kafka
  record's partition and offset; bronze holds that record with its producer timestamp).
- ``gold``: a closed hour of ``gold/revenue_hourly``: the moment its rows became visible
  minus the moment its hour was closed, the producer timestamp of the first order whose
  event time passed the hour's end plus the watermark delay (``window_delay``, 10 minutes).
- ``gold_watermark``: the same hours, from the moment ``revenue_hourly``'s own watermark
  passed the hour's end (the start of its first batch whose progress shows a watermark at
  or past it) to its rows visible: the last hop alone, without the order's way to silver
  and through the batch that moved the watermark.

Each setting also reports the batch times (``triggerExecution``) of ``silver`` and
``revenue_hourly`` in the measured minute, from their progress, and silver's split by whether
a batch with rows of ``bronze`` or a side flow ran beside it (flows on one processing-time
interval start their batches together, at its multiples since the epoch).

Event time runs :data:`SPEED` times faster than the wall clock (an order produced at wall
time ``w`` happened at ``start + (w - w0) x SPEED``), so that hours close every few seconds.
Each setting runs for :data:`WARMUP_SECONDS` at the rate first (its latencies left out),
then :data:`SECONDS` measured. The sustainable rate is the whole pipeline's catch-up rate
over a backlog (available-now, every level).

``python -m bench.medallion BOOTSTRAP ROOT`` prints one JSON line; :func:`measure_medallion`
runs it in a fresh process.
"""

from __future__ import annotations

import argparse
import bisect
import json
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.batch_cost import Recorder
from bench.fresh import in_fresh_process
from bench.latency import UTC, Watcher, paced, percentiles, rows_by_version
from eventlake.session import POLLING_DELAY, POLLING_DELAY_DEFAULT

RATE = 1_000
SECONDS = 60
WARMUP_SECONDS = 20
#: Event seconds per wall-clock second: an hour of event time every 10 s.
SPEED = 360
#: After the last measured order: time for every hop to drain (with every flow on a
#: 10-second trigger, three of them lie between Kafka and a closed hour).
DRAIN_SECONDS = {"every-10s": 50}
DRAIN_SECONDS_DEFAULT = 15
BACKLOG = 100_000
EVENT_START = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW_DELAY = timedelta(minutes=10)
CATEGORIES = ("books", "grocery", "electronics", "toys", "garden")
#: The flows no measured hop waits for (they read silver/orders or bronze/orders and
#: write elsewhere). Since silver reads the topic, bronze is not on the way to silver or
#: gold either.
SIDE_FLOWS = ("quarantine", "category_sliding", "high_value", "enriched")
#: The flows the shipped pipeline runs at ``0 seconds``.
CONTINUOUS_FLOWS = ("silver", "revenue_hourly")
#: name -> (what it is, trigger over every flow's: None keeps the configured ones, Spark
#: conf over eventlake's, the orders pipeline's config over the bench's). They run in this
#: order in one process: the shipped setting last, on a JVM the others warmed, where
#: ``silver-gold`` (the same triggers) ran until it shipped on 12-05.
SETTINGS: dict[str, tuple[str, str | None, dict[str, str], dict[str, Any]]] = {
    "every-10s": (
        "every flow every 10 seconds (as shipped until 12-05)", None, {},
        {"triggers": dict.fromkeys(CONTINUOUS_FLOWS, "10 seconds")},
    ),
    "continuous": (
        "every flow at `0 seconds` (a batch starts when the last ends), idle queries look "
        "every 10 ms (Spark's default)", "0 seconds", {POLLING_DELAY: "10ms"}, {},
    ),
    "continuous-250ms": (
        "every flow at `0 seconds`, idle queries look every 250 ms", "0 seconds", {}, {},
    ),
    "critical-path": (
        "bronze, silver, revenue_hourly at `0 seconds`, the other four flows every 10 "
        "seconds, idle queries look every 250 ms", None, {},
        {"triggers": {"bronze": "0 seconds"}},
    ),
    "shipped": (
        "as shipped: silver and revenue_hourly at `0 seconds` (the hops to silver and a "
        "closed hour), bronze and the other four flows every 10 seconds, idle queries look "
        "every 250 ms", None, {}, {},
    ),
}  # fmt: skip


def order_record(i: int, event_time: datetime) -> tuple[str, str]:
    """The i-th order (key, JSON value) the benchmarks send, at ``event_time``."""
    order_id = f"m{i:09d}"
    return order_id, json.dumps({
        "order_id": order_id, "user_id": f"u{i % 500:04d}", "category": CATEGORIES[i % 5],
        "region": "us-east", "amount": round(10 + (i * 7919) % 1500 + 0.25, 2),
        "event_time": event_time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
    })  # fmt: skip


def epoch(value: datetime) -> float:
    """A timestamp delta-rs read (naive ones are UTC) in epoch seconds."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def _settings(bootstrap: str, root: Path, topic: str, params: dict[str, Any] | None = None) -> Any:
    from eventlake.config.loader import settings_from_dict

    orders = {"topic": topic, "high_value_topic": f"{topic}-high", **(params or {})}
    return settings_from_dict({
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "project": {"examples": True},
        "pipelines": {"orders": orders},
    })  # fmt: skip


def _topics(bootstrap: str, name: str) -> str:
    from eventlake.kafka import create_topic

    create_topic(bootstrap, name, partitions=3)
    create_topic(bootstrap, f"{name}-high", partitions=1)
    return name


def batches_of(progress: list[dict[str, Any]], name: str, since: float
               ) -> list[tuple[float, dict[str, Any]]]:  # fmt: skip
    """(start in epoch seconds, progress) of query ``name``'s batches started at ``since``
    or later, in order, among ``progress`` (what the run's listener heard)."""
    from eventlake.monitoring.progress import epoch_seconds

    out = [(epoch_seconds(p["timestamp"]), p) for p in progress if p["name"] == name]
    return sorted(((t, p) for t, p in out if t >= since), key=lambda tp: tp[0])


def _sustainable(bootstrap: str, root: Path, backlog: int) -> float:
    """Orders a second the whole pipeline catches up (available-now, level by level)."""
    from eventlake.kafka import produce
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    topic = _topics(bootstrap, "medallion-backlog")
    at = EVENT_START
    produce(bootstrap, topic, (order_record(i, at + timedelta(seconds=i)) for i in range(backlog)))
    settings = _settings(bootstrap, root / "backlog", topic)
    get_spark(settings)
    t0 = time.perf_counter()
    run_pipeline("orders", settings, trigger="available-now")
    return backlog / (time.perf_counter() - t0)


def _live(bootstrap: str, root: Path, name: str, rate: float, seconds: int
          ) -> dict[str, list[float]]:  # fmt: skip
    """Latencies (s) of bronze rows, silver rows and closed gold hours at ``rate``, with
    setting ``name`` of :data:`SETTINGS`."""
    from eventlake.kafka import produce
    from eventlake.monitoring.progress import epoch_seconds
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    _what, trigger, conf, params = SETTINGS[name]
    topic = _topics(bootstrap, f"medallion-{name}")
    settings = _settings(bootstrap, root / name, topic, params)
    spark = get_spark(settings)
    # One session for every setting: each sets its own, else eventlake's.
    spark.conf.set(POLLING_DELAY, conf.get(POLLING_DELAY, POLLING_DELAY_DEFAULT))
    paths = {t: settings.lake.table_path(*t.split("/"))
             for t in ("bronze/orders", "silver/orders", "gold/revenue_hourly")}  # fmt: skip
    watchers = {t: Watcher(p) for t, p in paths.items()}
    for w in watchers.values():
        w.start()
    stop = threading.Event()
    # Every batch's progress as the run's listener hears it: polling each query's
    # recentProgress took 0.15-0.47 s a query under this load, in the process measured.
    listener = Recorder()
    runner = threading.Thread(target=run_pipeline, args=("orders", settings),
                              kwargs={"trigger": trigger, "stop": stop,
                                      "listener": listener})  # fmt: skip
    runner.start()
    # (event time, producer's wall clock) of every order, in order.
    sent: list[tuple[float, float]] = []
    w0 = time.time()
    measured_from = w0 + WARMUP_SECONDS

    def order_at(i: int, wall: float) -> tuple[str, str]:
        event_time = EVENT_START + timedelta(seconds=(wall - w0) * SPEED)
        sent.append((event_time.timestamp(), wall))
        return order_record(i, event_time)

    produce(bootstrap, topic, paced(rate, w0, measured_from + seconds, order_at))
    time.sleep(DRAIN_SECONDS.get(name, DRAIN_SECONDS_DEFAULT))
    progress = list(listener.progress)  # the batches until the run is told to stop
    stop.set()
    runner.join()
    listener.close()
    for w in watchers.values():
        w.done.set()
        w.join()
    visible = {t: dict(w.versions) for t, w in watchers.items()}

    bronze = rows_by_version(paths["bronze/orders"], ["partition", "offset", "kafka_timestamp"])
    produced = {(r["partition"], r["offset"]): epoch(r["kafka_timestamp"])
                for rows in bronze.values() for r in rows}  # fmt: skip
    out: dict[str, list[float]] = {"bronze": [], "silver": [], "gold": [], "gold_watermark": []}
    for v, rows in bronze.items():
        for r in rows:
            at = epoch(r["kafka_timestamp"])
            if at >= measured_from and v in visible["bronze/orders"]:
                out["bronze"].append(visible["bronze/orders"][v] - at)
    for v, rows in rows_by_version(paths["silver/orders"], ["partition", "offset"]).items():
        for r in rows:
            sent_at = produced.get((r["partition"], r["offset"]))
            if sent_at is not None and sent_at >= measured_from and v in visible["silver/orders"]:
                out["silver"].append(visible["silver/orders"][v] - sent_at)
    times = [e for e, _ in sent]
    closed: dict[float, float] = {}  # window end -> when the gold table first showed it
    for v, rows in rows_by_version(paths["gold/revenue_hourly"], ["window_end"]).items():
        for r in rows:
            if v in visible["gold/revenue_hourly"]:
                end = epoch(r["window_end"])
                closed.setdefault(end, visible["gold/revenue_hourly"][v])
    # (batch start, watermark) of revenue_hourly: a batch runs with the watermark its
    # predecessors moved, and writes the hours it passes.
    marks = [(t, epoch_seconds(p["eventTime"]["watermark"]))
             for t, p in batches_of(progress, "orders.revenue_hourly", w0)
             if p.get("eventTime", {}).get("watermark")]  # fmt: skip
    for end, shown in closed.items():
        first = bisect.bisect_left(times, end + WINDOW_DELAY.total_seconds())
        if first < len(sent) and sent[first][1] >= measured_from:
            out["gold"].append(shown - sent[first][1])
            passed = next((t for t, mark in marks if mark >= end), None)
            if passed is not None:
                out["gold_watermark"].append(shown - passed)
    for flow in ("silver", "revenue_hourly"):
        batches = batches_of(progress, f"orders.{flow}", measured_from)
        out[f"batch:{flow}"] = [p["durationMs"]["triggerExecution"] / 1000 for _t, p in batches]
    out.update(_beside(progress, measured_from))
    return out


def _beside(progress: list[dict[str, Any]], since: float) -> dict[str, list[float]]:
    """Silver's batch times (s) from ``since`` split by whether a batch with rows of bronze
    or a side flow ran at the same time: a processing-time trigger starts batches at
    multiples of its interval since the epoch, so flows on the same interval start
    together."""

    def spans(flow: str, start: float) -> list[tuple[float, float]]:
        return [(t, t + p["durationMs"]["triggerExecution"] / 1000)
                for t, p in batches_of(progress, f"orders.{flow}", start)
                if flow == "silver" or p["numInputRows"]]  # fmt: skip

    others = [span for flow in ("bronze", *SIDE_FLOWS) for span in spans(flow, since - 60)]
    split: dict[str, list[float]] = {"batch:silver:beside": [], "batch:silver:alone": []}
    for start, end in spans("silver", since):
        beside = any(s < end and e > start for s, e in others)
        split["batch:silver:beside" if beside else "batch:silver:alone"].append(end - start)
    return split


def _run(bootstrap: str, root: Path, rate: float, seconds: int, backlog: int,
         names: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    result: dict[str, Any] = {"rate": rate, "seconds": seconds, "warmup_seconds": WARMUP_SECONDS,
                              "speed": SPEED, "backlog": backlog}  # fmt: skip
    if backlog:
        result["sustainable_orders_per_second"] = round(_sustainable(bootstrap, root, backlog))
    for name in names or SETTINGS:
        lat = _live(bootstrap, root, name, rate, seconds)
        result[name] = {hop: percentiles(values) for hop, values in lat.items()}
    return result


#: (result key, row label) of each figure a setting reports.
HOPS = (
    ("bronze", "-> bronze"),
    ("silver", "-> silver"),
    ("gold", "closed hour -> gold"),
    ("gold_watermark", "closed hour -> gold, from the watermark"),
    ("batch:silver", "batch: silver"),
    ("batch:revenue_hourly", "batch: revenue_hourly"),
    ("batch:silver:beside", "batch: silver, beside a batch of bronze or a side flow"),
    ("batch:silver:alone", "batch: silver, beside none"),
)


def measure_medallion(bootstrap: str, root: Path) -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    title = "## The orders medallion: produce -> bronze, silver, closed gold hour (seconds)"
    r = in_fresh_process("bench.medallion", bootstrap, str(root), title=title)
    if "error" in r:
        return r
    lines = [
        title,
        "",
        f"The shipped `orders` pipeline, all seven flows on 2 cores, {r['rate']:,} orders/s "
        f"for {r['seconds']} s after {r['warmup_seconds']} s at that rate; event time "
        f"runs {r['speed']}x the wall clock (an hour closes every {3600 // r['speed']} s). "
        "Closed hour: from the producer timestamp of the first order past the hour's end "
        "plus the 10-minute watermark delay to its rows visible in `gold/revenue_hourly`; "
        "from the watermark: from the start of `revenue_hourly`'s first batch whose "
        "watermark passed the hour's end (its progress) to the same rows visible. Batch: "
        "each batch's `triggerExecution` in the measured minute; silver's, split by whether a "
        "batch with rows of bronze or a side flow ran beside it (flows on one interval start "
        "their batches together). "
        f"Sustainable (all flows catching up {r['backlog']:,} orders, available-now): "
        f"{r['sustainable_orders_per_second']:,} orders/s.",
        "",
        "| setting | hop | count | p50 | p99 | max |",
        "|---|---|---|---|---|---|",
    ]
    for name, (what, *_how) in SETTINGS.items():
        for hop, label in HOPS:
            p = r[name][hop]
            lines.append(f"| {what} | {label} | {p.get('count')} | {p.get('p50', '-')} "
                         f"| {p.get('p99', '-')} | {p.get('max', '-')} |")  # fmt: skip
    r["markdown"] = lines
    return r


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("root", type=Path)
    parser.add_argument("--rate", type=float, default=RATE)
    parser.add_argument("--seconds", type=int, default=SECONDS)
    parser.add_argument("--backlog", type=int, default=BACKLOG, help="0: not measured")
    parser.add_argument("--settings", default="", help=f"some of {', '.join(SETTINGS)}")
    args = parser.parse_args()
    names = [n for n in args.settings.split(",") if n]
    print(json.dumps(_run(args.bootstrap, args.root, args.rate, args.seconds, args.backlog,
                          names)))  # fmt: skip


if __name__ == "__main__":
    main()
