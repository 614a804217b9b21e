"""`eventlake version` prints the stack as installed, and where the jars come from; the
declared ranges hold the versions constraints.txt pins."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from eventlake.cli.main import app
from eventlake.jars import SPARK_JARS, cache_dir, locked

ROOT = Path(__file__).parents[2]
DEPENDENCIES = [
    Requirement(r)
    for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
]


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, pinned = line.partition("==")
        if sep and not line.startswith("#"):
            pins[canonicalize_name(name)] = pinned.strip()
    return pins


def test_version_prints_each_dependency_and_where_the_jars_come_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EVENTLAKE_MAVEN_REPOSITORY", raising=False)
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in result.output.splitlines()]
    lines = {name: value for name, value in rows if not name.startswith("jar")}
    pins = _constraints()
    for dependency in DEPENDENCIES:
        shown = lines[dependency.name]
        assert shown == pins[canonicalize_name(dependency.name)], dependency.name
        assert dependency.specifier.contains(shown), (dependency, shown)
    jars = [value for name, value in rows if name == "jar (spark)"]
    spark = {jar.artifact: jar.coordinates for jar in locked(SPARK_JARS)}
    assert spark["delta-spark_4.2_2.13"] in jars
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0" in jars
    assert dict((n, v) for n, v in rows)["jar cache"].startswith(str(cache_dir()))
    assert "https://repo1.maven.org/maven2" in result.output


def test_every_dependency_is_a_range_and_constrained() -> None:
    pins = _constraints()
    for dependency in DEPENDENCIES:
        assert not any(s.operator == "==" for s in dependency.specifier), dependency
        assert canonicalize_name(dependency.name) in pins, dependency.name
    pyspark = next(d for d in DEPENDENCIES if d.name == "pyspark")
    assert pyspark.specifier.contains("4.2.0")
    assert not pyspark.specifier.contains("4.3.0")  # the jars are built for Spark 4.2
