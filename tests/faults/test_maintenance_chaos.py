"""Table maintenance under SIGKILL: the driver killed 4 times, each time after its run
committed a few batches, while the run's maintenance compacts (clusters) and vacuums
between them: an appended table, a flow streaming it into another (its reader), and a
clustered MERGE target. After a last run drains the topic, every table holds each record
once, and each was compacted and vacuumed, never of a file its reader could still need."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from eventlake.checkpoints import CheckpointLog
from eventlake.kafka import topic_offsets
from eventlake.testing import read_delta, wait_until
from tests.faults.test_driver_chaos import Producer, _maintenance
from tests.integration.cli_helpers import cli_command, write_config

pytestmark = pytest.mark.integration

KILLS = 4
FLOWS = ("appended", "copied", "merged")
TABLES = ("bronze/events", "silver/events", "silver/per_key")
MAINTENANCE = {"compact_min_files": 3, "vacuum_interval": "10 seconds",
               "vacuum_retention": "0 seconds"}  # fmt: skip

KEPT = """
from pyspark.sql import functions as F

from eventlake.connectors import (
    DeltaInput, DeltaOutput, FanOut, KafkaInput, MergeDelta, kafka_records,
)
from eventlake.pipelines import Pipeline

kept = Pipeline("kept")


def numbered(df):
    n = F.get_json_object("value", "$.n").cast("long")
    return kafka_records(df).select(n.alias("n"), "partition", "offset")


def per_key(ctx, df, batch):
    return df.groupBy(F.col("n").alias("key")).agg(F.count("*").alias("records"))


def add_counts(target, source, batch):
    # Not idempotent on purpose: a batch merged twice counts its records twice.
    return (
        target.alias("t").merge(source.alias("s"), "t.key = s.key")
        .whenMatchedUpdate(set={"records": "t.records + s.records"})
        .whenNotMatchedInsertAll()
    )


@kept.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
def appended(ctx, df):
    return numbered(df)


@kept.flow(input=DeltaInput("bronze", "events"), output=DeltaOutput("silver", "events"))
def copied(ctx, df):
    return df


@kept.flow(input=KafkaInput(), output=FanOut(
    MergeDelta("silver", "per_key", add_counts, "key BIGINT, records BIGINT", prepare=per_key,
               cluster_by=("key",))))
def merged(ctx, df):
    return numbered(df)
"""


def committed(logs: list[CheckpointLog]) -> list[int]:
    """Each flow's committed batches."""
    return [len(log.committed) for log in logs]


def _progressed(
    logs: list[CheckpointLog], before: list[int], proc: subprocess.Popen[bytes]
) -> bool:
    """Since the start, a batch of every flow and three a flow in all, or the run gone (then
    the test fails). Every flow: the MERGE flow's batches are the slowest, and the two
    others alone would reach the count first in each run, leaving its table no small
    files to compact."""
    now = committed(logs)
    each = all(n > b for n, b in zip(now, before, strict=True))
    return (each and sum(now) >= sum(before) + 3 * len(FLOWS)) or proc.poll() is not None


def test_maintenance_between_batches_keeps_every_output_exact_under_sigkill(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    source = make_topic(partitions=2, prefix="kept-in")
    module = tmp_path / "kept.py"
    module.write_text(KEPT)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, maintenance=MAINTENANCE,
                       kept={"topic": source, "max_offsets_per_trigger": 200,
                             "trigger": "1 second"})  # fmt: skip
    logs = [CheckpointLog(tmp_path / "checkpoints" / "kept" / f) for f in FLOWS]
    rng = random.Random(33)
    command = cli_command("--config", str(cfg), "run", "kept", "-q", "--module", str(module))
    producer = Producer(bootstrap, source)
    producer.start()
    try:
        for kill in range(KILLS):
            before = committed(logs)
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
            try:
                wait_until(partial(_progressed, logs, before, proc), timeout=180,
                           what=f"batches committed before kill {kill + 1}")  # fmt: skip
                assert proc.poll() is None, f"the run exited by itself ({proc.returncode})"
                time.sleep(rng.uniform(0.0, 2.0))
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    finally:
        producer.done.set()
        producer.join(30)
    assert producer.error is None
    total = producer.sent
    assert sum(topic_offsets(bootstrap, source).values()) == total
    # In big batches: the backlog's batch boundaries are not what this test is about.
    drain = [*command[:3], "--set", "pipelines.kept.max_offsets_per_trigger=100000",
             *command[3:], "--trigger", "available-now"]  # fmt: skip
    drained = subprocess.run(drain, capture_output=True, text=True, timeout=600, check=False)
    assert drained.returncode == 0, drained.stderr[-2000:]

    lake = tmp_path / "lake"
    for table in ("bronze/events", "silver/events"):
        rows = read_delta(lake / table).to_pylist()
        assert sorted(r["n"] for r in rows) == list(range(total)), table  # each once
    counts = {r["key"]: r["records"] for r in read_delta(lake / "silver" / "per_key").to_pylist()}
    assert counts == dict.fromkeys(range(total), 1)  # no batch merged twice

    done = {table: _maintenance(lake / table) for table in TABLES}
    assert all(d["OPTIMIZE"] > 0 for d in done.values()), done
    # A table no flow reads loses its compacted files; bronze keeps what its reader may
    # replay (a whole hour here: delta-rs counts retention in hours; a VACUUM that removes
    # nothing leaves no commit), and the reader never missed a file, however often bronze
    # was compacted and vacuumed under it.
    assert done["silver/events"]["VACUUM END"] > 0, done
    assert done["silver/events"]["deleted"] > 0, done
    with capsys.disabled():
        print(f"\n[fault] the driver SIGKILLed {KILLS} times between batches with {total} "
              f"records arriving, maintenance between them: {json.dumps(done)}; "
              "every output exact")  # fmt: skip
