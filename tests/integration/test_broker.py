"""The embedded broker: restart keeps data; the CLI runs brokers side by side."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce, topic_offsets
from eventlake.testing import free_port, unique_name

pytestmark = pytest.mark.integration


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    import time

    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
    finally:
        consumer.close()
    return values


def test_data_survives_a_broker_restart(tmp_path: Path) -> None:
    broker = EmbeddedKafkaBroker(port=free_port(), data_dir=tmp_path / "broker")
    try:
        broker.start()
        topic = unique_name("restart")
        create_topic(broker.bootstrap_servers, topic, partitions=2)
        sent = [f"value-{i}" for i in range(500)]
        produce(broker.bootstrap_servers, topic, ((str(i), v) for i, v in enumerate(sent)))

        assert broker.stop() is True
        assert broker.status().running is False
        assert broker.stop() is False  # stopping twice is harmless

        broker.start()
        assert sum(topic_offsets(broker.bootstrap_servers, topic).values()) == 500
        assert sorted(_consume_all(broker.bootstrap_servers, topic, 500)) == sorted(sent)
    finally:
        broker.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eventlake.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_cli_start_status_stop_beside_the_session_broker(
    tmp_path: Path, kafka_broker: EmbeddedKafkaBroker
) -> None:
    port = free_port()
    data = str(tmp_path / "cli-broker")
    try:
        started = _cli("kafka", "start", "--port", str(port), "--data-dir", data)
        assert started.returncode == 0, started.stderr
        assert f"127.0.0.1:{port}" in started.stdout

        again = _cli("kafka", "start", "--port", str(port), "--data-dir", data)
        assert again.returncode == 0
        assert "already running" in again.stdout

        status = _cli("kafka", "status", "--port", str(port), "--data-dir", data)
        assert status.returncode == 0
        assert status.stdout.startswith(f"127.0.0.1:{port}\trunning")

        # Both brokers answer at once: the session one and this one.
        topic = unique_name("side")
        create_topic(f"127.0.0.1:{port}", topic)
        create_topic(kafka_broker.bootstrap_servers, topic)
        assert produce(f"127.0.0.1:{port}", topic, [("k", "v")]) == 1
        assert topic_offsets(kafka_broker.bootstrap_servers, topic) == {0: 0}
    finally:
        stopped = _cli("kafka", "stop", "--port", str(port), "--data-dir", data)
    assert stopped.returncode == 0
    assert "stopped" in stopped.stdout
    twice = _cli("kafka", "stop", "--port", str(port), "--data-dir", data)
    assert twice.returncode == 0
    assert "was not running" in twice.stdout
    down = _cli("kafka", "status", "--port", str(port), "--data-dir", data)
    assert down.returncode == 3
    assert "stopped" in down.stdout


def test_port_in_use_is_a_clear_error(tmp_path: Path, kafka_broker: EmbeddedKafkaBroker) -> None:
    clash = _cli("kafka", "start", "--port", str(kafka_broker.port), "--data-dir", str(tmp_path))
    assert clash.returncode == 1
    assert "EL-KAFKA-002" in clash.stderr
    assert "--port" in clash.stderr
