"""Faults on real components: the driver SIGKILLed 20 times at random points while records
keep arriving, across five outputs at once: a Delta append, a flow streaming that table
into another, a Delta MERGE that counts records per key, a PostgreSQL upsert and an
exactly-once Kafka relay, with the run's table maintenance on and due as often as it
can be (test_maintenance_chaos.py kills runs between batches). Each kill comes a random
0-3 s after the restarted run planned a new batch. After the last restart drains the topic,
every output equals what was produced, computed here from the records sent: each record
once in both Delta tables and in the relay (read_committed), each key's count and newest
record in the MERGE table, each key's newest record in PostgreSQL."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psycopg
import pytest

from eventlake.checkpoints import CheckpointLog
from eventlake.config import PostgresSettings
from eventlake.kafka import produce, topic_offsets
from eventlake.testing import consume_topic, read_delta, unique_name, wait_until
from tests.integration.cli_helpers import cli_command, write_config

pytestmark = pytest.mark.integration

KILLS = 20
KEYS = 40
FLOWS = ("appended", "copied", "merged", "upserted", "relayed")
#: Maintenance as often as it can: a compaction every few commits, VACUUM every few seconds.
MAINTENANCE = {"compact_min_files": 4, "vacuum_interval": "5 seconds",
               "vacuum_retention": "0 seconds"}  # fmt: skip

CHAOS = """
from pyspark.sql import functions as F

from eventlake.connectors import (
    DeltaInput, DeltaOutput, FanOut, KafkaInput, MergeDelta, ToKafkaExactlyOnce, ToPostgres,
    kafka_records,
)
from eventlake.pipelines import Pipeline, PipelineParams


class ChaosParams(PipelineParams):
    pg_table: str = ""
    out_topic: str = ""


chaos = Pipeline("chaos", params=ChaosParams)


def numbered(df):
    records = kafka_records(df)
    n = F.get_json_object("value", "$.n").cast("long").alias("n")
    return records.select("key", n, "partition", "offset")


def per_key(ctx, df, batch):
    return df.groupBy("key").agg(F.count("*").alias("records"), F.max("n").alias("n"))


def newest(ctx, df, batch):
    return df.groupBy("key").agg(F.max("n").alias("n"))


def add_counts(target, source, batch):
    # Not idempotent on purpose: a batch merged twice counts its records twice.
    return (
        target.alias("t").merge(source.alias("s"), "t.key = s.key")
        .whenMatchedUpdate(set={"records": "t.records + s.records",
                                "n": "greatest(t.n, s.n)"})
        .whenNotMatchedInsertAll()
    )


@chaos.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
def appended(ctx, df):
    return numbered(df)


@chaos.flow(input=DeltaInput("bronze", "events"), output=DeltaOutput("silver", "events"))
def copied(ctx, df):
    return df


@chaos.flow(input=KafkaInput(), output=FanOut(
    MergeDelta("silver", "per_key", add_counts, "key STRING, records BIGINT, n BIGINT",
               prepare=per_key, cluster_by=("key",))))
def merged(ctx, df):
    return numbered(df)


@chaos.flow(input=KafkaInput(), output=FanOut(
    ToPostgres("pg_table", key=("key",), order_by=("n",), prepare=newest)))
def upserted(ctx, df):
    return numbered(df)


@chaos.flow(input=KafkaInput(), output=FanOut(ToKafkaExactlyOnce("out_topic")))
def relayed(ctx, df):
    return df.select("key", F.concat(F.lit("seen:"), F.col("value").cast("string")).alias("value"))
"""


class Producer(threading.Thread):
    """Records numbered 0, 1, 2... keyed by n % KEYS, sent in small bursts until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.sent = 0
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.done.wait(0.5):
                burst = range(self.sent, self.sent + 20)
                produce(self.bootstrap, self.topic, [record(n) for n in burst])
                self.sent = burst.stop
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def record(n: int) -> tuple[str, str]:
    return f"k{n % KEYS}", json.dumps({"n": n})


def planned(logs: list[CheckpointLog]) -> int:
    return sum(len(log.planned) for log in logs)


def _progressed(logs: list[CheckpointLog], before: int, proc: subprocess.Popen[bytes]) -> bool:
    """A new batch planned since the start, or the run gone (then the test fails)."""
    return planned(logs) > before or proc.poll() is not None


