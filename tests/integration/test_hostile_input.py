"""Hostile input on real components: records no producer should send, files no one should
edit, a config wrong everywhere. Each ends in a quarantine row with its reason or a coded
error (fatal where retrying cannot help: no crash loop), and nothing else is lost."""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from eventlake.config import Settings
from eventlake.config.loader import settings_from_dict
from eventlake.errors import EventlakeError, Recovery, translate
from eventlake.testing import read_delta, run_available_now, settings_for

pytestmark = pytest.mark.integration

FLOWS = ["bronze", "silver", "quarantine"]


def _order(i: int, **extra: str) -> bytes:
    return json.dumps({"order_id": f"o{i}", "user_id": "u1", "category": "books",
                       "region": "eu", "amount": "12.50",
                       "event_time": "2026-11-01T10:00:00", **extra}).encode()  # fmt: skip


Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def _send(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2_000_000})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers or None)
    assert producer.flush(60) == 0


def test_hostile_records_are_quarantined_with_a_reason_and_nothing_else_is_lost(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2, prefix="hostile")
    rng = random.Random(7)
    nested = b'{"a":' * 5000 + b"1" + b"}" * 5000  # far beyond any parser's nesting limit
    hostile = {
        "binary garbage": bytes(rng.randrange(256) for _ in range(2048)),
        "invalid utf-8": b'{"order_id": "\xff\xfe\xfd", "amount": "1"}',
        "deeply nested": nested,
        "json array": b"[1, 2, 3]",
        "nul bytes": b"\x00" * 64,
    }
    valid = [_order(i) for i in range(20)]
    huge = _order(20, category="x" * 900_000)  # near the broker's 1 MB record limit
    headers = [("trace-id", b"\xff\x00binary"), ("empty", b"")]
    records = [(f"v{i}".encode(), v, headers) for i, v in enumerate(valid)]
    records += [(name.encode(), value, []) for name, value in hostile.items()]
    records.append((b"huge", huge, headers))
    _send(bootstrap, topic, records)

    settings = settings_for(
        tmp_path, bootstrap, orders={"topic": topic, "high_value_topic": "x"}, examples=True
    )
    result = run_available_now("orders", settings, flows=FLOWS)
    assert result.restarts == {}  # no flow failed on the way

    silver = read_delta(tmp_path / "lake" / "silver" / "orders").to_pylist()
    quarantine = read_delta(tmp_path / "lake" / "silver" / "orders_quarantine").to_pylist()
    bronze = read_delta(tmp_path / "lake" / "bronze" / "orders").to_pylist()
    assert len(bronze) == len(records)  # every record landed as received
    # The valid orders, the huge one among them, and only they.
    assert sorted(r["order_id"] for r in silver) == sorted(f"o{i}" for i in range(21))
    [big] = [r for r in silver if r["order_id"] == "o20"]
    assert len(big["category"]) == 900_000
    # Each hostile record once in the quarantine, with its reason.
    reasons = {r["key"]: r["reason"] for r in quarantine}
    assert len(quarantine) == len(hostile)
    assert reasons == {
        "binary garbage": "invalid_json",
        "invalid utf-8": "missing_event_time",
        "deeply nested": "invalid_json",
        "json array": "invalid_json",
        "nul bytes": "invalid_json",
    }


