"""A run's table reports read each table incrementally and keep the maintenance they saw."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from eventlake.config.model import MaintenanceSettings
from eventlake.connectors.delta import TableReader, table_report
from eventlake.storage import Location

ROW = pa.table({"x": [1]})


def _append(path: Path, commits: int) -> None:
    for _ in range(commits):
        write_deltalake(str(path), ROW, mode="append")


def _fresh_files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def test_reports_follow_the_table_and_keep_its_last_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module("eventlake.connectors.delta.maintenance")
    monkeypatch.setattr(module, "HISTORY_COMMITS", 5)
    path, settings, reader = tmp_path / "t", MaintenanceSettings(), TableReader()
    _append(path, 6)
    first = table_report(Location(path), "x/t", settings, reader)
    assert (first["files"], first["version"], first["last_compact"]) == (6, 5, None)

    DeltaTable(str(path)).optimize.compact()
    compacted = DeltaTable(str(path)).version()
    _append(path, 2)
    second = table_report(Location(path), "x/t", settings, reader)
    assert second["files"] == _fresh_files(path) == 3
    assert second["version"] == compacted + 2
    assert second["last_compact"]["version"] == compacted

    _append(path, 7)  # the compaction is now older than the 5 commits a first look reads
    third = table_report(Location(path), "x/t", settings, reader)
    assert third["files"] == _fresh_files(path) == 10
    assert third["last_compact"]["version"] == compacted
    assert table_report(Location(path), "x/t", settings)["last_compact"] is None


def test_a_replaced_table_is_read_afresh(tmp_path: Path) -> None:
    path, settings, reader = tmp_path / "t", MaintenanceSettings(), TableReader()
    _append(path, 4)
    DeltaTable(str(path)).optimize.compact()
    assert table_report(Location(path), "x/t", settings, reader)["last_compact"] is not None

    shutil.rmtree(path)
    assert table_report(Location(path), "x/t", settings, reader)["files"] is None
    _append(path, 2)
    report = table_report(Location(path), "x/t", settings, reader)
    assert (report["files"], report["version"], report["last_compact"]) == (2, 1, None)
