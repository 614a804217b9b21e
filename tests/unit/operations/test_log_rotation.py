"""The log file's rotation: copied aside and emptied in place, so a writer that holds it
open for appending (the driver JVM) goes on writing at its new start."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from pathlib import Path

from eventlake.operations.log_rotation import LogRotation, rotate, rotated
from eventlake.testing import wait_until

#: A second process holding the file open for appending, as the JVM does: writes a line
#: for each line it reads.
WRITER = """
import sys
with open(sys.argv[1], "ab", buffering=0) as out:
    for line in sys.stdin:
        out.write(line.encode())
        print("ok", flush=True)
"""


#: A second process appending lines on its own, as the JVM does (no thread of the test's
#: process, so the rotation never waits for it to let go of Python's lock): until stdin
#: closes; then prints the last line's number.
FREE_WRITER = """
import sys, threading
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
line = 0
with open(sys.argv[1], "ab", buffering=0) as out:
    out.write(b"x" * 100 + b"\\n")
    while not done.wait(0.001):
        out.write(f"line {line:06d} ".encode() + b"y" * 90 + b"\\n")
        line += 1
print(line - 1, flush=True)
"""


class Writer:
    def __init__(self, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip

    def write(self, line: str) -> None:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "ok\n"

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(10)


def test_a_writer_holding_the_file_open_writes_at_its_new_start(tmp_path: Path) -> None:
    log = tmp_path / "eventlake.log"
    writer = Writer(log)
    try:
        for i in range(100):
            writer.write(f"before {i}")
        before = log.read_bytes()
        assert rotate(log, keep=3)
        writer.write("after")
    finally:
        writer.close()
    assert rotated(log, 1).read_bytes() == before
    assert log.read_bytes() == b"after\n"  # not at the old offset, after a hole of zeros


def test_older_files_shift_and_the_oldest_beyond_keep_is_dropped(tmp_path: Path) -> None:
    log = tmp_path / "eventlake.log"
    for generation in range(5):
        log.write_text(f"generation {generation}\n")
        assert rotate(log, keep=3)
    assert log.read_text() == ""
    kept = {p.name: p.read_text() for p in tmp_path.iterdir() if p != log}
    assert kept == {
        "eventlake.log.1": "generation 4\n",
        "eventlake.log.2": "generation 3\n",
        "eventlake.log.3": "generation 2\n",
    }
    assert not rotate(tmp_path / "absent.log", keep=3)


def test_the_service_rotates_once_the_file_passes_its_size(tmp_path: Path) -> None:
    log = tmp_path / "eventlake.log"
    log.touch()
    service = LogRotation(log, max_bytes=2048, keep=2, check_seconds=0.05)
    service.start()
    writer = subprocess.Popen(
        [sys.executable, "-c", FREE_WRITER, str(log)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: service.rotations >= 3, timeout=60, interval=0.01,
                   what="three rotations")  # fmt: skip
        last, _ = writer.communicate("", timeout=60)  # stops it
        line = int(last) + 1
        wait_until(lambda: not log.exists() or log.stat().st_size <= 2048, timeout=10,
                   what="the log back under its size")  # fmt: skip
    finally:
        service.close()
        if writer.poll() is None:
            writer.kill()
    assert "eventlake-log-rotation" not in {t.name for t in threading.enumerate()}
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["eventlake.log", "eventlake.log.1", "eventlake.log.2"]
    for older in (rotated(log, 1), rotated(log, 2)):
        assert older.stat().st_size > 2048  # rotated once past its size, not before
    # The newest file and the two rotated ones hold the lines in order, up to the last; a
    # line written between a copy's last read and the truncation is the only one lost.
    numbers = [int(text.split()[1]) for p in (rotated(log, 2), rotated(log, 1), log)
               for text in p.read_text().splitlines() if text.startswith("line ")]  # fmt: skip
    assert numbers == sorted(set(numbers))
    assert numbers[-1] == line - 1
    gaps = [b - a for a, b in itertools.pairwise(numbers) if b - a > 1]
    assert len(gaps) <= 2
    assert all(gap == 2 for gap in gaps)
