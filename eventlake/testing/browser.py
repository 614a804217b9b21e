"""Headless Chromium (Debian's package) for tests of pages a run serves."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError

#: Flags for a closed network: no background connections, no first-run work.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
)  # fmt: skip


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise EventlakeError(ErrorCode.TOOLS_MISSING, "no chromium on PATH.")
    return found


def _run(url: str, extra: list[str], *, wait_ms: int, timeout: float) -> str:
    with tempfile.TemporaryDirectory(prefix="eventlake-chromium-") as profile:
        cmd = [_chromium(), *FLAGS, f"--user-data-dir={profile}",
               f"--virtual-time-budget={wait_ms}", *extra, url]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise EventlakeError(
            ErrorCode.QUERY_FAILED,
            f"chromium exited {done.returncode} loading {url}: {done.stderr[-500:]}",
        )
    return done.stdout


def rendered_dom(url: str, *, wait_ms: int = 5000, timeout: float = 90.0) -> str:
    """The page's DOM after its scripts ran for ``wait_ms`` of (virtual) time."""
    return _run(url, ["--dump-dom"], wait_ms=wait_ms, timeout=timeout)


def screenshot(
    url: str, path: Path, *, size: tuple[int, int] = (1400, 1000), wait_ms: int = 5000
) -> Path:
    """A PNG of the page after ``wait_ms`` of (virtual) time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _run(url, [f"--screenshot={path}", f"--window-size={size[0]},{size[1]}"],
         wait_ms=wait_ms, timeout=90.0)  # fmt: skip
    return path
