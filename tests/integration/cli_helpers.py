"""Running `eventlake` as a user would: a subprocess with a config file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml


def write_config(
    path: Path,
    bootstrap: str,
    root: Path | str,
    *,
    postgres: dict[str, Any] | None = None,
    maintenance: dict[str, Any] | None = None,
    **pipelines: dict[str, Any],
) -> Path:
    config: dict[str, Any] = {
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": f"{str(root).rstrip('/')}/lake"},
        "checkpoints": {"root": f"{str(root).rstrip('/')}/checkpoints"},
        "spark": {
            "master": "local[2]",
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        },
        "project": {"examples": True},
        "pipelines": pipelines,
    }
    if postgres is not None:
        config["postgres"] = postgres
    if maintenance is not None:
        config["maintenance"] = maintenance
    path.write_text(yaml.safe_dump(config))
    return path


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "eventlake.cli.main", *args]


def run_cli(
    *args: str, timeout: float = 600, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def bronze_silver_module(name: str) -> str:
    """A pipeline module for ``--module``: ``name`` reads Kafka into ``bronze/<name>``
    (flow ``raw``) and copies that into ``silver/<name>`` (flow ``copied``)."""
    return f"""
from eventlake.connectors import DeltaInput, DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline

{name} = Pipeline("{name}")


@{name}.flow(input=KafkaInput(), output=DeltaOutput("bronze", "{name}"))
def raw(ctx, df):
    return kafka_records(df).select("key", "value")


@{name}.flow(input=DeltaInput("bronze", "{name}"), output=DeltaOutput("silver", "{name}"))
def copied(ctx, df):
    return df
"""
