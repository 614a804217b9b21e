"""Running a planned pipeline.

Finite triggers (``available-now``, ``once``) run level by level: a level's flows run
together and the next level starts when they have all finished, so a downstream flow sees
everything its upstream wrote. Other triggers start every flow, upstream first, and run
until ``stop`` is set (SIGINT/SIGTERM in the CLI); each query is then stopped between
batches. A failed query stops the others and raises its translated error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.kafka.admin import list_topics
from eventlake.monitoring import FlowTotals, ProgressListener
from eventlake.pipelines.api import Pipeline
from eventlake.pipelines.context import FlowContext
from eventlake.pipelines.plan import Plan, PlannedFlow
from eventlake.triggers import AVAILABLE_NOW, ONCE

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

FINITE_TRIGGERS = (AVAILABLE_NOW, ONCE, "availablenow", "available_now")
POLL_SECONDS = 0.25


@dataclass
class RunResult:
    pipeline: str
    flows: dict[str, FlowTotals] = field(default_factory=dict)
    stopped_by_signal: bool = False


def is_finite(trigger: str) -> bool:
    return trigger.strip().lower() in FINITE_TRIGGERS


def preflight_topics(
    pipeline: Pipeline, contexts: list[FlowContext], flows: list[str] | None = None
) -> None:
    """Fail fast, before Spark starts: the broker answers and every topic exists."""
    needed: dict[str, list[str]] = {}
    for ctx in contexts:
        if flows and ctx.flow not in flows:
            continue
        spec = pipeline.flows[ctx.flow]
        for topic in spec.source.topics(ctx) + spec.sink.topics(ctx):
            needed.setdefault(topic, []).append(spec.query_name)
    if not needed:
        return
    kafka = contexts[0].settings.kafka
    existing = list_topics(kafka.bootstrap_servers, timeout=10.0, options=kafka.client_options())
    missing = {t: f for t, f in needed.items() if t not in existing}
    if missing:
        names = "; ".join(f"'{t}' (used by {', '.join(f)})" for t, f in sorted(missing.items()))
        first = sorted(missing)[0]
        raise EventlakeError(
            ErrorCode.KAFKA_TOPIC_MISSING,
            f"Kafka topic(s) missing on {kafka.bootstrap_servers}: {names}.",
            expected="every topic a flow reads or writes to exist before the run",
            fix=f"create it: `eventlake kafka create-topic {first} --partitions N "
            f"--bootstrap-servers {kafka.bootstrap_servers}`, or correct the topic in the config",
        )


def _all_ended(queries: list[StreamingQuery]) -> bool:
    return not any(q.isActive for q in queries)


class PipelineRunner:
    def __init__(self, plan: Plan, listener: ProgressListener) -> None:
        self.plan = plan
        self.listener = listener
        self.queries: dict[str, StreamingQuery] = {}

    def _start(self, flow: PlannedFlow) -> StreamingQuery:
        from eventlake.validation.rules import write_fingerprint

        try:
            write_fingerprint(flow)
            query = flow.sink.start(
                flow.df,
                query_name=flow.query_name,
                checkpoint=flow.checkpoint,
                trigger=flow.trigger,
                output_mode=flow.spec.output_mode,
            )
        except Exception as exc:
            self.stop_all()
            raise translate(exc, context=f"starting flow '{flow.query_name}'") from exc
        self.queries[flow.query_name] = query
        return query

    def _failure(self, name: str, query: StreamingQuery) -> EventlakeError | None:
        if query.isActive:
            return None
        error = query.exception()
        if error is None:
            return None
        totals = self.listener.snapshot().get(name)
        last = totals.last_batch_id if totals else None
        batch = f", after batch {last}" if last is not None else ", in its first batch"
        return translate(error, context=f"flow '{name}'{batch}")

    def _check(self) -> None:
        for name, query in self.queries.items():
            failure = self._failure(name, query)
            if failure is not None:
                self.stop_all()
                raise failure

    def run(self, stop: threading.Event | None = None) -> RunResult:
        stop = stop or threading.Event()
        finite = all(is_finite(f.trigger) for f in self.plan.flows)
        result = RunResult(self.plan.pipeline.name)
        try:
            for level in self.plan.levels():
                started = [self._start(flow) for flow in level]
                if finite:
                    self._wait(partial(_all_ended, started), stop)
                    if stop.is_set():
                        break
            if not finite:
                self._wait(lambda: False, stop)
            result.stopped_by_signal = stop.is_set()
        finally:
            self.stop_all(graceful=True)
        self._check()
        self._await_listener()
        result.flows = self.listener.snapshot()
        return result

    def _await_listener(self, timeout: float = 10.0) -> None:
        """Progress events reach the listener asynchronously: wait for each query's last."""
        last = {
            name: int(q.lastProgress["batchId"])
            for name, q in self.queries.items()
            if q.lastProgress is not None
        }

        def drained() -> bool:
            totals = self.listener.snapshot()
            return all(
                name in totals and (totals[name].last_batch_id or -1) >= batch
                for name, batch in last.items()
            )

        deadline = time.monotonic() + timeout
        while not drained() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _wait(self, done: Callable[[], bool], stop: threading.Event) -> None:
        while not stop.is_set():
            self._check()
            if done():
                return
            stop.wait(POLL_SECONDS)

    def stop_all(self, *, graceful: bool = False, timeout: float = 60.0) -> None:
        """Stop every query; graceful waits (bounded) for each to be between batches."""
        for query in self.queries.values():
            if not query.isActive:
                continue
            if graceful:
                deadline = time.monotonic() + timeout
                while query.isActive and query.status.get("isTriggerActive"):
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            query.stop()


def run_plan(
    plan: Plan,
    *,
    stop: threading.Event | None = None,
    listener: ProgressListener | None = None,
) -> RunResult:
    """Run ``plan`` with a progress listener registered for the duration of the run."""
    spark = plan.flows[0].ctx.spark
    own = listener is None
    listener = listener or ProgressListener()
    spark.streams.addListener(listener)
    try:
        return PipelineRunner(plan, listener).run(stop)
    finally:
        spark.streams.removeListener(listener)
        if own:
            listener.close()
