"""The benchmarks' reading of a table's rows version by version, on tables delta-rs writes:
each append's rows at its version, nothing at a compaction."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.latency import rows_by_version
from eventlake.storage import Location


def _append(path: Path, ids: list[int]) -> None:
    write_deltalake(str(path), pa.table({"id": ids, "tag": [f"t{i}" for i in ids]}), mode="append")


def test_each_version_holds_the_rows_its_commit_appended(tmp_path: Path) -> None:
    table = tmp_path / "t"
    batches = [[1, 2], [3], [4, 5, 6], [7]]
    for ids in batches:
        _append(table, ids)
    DeltaTable(str(table)).optimize.compact()  # version 4 rewrites every row
    _append(table, [8, 9])

    rows = rows_by_version(Location(str(table)), ["id"])

    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    assert {v: sorted(r["id"] for r in rows[v]) for v in rows} == {
        0: [1, 2], 1: [3], 2: [4, 5, 6], 3: [7], 4: [], 5: [8, 9]
    }  # fmt: skip
    assert [r["id"] for v in sorted(rows) for r in rows[v]] == list(range(1, 10))


def test_the_columns_asked_for_only(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _append(table, [1])
    assert rows_by_version(Location(str(table)), ["tag"]) == {0: [{"tag": "t1"}]}


def test_a_trimmed_log_is_read_from_the_soaks_copies_of_its_commits(tmp_path: Path) -> None:
    """The run's maintenance trims a table's log; the soak copies each commit as it
    appears, and the rows of every version are read from the copies after the run."""
    from bench.soak import copy_commits
    from eventlake.connectors.delta.log_checkpoints import trim_log, trim_start
    from eventlake.storage.local import LocalStorage

    lake, copies = tmp_path / "lake", tmp_path / "commits"
    table = lake / "silver" / "t"
    for n in range(6):
        _append(table, [n])
    assert copy_commits(lake, copies) == 6
    DeltaTable(str(table)).create_checkpoint()  # at version 5
    for n in range(6, 9):
        _append(table, [n])
    assert copy_commits(lake, copies) == 3  # the new ones only
    log = table / "_delta_log"
    names = sorted(p.name for p in log.iterdir())
    start = trim_start(names, keep_commits=2, keep_from=None)
    assert start == 5
    trim_log(LocalStorage(), Location(str(log)), names, start)

    trimmed = rows_by_version(Location(str(table)), ["id"])
    copied = rows_by_version(
        Location(str(table)), ["id"], Location(str(copies / "silver" / "t" / "_delta_log"))
    )

    assert sorted(trimmed) == [5, 6, 7, 8]
    assert {v: [r["id"] for r in copied[v]] for v in copied} == {n: [n] for n in range(9)}
