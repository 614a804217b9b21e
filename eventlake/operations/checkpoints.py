"""What a flow's checkpoint holds (``eventlake checkpoint show``) and what resetting it
would reprocess (``eventlake checkpoint reset``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from eventlake.checkpoints import CheckpointLog, read_fingerprint, stream_id
from eventlake.context import FlowConfig
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.monitoring.lag import parse_kafka_offsets
from eventlake.operations.status import flow_lag, read_progress
from eventlake.storage import Location, filesystem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventlake.pipelines.api import FlowSpec


@dataclass(frozen=True)
class BatchEntry:
    batch: int
    #: Where each source ended in this batch, as Spark logged it, with its kind.
    sources: list[dict[str, Any]]
    watermark_ms: int
    committed: bool
    #: When its offsets were logged and when it committed (seconds since the epoch).
    planned_at: float | None
    committed_at: float | None


@dataclass
class CheckpointReport:
    flow: str
    path: str
    stream_id: str | None
    batches: list[BatchEntry]
    total_batches: int
    last_committed: int | None
    in_flight: int | None
    watermark_ms: int
    fingerprint: dict[str, Any] | None
    progress: dict[str, Any]
    state: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def source_kind(offset: Any) -> str:
    if parse_kafka_offsets(offset):
        return "kafka"
    if isinstance(offset, dict) and "reservoirId" in offset:
        return "delta"
    if isinstance(offset, dict) and "logOffset" in offset:
        return "files"
    return "other"


def require_checkpoint(config: FlowConfig) -> Location:
    cp = config.checkpoint
    if not CheckpointLog(cp).exists:
        raise EventlakeError(
            ErrorCode.CHECKPOINT_MISSING,
            f"flow '{config.query_name}' has no checkpoint at {cp}.",
        )
    return cp


def inspect_checkpoint(config: FlowConfig, *, last: int = 10) -> CheckpointReport:
    """The checkpoint's logs: its ``last`` batches, the in-flight one, the fingerprint."""
    cp = require_checkpoint(config)
    log = CheckpointLog(cp)
    planned, committed = log.planned, set(log.committed)
    fs = filesystem(cp)
    entries = []
    for batch in planned[-last:]:
        entry = log.entry(batch)
        entries.append(BatchEntry(
            batch=batch,
            sources=[{"kind": source_kind(s), "offset": s} for s in entry.sources],
            watermark_ms=entry.watermark_ms,
            committed=batch in committed,
            planned_at=fs.modified(cp / "offsets" / str(batch)),
            committed_at=fs.modified(cp / "commits" / str(batch)),
        ))  # fmt: skip
    try:
        stream: str | None = stream_id(cp)
    except EventlakeError:  # no metadata file: the query never started
        stream = None
    return CheckpointReport(
        flow=config.query_name,
        path=str(cp),
        stream_id=stream,
        batches=entries,
        total_batches=len(planned),
        last_committed=log.last_committed,
        in_flight=log.in_flight,
        watermark_ms=log.watermark_ms(planned[-1]) if planned else 0,
        fingerprint=read_fingerprint(cp),
        progress=read_progress(cp),
    )


def state_operators(
    spark: SparkSession, checkpoint: Location, *, count: bool = True
) -> list[dict[str, Any]]:
    """Each stateful operator of the checkpoint, via Spark's state data sources: name,
    store, partitions, batches, key and value schema, rows (with ``count``), bytes on
    disk."""
    fs = filesystem(checkpoint)
    if not fs.is_dir(checkpoint / "state"):
        return []
    # RocksDB reports to the state store coordinator, which the session creates with its
    # streaming query manager: outside a running query, ask for the manager first.
    _ = spark.streams.active
    meta = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    operators = []
    for row in meta:
        op = row.asDict()
        entry: dict[str, Any] = {
            "operator_id": op["operatorId"],
            "operator": op["operatorName"],
            "store": op["stateStoreName"],
            "partitions": op["numPartitions"],
            "min_batch": op["minBatchId"],
            "max_batch": op["maxBatchId"],
            "bytes_on_disk": fs.size(checkpoint / "state" / str(op["operatorId"])),
        }
        try:
            store = (
                spark.read.format("statestore")
                .option("operatorId", op["operatorId"])
                .option("storeName", op["stateStoreName"])
                .load(str(checkpoint))
            )
            entry["key_schema"] = store.schema["key"].dataType.simpleString()
            entry["value_schema"] = store.schema["value"].dataType.simpleString()
            if count:
                entry["rows"] = store.count()
        except Exception as exc:  # e.g. transformWithState needs its state variable named
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        operators.append(entry)
    return operators


def reprocessing(config: FlowConfig, spec: FlowSpec) -> list[str]:
    """What a fresh checkpoint of the flow would read again, one line per input."""
    from eventlake.connectors.delta import delta_row_count

    lines = []
    for inp in spec.all_inputs():
        topics = inp.topics(config)
        table = inp.table()
        if topics:
            start = _kafka_start(config)
            lags = flow_lag(config, spec, None) if start == "earliest" else []
            for topic in topics:
                mine = [lag for lag in lags if lag.topic == topic]
                if start != "earliest":
                    lines.append(f"kafka:{topic}: from {start}")
                    continue
                parts = ", ".join(f"p{lag.partition} {lag.records}" for lag in mine)
                total = sum(lag.records for lag in mine)
                lines.append(f"kafka:{topic}: {total} records from the earliest offset ({parts})")
        elif table is not None:
            rows = delta_row_count(config.table_path(*table))
            lines.append(f"delta:{table[0]}/{table[1]}: the whole table, {rows or 0} rows")
        else:
            lines.append(f"{inp.describe(config)}: everything it holds")
    return lines


def _kafka_start(config: FlowConfig) -> str:
    """Where a new checkpoint of the flow starts reading Kafka, as its params say."""
    p = config.params
    if p.starting_timestamp is not None:
        return f"starting_timestamp {p.starting_timestamp.isoformat()}"
    if p.starting_offsets_by_timestamp is not None:
        return f"starting_offsets_by_timestamp {p.starting_offsets_by_timestamp}"
    return (
        p.starting_offsets
        if p.starting_offsets == "earliest"
        else (f"starting_offsets {p.starting_offsets}")
    )