def test_the_driver_killed_20_times_at_random_points_across_four_outputs(
    bootstrap: str, make_topic: Callable[..., str], postgres: PostgresSettings, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    source, out = make_topic(partitions=3, prefix="chaos-in"), make_topic(prefix="chaos-out")
    table = unique_name("chaos").replace("-", "_")
    module = tmp_path / "chaos.py"
    module.write_text(CHAOS)
    pg = {"port": postgres.port, "password": "${EVENTLAKE_TEST_PG_PASSWORD}"}
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, postgres=pg,
                       maintenance=MAINTENANCE, chaos={
        "topic": source, "out_topic": out, "pg_table": table,
        "max_offsets_per_trigger": 400, "trigger": "1 second"})  # fmt: skip
    logs = [CheckpointLog(tmp_path / "checkpoints" / "chaos" / f) for f in FLOWS]
    rng = random.Random(20261125)
    command = cli_command("--config", str(cfg), "run", "chaos", "-q", "--module", str(module))

    producer = Producer(bootstrap, source)
    producer.start()
    in_flight = 0
    started = time.monotonic()
    try:
        for kill in range(KILLS):
            before = planned(logs)
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
            try:
                wait_until(partial(_progressed, logs, before, proc), timeout=180,
                           what=f"a batch planned before kill {kill + 1}")  # fmt: skip
                assert proc.poll() is None, f"the run exited by itself ({proc.returncode})"
                time.sleep(rng.uniform(0.0, 3.0))  # the random point of the kill
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
            in_flight += sum(1 for log in logs if log.in_flight is not None)
    finally:
        producer.done.set()
        producer.join(30)
    chaos_time = time.monotonic() - started
    assert producer.error is None
    total = producer.sent
    assert sum(topic_offsets(bootstrap, source).values()) == total

    # The last run drains the topic and exits by itself.
    drain_started = time.monotonic()
    # In big batches: the backlog's batch boundaries are not what this test is about.
    drain_all = ["--trigger", "available-now"]
    drained = subprocess.run(
        [*command[:3], "--set", "pipelines.chaos.max_offsets_per_trigger=100000",
         *command[3:], *drain_all],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    drain = time.monotonic() - drain_started
    assert drained.returncode == 0, drained.stderr[-2000:]
    assert all(log.in_flight is None for log in logs)

    sent = [record(n) for n in range(total)]
    count = Counter(key for key, _ in sent)
    newest = {key: n for n, (key, _) in enumerate(sent)}  # the last one sent per key wins

    appended = read_delta(tmp_path / "lake" / "bronze" / "events").to_pylist()
    assert sorted(r["n"] for r in appended) == list(range(total))  # each once
    assert len({(r["partition"], r["offset"]) for r in appended}) == total
    copied = read_delta(tmp_path / "lake" / "silver" / "events").to_pylist()
    assert sorted(r["n"] for r in copied) == list(range(total))  # compactions read as no data

    merged = read_delta(tmp_path / "lake" / "silver" / "per_key").to_pylist()
    assert {r["key"]: r["records"] for r in merged} == dict(count)
    assert {r["key"]: r["n"] for r in merged} == newest

    with psycopg.connect(**postgres.connect_kwargs()) as conn:
        rows = conn.execute(f'SELECT key, n FROM "{table}"').fetchall()
    assert dict(rows) == newest

    relayed = consume_topic(bootstrap, out, committed_only=True, timeout=120)
    assert Counter(relayed) == Counter((key, f"seen:{value}") for key, value in sent)

    # The runs cut short commit little; the table the most runs committed to was compacted
    # while its reader streamed it (tests/faults/test_maintenance_chaos.py: between batches).
    done = {name: _maintenance(tmp_path / "lake" / name) for name in MAINTAINED}
    assert done["bronze/events"]["OPTIMIZE"] > 0, done
    with capsys.disabled():
        print(f"\n[fault] the driver SIGKILLed {KILLS} times over {chaos_time:.0f} s "
              f"({in_flight} flow-batches cut in flight) with {total} records arriving, "
              f"maintenance {done}: the last run drained the rest in {drain:.1f} s; "
              "every output exact")  # fmt: skip


MAINTAINED = ("bronze/events", "silver/events", "silver/per_key")


def _maintenance(path: Path) -> dict[str, int]:
    """Compactions and VACUUMs in the table's history, and the files VACUUM deleted."""
    from deltalake import DeltaTable

    history = DeltaTable(str(path)).history()
    ops = Counter(str(c.get("operation")) for c in history)
    deleted = sum(int((c.get("operationMetrics") or {}).get("numDeletedFiles", 0))
                  for c in history if c.get("operation") == "VACUUM END")  # fmt: skip
    return {"OPTIMIZE": ops["OPTIMIZE"], "VACUUM END": ops["VACUUM END"], "deleted": deleted}
