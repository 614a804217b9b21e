"""A one-flow pipeline (JSON files to Delta) run in a process of its own, for what its driver
JVM was started with: the tests' shared session cannot show options a JVM takes at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from eventlake.testing import read_delta

#: The run; ``jvm`` (its driver JVM's gateway) is there for the caller's report.
SCRIPT = """
import json, os, sys
from pathlib import Path
from pyspark.sql import DataFrame
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline
from eventlake.run import run_pipeline
from eventlake.session import get_spark
from eventlake.testing import settings_for

root = Path(sys.argv[1])
p = Pipeline("own_process")

@p.flow(name="copy", input=FilesInput("inbox", "json", "id STRING"),
        output=DeltaOutput("silver", "copy"))
def copy(ctx, df: DataFrame) -> DataFrame:
    return df

settings = settings_for(root, spark=json.loads(sys.argv[2]))
run_pipeline(p, settings, trigger=sys.argv[3])
jvm = get_spark()._jvm
"""


def run_copy(root: Path, spark: dict[str, Any], trigger: str, report: str, ids: list[str]) -> Any:
    """Run the pipeline under ``root`` on records with ``ids``, with ``spark`` settings, and
    return what ``report`` (Python run after it, printing JSON) printed last; the records
    must be in the sink. The process gets this one's environment without ``LD_PRELOAD``."""
    inbox = root / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT + report, str(root), json.dumps(spark), trigger],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = read_delta(root / "lake" / "silver" / "copy").to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": i} for i in sorted(ids)]
    return json.loads(ran.stdout.strip().splitlines()[-1])
