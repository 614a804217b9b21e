"""Late rows kept: the rows a flow's watermark drops, written to ``<layer>/<table>_late``.

Spark counts the rows its stateful operators drop behind the watermark
(``numRowsDroppedByWatermark``) and keeps none of them. The :class:`LateKeeper` of a run
watches each flow's progress; after a batch with drops it replays that batch: a one-batch
query reads exactly the batch's input again (the batch's offsets, copied from the flow's
checkpoint into a scratch one, so Kafka, Delta and file inputs alike), runs the flow's
transform up to its ``withWatermark`` and keeps the rows Spark's operator judged late
against the watermark of the batch before (the one Spark drops by):

- de-duplication, ``transformWithState``, ``flatMapGroupsWithState``, and aggregations
  grouped by the event time itself: the row's event time is at or behind it;
- aggregations by ``window(...)``: a window the row falls in ended at or before it (one
  late row per dropped window; Spark counts dropped (window, key) groups);
- aggregations by ``session_window(...)`` with a fixed gap: event time plus the gap is.

Each late row is written with its batch id, event time, that watermark and the whole row
as JSON, in one Delta append tagged with the batch id: a second replay of the batch writes
nothing. A batch whose progress the keeper never saw (the run died first) is replayed at
the next start, so no batch is skipped.

Not kept: flows with further inputs (stream-stream joins drop by their join condition),
with more than one watermark, or declared with ``keep_late=False``.
"""

from __future__ import annotations

import json
import logging
import queue
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.checkpoints import CheckpointLog, stream_id
from eventlake.connectors.delta import sink_committed, write_once
from eventlake.context import FlowContext
from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.monitoring import BatchProgress, ProgressListener
from eventlake.monitoring.metrics import PipelineMetrics
from eventlake.monitoring.progress import INTERNAL_QUERY_PREFIX
from eventlake.pipelines.plan import PlannedFlow
from eventlake.pipelines.plan_tree import planned_operators
from eventlake.storage import Location, filesystem
from eventlake.triggers import ONCE, apply_trigger, is_micro_batch
from eventlake.watermarks import LATE, WINDOW, WatermarkCall, flag_late

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from rich.console import Console

log = logging.getLogger(__name__)

#: Beside a flow's checkpoint: the last batch whose late rows were looked for.
MARK_FILE = "eventlake-late.json"


def late_table(flow: PlannedFlow) -> tuple[str, str]:
    """``(layer, <table>_late)`` of the flow's first Delta table, else
    ``(_eventlake, <pipeline>_<flow>_late)``."""
    tables = flow.spec.output.tables()
    if tables:
        layer, table = tables[0]
        return layer, f"{table}_late"
    return "_eventlake", f"{flow.spec.pipeline}_{flow.spec.name}_late"


def not_kept(flow: PlannedFlow) -> str | None:
    """Why the flow's late rows are not kept (None: they are)."""
    if not flow.spec.keep_late:
        return "declared with keep_late=False"
    if not flow.spec.output.capabilities.late_rows:
        return f"{flow.spec.output.describe(flow.ctx)} keeps no late rows beside it"
    if not is_micro_batch(flow.trigger):
        return f"the {flow.trigger} trigger has no batches to replay"
    if flow.spec.output_mode == "complete":
        return "complete mode keeps every row: nothing is dropped late"
    tree = flow.tree()
    marks = tree.find("EventTimeWatermark")
    if not marks:
        return "it has no watermark"
    if flow.spec.inputs or len(marks) > 1:
        return "it reads more than one watermarked stream (joins drop by their condition)"
    if len(flow.ctx.watermarks.calls) != 1:
        return (
            "its watermark is set with DataFrame.withWatermark: declare it with "
            "ctx.with_watermark (or eventlake's windowed/deduplicated_events) to keep late rows"
        )
    operators = planned_operators(tree)
    if not operators:
        return "it keeps no state, so its watermark drops nothing"
    aggregates = tree.find("Aggregate")
    if [o for o in operators if o.operator == "stateStoreSave"] and not any(
        a.keys_watermarked() for a in aggregates
    ):
        return "its aggregation keys carry no event time, so Spark drops nothing late"
    return None


