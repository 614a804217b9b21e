"""Where eventlake keeps a project's state (broker data, the default lake and checkpoints)
and the user's caches (jars, the JVM's class-data archive)."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "EVENTLAKE_HOME"


def state_dir() -> Path:
    """The project's state folder (broker data, default lake and checkpoints)."""
    return Path(os.environ.get(STATE_DIR_ENV, ".eventlake")).absolute()


def user_cache_dir() -> Path:
    """eventlake's folder in the user's cache: ``$XDG_CACHE_HOME/eventlake`` (``~/.cache``
    by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).absolute() / "eventlake"
