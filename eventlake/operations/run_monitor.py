"""The monitor of one run: keeps each flow's progress record beside its checkpoint, and
with a metrics port serves ``/metrics``, ``/api/status`` and the dashboard, polling
Kafka lag in the background."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from eventlake.config import Settings
from eventlake.connectors.delta import (
    EXPECTATIONS_TABLE,
    Maintenance,
    TableReader,
    sink_committed,
)
from eventlake.durations import duration_ms
from eventlake.errors import EventlakeError
from eventlake.monitoring import BatchProgress, ProgressListener
from eventlake.monitoring.lag import Offsets, PartitionLag
from eventlake.monitoring.metrics import PipelineMetrics
from eventlake.operations.status import (
    PROGRESS_FILE,
    flow_lag,
    pipeline_status,
    processed_offsets,
    read_progress,
    run_file,
    table_reports,
)
from eventlake.pipelines.plan import Plan, PlannedFlow, check_flow_names
from eventlake.secrets import mask_text
from eventlake.storage import Location, filesystem

log = logging.getLogger(__name__)

#: How often Kafka lag is read while a run serves metrics.
LAG_INTERVAL_SECONDS = 2.0
#: How long ``/api/status`` serves one computed record (it reads every checkpoint and
#: counts rows in the outputs), however many clients ask.
STATUS_SECONDS = 2.0
#: How often the tables' files and last maintenance are read again (seconds).
TABLES_SECONDS = 5.0


class RunMonitor:
    """Attach with :meth:`start` (before the queries start), :meth:`close` at the end.

    ``running`` tells which flows' queries are active (the runner's view).
    """

    def __init__(
        self,
        plan: Plan,
        listener: ProgressListener,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        running: Callable[[], set[str]] = set,
        lag_interval: float = LAG_INTERVAL_SECONDS,
    ) -> None:
        self.plan = plan
        self.settings: Settings = plan.flows[0].ctx.settings
        self.listener = listener
        self.port, self.host = port, host
        self.running = running
        self.lag_interval = lag_interval
        self.metrics = PipelineMetrics(plan.pipeline.name)
        self._flows: dict[str, PlannedFlow] = {f.query_name: f for f in plan.chosen()}
        self._offsets: dict[str, Offsets] = {}
        self._lags: dict[str, list[PartitionLag]] = {}
        #: Each flow's last progress record, read from its file once, then kept here.
        self._kept: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poked = threading.Event()
        self._server: Any = None
        self._threads: list[threading.Thread] = []
        #: Flows restarted after a failure that have not completed a batch since.
        self._restarting: set[str] = set()
        #: Per flow: restarts so far and the error of the last one.
        self._restarts: dict[str, dict[str, Any]] = {}
        self._status: tuple[float, dict[str, Any]] | None = None
        #: The tables' files and maintenance, read at most every TABLES_SECONDS.
        self._tables: tuple[float, list[dict[str, Any]]] | None = None
        self._reader = TableReader()
        self._status_lock = threading.Lock()

    def restarted(self, name: str, error: EventlakeError, delay: float) -> None:
        """The runner restarts flow ``name`` in ``delay`` seconds after ``error``."""
        flow = self._flows.get(name)
        if flow is None:
            return
        self._restarting.add(name)
        self.metrics.restarts.labels(self.pipeline, flow.spec.name, error.code).inc()
        count = self._restarts.get(name, {}).get("restarts", 0) + 1
        self._restarts[name] = {"restarts": count, "code": error.code,
                                "error": mask_text(error.what.splitlines()[0],
                                                   self.settings.secret_values),
                                "at": time.time(), "delay_seconds": round(delay, 3)}  # fmt: skip

    @property
    def pipeline(self) -> str:
        return self.plan.pipeline.name

    @property
    def url(self) -> str | None:
        """Where the dashboard is served (None: not served)."""
        if self._server is None:
            return None
        host = "127.0.0.1" if self.host == "0.0.0.0" else self.host
        host = "[::1]" if host == "::" else f"[{host}]" if ":" in host else host
        scheme = "https" if self.settings.metrics.tls_cert else "http"
        return f"{scheme}://{host}:{self.port}/"

    def start(self) -> None:
        for flow in self._flows.values():
            self.metrics.flow_started(flow.spec.name, flow.trigger)
        self.listener.observers.append(self.batch)
        if self.port is not None:
            from eventlake.operations.server import serve

            served = self.settings.metrics.model_copy(update={"host": self.host})
            self._server = serve(self, served, self.port)
            self.port = int(self._server.server_address[1])
        self._write_run_file()
        if self._server is None:
            return
        poller = threading.Thread(target=self._poll_lag, name="eventlake-lag", daemon=True)
        poller.start()
        self._threads.append(poller)

    def batch(self, p: BatchProgress) -> None:
        """One batch's progress (called on the listener's thread)."""
        flow = self._flows.get(p.query)
        if flow is None:
            return
        self._restarting.discard(p.query)  # a batch completed: it runs again
        self.metrics.batch(p)
        if p.expectations:
            record_expectations(flow, p)
        if p.kafka_offsets:
            with self._lock:
                self._offsets[flow.spec.name] = p.kafka_offsets
            self._poked.set()
        self._keep_progress(flow.checkpoint, p)

    def _keep_progress(self, checkpoint: Location, p: BatchProgress) -> None:
        """Write the batch's figures, with totals since the checkpoint was new, to the
        flow's progress file (``eventlake status`` of a stopped pipeline reads it)."""
        before = self._kept.get(p.query)
        if before is None:
            before = read_progress(checkpoint)
        record = {
            "batch_id": p.batch_id,
            "timestamp": p.timestamp,
            "batch_seconds": p.batch_duration_ms / 1000.0,
            "watermark": p.watermark,
            "state_rows": p.state_rows,
            "state_bytes": p.state_bytes,
            "input_rows": p.input_rows,
            "input_rows_per_second": p.input_rows_per_second,
            "processed_rows_per_second": p.processed_rows_per_second,
            "quarantined_rows_total": before.get("quarantined_rows_total", 0) + p.quarantined_rows,
            "dropped_by_watermark_total": before.get("dropped_by_watermark_total", 0)
            + p.dropped_by_watermark,
        }
        self._kept[p.query] = record
        fs = filesystem(checkpoint)
        if fs.is_dir(checkpoint):
            fs.write_text(checkpoint / PROGRESS_FILE, json.dumps(record))

    def refresh_lag(self) -> None:
        """Read every Kafka-reading flow's lag now (from its last batch's offsets, else
        its checkpoint) into the metrics."""
        for flow in self._flows.values():
            if not any(i.topics(flow.ctx) for i in flow.spec.all_inputs()):
                continue
            with self._lock:
                offsets = self._offsets.get(flow.spec.name)
            if offsets is None:
                offsets = processed_offsets(flow.checkpoint)
            lags = flow_lag(flow.ctx, flow.spec, offsets)
            with self._lock:
                self._lags[flow.spec.name] = lags
            self.metrics.lag(flow.spec.name, lags)

    def _poll_lag(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh_lag()
            except Exception:  # a broker hiccup: keep the last figures, try again
                log.exception("reading Kafka lag failed")
            self._poked.wait(self.lag_interval)
            self._poked.clear()
            # Batches can follow one another quickly: read at most every quarter second.
            self._stop.wait(0.25)

    def _update_running(self) -> set[str]:
        active = self.running()
        for name, flow in self._flows.items():
            self.metrics.up.labels(self.pipeline, flow.spec.name).set(int(name in active))
        return {self._flows[n].spec.name for n in active if n in self._flows}

    def exposition(self) -> bytes:
        self._update_running()
        self._table_reports()
        return self.metrics.exposition()

    def _table_reports(self) -> list[dict[str, Any]]:
        """The written tables' files and maintenance, read at most every
        :data:`TABLES_SECONDS` (each table's commits since the last look, with delta-rs)."""
        with self._lock:
            cached = self._tables
        if cached is not None and time.monotonic() - cached[0] < TABLES_SECONDS:
            reports = cached[1]
        else:
            reports = table_reports(self.plan.pipeline, self.settings, self._reader)
            self.metrics.tables(reports)
            with self._lock:
                self._tables = (time.monotonic(), reports)
        return self._with_failures(reports)

    def _with_failures(self, reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``reports`` with each table's failed maintenance in this run (the service's
        own count; a table's history holds only what succeeded), also to the metrics."""
        service = self.plan.run.find(Maintenance)
        failed = service.failures() if service is not None else {}
        self.metrics.maintenance_failures(failed)
        secrets = self.settings.secret_values
        for record in failed.values():
            if record["last"] is not None:
                record["last"]["error"] = mask_text(record["last"]["error"] or "", secrets)
        none: dict[str, Any] = {"counts": {}, "last": None}
        return [
            {**r, "maintenance_failures": failed.get(r["table"], none)["counts"],
             "last_failure": failed.get(r["table"], none)["last"]}
            for r in reports
        ]  # fmt: skip

    def status(self) -> dict[str, Any]:
        """The live status record (``eventlake status`` reads it from ``/api/status``):
        computed at most once per :data:`STATUS_SECONDS`, the restart fields always
        current."""
        with self._status_lock:
            if self._status is None or time.monotonic() - self._status[0] >= STATUS_SECONDS:
                self._status = (time.monotonic(), self._compute_status())
            record: dict[str, Any] = json.loads(json.dumps(self._status[1], default=str))
        for flow in record["flows"]:
            query = f"{self.pipeline}.{flow['flow']}"
            flow["restarting"] = query in self._restarting
            flow["last_restart"] = self._restarts.get(query)
        return record

    def _compute_status(self) -> dict[str, Any]:
        running = self._update_running()
        with self._lock:
            lags = {name: list(lags) for name, lags in self._lags.items()}
        record = pipeline_status(self.plan.pipeline, self.settings, running=running, lags=lags,
                                 tables=self._table_reports())  # fmt: skip
        record["source"] = f"metrics endpoint {self.host}:{self.port}"
        record["pid"] = os.getpid()
        record["time"] = time.time()
        return record

    def readiness(self) -> dict[str, Any]:
        """``/readyz``: ready when every flow's query runs (none failed or waiting to
        restart) and no partition of its Kafka input has waited longer than
        ``metrics.ready_lag``; else why not, by flow."""
        running = self._update_running()  # by flow name
        bound = duration_ms(self.settings.metrics.ready_lag) / 1000.0
        with self._lock:
            lags = {name: list(lags) for name, lags in self._lags.items()}
        waiting: dict[str, str] = {}
        for name, flow in self._flows.items():
            behind = max((lag.seconds for lag in lags.get(flow.spec.name, [])), default=0.0)
            if name in self._restarting:
                waiting[name] = "restarting after a failure (no batch completed since)"
            elif flow.spec.name not in running:
                waiting[name] = "not running (failed or stopped)"
            elif behind > bound:
                waiting[name] = f"{behind:.0f} s behind its input (ready_lag {bound:.0f} s)"
        return {"ready": not waiting, "flows": waiting}

    def lateness(self, flow: str) -> dict[str, Any]:
        """``eventlake lateness`` of one of the run's flows, on the run's session."""
        from eventlake.operations.lateness_report import measure_lateness

        name = flow.removeprefix(f"{self.pipeline}.")
        check_flow_names(self.plan.pipeline, [name])
        spark = self.plan.flows[0].ctx.spark
        bounds = self.settings.metrics
        found = measure_lateness(self.plan.pipeline, name, self.settings, spark,
                                 max_rows=bounds.lateness_max_rows,
                                 timeout=duration_ms(bounds.lateness_timeout) / 1000.0)  # fmt: skip
        return {"flow": f"{self.pipeline}.{name}", "watermarks": [w.as_dict() for w in found]}

    def _write_run_file(self) -> None:
        path = run_file(self.settings, self.pipeline)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "url": self.url,
                  "flows": [f.spec.name for f in self._flows.values()],
                  "started": time.time()}  # fmt: skip
        filesystem(path).write_text(path, json.dumps(record))

    def close(self) -> None:
        self._stop.set()
        self._poked.set()
        if self.batch in self.listener.observers:
            self.listener.observers.remove(self.batch)
        for thread in self._threads:
            thread.join(10)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        path = run_file(self.settings, self.pipeline)
        fs = filesystem(path)
        try:
            if json.loads(fs.read_text(path)).get("pid") == os.getpid():
                fs.delete(path)
        except (OSError, ValueError):
            pass


def record_expectations(flow: PlannedFlow, p: BatchProgress) -> None:
    """Append the batch's count per expectation to ``<lake.root>/_eventlake/expectations``
    (delta-rs, from the listener's thread: no Spark job). A replayed batch appears again
    with the same batch id."""
    import pyarrow as pa
    from deltalake import write_deltalake

    rules = {r.name: r for r in flow.spec.expectations}
    rows = [
        {"pipeline": flow.spec.pipeline, "flow": flow.spec.name, "batch_id": p.batch_id,
         "batch_time": p.timestamp, "expectation": name,
         "condition": rules[name].condition if name in rules else None,
         "on_violation": rules[name].on_violation if name in rules else None,
         "passed": passed, "failed": failed}
        for name, passed, failed in p.expectations
    ]  # fmt: skip
    schema = pa.schema([("pipeline", pa.string()), ("flow", pa.string()),
                        ("batch_id", pa.int64()), ("batch_time", pa.float64()),
                        ("expectation", pa.string()), ("condition", pa.string()),
                        ("on_violation", pa.string()), ("passed", pa.int64()),
                        ("failed", pa.int64())])  # fmt: skip
    path = flow.ctx.lake_root.joinpath(*EXPECTATIONS_TABLE)
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=schema), mode="append")
    sink_committed(flow.ctx, *EXPECTATIONS_TABLE)