def _bronze_after_one_record(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> tuple[Settings, str]:
    """Orders' bronze flow run once on one record: its table and checkpoint to break."""
    topic = make_topic(prefix="hostile-files")
    _send(bootstrap, topic, [(b"k", _order(1), [])])
    settings = settings_for(
        tmp_path, bootstrap, orders={"topic": topic, "high_value_topic": "x"}, examples=True
    )
    run_available_now("orders", settings, flows=["bronze"])
    return settings, topic


def test_a_corrupted_checkpoint_file_is_a_fatal_coded_error(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    settings, topic = _bronze_after_one_record(bootstrap, make_topic, tmp_path)
    offsets = tmp_path / "checkpoints" / "orders" / "bronze" / "offsets"
    last = max(offsets.iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last.write_bytes(last.read_bytes()[:7])  # truncated mid-header
    _send(bootstrap, topic, [(b"k", _order(2), [])])
    with pytest.raises(EventlakeError) as caught:
        run_available_now("orders", settings, flows=["bronze"])
    assert caught.value.code == "EL-CHECKPOINT-003"
    assert caught.value.recovery is Recovery.FATAL
    assert str(last) in caught.value.what


def _unfinished_first_entry(spark: SparkSession, checkpoint: Path) -> list[str]:
    """What a run killed while Spark wrote a query's first offsets entry leaves behind:
    Spark's own atomic writer opened on ``offsets/0``, part written, never closed."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    managers = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager = managers.create(
        jvm.org.apache.hadoop.fs.Path(str(offsets)), spark.sparkContext._jsc.hadoopConfiguration()
    )
    stream = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(str(offsets / "0")), False)
    stream.write(bytearray(b"v1\n"))
    stream.flush()
    return sorted(p.name for p in offsets.iterdir())


def test_a_run_killed_while_it_planned_its_first_batch_does_not_stop_the_next(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Spark starts a query with no batch only over an empty offsets folder, so the file
    a killed first plan leaves there would stop the flow at every start (seen under SIGKILL
    in test_orders_crash): eventlake deletes Spark's temporary files, and only those."""
    # Spark alone refuses such a checkpoint; the refusal is EL-CHECKPOINT-004, fatal.
    plain = tmp_path / "plain"
    assert [n for n in _unfinished_first_entry(spark, plain) if n.endswith(".tmp")]
    query = (
        spark.readStream.format("rate").load().writeStream.format("noop")
        .option("checkpointLocation", str(plain)).start()
    )  # fmt: skip
    with pytest.raises(StreamingQueryException) as refused:
        query.awaitTermination(120)
    error = translate(refused.value)
    assert error.code == "EL-CHECKPOINT-004"
    assert error.recovery is Recovery.FATAL

    topic = make_topic(prefix="unfinished")
    _send(bootstrap, topic, [(b"k", _order(1), [])])
    settings = settings_for(
        tmp_path, bootstrap, orders={"topic": topic, "high_value_topic": "x"}, examples=True
    )
    checkpoint = tmp_path / "checkpoints" / "orders" / "bronze"
    assert [n for n in _unfinished_first_entry(spark, checkpoint) if n.endswith(".tmp")]
    # A file of anyone else's stays, and Spark's refusal stops the run at once.
    stray = checkpoint / "offsets" / "0.bak"
    stray.write_text("v1\n")
    with pytest.raises(EventlakeError) as caught:
        run_available_now("orders", settings, flows=["bronze"])
    assert caught.value.code == "EL-CHECKPOINT-004", caught.value.render()
    assert "restarts)" not in caught.value.what
    assert sorted(p.name for p in (checkpoint / "offsets").iterdir()) == ["0.bak"]

    # Without it, the next start after a killed first plan runs.
    shutil.rmtree(checkpoint)
    left = _unfinished_first_entry(spark, checkpoint)
    result = run_available_now("orders", settings, flows=["bronze"])
    assert result.flows["orders.bronze"].input_rows == 1
    assert len(read_delta(tmp_path / "lake" / "bronze" / "orders")) == 1
    assert not set(left) & {p.name for p in (checkpoint / "offsets").iterdir()}


def test_a_corrupted_delta_log_entry_is_a_fatal_coded_error(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    settings, topic = _bronze_after_one_record(bootstrap, make_topic, tmp_path)
    log = tmp_path / "lake" / "bronze" / "orders" / "_delta_log"
    newest = max(log.glob("*.json"))
    newest.write_text('{"add": {"path": ')  # cut mid-object
    _send(bootstrap, topic, [(b"k", _order(2), [])])
    with pytest.raises(EventlakeError) as caught:
        run_available_now("orders", settings, flows=["bronze"])
    assert caught.value.code == "EL-DELTA-001"
    assert caught.value.recovery is Recovery.FATAL
    assert "_delta_log" in caught.value.what


def test_a_config_wrong_everywhere_names_every_key() -> None:
    wrong = {
        "production": "maybe",
        "kafka": {"bootstrap_servers": 12, "sasl_password": ["x"]},
        "lake": {"root": {"a": 1}, "log_checkpoint_commits": "many"},
        "spark": {"master": ["local"], "conf": "spark.x=1"},
        "postgres": {"port": "fivefour"},
        "metrics": {"port": -1, "ready_lag": "soon"},
        "restart": {"strategy": "sometimes", "multiplier": 0.5, "attempts": -2},
        "pipelines": {"orders": "fast"},
    }
    with pytest.raises(EventlakeError) as caught:
        settings_from_dict(wrong)
    assert caught.value.code == "EL-CONFIG-004"
    for key in ("production", "kafka.bootstrap_servers", "kafka.sasl_password", "lake.root",
                "lake.log_checkpoint_commits", "spark.master", "spark.conf", "postgres.port",
                "metrics.port", "metrics.ready_lag", "restart.strategy",
                "restart.multiplier", "restart.attempts", "pipelines.orders"):  # fmt: skip
        assert key in caught.value.what, key
    assert "'x'" not in caught.value.what  # the (secret) value is not echoed
