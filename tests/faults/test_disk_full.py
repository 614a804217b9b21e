"""Faults on real components: the disk that holds the lake and the checkpoints fills up
under a running flow (a small tmpfs the test mounts, filled by a ballast file). The flow
fails with EL-STORAGE-003, backs off and restarts by itself; once the ballast is removed it
resumes, and the Delta table ends with every record once. The recovery time, from the
space returning to the table holding every record, is printed."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eventlake.config import RestartSettings
from eventlake.kafka import produce
from eventlake.testing import read_delta, running_pipeline, settings_for, wait_until
from tests.faults.bronze import assert_each_once, bronze_pipeline, caught_up

pytestmark = pytest.mark.integration

SIZE_MB = 64


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB tmpfs mounted for this test (root can mount; CI runs as root)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(where)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.fail(f"this machine does not let the test mount a small filesystem "
                    f"({mounted.stderr.strip()}); the disk-full fault needs one")  # fmt: skip
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a ballast file until the filesystem refuses more (ENOSPC)."""
    ballast = disk / "ballast"
    refused: list[int | None] = []
    with ballast.open("wb", buffering=0) as out:
        for size in (1 << 20, 4096):  # whole megabytes, then the last partial blocks
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as err:
                refused.append(err.errno)
    assert refused == [errno.ENOSPC, errno.ENOSPC]
    return ballast


def test_the_lakes_disk_full_then_space_returns(
    small_disk: Path, bootstrap: str, make_topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    topic = make_topic(partitions=2, prefix="disk-full")
    backoff = RestartSettings(max_delay="5 seconds")
    settings = settings_for(small_disk, bootstrap, full_disk={"topic": topic}).model_copy(
        update={"restart": backoff}
    )
    table = small_disk / "lake" / "bronze" / "events"

    def offsets() -> list[tuple[int, int]]:
        try:
            rows = read_delta(table).select(["partition", "offset"]).to_pylist()
        except Exception:  # not created yet
            return []
        return sorted((r["partition"], r["offset"]) for r in rows)

    payload = "x" * 200
    produce(bootstrap, topic, [(f"k{i}", f"{i}:{payload}") for i in range(500)])
    with running_pipeline(bronze_pipeline("full_disk"), settings, trigger="1 second") as run:
        wait_until(lambda: len(offsets()) == 500, timeout=120,
                   what="the first records in bronze")  # fmt: skip
        ballast = fill(small_disk)
        produce(bootstrap, topic, [(f"k{i}", f"{i}:{payload}") for i in range(500, 1500)])

        def backing_off() -> dict[str, Any] | None:
            flow = {f["flow"]: f for f in run.status()["flows"]}["bronze"]
            last = flow["last_restart"]
            return last if last and last["code"] == "EL-STORAGE-003" else None

        failure = wait_until(backing_off, timeout=120,
                             what="the flow to fail on the full disk and back off")  # fmt: skip
        assert len(offsets()) == 500  # nothing more was written while the disk was full
        ballast.unlink()
        recovery = caught_up(lambda: len(offsets()), 1500, timeout=180,
                             what="every record in bronze once space returned")  # fmt: skip
    assert_each_once(offsets(), 1500)
    assert run.result is not None
    restarts = run.result.restarts["full_disk.bronze"]
    assert restarts >= 1
    assert os.statvfs(small_disk).f_bavail > 0
    with capsys.disabled():
        print(f"\n[fault] the lake's disk full: the flow failed with {failure['code']} "
              f"and backed off; caught up {recovery:.1f} s after space returned, "
              f"{restarts} restart(s) of the flow")  # fmt: skip
