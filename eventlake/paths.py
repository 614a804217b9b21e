"""Where eventlake keeps a project's state: broker data, the default lake and checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "EVENTLAKE_HOME"


def state_dir() -> Path:
    """The project's state folder (broker data, default lake and checkpoints)."""
    return Path(os.environ.get(STATE_DIR_ENV, ".eventlake")).absolute()
