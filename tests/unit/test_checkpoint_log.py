"""Reading a checkpoint's offsets and commits logs."""

from __future__ import annotations

from pathlib import Path

from eventlake.checkpoints import (
    FINGERPRINT,
    CheckpointLog,
    Fingerprint,
    read_fingerprint,
    write_fingerprint,
)


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


def test_a_later_start_records_only_what_a_flow_may_change(tmp_path: Path) -> None:
    first = Fingerprint("p.f", "kafka:t", "delta:silver/x", "append", ("dedupe",), ("ts 10",))
    write_fingerprint(tmp_path, first)
    assert read_fingerprint(tmp_path) == first.as_dict()
    later = Fingerprint("p.f", "kafka:u", "delta:silver/y", "update", (), ("ts 20",))
    write_fingerprint(tmp_path, later)
    assert read_fingerprint(tmp_path) == {
        "flow": "p.f",
        "source": "kafka:t",
        "sink": "delta:silver/y",
        "output_mode": "update",
        "stateful": ["dedupe"],
        "watermarks": ["ts 20"],
    }
    written = (tmp_path / FINGERPRINT).stat().st_mtime_ns
    write_fingerprint(tmp_path, later)  # nothing changed: the file is left as it is
    assert (tmp_path / FINGERPRINT).stat().st_mtime_ns == written


def test_only_sparks_temporary_files_of_an_unplanned_first_batch_are_discarded(
    tmp_path: Path,
) -> None:
    log = CheckpointLog(tmp_path)
    assert log.discard_unfinished_start() == []  # no checkpoint yet
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    temp = ".0.85072410-2bc8-4ac1-b20e-a42f180c06e2.tmp"
    for name in (temp, f".{temp}.crc", "0.bak", ".0.crc", ".0.notauuid.tmp"):
        (offsets / name).write_text("")
    assert sorted(log.discard_unfinished_start()) == sorted([temp, f".{temp}.crc"])
    assert sorted(p.name for p in offsets.iterdir()) == [".0.crc", ".0.notauuid.tmp", "0.bak"]
    # Once a batch is planned, Spark ignores such files, and so does eventlake.
    (offsets / temp.replace(".0.", ".1.")).write_text("")
    _log(tmp_path, "offsets", 0)
    assert log.discard_unfinished_start() == []
    assert (offsets / temp.replace(".0.", ".1.")).exists()
