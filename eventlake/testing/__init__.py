"""Helpers for testing pipelines on real components; importable by users' own tests."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    import pyarrow as pa

    from eventlake.config import Settings
    from eventlake.pipelines import Pipeline, Registry
    from eventlake.pipelines.runner import RunResult

T = TypeVar("T")


def unique_name(prefix: str = "t") -> str:
    """A name no other test uses: for topics, tables and checkpoint folders."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value, and return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise EventlakeError(
                ErrorCode.QUERY_TIMEOUT,
                f"{what} did not hold within {timeout:.0f}s.",
                fix="look at the query's progress and the component's log",
            )
        time.sleep(interval)


def read_delta(path: Path | str) -> pa.Table:
    """Read a Delta table with delta-rs, independently of Spark."""
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table()


def delta_version(path: Path | str) -> int:
    """The latest committed version of a Delta table, read with delta-rs."""
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).version())


def settings_for(
    root: Path,
    bootstrap: str | None = None,
    *,
    spark: dict[str, Any] | None = None,
    **pipelines: dict[str, Any],
) -> Settings:
    """Settings for a test: lake and checkpoints under ``root``, the given broker, and a
    section per pipeline (``settings_for(tmp, bootstrap, orders={"topic": t})``)."""
    from eventlake.config.loader import settings_from_dict

    data: dict[str, Any] = {
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "spark": spark or {"master": "local[2]"},
        "pipelines": pipelines,
    }
    if bootstrap is not None:
        data["kafka"] = {"bootstrap_servers": bootstrap}
    return settings_from_dict(data)


def run_available_now(
    pipeline: str | Pipeline,
    settings: Settings,
    *,
    flows: list[str] | None = None,
    registry: Registry | None = None,
) -> RunResult:
    """One validated available-now run of ``pipeline`` (or of ``flows``), as
    ``eventlake run --trigger available-now`` does."""
    from eventlake.run import run_pipeline

    return run_pipeline(pipeline, settings, trigger="available-now", flows=flows, registry=registry)
