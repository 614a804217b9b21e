"""Reading a checkpoint's offsets and commits logs."""

from __future__ import annotations

from pathlib import Path

from eventlake.checkpoints import CheckpointLog


def _log(root: Path, kind: str, *ids: int) -> None:
    (root / kind).mkdir(parents=True, exist_ok=True)
    for i in ids:
        (root / kind / str(i)).write_text("v1\n")
        (root / kind / f".{i}.crc").write_text("")


def test_in_flight_is_the_planned_batch_without_a_commit(tmp_path: Path) -> None:
    log = CheckpointLog(tmp_path)
    assert (log.planned, log.last_committed, log.in_flight) == ([], None, None)
    _log(tmp_path, "offsets", 0, 1, 2)
    _log(tmp_path, "commits", 0, 1)
    assert log.planned == [0, 1, 2]
    assert log.last_committed == 1
    assert log.in_flight == 2
    _log(tmp_path, "commits", 2)
    assert log.in_flight is None
