"""The driver JVM's collector follows the run: Parallel (throughput) for a run whose flows
all end, G1 (short pauses) for one that lasts; a collector the user names wins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventlake.testing import read_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

#: A run of a one-flow pipeline in a process of its own: the collectors of its JVM.
RUN = """
import json, sys
from pathlib import Path
from pyspark.sql import DataFrame
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline
from eventlake.run import run_pipeline
from eventlake.session import get_spark
from eventlake.testing import settings_for

root = Path(sys.argv[1])
p = Pipeline("gc")

@p.flow(name="copy", input=FilesInput("inbox", "json", "id STRING"),
        output=DeltaOutput("silver", "copy"))
def copy(ctx, df: DataFrame) -> DataFrame:
    return df

spark_conf = json.loads(sys.argv[3])
settings = settings_for(root, spark={"master": "local[1]", "conf": spark_conf})
run_pipeline(p, settings, trigger=sys.argv[2])
jvm = get_spark()._jvm
beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
print(json.dumps(sorted(b.getName() for b in beans)))
"""


def _collectors(tmp_path: Path, trigger: str, conf: dict[str, str]) -> list[str]:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text('{"id": "r-1"}\n')
    ran = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path), trigger, json.dumps(conf)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert read_delta(tmp_path / "lake" / "silver" / "copy").to_pylist() == [{"id": "r-1"}]
    names: list[str] = json.loads(ran.stdout.strip().splitlines()[-1])
    return names


def test_a_run_whose_flows_end_collects_with_parallel(tmp_path: Path) -> None:
    assert _collectors(tmp_path, "available-now", {}) == ["PS MarkSweep", "PS Scavenge"]


def test_a_collector_the_user_names_wins(tmp_path: Path) -> None:
    conf = {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"}
    assert _collectors(tmp_path, "available-now", conf) == ["Copy", "MarkSweepCompact"]


def test_a_session_for_a_run_that_lasts_collects_with_g1(spark: SparkSession) -> None:
    # The tests' session is started as any session not for an ending run.
    jvm = spark._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = sorted(b.getName() for b in beans)
    assert "G1 Young Generation" in names
