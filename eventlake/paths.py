"""Where eventlake keeps things: the project state folder and the JVM jar cache."""

from __future__ import annotations

import os
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError

STATE_DIR_ENV = "EVENTLAKE_HOME"
JARS_DIR_ENV = "EVENTLAKE_JARS_DIR"
SPARK_JARS = "spark"
BROKER_JARS = "kafka-broker"
HDFS_TEST_JARS = "hdfs-test"


def state_dir() -> Path:
    """The project's state folder (broker data, default lake and checkpoints)."""
    return Path(os.environ.get(STATE_DIR_ENV, ".eventlake")).absolute()


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def jars_root() -> Path:
    """The folder holding the jar sets `make jars` resolves (``spark/`` and ``kafka-broker/``)."""
    env = os.environ.get(JARS_DIR_ENV)
    if env:
        return Path(env).absolute()
    for base in (Path.cwd(), _repo_root()):
        candidate = base / ".cache" / "jars"
        if candidate.is_dir():
            return candidate
    return _repo_root() / ".cache" / "jars"


def jar_files(kind: str) -> list[Path]:
    """The jars of one set, sorted; an actionable error when the set was never resolved."""
    folder = jars_root() / kind
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise EventlakeError(
            ErrorCode.JARS_MISSING,
            f"no {kind} jars in {folder}.",
            expected=f"the jars of jvm/{kind}/pom.xml, resolved by Maven",
            fix=f"run `make jars` in the eventlake checkout, or point {JARS_DIR_ENV} at them",
        )
    return jars
