"""Arbitrary state with Spark 4's ``transformWithState``: processors and their helpers."""

from __future__ import annotations

from eventlake.state.dedup import drop_duplicates_within_watermark
from eventlake.state.sessions import (
    SESSION_OUTPUT,
    Session,
    SessionProcessor,
    merge_sessions,
    sessions_with_state,
)

__all__ = [
    "SESSION_OUTPUT",
    "Session",
    "SessionProcessor",
    "drop_duplicates_within_watermark",
    "merge_sessions",
    "sessions_with_state",
]
