"""delta-rs's own allocator (the jemalloc built into deltalake) set lean for a run, in a
process of its own each: it reads its options once, at its first allocation. The options
in effect are read from jemalloc's statistics, printed at the process's exit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eventlake.connectors.delta.tables import (
    DELTA_RS_MALLOC_CONF,
    LEAN_DELTA_RS_MALLOC,
    lean_delta_rs_allocator,
)

#: A process that sets the lean options (unless told not to), asks jemalloc for its
#: statistics at exit, then writes and reads a table.
READ = """
import os, sys
if sys.argv[2] == "lean":
    from eventlake.connectors.delta.tables import lean_delta_rs_allocator
    lean_delta_rs_allocator()
conf = os.environ.get("_RJEM_MALLOC_CONF")
os.environ["_RJEM_MALLOC_CONF"] = f"{conf},stats_print:true" if conf else "stats_print:true"
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
write_deltalake(sys.argv[1], pa.table({"a": list(range(1000))}))
for _ in range(3):
    write_deltalake(sys.argv[1], pa.table({"a": [1]}), mode="append")
table = DeltaTable(sys.argv[1])
print(table.version(), len(table.file_uris()), conf)
"""


def _options(tmp_path: Path, mode: str) -> tuple[str, dict[str, str]]:
    """What the process printed, and jemalloc's options in effect (``opt.NAME: VALUE``)."""
    env = {k: v for k, v in os.environ.items() if k != DELTA_RS_MALLOC_CONF}
    done = subprocess.run([sys.executable, "-c", READ, str(tmp_path / "t"), mode], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    found = dict(re.findall(r"^\s+opt\.(\w+): (\S+)", done.stderr, re.MULTILINE))
    assert found, done.stderr[-2000:]
    return done.stdout.strip(), found


def test_delta_rs_allocates_with_one_arena_and_no_thread_caches(tmp_path: Path) -> None:
    printed, options = _options(tmp_path, "lean")
    assert printed == f"3 4 {LEAN_DELTA_RS_MALLOC}"
    assert options["narenas"] == "1"
    assert options["tcache"] == "false"
    assert options["dirty_decay_ms"] == "10000"  # freed pages still given back on its own


def test_without_them_delta_rs_keeps_jemallocs_defaults(tmp_path: Path) -> None:
    """The control: an arena per four cores' worth and a cache per thread."""
    printed, options = _options(tmp_path, "plain")
    assert printed == "3 4 None"
    assert int(options["narenas"]) == 4 * (os.cpu_count() or 1)
    assert options["tcache"] == "true"


def test_the_users_own_options_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DELTA_RS_MALLOC_CONF, "narenas:2")
    lean_delta_rs_allocator()
    assert os.environ[DELTA_RS_MALLOC_CONF] == "narenas:2"
    monkeypatch.delenv(DELTA_RS_MALLOC_CONF)
    lean_delta_rs_allocator()
    assert os.environ[DELTA_RS_MALLOC_CONF] == LEAN_DELTA_RS_MALLOC
