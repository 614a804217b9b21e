"""Exactly-once Kafka output under SIGKILL: ten kills, five right after a batch's Kafka
transaction committed (before Spark's commit) and five at random moments of a running
batch; a read_committed consumer then sees every input record once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlake.checkpoints import CheckpointLog
from eventlake.kafka import produce
from eventlake.testing import consume_topic, crash, wait_until
from tests.integration.cli_helpers import cli_command, write_config

pytestmark = pytest.mark.integration

RECORDS = 4_000

RELAY = """
from pyspark.sql import functions as F

from eventlake.connectors import FanOut, KafkaInput, ToKafkaExactlyOnce
from eventlake.pipelines import Pipeline, PipelineParams


class RelayParams(PipelineParams):
    out_topic: str = ""


relay = Pipeline("relay", params=RelayParams)


@relay.flow(input=KafkaInput(), output=FanOut(ToKafkaExactlyOnce("out_topic")))
def forward(ctx, df):
    return df.select("key", F.concat(F.lit("seen:"), F.col("value").cast("string")).alias("value"))
"""


def _start(cfg: Path, module: Path, crash_after: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != crash.CRASH_AFTER_ENV}
    modules = ["--module", str(module)]
    if crash_after:
        env[crash.CRASH_AFTER_ENV] = crash_after
        modules += ["--module", crash.__file__]
    return subprocess.Popen(
        cli_command("--config", str(cfg), "run", "relay", "-q", "--trigger", "available-now",
                    *modules),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[bytes], timeout: float = 300) -> int:
    try:
        return proc.wait(timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_exactly_once_kafka_output_survives_ten_kills(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source, out = make_topic(partitions=3, prefix="relay-in"), make_topic(prefix="relay-out")
    sent = [(f"k{i:05d}", json.dumps({"n": i})) for i in range(RECORDS)]
    produce(bootstrap, source, sent)
    module = tmp_path / "relay.py"
    module.write_text(RELAY)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, relay={
        "topic": source, "out_topic": out, "max_offsets_per_trigger": 250})  # fmt: skip
    log = CheckpointLog(tmp_path / "checkpoints" / "relay" / "forward")

    def next_batch() -> int:
        if log.in_flight is not None:
            return log.in_flight
        return 0 if log.last_committed is None else log.last_committed + 1

    rng = random.Random(16)
    for kill in range(10):
        if kill % 2 == 0:  # after Kafka's commit, before Spark's: the replay must be skipped
            point = f"kafka-eo:{out}:{next_batch()}"
            assert _finish(_start(cfg, module, point)) == -signal.SIGKILL, point
            continue
        # At a random moment of a running batch: often inside the open transaction.
        proc = _start(cfg, module)
        planned = next_batch()

        def running(proc: subprocess.Popen[bytes] = proc, planned: int = planned) -> bool:
            return (log.in_flight or -1) >= planned or proc.poll() is not None

        wait_until(running, timeout=180, what=f"batch {planned} running")
        time.sleep(rng.uniform(0.0, 1.0))  # the kill point itself, not a wait
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    assert _finish(_start(cfg, module)) == 0
    assert log.in_flight is None

    committed = consume_topic(bootstrap, out, committed_only=True)
    assert sorted(committed) == sorted((k, f"seen:{v}") for k, v in sent)  # each key once
