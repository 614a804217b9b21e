"""Real-time mode: the alerts pipeline routes big orders Kafka -> Kafka while it runs."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from pyspark.sql import SparkSession

from eventlake.kafka import produce
from eventlake.pipelines.runner import RunResult
from eventlake.run import run_pipeline
from eventlake.testing import settings_for, unique_name, wait_until

pytestmark = pytest.mark.integration

THRESHOLD = 1000


def _orders(start: int, n: int) -> list[tuple[str, str]]:
    return [
        (f"o{i:05d}", json.dumps({"order_id": f"o{i:05d}", "amount": (i * 37) % 2000}))
        for i in range(start, start + n)
    ]


def _big(orders: list[tuple[str, str]]) -> list[str]:
    return [k for k, v in orders if json.loads(v)["amount"] > THRESHOLD]


def test_alerts_stream_in_real_time_mode(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic, alerts = make_topic(prefix="orders"), make_topic(prefix="alerts")
    backlog = _orders(0, 200)
    produce(bootstrap, topic, backlog)
    settings = settings_for(
        tmp_path,
        bootstrap,
        alerts={"topic": topic, "alerts_topic": alerts, "threshold": THRESHOLD},
        examples=True,
    )
    stop = threading.Event()
    outcome: dict[str, RunResult | BaseException] = {}

    def run() -> None:
        try:
            outcome["result"] = run_pipeline("alerts", settings, stop=stop)
        except BaseException as exc:  # reported by the assertions below
            outcome["error"] = exc

    runner = threading.Thread(target=run)
    runner.start()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([alerts])
    seen: list[tuple[str, str]] = []

    def received(n: int) -> Callable[[], bool]:
        def check() -> bool:
            assert "error" not in outcome, outcome.get("error")
            for msg in consumer.consume(num_messages=500, timeout=0.2):
                if msg.error() is None:
                    seen.append((msg.key().decode(), msg.value().decode()))
            return len(seen) >= n

        return check

    try:
        # The backlog's big orders, then orders produced while the query runs.
        wait_until(received(len(_big(backlog))), timeout=120, what="the backlog's alerts")
        live = _orders(200, 100)
        produce(bootstrap, topic, live)
        expected = _big(backlog) + _big(live)
        wait_until(received(len(expected)), timeout=60, what="alerts of orders sent while running")
    finally:
        stop.set()
        runner.join(timeout=120)
        consumer.close()
    assert "error" not in outcome, outcome.get("error")
    # Exactly the orders over the threshold, each once, as received.
    assert sorted(k for k, _ in seen) == sorted(expected)
    by_key = dict(backlog + live)
    assert all(by_key[k] == v for k, v in seen)
    result = outcome["result"]
    assert isinstance(result, RunResult)
    assert result.stopped_by_signal
