"""delta-rs's own allocator (the jemalloc built into deltalake) set lean for a run, in a
process of its own each: it reads its options once, at its first allocation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eventlake.connectors.delta.tables import (
    DELTA_RS_MALLOC_CONF,
    LEAN_DELTA_RS_MALLOC,
    lean_delta_rs_allocator,
)

#: A process that sets the lean options (unless told not to), then writes and reads a table.
READ = """
import os, sys
if sys.argv[2] == "lean":
    from eventlake.connectors.delta.tables import lean_delta_rs_allocator
    lean_delta_rs_allocator()
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
write_deltalake(sys.argv[1], pa.table({"a": list(range(1000))}))
for _ in range(3):
    write_deltalake(sys.argv[1], pa.table({"a": [1]}), mode="append")
print(DeltaTable(sys.argv[1]).to_pyarrow_table().num_rows, os.environ.get("_RJEM_MALLOC_CONF"))
"""


def _read(tmp_path: Path, mode: str, conf: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != DELTA_RS_MALLOC_CONF}
    if conf is not None:
        env[DELTA_RS_MALLOC_CONF] = conf
    return subprocess.run([sys.executable, "-c", READ, str(tmp_path / "t"), mode], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip


def test_delta_rs_takes_the_lean_options(tmp_path: Path) -> None:
    done = _read(tmp_path, "lean")
    assert done.stdout.split() == ["1003", LEAN_DELTA_RS_MALLOC]
    assert "<jemalloc>" not in done.stderr, done.stderr  # every option known to it


def test_delta_rs_reads_the_variable(tmp_path: Path) -> None:
    """The control: an option its jemalloc does not know is complained about, so the
    variable reaches delta-rs's allocator (a rename would leave the lean options unread)."""
    done = _read(tmp_path, "plain", conf="narenas:many")
    assert done.stdout.split() == ["1003", "narenas:many"]
    assert "<jemalloc>" in done.stderr, done.stderr
    assert "narenas" in done.stderr, done.stderr


def test_the_users_own_options_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DELTA_RS_MALLOC_CONF, "narenas:2")
    lean_delta_rs_allocator()
    assert os.environ[DELTA_RS_MALLOC_CONF] == "narenas:2"
    monkeypatch.delenv(DELTA_RS_MALLOC_CONF)
    lean_delta_rs_allocator()
    assert os.environ[DELTA_RS_MALLOC_CONF] == LEAN_DELTA_RS_MALLOC
