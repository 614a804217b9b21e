"""Reading a query's checkpoint: which batches were planned and which committed."""

from __future__ import annotations

from eventlake.checkpoints.log import CheckpointLog

__all__ = ["CheckpointLog"]
