"""Scratch folders: one per process, locked for its life; a claim removes the folders of
processes gone, never a live one's. Real processes hold and drop the locks."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.scratch import LOCK, UNLOCKED_GRACE_S, claim

HOLD = """
import sys, time
from pathlib import Path
from eventlake.scratch import claim
scratch = claim(Path(sys.argv[1]))
(scratch.java_tmp / "librocksdbjni.so").write_bytes(b"x" * 4096)
print(scratch.path, flush=True)
time.sleep(600)
"""


def holder(root: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process that claims a folder under ``root``, puts a file in it and waits."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_a_claim_is_locked_for_the_life_of_its_process(tmp_path: Path) -> None:
    scratch = claim(tmp_path)
    assert scratch.path.parent == tmp_path
    assert scratch.spark_dir.is_dir()
    assert scratch.java_tmp.is_dir()
    assert scratch.removed == ()
    other = os.open(scratch.path / LOCK, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
    # A second claim in the same process is a folder of its own; the first stays.
    second = claim(tmp_path)
    assert second.path != scratch.path
    assert scratch.path.is_dir()


def test_a_killed_process_folder_goes_at_the_next_claim_a_live_one_stays(tmp_path: Path) -> None:
    live, live_folder = holder(tmp_path)
    killed, killed_folder = holder(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert (killed_folder / "tmp" / "librocksdbjni.so").is_file()  # left behind
        mine = claim(tmp_path)
        assert mine.removed == (killed_folder,)
        assert not killed_folder.exists()
        assert (live_folder / "tmp" / "librocksdbjni.so").is_file()
        assert sorted(tmp_path.iterdir()) == sorted([live_folder, mine.path])
    finally:
        live.kill()
        live.wait(10)
    # Its process gone, the live one's folder goes too.
    assert claim(tmp_path).removed == (live_folder,)


def test_a_folder_without_its_lock_goes_only_once_it_is_old(tmp_path: Path) -> None:
    starting = tmp_path / "1-starting"  # a claim between its folder and its lock
    starting.mkdir()
    died = tmp_path / "2-died"  # a claim that died there, long ago
    died.mkdir()
    old = time.time() - UNLOCKED_GRACE_S - 60
    os.utime(died, (old, old))
    assert claim(tmp_path).removed == (died,)
    assert starting.is_dir()


def test_a_root_that_cannot_hold_a_folder_is_a_coded_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(EventlakeError) as caught:
        claim(blocked / "scratch")
    assert caught.value.code is ErrorCode.STORAGE_UNAVAILABLE
    assert "spark.scratch_dir" in str(caught.value)
