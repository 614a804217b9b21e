"""A process's scratch folder: Spark's local files (shuffle and cached blocks, RocksDB's
working copies of state) and the driver JVM's temporary files, beside the project's state
instead of in /tmp, one folder per process.

Not /tmp, because a run lives for months: systems clean /tmp of files unused for days
(systemd-tmpfiles: 10 days) under a running Spark (SPARK-21942). And a process killed
(SIGKILL, the OOM killer) leaves its files behind there for good: the native libraries the
JVM unpacked (RocksDB's alone is 15 MB), blocks, copies of state.

Each process holds an exclusive ``flock`` on its folder's lock file for its life, and the
JVM it starts inherits it; a process claiming a folder first removes the folders whose
lock nobody holds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError

LOCK = ".lock"
#: A folder without its lock file this long after it changed is a start that died
#: between creating the folder and locking it.
UNLOCKED_GRACE_S = 3600.0


@dataclass(frozen=True)
class Scratch:
    """A claimed folder; the lock's descriptor stays open for the life of the process."""

    path: Path
    lock_fd: int
    #: Folders of processes gone that the claim removed.
    removed: tuple[Path, ...]

    @property
    def spark_dir(self) -> Path:
        """``spark.local.dir``."""
        return self.path / "spark"

    @property
    def java_tmp(self) -> Path:
        """The driver JVM's ``java.io.tmpdir``."""
        return self.path / "tmp"


def claim(root: Path) -> Scratch:
    """A new folder under ``root``, locked by this process, after removing the folders of
    processes gone. EL-STORAGE-001 when ``root`` cannot hold it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        removed = tuple(remove_abandoned(root))
        path = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
        scratch = Scratch(path, fd, removed)
        scratch.spark_dir.mkdir()
        scratch.java_tmp.mkdir()
    except OSError as exc:
        raise EventlakeError(
            ErrorCode.STORAGE_UNAVAILABLE,
            f"no scratch folder for Spark's and the JVM's files under {root} ({exc}).",
            expected="a folder on a local disk this user can write",
            fix="set spark.scratch_dir to one, or make this one writable",
        ) from exc
    return scratch


def remove_abandoned(root: Path) -> Iterator[Path]:
    """Remove each folder under ``root`` whose lock no process holds; yield it."""
    for folder in sorted(root.iterdir()):
        if folder.is_dir() and abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            yield folder


def abandoned(folder: Path) -> bool:
    """Whether no process holds ``folder``'s lock (nor is about to take it)."""
    try:
        fd = os.open(folder / LOCK, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime > UNLOCKED_GRACE_S
        except FileNotFoundError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # releases the lock taken just now: the folder's name is never reused
    return True
