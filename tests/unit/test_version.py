"""`eventlake version` prints the pinned stack, as installed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from eventlake.cli.main import app
from eventlake.paths import SPARK_JARS, jar_files

ROOT = Path(__file__).parents[2]


def test_version_prints_every_pin_and_the_jars() -> None:
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    lines = dict(
        re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in result.output.splitlines()
    )
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for pin in pins:
        name, _, wanted = pin.partition("==")
        name = name.split("[")[0]
        assert lines[name] == wanted, name
    shown = set(result.output.split())
    on_disk = {j.name.removesuffix(".jar") for j in jar_files(SPARK_JARS)}
    for artifact in ("delta-spark_4.2_2.13-", "spark-sql-kafka-0-10_2.13-4.2.0", "postgresql-"):
        [jar] = [j for j in on_disk if j.startswith(artifact)]
        assert jar in shown, artifact
