"""Helpers for testing pipelines on real components; importable by users' own tests."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.processes import free_port as free_port  # re-exported for users

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from eventlake.config import Settings
    from eventlake.config.model import MetricsSettings
    from eventlake.monitoring.progress import ProgressListener
    from eventlake.pipelines import Pipeline, Registry
    from eventlake.pipelines.runner import RunResult
    from eventlake.storage import Location

T = TypeVar("T")


def unique_name(prefix: str = "t") -> str:
    """A name no other test uses: for topics, tables and checkpoint folders."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def resident_bytes(pid: int | str = "self", field: str = "VmRSS") -> int:
    """Process ``pid``'s resident bytes from ``/proc/<pid>/status`` (Linux): all
    (``VmRSS``), anonymous pages only (``RssAnon``) or pages of mapped files (``RssFile``:
    libraries, a class-data archive; the kernel can drop them)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no {field} in /proc/{pid}/status")


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Poll ``condition`` until it returns a truthy value, and return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise EventlakeError(
                ErrorCode.QUERY_TIMEOUT,
                f"{what} did not hold within {timeout:.0f}s.",
                fix="look at the query's progress and the component's log",
            )
        time.sleep(interval)


def read_delta(path: Location | Path | str) -> pa.Table:
    """Read a Delta table with delta-rs, independently of Spark (deletion vectors
    applied)."""
    from eventlake.connectors.delta import read_arrow

    return read_arrow(path)


def delta_version(path: Location | Path | str) -> int:
    """The latest committed version of a Delta table, read with delta-rs."""
    from eventlake.connectors.delta import open_delta_rs

    return int(open_delta_rs(path).version())


def codegen_compilations(spark: SparkSession) -> int:
    """Janino compiles of generated code in this session's JVM so far (Spark's own counter):
    a flow whose code stays the same compiles nothing after its first batches."""
    assert spark._jvm is not None
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
               .METRIC_COMPILATION_TIME().getCount())  # fmt: skip


@dataclass(frozen=True)
class ConsumedRecord:
    """A Kafka record as a plain consumer reads it: coordinates, text and timestamp."""

    partition: int
    offset: int
    key: str | None
    value: str | None
    #: The record's timestamp (producer or broker time, by the topic's setting), epoch ms.
    timestamp_ms: int


def consume_records(
    bootstrap: str, topic: str, *, committed_only: bool = False, timeout: float = 60.0
) -> list[ConsumedRecord]:
    """Every record now in ``topic``, read by assignment (no group, nothing committed) up
    to each partition's end; key and value as UTF-8 text. ``committed_only`` reads as a
    ``read_committed`` consumer: records of aborted or open transactions are left out."""
    from confluent_kafka import Consumer, TopicPartition

    from eventlake.kafka import topic_offsets

    ends = topic_offsets(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level":
                         "read_committed" if committed_only else "read_uncommitted"})  # fmt: skip
    parts = [TopicPartition(topic, p, 0) for p in ends]
    consumer.assign(parts)
    out: list[ConsumedRecord] = []

    def at_end() -> bool:  # by position: transaction markers take offsets too
        return all(tp.offset >= ends[tp.partition] for tp in consumer.position(parts))

    deadline = time.monotonic() + timeout
    try:
        while not at_end():
            if time.monotonic() >= deadline:
                raise EventlakeError(
                    ErrorCode.QUERY_TIMEOUT,
                    f"read {len(out)} records of '{topic}' but not to its end in {timeout:.0f}s.",
                    fix="look at the broker log; an open transaction holds read_committed back",
                )
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                partition, offset = msg.partition(), msg.offset()
                if msg.error() is None and partition is not None and offset is not None:
                    key, value = msg.key(), msg.value()
                    out.append(ConsumedRecord(
                        partition, offset, None if key is None else key.decode(),
                        None if value is None else value.decode(), msg.timestamp()[1],
                    ))  # fmt: skip
    finally:
        consumer.close()
    return out


def consume_topic(
    bootstrap: str, topic: str, *, committed_only: bool = False, timeout: float = 60.0
) -> list[tuple[str, str]]:
    """Every record now in ``topic`` as (key, value) text (a missing one as ""), as
    :func:`consume_records` reads them."""
    records = consume_records(bootstrap, topic, committed_only=committed_only, timeout=timeout)
    return [(r.key or "", r.value or "") for r in records]


def settings_for(
    root: Path,
    bootstrap: str | None = None,
    *,
    spark: dict[str, Any] | None = None,
    config: Path | None = None,
    examples: bool = False,
    **pipelines: dict[str, Any],
) -> Settings:
    """Settings for a test: lake and checkpoints under ``root``, the given broker, and a
    section per pipeline (``settings_for(tmp, bootstrap, orders={"topic": t})``).

    ``config`` starts from a project's ``eventlake.yaml`` (its ``project.modules`` and
    pipeline sections; the sections given here win); ``examples`` loads eventlake's
    example pipelines."""
    import yaml

    from eventlake.config.loader import settings_from_dict

    data: dict[str, Any] = yaml.safe_load(config.read_text()) or {} if config else {}
    sections = {**data.get("pipelines", {})}
    for name, params in pipelines.items():
        sections[name] = {**sections.get(name, {}), **params}
    project = {**data.get("project", {})}
    if examples:
        project["examples"] = True
    data.update({
        "lake": {**data.get("lake", {}), "root": str(root / "lake")},
        "checkpoints": {**data.get("checkpoints", {}), "root": str(root / "checkpoints")},
        "spark": spark or {"master": "local[2]"},
        "project": project,
        "pipelines": sections,
    })  # fmt: skip
    if bootstrap is not None:
        data["kafka"] = {**data.get("kafka", {}), "bootstrap_servers": bootstrap}
    settings = settings_from_dict(data)
    return settings.with_base_dir(config.parent) if config else settings


def run_available_now(
    pipeline: str | Pipeline,
    settings: Settings,
    *,
    flows: list[str] | None = None,
    registry: Registry | None = None,
) -> RunResult:
    """One validated available-now run of ``pipeline`` (or of ``flows``), as
    ``eventlake run --trigger available-now`` does."""
    from eventlake.run import run_pipeline

    return run_pipeline(pipeline, settings, trigger="available-now", flows=flows, registry=registry)


@dataclass
class LiveRun:
    """A pipeline running in a background thread (see :func:`running_pipeline`)."""

    #: Where its dashboard is served; ``/metrics`` and ``/api/status`` beside it.
    url: str
    stop: threading.Event
    result: RunResult | None = None
    error: BaseException | None = None
    #: The run's ``metrics`` settings: its token and certificate, for the requests here.
    access: MetricsSettings | None = None

    def metrics(self) -> dict[str, list[Any]]:
        """The run's ``/metrics`` parsed by prometheus_client: samples by family name."""
        return scrape_metrics(self.url + "metrics", self.access)

    def status(self) -> dict[str, Any]:
        """The run's ``/api/status`` record."""
        from eventlake.operations.status import fetch_status

        return fetch_status(self.url, self.access, timeout=30)


