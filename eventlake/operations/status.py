"""Where each flow of a pipeline stands: from its checkpoint, the progress file the run
keeps beside it, the broker (lag) and its outputs (rows). Works on a stopped pipeline; a
running one serves the same record at ``/api/status`` with its live lag."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from eventlake.checkpoints import CheckpointLog
from eventlake.config import Settings
from eventlake.config.model import MetricsSettings
from eventlake.connectors.delta import (
    EXPECTATIONS_TABLE,
    TableReader,
    table_report,
    table_settings,
)
from eventlake.context import FlowConfig
from eventlake.monitoring.lag import Offsets, PartitionLag, kafka_lag, parse_kafka_offsets
from eventlake.pipelines.api import FlowSpec, Pipeline
from eventlake.pipelines.plan import dependency_order
from eventlake.secrets import masked
from eventlake.storage import Location, filesystem

#: Beside Spark's files in each flow's checkpoint: the last batch's progress.
PROGRESS_FILE = "eventlake-progress.json"
#: In ``<checkpoints.root>/<pipeline>/``: the running process and its metrics port.
RUN_FILE = "eventlake-run.json"


@dataclass
class FlowStatus:
    flow: str
    query: str
    level: int
    upstream: list[str]
    reads: str
    writes: str
    running: bool
    last_batch: int | None
    #: When the last batch committed (seconds since the epoch).
    last_commit: float | None
    in_flight: int | None
    watermark: str | None
    #: From the last batch's progress; None before the first batch.
    state_rows: int | None
    state_bytes: int | None
    batch_seconds: float | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    #: Since the checkpoint was new.
    quarantined_rows: int
    dropped_by_watermark: int
    lag: list[PartitionLag] = field(default_factory=list)
    #: Why the lag could not be read (the broker did not answer), else None.
    lag_error: str | None = None
    #: Rows each output holds now, by its description.
    outputs: dict[str, int | None] = field(default_factory=dict)

    @property
    def lag_records(self) -> int:
        return sum(lag.records for lag in self.lag)

    @property
    def lag_seconds(self) -> float:
        return max((lag.seconds for lag in self.lag), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["lag"] = [asdict(lag) for lag in self.lag]
        data["lag_records"] = self.lag_records
        data["lag_seconds"] = self.lag_seconds
        return data


def read_progress(checkpoint: Location) -> dict[str, Any]:
    """The progress record the last run kept in ``checkpoint`` ({} when none)."""
    path = checkpoint / PROGRESS_FILE
    try:
        data: dict[str, Any] = json.loads(filesystem(path).read_text(path))
    except (OSError, ValueError):
        return {}
    return data


def processed_offsets(checkpoint: Location) -> Offsets | None:
    """The Kafka offsets the flow's last committed batch ended at (None: no batch yet)."""
    log = CheckpointLog(checkpoint)
    batch = log.last_committed
    if batch is None:
        return None
    offsets: Offsets = {}
    for source in log.sources(batch):
        offsets.update(parse_kafka_offsets(source))
    return offsets


def flow_lag(config: FlowConfig, spec: FlowSpec, processed: Offsets | None) -> list[PartitionLag]:
    topics = [t for i in spec.all_inputs() for t in i.topics(config)]
    if not topics:
        return []
    start = config.params.starting_offsets
    return kafka_lag(config.settings.kafka, topics, processed, starting=start, timeout=5.0)


def flow_status(
    config: FlowConfig,
    spec: FlowSpec,
    level: int,
    upstream: tuple[str, ...],
    *,
    running: bool = False,
    lag: list[PartitionLag] | None = None,
) -> FlowStatus:
    """One flow's status; ``lag`` given (a running flow's, polled live) or read now."""
    cp = config.checkpoint
    log = CheckpointLog(cp)
    last = log.last_committed
    planned = log.planned
    progress = read_progress(cp)
    watermark_ms = log.watermark_ms(planned[-1]) if planned else 0
    lag_error = None
    if lag is None:
        try:
            lag = flow_lag(config, spec, processed_offsets(cp))
        except KafkaException as exc:
            lag, lag_error = [], str(exc.args[0] if exc.args else exc)
    committed_at = filesystem(cp).modified(cp / "commits" / str(last)) if last is not None else None
    return FlowStatus(
        flow=spec.name,
        query=spec.query_name,
        level=level,
        upstream=list(upstream),
        reads=spec.describe_inputs(config),
        writes=spec.output.describe(config),
        running=running,
        last_batch=last,
        last_commit=committed_at,
        in_flight=log.in_flight,
        watermark=iso_from_ms(watermark_ms) if watermark_ms else progress.get("watermark"),
        state_rows=progress.get("state_rows"),
        state_bytes=progress.get("state_bytes"),
        batch_seconds=progress.get("batch_seconds"),
        input_rows_per_second=progress.get("input_rows_per_second"),
        processed_rows_per_second=progress.get("processed_rows_per_second"),
        quarantined_rows=int(progress.get("quarantined_rows_total", 0)),
        dropped_by_watermark=int(progress.get("dropped_by_watermark_total", 0)),
        lag=lag,
        lag_error=lag_error,
        outputs=_output_rows(config, spec),
    )


