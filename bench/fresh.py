"""Run a bench module in a fresh process (its own JVM), for figures a warm one would skew."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def in_fresh_process(
    module: str, *args: str, title: str, show_stderr: bool = False
) -> dict[str, Any]:
    """``python -m module args`` from the repository: its last stdout line as JSON, or
    ``error`` (the tail of stderr) and a Markdown section under ``title`` saying so.
    ``show_stderr`` passes the child's stderr through (progress of a long run)."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=None if show_stderr else subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    if proc.returncode != 0:
        tail = (proc.stderr or "see the output above").strip().splitlines()[-3:]
        return {"error": tail, "markdown": [title, "", f"failed: {' / '.join(tail)}"]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
