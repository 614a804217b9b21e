"""Python's own warnings in a process eventlake set up: in its log file, not on the console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LIBRARY = """
import warnings
from pathlib import Path
from eventlake.session import configure_python_logging

configure_python_logging(Path({log!r}))
# What pyspark's toPandas says when a job it waits on is cancelled (a lateness measure
# past its time bound), Java stack trace and all.
warnings.warn("toPandas attempted Arrow optimization ... SPARK_JOB_CANCELLED", UserWarning)
print("done")
"""


def test_a_library_warning_goes_to_the_log_file_not_the_console(tmp_path: Path) -> None:
    log = tmp_path / "eventlake.log"
    ran = subprocess.run(
        [sys.executable, "-c", LIBRARY.format(log=str(log))],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "done"
    assert ran.stderr == ""
    kept = log.read_text()
    assert "WARNING py.warnings" in kept
    assert "SPARK_JOB_CANCELLED" in kept