def judged(flow: PlannedFlow, mark: WatermarkCall, watermark_ms: int) -> DataFrame:
    """The rows of ``mark.before`` Spark drops when its late-events watermark is
    ``watermark_ms``, as late-table rows."""
    from pyspark.sql import functions as F

    from eventlake.transforms.heartbeat import HEARTBEAT

    df = mark.before
    if HEARTBEAT in df.columns:
        df = df.where(~F.col(HEARTBEAT)).drop(HEARTBEAT)
    limit = F.lit(watermark_ms)
    flagged = flag_late(mark, df, limit, f"flow '{flow.query_name}'")
    columns = [F.col(mark.column).cast("timestamp").alias("event_time"),
               F.timestamp_millis(limit).alias("watermark"),
               F.to_json(F.struct(*[F.col(c) for c in df.columns])).alias("row")]  # fmt: skip
    if WINDOW in flagged.columns:
        columns += [F.col(f"{WINDOW}.start").alias("window_start"),
                    F.col(f"{WINDOW}.end").alias("window_end")]  # fmt: skip
    return flagged.where(F.col(LATE)).select(*columns)


def seed_replay_checkpoint(checkpoint: Location, scratch: Path, batch: int) -> None:
    """A checkpoint in ``scratch`` whose next start re-runs exactly ``batch``, under a
    query id of its own."""
    fs = filesystem(checkpoint)
    for sub in ("offsets", "commits"):
        (scratch / sub).mkdir(parents=True)
    (scratch / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    copies = [f"offsets/{batch}"] + (
        [f"offsets/{batch - 1}", f"commits/{batch - 1}"] if batch else []
    )
    if fs.is_dir(checkpoint / "sources"):
        copies.append("sources")
    for rel in copies:
        fs.copy_to_local(checkpoint / rel, scratch / rel)


def _rebuilt(flow: PlannedFlow) -> tuple[FlowContext, WatermarkCall]:
    """The flow's transform built again on a fresh read of its input, with its watermark."""
    spec, spark = flow.spec, flow.ctx.spark
    ctx = FlowContext.of(flow.ctx, spark, trigger=flow.trigger, sources=(spec.input,))
    spec.transform(ctx, spec.input.read(ctx))
    calls = ctx.watermarks.calls
    if len(calls) != 1:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"flow '{flow.query_name}' declared {len(calls)} watermarks with "
            "ctx.with_watermark when rebuilt for its late rows.",
            expected="one watermark, as when it was planned",
            fix="declare the flow with keep_late=False",
        )
    return ctx, calls[0]


def keep_late_rows(flow: PlannedFlow, batch: int) -> int:
    """Replay ``batch`` of the flow's checkpoint and append the rows its watermark
    dropped to the flow's late table; returns how many were written now (0 when the
    table already had them)."""
    log_ = CheckpointLog(flow.checkpoint)
    if batch < 1 or batch not in log_.committed:
        return 0
    watermark_ms = log_.watermark_ms(batch - 1)
    if watermark_ms <= 0:
        return 0  # no watermark yet: nothing is late
    ctx, mark = _rebuilt(flow)
    late = judged(flow, mark, watermark_ms)
    layer, table = late_table(flow)
    path = ctx.table_path(layer, table)
    app_id = f"eventlake-late:{flow.query_name}:{stream_id(flow.checkpoint)}"
    written: list[int] = []

    def write(df: DataFrame, batch_id: int) -> None:
        from pyspark.sql import functions as F

        rows = df.select(F.lit(batch_id).cast("long").alias("batch_id"), "*").persist()
        try:
            count = rows.count()
            if count == 0:
                written.append(0)
                return
            # The flow planned the batch before this replay: its commit, if any, is later.
            wrote = write_once(
                rows, path, app_ids=(app_id,), batch_id=batch_id, checkpoint=flow.checkpoint
            )
            written.append(count if wrote else 0)
            if wrote:
                sink_committed(ctx, layer, table)
        finally:
            rows.unpersist()

    with tempfile.TemporaryDirectory(prefix="eventlake-late-") as scratch:
        seed_replay_checkpoint(flow.checkpoint, Path(scratch), batch)
        writer = (
            late.writeStream.foreachBatch(write)
            .queryName(f"{INTERNAL_QUERY_PREFIX}late.{flow.query_name}")
            .option("checkpointLocation", scratch)
        )
        query = apply_trigger(writer, ONCE).start()
        query.awaitTermination()
    return written[0] if written else 0


