"""Bounding a Delta log by commits, on real logs written by delta-rs: the log starts at a
checkpoint, keeps what it is told to keep, and the table still reads whole."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from eventlake.connectors.delta.log_checkpoints import complete_checkpoints, trim_log, trim_start
from eventlake.storage import Location
from eventlake.storage.local import LocalStorage


def _table(path: Path, commits: int, checkpoints: tuple[int, ...]) -> None:
    """A table of ``commits`` versions, one row each (row ``n`` in version ``n``), with a
    log checkpoint at each of ``checkpoints``."""
    for n in range(commits):
        write_deltalake(str(path), pa.table({"n": [n]}), mode="append")
        if n in checkpoints:
            DeltaTable(str(path)).create_checkpoint()


def _names(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "_delta_log").iterdir())


def _v(version: int) -> str:
    return f"{version:020d}"


def test_only_a_checkpoint_with_every_part_counts() -> None:
    names = [
        f"{_v(10)}.checkpoint.parquet",
        f"{_v(20)}.checkpoint.0000000001.0000000002.parquet",
        f"{_v(20)}.checkpoint.0000000002.0000000002.parquet",
        f"{_v(30)}.checkpoint.0000000001.0000000002.parquet",  # its second part not there
        f".{_v(40)}.checkpoint.parquet.crc",
        f"{_v(50)}.json",
    ]
    assert complete_checkpoints(names) == [10, 20]


def test_the_log_starts_at_the_newest_checkpoint_that_keeps_what_it_must(tmp_path: Path) -> None:
    _table(tmp_path, 31, checkpoints=(10, 20))  # versions 0-30
    names = _names(tmp_path)
    assert trim_start(names, keep_commits=5, keep_from=None) == 20  # 26-30 kept, from 20
    assert trim_start(names, keep_commits=15, keep_from=None) == 10  # 16-30 kept, from 10
    assert trim_start(names, keep_commits=5, keep_from=15) == 10  # a reader needs 15
    assert trim_start(names, keep_commits=25, keep_from=None) is None  # 6-30: no checkpoint
    assert trim_start(names, keep_commits=5, keep_from=5) is None  # nothing before 5 to use


def test_a_trimmed_log_reads_every_row_and_takes_more_commits(tmp_path: Path) -> None:
    _table(tmp_path, 31, checkpoints=(10, 20))
    log = tmp_path / "_delta_log"
    for version in (3, 19, 20, 25):  # what Spark and Hadoop's local filesystem add
        (log / f"{_v(version)}.crc").write_text("{}")
        (log / f".{_v(version)}.json.crc").write_text("")
    names = _names(tmp_path)
    start = trim_start(names, keep_commits=5, keep_from=None)
    assert start == 20

    detail = trim_log(LocalStorage(), Location(log), names, start)

    # 20 commits, the checkpoint at 10, the two checksums of versions 3 and 19
    assert detail == "25 log files of versions 0-19 removed"
    left = _names(tmp_path)
    assert [n for n in left if n.endswith(".json") and not n.startswith(".")] == [
        f"{_v(v)}.json" for v in range(20, 31)
    ]
    assert f"{_v(20)}.checkpoint.parquet" in left
    assert f"{_v(10)}.checkpoint.parquet" not in left
    kept = {f"{_v(20)}.crc", f".{_v(20)}.json.crc", f"{_v(25)}.crc", "_last_checkpoint"}
    assert kept <= set(left)
    assert not [n for n in left if n.lstrip(".")[:20].isdigit() and int(n.lstrip(".")[:20]) < 20]
    table = DeltaTable(str(tmp_path))
    assert table.version() == 30
    assert sorted(table.to_pyarrow_table().column("n").to_pylist()) == list(range(31))
    write_deltalake(str(tmp_path), pa.table({"n": [31]}), mode="append")
    assert sorted(DeltaTable(str(tmp_path)).to_pyarrow_table().column("n").to_pylist()) == list(
        range(32)
    )
