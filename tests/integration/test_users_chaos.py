"""Exactly-once under SIGKILL for the users fan-out (Delta + PostgreSQL + Kafka).

Five kills: four from the crash injector (``eventlake.testing.crash``, loaded with
``--module``), right after one target wrote a batch (so the batch is in some targets and
not yet in Spark's commit log, the last one after every target), and one at an arbitrary
moment. Restarted on the same checkpoints each time, the
tables equal the independent computation from the records (test_users_pipeline's) and
Kafka has every key.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from eventlake.checkpoints import CheckpointLog
from eventlake.config import PostgresSettings
from eventlake.generator import CdcConfig, CdcGenerator, send
from eventlake.kafka import topic_offsets
from eventlake.testing import crash, unique_name, wait_until
from tests.integration.cli_helpers import cli_command, write_config
from tests.integration.test_users_pipeline import assert_matches
from tests.integration.users_expected import expected_users

pytestmark = pytest.mark.integration


def run(
    cfg: Path, *extra: str, crash_after: str | None = None, sets: tuple[str, ...] = (),
    timeout: float = 600,
) -> int:  # fmt: skip
    env = dict(os.environ)
    env.pop(crash.CRASH_AFTER_ENV, None)
    inject: tuple[str, ...] = ()
    if crash_after:
        env[crash.CRASH_AFTER_ENV] = crash_after
        inject = ("--module", crash.__file__)
    proc = subprocess.Popen(
        cli_command(*(a for kv in sets for a in ("--set", kv)), "--config", str(cfg),
                    "run", "users", "-q", *inject, *extra),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return proc.returncode


def state_keys(bootstrap: str, topic: str) -> set[int]:
    ends = topic_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    keys: set[int] = set()
    seen = 0
    try:
        while seen < sum(ends.values()):
            msg = consumer.poll(5)
            if msg is None or msg.error():
                continue
            seen += 1
            keys.add(int(msg.key()))
    finally:
        consumer.close()
    return keys


def test_users_fanout_survives_five_kills(
    bootstrap: str, make_topic: Callable[..., str], postgres: PostgresSettings, tmp_path: Path
) -> None:
    topic, state = make_topic(partitions=3, prefix="cdc-chaos"), make_topic(prefix="state")
    table = unique_name("users_chaos").replace("-", "_")
    users = {
        "topic": topic,
        "state_topic": state,
        "postgres_table": table,
        "max_offsets_per_trigger": 80,
        "max_files_per_trigger": 1,
        "trigger": "1 second",
    }
    # The password stays in the environment, never in the file.
    pg = {"port": postgres.port, "password": "${EVENTLAKE_TEST_PG_PASSWORD}"}
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, postgres=pg, users=users)
    records = list(CdcGenerator(CdcConfig(seed=21, users=25, out_of_order_fraction=0.15,
                                          duplicate_fraction=0.08)).records(500))  # fmt: skip
    send(bootstrap, topic, records)
    silver = CheckpointLog(tmp_path / "checkpoints" / "users" / "silver")
    crash_points = [
        f"merge:silver/users_history:{0}",  # Delta history written, nothing else
        f"postgres:{table}:{1}",  # all Delta tables and PostgreSQL written, Kafka not
        f"kafka:{state}:{2}",  # every writer done, Spark's commit not
        f"delta:silver/users_quarantine:{3}",  # the first writer only
    ]
    kills = 0
    for point in crash_points:
        code = run(cfg, "--trigger", "available-now", crash_after=point)
        assert code == -signal.SIGKILL, f"the hook {point} did not fire"
        assert silver.in_flight is not None  # died inside a batch
        kills += 1

    # One more at an arbitrary moment of a live run.
    proc = subprocess.Popen(
        cli_command("--config", str(cfg), "run", "users", "-q"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        done = silver.last_committed or 0
        wait_until(lambda: (silver.last_committed or 0) > done or proc.poll() is not None,
                   timeout=240, what="another silver batch")  # fmt: skip
        assert proc.poll() is None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    kills += 1
    assert kills >= 5

    # The last run drains the rest in big batches, as an operator catching up would: the
    # kills are what this test is about, not the backlog's batch boundaries (one bronze
    # file per silver batch made it 16 batches, four of the test's nine minutes).
    catch_up = ("pipelines.users.max_files_per_trigger=1000",
                "pipelines.users.max_offsets_per_trigger=100000")  # fmt: skip
    assert run(cfg, "--trigger", "available-now", sets=catch_up) == 0
    assert silver.in_flight is None
    assert_matches(tmp_path, records, postgres, table)
    # Kafka is at-least-once: every user whose state changed is there, maybe twice.
    touched = {int(k) for k in expected_users(records)}
    assert touched <= state_keys(bootstrap, state)
