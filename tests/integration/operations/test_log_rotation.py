"""`eventlake run` keeps its log file to ``log.max_bytes``: a run that lasts a year does
not fill its disk with Spark's output."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eventlake.testing import read_delta
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

FILES_MODULE = """
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline

rotating = Pipeline("rotating")


@rotating.flow(input=FilesInput("inbox", "json", "id STRING"), output=DeltaOutput("silver", "rows"))
def copied(ctx, df):
    return df
"""


def test_a_run_rotates_a_log_past_its_size_and_keeps_the_older_files(
    bootstrap: str, tmp_path: Path
) -> None:
    module = tmp_path / "rotating.py"
    module.write_text(FILES_MODULE)
    (tmp_path / "lake" / "inbox").mkdir(parents=True)
    (tmp_path / "lake" / "inbox" / "a.json").write_text('{"id": "a"}\n{"id": "b"}\n')
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path)
    config = yaml.safe_load(cfg.read_text())
    config["log"] = {"max_bytes": 4096, "keep": 2}
    cfg.write_text(yaml.safe_dump(config))
    log = tmp_path / "logs" / "eventlake.log"
    log.parent.mkdir()
    # What earlier runs left: the oldest beyond `keep` goes, the others shift.
    earlier = "an earlier run's line\n" * 400
    log.write_text(earlier)
    (tmp_path / "logs" / "eventlake.log.1").write_text("the run before\n")
    (tmp_path / "logs" / "eventlake.log.2").write_text("the oldest\n")

    done = run_cli("--config", str(cfg), "run", "rotating", "--trigger", "available-now",
                   "--module", str(module))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    assert sorted(
        r["id"] for r in read_delta(tmp_path / "lake" / "silver" / "rows").to_pylist()
    ) == ["a", "b"]
    logs = sorted(p.name for p in log.parent.iterdir())
    assert logs == ["eventlake.log", "eventlake.log.1", "eventlake.log.2"]
    assert (log.parent / "eventlake.log.1").read_text().startswith(earlier)
    assert (log.parent / "eventlake.log.2").read_text() == "the run before\n"
    assert "an earlier run's line" not in log.read_text()
    assert "\0" not in log.read_text()
