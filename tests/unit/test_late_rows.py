"""The late keeper's bookkeeping: the scratch checkpoint that replays one batch, the mark
of the last batch looked at, and a session gap read from the grouping column."""

from __future__ import annotations

import json
from pathlib import Path

from eventlake.operations.late_rows import (
    MARK_FILE,
    read_late_mark,
    seed_replay_checkpoint,
    write_late_mark,
)
from eventlake.storage import Location
from eventlake.watermarks import SESSION_WINDOW, WatermarkCall, sliding


def _checkpoint(root: Path, planned: int, committed: int) -> Path:
    for batch in range(planned + 1):
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "offsets" / str(batch)).write_text(f'v1\n{{}}\n{{"t": {{"0": {batch}}}}}')
    for batch in range(committed + 1):
        (root / "commits").mkdir(parents=True, exist_ok=True)
        (root / "commits" / str(batch)).write_text("v1\n{}")
    (root / "sources" / "0").mkdir(parents=True)
    (root / "sources" / "0" / "0").write_text('v1\n{"t": {"0": 0}}')
    (root / "metadata").write_text('{"id": "q"}')
    return root


def test_seed_holds_the_batch_its_predecessor_and_the_sources_only(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp", planned=4, committed=4)
    scratch = tmp_path / "scratch"
    seed_replay_checkpoint(Location(checkpoint), scratch, 3)
    assert sorted(p.name for p in (scratch / "offsets").iterdir()) == ["2", "3"]
    assert sorted(p.name for p in (scratch / "commits").iterdir()) == ["2"]
    assert (scratch / "offsets" / "3").read_text() == (checkpoint / "offsets" / "3").read_text()
    assert (scratch / "sources" / "0" / "0").is_file()
    # A query id of its own (Spark refuses logs without one).
    query_id = json.loads((scratch / "metadata").read_text())["id"]
    assert query_id != "q"
    assert len(query_id) == 36


def test_seed_of_the_first_batch_has_no_commit(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp", planned=1, committed=1)
    scratch = tmp_path / "scratch"
    seed_replay_checkpoint(Location(checkpoint), scratch, 0)
    assert [p.name for p in (scratch / "offsets").iterdir()] == ["0"]
    assert not any((scratch / "commits").iterdir())


def test_mark_round_trip_and_absent(tmp_path: Path) -> None:
    assert read_late_mark(Location(tmp_path)) is None
    write_late_mark(Location(tmp_path), 7)
    assert json.loads((tmp_path / MARK_FILE).read_text()) == {"checked": 7}
    assert read_late_mark(Location(tmp_path)) == 7
    write_late_mark(Location(tmp_path / "missing"), 3)  # no checkpoint folder: nothing written
    assert not (tmp_path / "missing").exists()


def test_session_gap_is_read_from_the_grouping_column() -> None:
    found = SESSION_WINDOW.match("session_window(ts, '3 minutes') AS session")
    assert found is not None
    assert (found.group("col"), found.group("gap").strip()) == ("ts", "3 minutes")
    assert (
        SESSION_WINDOW.match("session_window(ts, CASE WHEN (user = a) THEN 1 minute END)") is None
    )


def test_sliding_windows_are_told_from_tumbling_ones() -> None:
    def mark(*grouping: str) -> WatermarkCall:
        return WatermarkCall(None, "ts", "5 minutes", None, grouping)  # type: ignore[arg-type]

    assert sliding(mark("window(ts, '10 minutes', '5 minutes', '0 second')", "user"))
    assert not sliding(mark("window(ts, '10 minutes', '10 minutes', '0 second')", "user"))
    assert not sliding(mark("session_window(ts, '3 minutes') AS session", "user"))
    assert not sliding(mark("user"))