def scrape_metrics(url: str, access: MetricsSettings | None = None) -> dict[str, list[Any]]:
    """Prometheus text at ``url`` parsed with ``prometheus_client.parser``: the samples of
    each metric family, by family name (counters without their ``_total``)."""
    from prometheus_client.parser import text_string_to_metric_families

    from eventlake.operations.status import http_get

    text = http_get(url, access, timeout=30).decode()
    return {family.name: list(family.samples) for family in text_string_to_metric_families(text)}


@contextmanager
def listening(spark: SparkSession) -> Iterator[ProgressListener]:
    """A quiet :class:`ProgressListener` registered with ``spark`` for the block, then
    removed and closed; its totals and observers stay readable after the block."""
    from eventlake.monitoring.progress import ProgressListener

    listener = ProgressListener(show=False)
    spark.streams.addListener(listener)
    try:
        yield listener
    finally:
        spark.streams.removeListener(listener)
        listener.close()


@contextmanager
def running_pipeline(
    pipeline: str | Pipeline,
    settings: Settings,
    *,
    registry: Registry | None = None,
    flows: list[str] | None = None,
    trigger: str | None = None,
    timeout: float = 180.0,
) -> Iterator[LiveRun]:
    """Run ``pipeline`` in a thread with its metrics endpoint on a free port until the
    block ends, then stop it (between batches) and re-raise any failure of the run."""
    from eventlake.run import run_pipeline

    served: queue.Queue[str | None] = queue.Queue()
    run = LiveRun(url="", stop=threading.Event(), access=settings.metrics)

    def target() -> None:
        try:
            run.result = run_pipeline(
                pipeline, settings, registry=registry, flows=flows, trigger=trigger,
                stop=run.stop, metrics_port=0, on_serve=served.put,
            )  # fmt: skip
        except BaseException as exc:
            run.error = exc
        finally:
            served.put(None)

    thread = threading.Thread(target=target, name="eventlake-test-run", daemon=True)
    thread.start()
    url = served.get(timeout=timeout)
    if url is None:
        thread.join(timeout)
        raise run.error or RuntimeError("the run ended before serving its metrics")
    run.url = url
    try:
        yield run
    finally:
        run.stop.set()
        thread.join(timeout)
    if run.error is not None:
        raise run.error
