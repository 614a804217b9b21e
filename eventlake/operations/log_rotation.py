"""The run's log file kept to a size: a run that lasts a year must not fill its disk.

The driver JVM writes the log through a descriptor of its own (its stdout and stderr,
opened for appending when it started), as do the Python workers it starts and Python's
logging. A file renamed under them would go on growing under its new name, so a rotation
copies the file to ``<log>.1`` (the older ones shifted to ``.2``...) and then truncates
it: every writer appends, so each goes on writing at the file's new end (as logrotate's
``copytruncate``). Lines written between the copy's last read and the truncation are
lost: a few microseconds' worth.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

log = logging.getLogger(__name__)

#: How often the file's size is looked at (seconds).
CHECK_SECONDS = 10.0
_CHUNK = 1024 * 1024


def rotated(path: Path, index: int) -> Path:
    """The ``index``-th older file of the log at ``path`` (``<log>.1`` the newest)."""
    return path.with_name(f"{path.name}.{index}")


def rotate(path: Path, keep: int) -> bool:
    """Move what ``path`` holds to ``<path>.1`` (older files shifted up, the ``keep``-th
    dropped) and empty it in place; False when there is no file."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    for index in range(keep, 1, -1):
        older = rotated(path, index - 1)
        if older.exists():
            older.replace(rotated(path, index))
    copy = rotated(path, 1)
    with path.open("rb") as source, copy.open("wb") as target:
        shutil.copyfileobj(source, target, _CHUNK)
        os.truncate(path, 0)
    log.info("log file rotated at %d bytes into %s", size, copy)
    return True


class LogRotation:
    """A run's service: rotates the log file at ``path`` once it passes ``max_bytes``,
    keeping ``keep`` older files beside it."""

    def __init__(
        self, path: Path, max_bytes: int, keep: int, *, check_seconds: float = CHECK_SECONDS
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.keep = keep
        self.check_seconds = check_seconds
        self.rotations = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="eventlake-log-rotation",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def rotate_if_due(self) -> bool:
        """Rotate when the file has passed ``max_bytes``; True when it did."""
        try:
            due = self.path.stat().st_size > self.max_bytes
        except FileNotFoundError:
            return False
        if due and rotate(self.path, self.keep):
            self.rotations += 1
            return True
        return False

    def _run(self) -> None:
        while True:
            try:
                self.rotate_if_due()
            except OSError as e:  # a full disk or a removed folder: tried again later
                log.warning("cannot rotate the log file %s: %s", self.path, e)
            if self._stop.wait(self.check_seconds):
                return

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.check_seconds)
