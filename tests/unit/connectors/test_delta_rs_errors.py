"""delta-rs's errors in a run: no backtrace resolved into the process's memory unless the
user asks for one (``RUST_LIB_BACKTRACE``), even with ``RUST_BACKTRACE=1`` set; a read that
raced a commit is read again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError, TableNotFoundError

from eventlake.connectors.delta import open_delta_rs, table_files
from eventlake.storage import Location

#: A process that reads a delta-rs table whose log has a checksum newer than its newest
#: commit (what a maintenance read racing a commit saw in a soak), three times.
READ = """
import json, os, sys
if sys.argv[2] == "plain":
    from eventlake.connectors.delta.tables import plain_delta_rs_errors
    plain_delta_rs_errors()
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from eventlake.testing import resident_bytes

def anon_mib():
    return resident_bytes("self", "RssAnon") / 2**20

path = sys.argv[1]
write_deltalake(path, pa.table({"a": [1, 2]}))
DeltaTable(path).to_pyarrow_table()
open(os.path.join(path, "_delta_log", "00000000000000000005.crc"), "w").write("{}")
before = anon_mib()
errors = []
for _ in range(3):
    try:
        DeltaTable(path)
    except Exception as e:
        errors.append(str(e))
print(json.dumps({"errors": errors, "grew_mib": anon_mib() - before}))
"""


def _read(tmp_path: Path, mode: str, **env: str) -> tuple[list[str], float]:
    """The errors of :data:`READ` in a new process with ``RUST_BACKTRACE=1``, and how much
    its anonymous memory grew over them (MiB)."""
    environ = {k: v for k, v in os.environ.items() if k != "RUST_LIB_BACKTRACE"}
    done = subprocess.run(
        [sys.executable, "-c", READ, str(tmp_path / mode), mode],
        env={**environ, "RUST_BACKTRACE": "1", **env},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    errors = [str(e) for e in out["errors"]]
    assert len(errors) == 3
    assert all("newer than log segment" in e for e in errors)
    return errors, float(out["grew_mib"])


def _has_backtrace(error: str) -> bool:
    return "\n   0: " in error


def test_plain_errors_carry_no_backtrace_and_keep_no_memory(tmp_path: Path) -> None:
    errors, grew = _read(tmp_path, "plain")
    assert not any(_has_backtrace(e) for e in errors)
    assert grew < 8


def test_rust_backtrace_alone_resolves_one_into_every_error(tmp_path: Path) -> None:
    # What the run turns off: delta-rs with RUST_BACKTRACE=1 and nothing else.
    errors, _ = _read(tmp_path, "unset")
    assert all(_has_backtrace(e) for e in errors)


def test_the_users_rust_lib_backtrace_wins(tmp_path: Path) -> None:
    errors, _ = _read(tmp_path, "plain", RUST_LIB_BACKTRACE="1")
    assert all(_has_backtrace(e) for e in errors)


def _checksum_ahead(path: Path) -> Path:
    """A table of two commits whose log shows the second one's checksum but not the commit
    (what a listing racing a commit sees); returns where the commit was put aside."""
    write_deltalake(str(path), pa.table({"a": [1]}))
    write_deltalake(str(path), pa.table({"a": [2]}), mode="append")
    log = path / "_delta_log"
    (log / f"{1:020d}.crc").write_text("{}")
    aside = path.parent / f"{path.name}-commit-1.json"
    (log / f"{1:020d}.json").rename(aside)
    return aside


def test_a_read_racing_a_commit_reads_the_table_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    aside = _checksum_ahead(path)
    with pytest.raises(DeltaError, match="newer than log segment"):
        DeltaTable(str(path))
    committed = threading.Timer(0.1, aside.rename, [path / "_delta_log" / f"{1:020d}.json"])
    committed.start()
    try:
        files = table_files(None, Location(path), small_bytes=2**20)
    finally:
        committed.join()
    assert files is not None
    assert (files.version, files.files) == (1, 2)
    assert open_delta_rs(path).to_pyarrow_table().num_rows == 2


def test_a_checksum_whose_commit_never_comes_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _checksum_ahead(path)
    with pytest.raises(DeltaError, match="newer than log segment"):
        open_delta_rs(path)


def test_other_errors_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from eventlake.connectors.delta import tables

    pauses: list[float] = []
    monkeypatch.setattr(tables.time, "sleep", pauses.append)
    with pytest.raises(TableNotFoundError):
        open_delta_rs(tmp_path / "none")
    assert pauses == []


def test_the_cli_sets_plain_errors_before_any_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from eventlake.cli.main import main

    monkeypatch.delenv("RUST_LIB_BACKTRACE", raising=False)
    monkeypatch.setattr(sys, "argv", ["eventlake", "--help"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 0
    assert os.environ["RUST_LIB_BACKTRACE"] == "0"
