"""PostgreSQL: a real server from Debian's packages, run by eventlake for demos and tests."""

from __future__ import annotations

from eventlake.postgres.server import EmbeddedPostgres, find_bin_dir

__all__ = ["EmbeddedPostgres", "find_bin_dir"]
