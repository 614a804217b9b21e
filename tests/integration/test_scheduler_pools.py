"""Each flow's jobs go to a scheduler pool named after its query, so that under
``spark.scheduler.mode: FAIR`` the flows of a run share the cores instead of queueing
behind each other's jobs. Read back from Spark's own event log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from eventlake.kafka import produce
from tests.integration.cli_helpers import bronze_silver_module, run_cli, write_config

pytestmark = pytest.mark.integration

MODULE = bronze_silver_module("pooled")


def test_each_flow_runs_its_jobs_in_a_pool_of_its_own(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=1, prefix="pooled")
    module = tmp_path / "pooled.py"
    module.write_text(MODULE)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, pooled={"topic": topic})
    events = tmp_path / "events"
    events.mkdir()
    config = yaml.safe_load(cfg.read_text())
    config["spark"]["conf"].update({"spark.scheduler.mode": "FAIR",
                                    "spark.eventLog.enabled": "true",
                                    "spark.eventLog.compress": "false",
                                    "spark.eventLog.dir": events.as_uri()})  # fmt: skip
    cfg.write_text(yaml.safe_dump(config))
    produce(bootstrap, topic, [(f"k{i}", "{}") for i in range(20)])

    done = run_cli("--config", str(cfg), "run", "pooled", "--module", str(module),
                   "--trigger", "available-now")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    pools: dict[str, int] = {}
    for log in events.rglob("events_*"):  # Spark 4 rolls its log in a folder
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") == "SparkListenerJobStart":
                pool = (event.get("Properties") or {}).get("spark.scheduler.pool", "default")
                pools[pool] = pools.get(pool, 0) + 1
    assert pools.get("pooled.raw", 0) >= 1, pools
    assert pools.get("pooled.copied", 0) >= 1, pools