def _output_rows(config: FlowConfig, spec: FlowSpec) -> dict[str, int | None]:
    """Rows in each output; None for one that cannot be read now (its server is down)."""
    try:
        return spec.output.count_rows(config)
    except (KafkaException, OSError):
        return dict.fromkeys(spec.output.describe(config).split(" + "))


def iso_from_ms(ms: int) -> str:
    """Milliseconds since the epoch as Spark prints a watermark (``...T00:10:00.000Z``)."""
    from datetime import datetime, timezone

    when = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def pipeline_status(
    pipeline: Pipeline,
    settings: Settings,
    *,
    running: set[str] | None = None,
    lags: dict[str, list[PartitionLag]] | None = None,
    tables: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The status record of every flow, in dependency order (``running``/``lags``: the
    live view of a run, by flow name), and of the tables they write (``tables``: as the
    caller last read them, else read now)."""
    configs = pipeline.configs(settings)
    flows = [
        flow_status(
            configs[spec.name], spec, level, ups,
            running=spec.name in (running or set()),
            lag=(lags or {}).get(spec.name),
        ).as_dict()
        for spec, level, ups in dependency_order(pipeline)
    ]  # fmt: skip
    written = tables if tables is not None else table_reports(pipeline, settings)
    record = {"pipeline": pipeline.name, "running": bool(running), "flows": flows,
              "tables": written}  # fmt: skip
    shown: dict[str, Any] = masked(record, settings.secret_values)
    return shown


def table_reports(
    pipeline: Pipeline, settings: Settings, reader: TableReader | None = None
) -> list[dict[str, Any]]:
    """Each Delta table the pipeline's flows write: files, bytes, small files, last
    compaction and VACUUM (:func:`table_report`, through a run's ``reader``); its late
    rows' table and the expectations event table once they exist."""
    configs = pipeline.configs(settings)
    seen: dict[str, dict[str, Any]] = {}
    for spec, _level, _ups in dependency_order(pipeline):
        ctx = configs[spec.name]
        declared = spec.output.tables()
        extra = [(declared[0][0], f"{declared[0][1]}_late")] if declared else []
        extra.append(EXPECTATIONS_TABLE)
        for layer, name in [*declared, *extra]:
            key, path = f"{layer}/{name}", ctx.table_path(layer, name)
            if key in seen or (
                (layer, name) not in declared and not filesystem(path).exists(path / "_delta_log")
            ):
                continue
            try:
                seen[key] = table_report(path, key, table_settings(ctx, layer, name), reader)
            except Exception as exc:  # a table being created, a broken log: shown, not fatal
                seen[key] = {"table": key, "path": str(path), "error": str(exc).split("\n")[0]}
    return list(seen.values())


def run_file(settings: Settings, pipeline: str) -> Location:
    return settings.checkpoints.root / pipeline / RUN_FILE


def http_get(url: str, metrics: MetricsSettings | None = None, *, timeout: float = 10.0) -> bytes:
    """GET ``url`` of a run's endpoint with ``metrics``' token, trusting its
    ``tls_cert`` (a self-signed certificate, or a chain up to a CA) beside the system's
    CAs."""
    import ssl
    import urllib.request

    request = urllib.request.Request(url)
    if metrics is not None and metrics.token is not None:
        request.add_header("Authorization", f"Bearer {metrics.token.get_secret_value()}")
    context = None
    if url.startswith("https:"):
        context = ssl.create_default_context()
        if metrics is not None and metrics.tls_cert is not None:
            context.load_verify_locations(cafile=str(metrics.tls_cert))
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        body: bytes = response.read()
    return body


def fetch_status(
    url: str, metrics: MetricsSettings | None = None, *, timeout: float = 10.0
) -> dict[str, Any]:
    """The status record a run serves at ``<url>api/status`` (``url``: its dashboard)."""
    data: dict[str, Any] = json.loads(http_get(url + "api/status", metrics, timeout=timeout))
    return data


def live_run(settings: Settings, pipeline: str) -> dict[str, Any] | None:
    """The run record of a live ``eventlake run`` of ``pipeline`` (pid, metrics port), or
    None when none runs (no record, or its process is gone)."""
    path = run_file(settings, pipeline)
    try:
        record: dict[str, Any] = json.loads(filesystem(path).read_text(path))
        if record.get("host", socket.gethostname()) != socket.gethostname():
            return record  # another machine's run: its process cannot be checked from here
        os.kill(int(record["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record
