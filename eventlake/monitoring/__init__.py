"""Progress of running queries: a non-blocking listener and a printer."""

from __future__ import annotations

from eventlake.monitoring.progress import BatchProgress, FlowTotals, ProgressListener

__all__ = ["BatchProgress", "FlowTotals", "ProgressListener"]
