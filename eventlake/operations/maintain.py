"""`eventlake maintain`: the run's table maintenance on demand, for a schedule (cron, a
Kubernetes CronJob) or a pipeline that is stopped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlake.connectors.delta import Maintained, TableState, maintain_table, table_settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.operations.status import table_reports

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.config import Settings
    from eventlake.pipelines.api import Pipeline
    from eventlake.storage import Location


def readers_of(pipeline: Pipeline, settings: Settings, table: tuple[str, str]) -> list[Location]:
    """The checkpoints of the pipeline's flows that stream ``table``: VACUUM keeps what
    they may replay."""
    configs = pipeline.configs(settings)
    return [
        configs[spec.name].checkpoint
        for spec in pipeline.flows.values()
        if any(i.table() == table for i in spec.all_inputs())
    ]


def maintain_pipeline(
    pipeline: Pipeline,
    settings: Settings,
    spark: SparkSession,
    *,
    tables: list[str] | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> list[Maintained]:
    """Compact and vacuum the Delta tables ``pipeline`` writes (``tables``: only these
    ``layer/table`` names): as the run's service does, now; ``force`` compacts any table
    with two small files and vacuums at once."""
    reports = {r["table"]: r for r in table_reports(pipeline, settings)}
    unknown = sorted(set(tables or ()) - set(reports))
    if unknown:
        raise EventlakeError(
            ErrorCode.PIPELINE_NOT_FOUND,
            f"pipeline '{pipeline.name}' writes no table {', '.join(unknown)}.",
            expected=f"one of: {', '.join(reports)}",
            fix="name a table as `eventlake status` lists it (layer/table)",
        )
    ctx = next(iter(pipeline.configs(settings).values()))
    keys = {k: v for spec in pipeline.flows.values() for k, v in spec.output.layout_keys().items()}
    done = []
    for name in tables or list(reports):
        layer, table = name.split("/", 1)
        path = ctx.table_path(layer, table)
        state = TableState(str(path), name, table_settings(ctx, layer, table),
                           layout_key=keys.get((layer, table), ()))  # fmt: skip
        readers = readers_of(pipeline, settings, (layer, table))
        done.append(maintain_table(spark, state, readers=readers, force=force, dry_run=dry_run,
                                   checkpoints_root=settings.checkpoints.root))  # fmt: skip
    return done