def read_late_mark(checkpoint: Location) -> int | None:
    """The last batch whose late rows were looked for (beside the checkpoint), if any."""
    mark = checkpoint / MARK_FILE
    try:
        return int(json.loads(filesystem(mark).read_text(mark))["checked"])
    except (OSError, ValueError, KeyError):
        return None


def write_late_mark(checkpoint: Location, batch: int) -> None:
    """Record ``batch`` as looked at (nothing when the checkpoint folder is gone)."""
    fs = filesystem(checkpoint)
    if fs.is_dir(checkpoint):
        fs.write_text(checkpoint / MARK_FILE, json.dumps({"checked": batch}))


class LateKeeper:
    """Keeps the late rows of a run's flows; :meth:`start` before the queries start,
    :meth:`close` after they end (it finishes the replays queued by then)."""

    def __init__(
        self,
        flows: list[PlannedFlow],
        listener: ProgressListener,
        console: Console | None = None,
        metrics: PipelineMetrics | None = None,
    ) -> None:
        from rich.console import Console

        self.flows = {f.query_name: f for f in flows if not_kept(f) is None}
        self.listener = listener
        self.metrics = metrics
        self.console = console or Console(stderr=True)
        #: Per flow, the last batch whose late rows were looked for.
        self.checked: dict[str, int] = {}
        #: Rows written per flow by this run (the tests and the summary read it).
        self.kept: dict[str, int] = {}
        self._queue: queue.SimpleQueue[tuple[str, int, int | None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="eventlake-late", daemon=True)

    def start(self) -> None:
        for name, flow in self.flows.items():
            last = CheckpointLog(flow.checkpoint).last_committed
            mark = read_late_mark(flow.checkpoint)
            # A checkpoint from before late rows were kept starts being watched from here.
            self.checked[name] = mark if mark is not None else (last if last is not None else -1)
            if last is not None and last > self.checked[name]:
                self._queue.put((name, last, None))  # batches a dead run never looked at
        self.listener.observers.append(self.batch)
        self._thread.start()

    def batch(self, p: BatchProgress) -> None:
        """One batch's progress (called on the listener's thread)."""
        if p.query in self.flows:
            self._queue.put((p.query, p.batch_id, p.dropped_by_watermark))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            name, batch, dropped = item
            flow = self.flows[name]
            # Batches between the last looked at and this one had no progress seen: replay.
            for unseen in range(self.checked[name] + 1, batch):
                self._keep(flow, unseen, None)
            if batch > self.checked[name]:
                if dropped is None or dropped > 0:
                    self._keep(flow, batch, dropped)
                self.checked[name] = batch
                write_late_mark(flow.checkpoint, batch)

    def _keep(self, flow: PlannedFlow, batch: int, dropped: int | None) -> None:
        layer, table = late_table(flow)
        started = time.monotonic()
        try:
            rows = keep_late_rows(flow, batch)
        except Exception as exc:  # a late-rows failure never stops the flow
            error = translate(exc, context=f"keeping the late rows of batch {batch}")
            log.exception("late rows of %s batch %s", flow.query_name, batch)
            self.console.print(
                f"[{flow.query_name}] batch {batch}: late rows NOT kept in {layer}/{table}: "
                f"{error.code}: {error.what}",
                highlight=False, soft_wrap=True, markup=False,
            )  # fmt: skip
            return
        self.kept[flow.query_name] = self.kept.get(flow.query_name, 0) + rows
        if self.metrics is not None:
            self.metrics.late_kept.labels(flow.spec.pipeline, flow.spec.name).inc(rows)
        log.info("%s batch %s: %s late rows kept in %.2fs", flow.query_name, batch, rows,
                 time.monotonic() - started)  # fmt: skip
        if rows:
            spark_count = f" (Spark dropped {dropped})" if dropped is not None else ""
            noun = "row" if rows == 1 else "rows"
            self.console.print(
                f"[{flow.query_name}] batch {batch}: {rows} late {noun} kept in "
                f"{layer}/{table}{spark_count}",
                highlight=False, soft_wrap=True, markup=False,
            )  # fmt: skip

    def close(self, timeout: float = 600.0) -> None:
        if self.batch in self.listener.observers:
            self.listener.observers.remove(self.batch)
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)
