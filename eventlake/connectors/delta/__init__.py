"""Delta Lake, by concern: the connector classes (:mod:`.connector`), the marked-commit
protocol that makes them exactly-once (:mod:`.commits`), the run's log-checkpoint service
(:mod:`.log_checkpoints`), table maintenance (:mod:`.maintenance`) and table creation
(:mod:`.tables`)."""

from __future__ import annotations

from eventlake.connectors.delta.commits import (
    BATCH_MARK,
    batch_committed,
    batch_mark,
    marked_commits,
    newest_marked_batch,
    write_once,
)
from eventlake.connectors.delta.connector import (
    DeltaInput,
    DeltaOutput,
    MergeBuilder,
    MergeDelta,
    ToDelta,
)
from eventlake.connectors.delta.log_checkpoints import LogCheckpoints, log_checkpoints
from eventlake.connectors.delta.maintenance import (
    EXPECTATIONS_TABLE,
    Action,
    Maintained,
    Maintenance,
    TableFiles,
    TableReader,
    TableState,
    maintain_table,
    maintenance,
    sink_committed,
    table_files,
    table_report,
    table_settings,
)
from eventlake.connectors.delta.tables import (
    NO_INLINE_CHECKPOINTS,
    ddl_schema,
    delta_row_count,
    enable_change_feed,
    ensure_delta_table,
    open_delta_rs,
    read_arrow,
    sink_checkpoint_interval,
)

__all__ = [
    "BATCH_MARK",
    "EXPECTATIONS_TABLE",
    "NO_INLINE_CHECKPOINTS",
    "Action",
    "DeltaInput",
    "DeltaOutput",
    "LogCheckpoints",
    "Maintained",
    "Maintenance",
    "MergeBuilder",
    "MergeDelta",
    "TableFiles",
    "TableReader",
    "TableState",
    "ToDelta",
    "batch_committed",
    "batch_mark",
    "ddl_schema",
    "delta_row_count",
    "enable_change_feed",
    "ensure_delta_table",
    "log_checkpoints",
    "maintain_table",
    "maintenance",
    "marked_commits",
    "newest_marked_batch",
    "open_delta_rs",
    "read_arrow",
    "sink_checkpoint_interval",
    "sink_committed",
    "table_files",
    "table_report",
    "table_settings",
    "write_once",
]
