"""A query's checkpoint: its offsets and commit logs, its stream id, its plan fingerprint."""

from __future__ import annotations

from eventlake.checkpoints.fingerprint import (
    FINGERPRINT,
    Fingerprint,
    read_fingerprint,
    write_fingerprint,
)
from eventlake.checkpoints.log import (
    BatchRead,
    CheckpointLog,
    OffsetsEntry,
    ensure_stream_id,
    stream_id,
)

__all__ = [
    "FINGERPRINT",
    "BatchRead",
    "CheckpointLog",
    "Fingerprint",
    "OffsetsEntry",
    "ensure_stream_id",
    "read_fingerprint",
    "stream_id",
    "write_fingerprint",
]
