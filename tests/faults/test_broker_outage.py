"""Faults on real components: the pipeline's only Kafka broker is SIGKILLed under a
running flow and restarted on the same port and data after an outage. The flow rides it
out (Spark's client waits, or the flow fails with EL-KAFKA-003 and restarts); no human
acts, and the Delta table ends with every record once. The recovery time, from the
broker's restart to the table holding every record, is printed.

The outage is either fixed (shorter than the client's patience) or lasts until the run
reports the flow failed and restarting (past it), however long the client took to give
up."""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from pathlib import Path

import pytest

from eventlake.config import RestartSettings
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce
from eventlake.testing import (
    LiveRun,
    free_port,
    read_delta,
    running_pipeline,
    settings_for,
    wait_until,
)
from tests.faults.bronze import assert_each_once, bronze_pipeline, caught_up

pytestmark = pytest.mark.integration


def _offsets(lake: Path) -> list[tuple[int, int]]:
    table = read_delta(lake / "bronze" / "events").select(["partition", "offset"]).to_pylist()
    return sorted((r["partition"], r["offset"]) for r in table)


#: Past the patience of Spark's Kafka client: its offset requests (3 tries of
#: ``default.api.timeout.ms``) fail the batch, and the flow restarts. The client's timeout
#: is a third of its default (60 s) here, so the outage that outlasts it is too.
CLIENT_TIMEOUT_MS = 20_000
#: How long the flow may take to fail once the broker is gone, with that client timeout.
FAILURE_SEEN = 240


def _restarted(run: LiveRun) -> bool:
    """The run reports the flow failed and a restart of it scheduled."""
    flows = {f["flow"]: f for f in run.status()["flows"]}
    return flows["bronze"]["last_restart"] is not None


@pytest.mark.parametrize(
    ("outage", "client_timeout_ms"),
    [(60, None), (None, CLIENT_TIMEOUT_MS)],
    ids=["60s-client-waits", "until-the-flow-fails-past-client-timeout"],
)
def test_the_only_broker_killed_and_back_after_an_outage(
    tmp_path: Path, outage: int | None, client_timeout_ms: int | None,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    port = free_port()
    broker = EmbeddedKafkaBroker(port=port, data_dir=tmp_path / "kafka")
    broker.start()
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "events", partitions=2)
    produce(bootstrap, "events", [(f"k{i}", f"v{i}") for i in range(500)])
    backoff = RestartSettings(max_delay="20 seconds")  # the default strategy, a shorter cap
    settings = settings_for(tmp_path, bootstrap, outage={"topic": "events"})
    java: dict[str, str | bool | int | float] = {}
    if client_timeout_ms:  # Kafka requires request.timeout.ms <= default.api.timeout.ms
        java = {"default.api.timeout.ms": client_timeout_ms,
                "request.timeout.ms": client_timeout_ms // 2}  # fmt: skip
    kafka = settings.kafka.model_copy(update={"java_properties": java})
    settings = settings.model_copy(update={"restart": backoff, "kafka": kafka})
    lake = tmp_path / "lake"
    try:
        with running_pipeline(bronze_pipeline("outage"), settings, trigger="2 seconds") as run:
            wait_until(lambda: len(_offsets(lake)) == 500, timeout=120,
                       what="the first 500 records in bronze")  # fmt: skip
            pid = broker.status().pid
            assert pid is not None
            os.killpg(pid, signal.SIGKILL)  # the broker's JVM leads its own session
            wait_until(lambda: not broker.status().running, timeout=30, what="the broker gone")
            down = time.monotonic()
            if outage is None:  # the fault itself: the broker stays away until the flow fails
                wait_until(partial(_restarted, run), timeout=FAILURE_SEEN,
                           what="the flow to fail and restart")  # fmt: skip
            else:  # or this long
                time.sleep(outage)
            away = time.monotonic() - down
            broker.start()
            began = time.monotonic()
            produce(bootstrap, "events", [(f"k{i}", f"v{i}") for i in range(500, 1000)])
            recovery = (time.monotonic() - began) + caught_up(
                lambda: len(_offsets(lake)), 1000, timeout=300,
                what="every record in bronze after the broker came back",
            )  # fmt: skip
    finally:
        broker.stop()
    assert_each_once(_offsets(lake), 1000)
    assert run.result is not None
    restarts = run.result.restarts.get("outage.bronze", 0)
    assert (restarts > 0) == (client_timeout_ms is not None), restarts
    with capsys.disabled():  # the figure belongs in the test output, passed or not
        print(f"\n[fault] broker away {away:.0f} s: bronze caught up {recovery:.1f} s after it "
              f"came back, {restarts} restart(s) of the flow")  # fmt: skip
