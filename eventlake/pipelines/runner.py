"""Running a planned pipeline.

Finite triggers (``available-now``, ``once``) run level by level: a level's flows run
together and the next level starts when they have all finished, so a downstream flow sees
everything its upstream wrote. Other triggers start every flow, upstream first, and run
until ``stop`` is set (SIGINT/SIGTERM in the CLI); each query is then stopped between
batches.

A failed query's error is translated; unless its recovery is fatal, the pipeline's restart
strategy (:mod:`eventlake.pipelines.restarts`) restarts the flow from its checkpoint after
a delay, its output closed and opened again, while the other flows keep running. When the
strategy gives up, or the error is fatal, every other query stops between batches and the
error is raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from eventlake.checkpoints import CheckpointLog, write_fingerprint
from eventlake.context import FlowConfig
from eventlake.errors import ErrorCode, EventlakeError, Recovery, interrupted, translate
from eventlake.kafka.admin import list_topics
from eventlake.monitoring import FlowTotals, ProgressListener
from eventlake.pipelines.api import Pipeline
from eventlake.pipelines.plan import Plan, PlannedFlow, trigger_of
from eventlake.pipelines.restarts import RestartPolicy
from eventlake.secrets import mask_text
from eventlake.triggers import ONCE, is_finite, is_micro_batch

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from rich.console import Console

    from eventlake.scope import RunScope

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25


@dataclass
class RunResult:
    """What a run did: per flow (by query name) its batches, rows and late drops."""

    plan: Plan
    flows: dict[str, FlowTotals] = field(default_factory=dict)
    stopped_by_signal: bool = False
    #: Late rows written per flow by this run (``eventlake.operations.late_rows``).
    late_rows_kept: dict[str, int] = field(default_factory=dict)
    #: Restarts per flow (flows that never failed are left out).
    restarts: dict[str, int] = field(default_factory=dict)

    @property
    def pipeline(self) -> str:
        return self.plan.pipeline.name


def preflight_topics(
    pipeline: Pipeline, configs: dict[str, FlowConfig], flows: list[str] | None = None
) -> None:
    """Fail fast, before Spark starts: the broker answers and every topic exists."""
    needed: dict[str, list[str]] = {}
    for name, config in configs.items():
        if flows and name not in flows:
            continue
        spec = pipeline.flows[name]
        read = [t for i in spec.all_inputs() for t in i.topics(config)]
        for topic in read + spec.output.topics(config):
            needed.setdefault(topic, []).append(spec.query_name)
    if not needed:
        return
    kafka = next(iter(configs.values())).settings.kafka
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


def preflight_inputs(
    pipeline: Pipeline,
    configs: dict[str, FlowConfig],
    run: RunScope,
    flows: list[str] | None = None,
    trigger: str | None = None,
) -> None:
    """Each input of the flows run asks what its read will need (a Kafka topic's record
    size, its partitions) while the JVM starts, and keeps the answers in ``run``."""
    for name, config in configs.items():
        if flows and name not in flows:
            continue
        spec = pipeline.flows[name]
        for source in spec.all_inputs():
            source.preflight(config, trigger_of(spec, config, trigger), run)


#: The local property naming a job's scheduler pool; the query's thread inherits it.
SCHEDULER_POOL = "spark.scheduler.pool"


def _start_query(flow: PlannedFlow, trigger: str) -> StreamingQuery:
    """Open the flow's output and start its query (the output is closed again when the
    query cannot start). The query's jobs go to a scheduler pool named after it: under
    ``spark.scheduler.mode=FAIR`` the flows share the cores instead of queueing their
    jobs one behind another (FIFO, Spark's default, ignores pools)."""
    discarded = CheckpointLog(flow.checkpoint).discard_unfinished_start()
    if discarded:
        log.warning(
            "%s: deleted %s, left in its checkpoint's offsets by a run killed while it "
            "planned its first batch", flow.query_name, ", ".join(discarded),
        )  # fmt: skip
    output = flow.spec.output
    output.open(flow.ctx)
    context = flow.ctx.spark.sparkContext
    context.setLocalProperty(SCHEDULER_POOL, flow.query_name)
    try:
        return output.start(flow.df, flow.ctx, trigger=trigger, output_mode=flow.spec.output_mode)
    except BaseException:
        output.close(flow.ctx)
        raise
    finally:
        context.setLocalProperty(SCHEDULER_POOL, None)  # type: ignore[arg-type]


#: Called with the flow's query name, the error it failed with, the restart's number and
#: the delay before it (seconds).
OnRestart = Callable[[str, EventlakeError, int, float], None]


class PipelineRunner:
    """Runs a plan's queries; ``on_restart`` hears of each restart, ``console`` shows it."""

    def __init__(
        self, plan: Plan, listener: ProgressListener, *,
        console: Console | None = None, on_restart: OnRestart | None = None,
    ) -> None:  # fmt: skip
        from rich.console import Console

        self.plan = plan
        self.listener = listener
        self.console = console or Console(stderr=True)
        self.on_restart = on_restart
        self.queries: dict[str, StreamingQuery] = {}
        #: Flows waiting to restart, by query name: when (monotonic seconds).
        self.pending: dict[str, float] = {}
        self.policies: dict[str, RestartPolicy] = {}
        self._flows = {f.query_name: f for f in plan.flows}
        self._stopping = False

    def _policy(self, flow: PlannedFlow) -> RestartPolicy:
        if flow.query_name not in self.policies:
            settings = flow.ctx.params.restart or flow.ctx.settings.restart
            self.policies[flow.query_name] = RestartPolicy(settings, is_finite(flow.trigger))
        return self.policies[flow.query_name]

    def restarts(self) -> dict[str, int]:
        """Restarts per flow so far."""
        return {name: p.restarts for name, p in self.policies.items() if p.restarts}

    def _start(self, flow: PlannedFlow) -> StreamingQuery:
        self.plan.run.failures.take(flow.query_name)  # one an earlier start left
        try:
            write_fingerprint(flow.checkpoint, flow.fingerprint())
            query = _start_query(flow, flow.trigger)
        except Exception as exc:
            self.stop_all()
            raise translate(exc, context=f"starting flow '{flow.query_name}'") from exc
        self.queries[flow.query_name] = query
        return query

    def _failure(self, name: str, query: StreamingQuery) -> EventlakeError | None:
        if query.isActive:
            return None
        # A stop interrupts a running batch function too; only a failed query reports it.
        recorded = self.plan.run.failures.take(name)
        failed = _query_exception(query)
        if failed is None:
            return None
        error = recorded or failed
        if self._stopping and interrupted(error):
            # The run's own stop cut it short (a query still initialising, or a batch past
            # the graceful wait): not a failure; _finish_in_flight completes its batch.
            log.info("%s: interrupted by the run's stop", name)
            return None
        totals = self.listener.snapshot().get(name)
        last = totals.last_batch_id if totals else None
        batch = f", after batch {last}" if last is not None else ", in the run's first batch"
        return translate(error, context=f"flow '{name}'{batch}", in_query=recorded is not None)

    def _check(self) -> None:
        now = time.monotonic()
        for name, query in list(self.queries.items()):
            if name in self.pending:
                continue
            failure = self._failure(name, query)
            if failure is not None:
                self._failed(name, failure, now)
        for name, due in list(self.pending.items()):
            if now >= due:
                self._restart(name)

    def _failed(self, name: str, failure: EventlakeError, now: float) -> None:
        """Schedule the failed flow's restart, or stop the run with ``failure``."""
        flow = self._flows[name]
        flow.spec.output.close(flow.ctx)
        policy = self._policy(flow)
        fatal = failure.recovery is Recovery.FATAL
        delay = None if fatal or self._stopping else policy.next_delay(now)
        if delay is None:
            if not fatal and policy.restarts:
                failure.what += f" (after {policy.restarts} restarts)"
            self.stop_all(graceful=True)
            raise failure
        self.pending[name] = now + delay
        secrets = flow.ctx.settings.secret_values
        self.console.print(
            mask_text(f"[{name}] failed: {failure.code} {failure.what.splitlines()[0]}; "
                      f"restart {policy.restarts} in {delay:.1f} s ({failure.recovery} error)",
                      secrets),
            highlight=False, soft_wrap=True, markup=False,
        )  # fmt: skip
        log.warning("%s failed (%s); restart %d in %.1fs", name,
                    mask_text(failure.render(), secrets), policy.restarts, delay)  # fmt: skip
        if self.on_restart is not None:
            self.on_restart(name, failure, policy.restarts, delay)

    def _restart(self, name: str) -> None:
        """Start a failed flow again from its checkpoint (a start that fails counts as a
        failure of the flow)."""
        del self.pending[name]
        flow = self._flows[name]
        self.plan.run.failures.take(name)
        try:
            self.queries[name] = _start_query(flow, flow.trigger)
        except Exception as exc:
            error = translate(exc, context=f"restarting flow '{name}'")
            self._failed(name, error, time.monotonic())

    def run(self, stop: threading.Event | None = None) -> RunResult:
        stop = stop or threading.Event()
        finite = all(is_finite(f.trigger) for f in self.plan.chosen())
        result = RunResult(self.plan)
        try:
            for level in self.plan.levels():
                for flow in level:
                    self._start(flow)
                if finite:
                    names = [flow.query_name for flow in level]
                    self._wait(partial(self._finished, names), stop)
                    if stop.is_set():
                        break
            if not finite:
                self._wait(lambda: False, stop)
            result.stopped_by_signal = stop.is_set()
        finally:
            self._stopping = True
            self.stop_all(graceful=True)
        self._check()
        self._finish_in_flight()
        self._await_listener()
        result.flows = self.listener.snapshot()
        result.restarts = self.restarts()
        return result

    def _finished(self, names: list[str]) -> bool:
        """Whether each of ``names`` ended and none waits to restart."""
        return not any(n in self.pending or self.queries[n].isActive for n in names)

    def _finish_in_flight(self, timeout: int = 300) -> None:
        """Re-run, once, each batch a stop cut short, so every flow ends on a commit.

        The re-run takes exactly the batch's logged offsets (Spark replays an uncommitted
        batch before planning a new one) and the outputs are idempotent per batch, so this
        is the same batch the next start would replay, done now instead.
        """
        for flow in self.plan.flows:
            if flow.query_name not in self.queries or not is_micro_batch(flow.trigger):
                continue
            if flow.query_name in self.pending:
                continue  # it failed: its next start replays the batch
            if CheckpointLog(flow.checkpoint).in_flight is None:
                continue
            query = _start_query(flow, ONCE)
            self.queries[flow.query_name] = query
            try:
                ended = query.awaitTermination(timeout)
            except Exception:  # a failure: _check reports it translated
                ended = True
            if not ended:
                query.stop()
            flow.spec.output.close(flow.ctx)
            self._check()

    def _await_listener(self, timeout: float = 10.0) -> None:
        """Progress events reach the listener asynchronously: wait for each query's last
        batch that ran. A trigger that found nothing to run is in ``lastProgress`` too,
        but Spark does not post it as a progress event."""
        last: dict[str, int] = {}
        for name, query in self.queries.items():
            progress = query.lastProgress  # a py4j call and a JSON parse: asked once
            if progress is not None and ran_a_batch(progress):
                last[name] = int(progress["batchId"])

        deadline = time.monotonic() + timeout
        while not caught_up(last, self.listener.snapshot()) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _wait(self, done: Callable[[], bool], stop: threading.Event) -> None:
        while not stop.is_set():
            self._check()
            if done():
                return
            stop.wait(POLL_SECONDS)

    def active(self) -> set[str]:
        """Names of the queries running now."""
        return {name for name, q in list(self.queries.items()) if q.isActive}

    def stop_all(self, *, graceful: bool = False) -> None:
        # A real-time or continuous "batch" lasts its whole checkpoint interval: those stop
        # at once, and their Kafka outputs re-send the uncommitted part (at-least-once).
        batched = {f.query_name for f in self.plan.flows if is_micro_batch(f.trigger)}
        stop_queries([q for n, q in self.queries.items() if n in batched], graceful=graceful)
        stop_queries([q for n, q in self.queries.items() if n not in batched])
        for flow in self.plan.flows:
            if flow.query_name in self.queries:
                flow.spec.output.close(flow.ctx)


def ran_a_batch(progress: dict[str, Any]) -> bool:
    """Whether a progress entry is of a batch that ran (with or without data): one that
    did has an ``addBatch`` phase; a trigger that found nothing to do has only the
    ``latestOffset`` and ``triggerExecution`` phases."""
    return "addBatch" in (progress.get("durationMs") or {})


def caught_up(last: dict[str, int], totals: dict[str, FlowTotals]) -> bool:
    """Whether the listener has seen each query's ``last`` batch id (batch 0 included)."""

    def seen(name: str) -> int:
        batch = totals[name].last_batch_id if name in totals else None
        return -1 if batch is None else batch

    return all(seen(name) >= batch for name, batch in last.items())


def stop_queries(
    queries: list[StreamingQuery], *, graceful: bool = False, timeout: float = 60.0
) -> None:
    """Stop ``queries``; graceful lets each finish the batch it is running first."""
    active = [q for q in queries if q.isActive]
    if graceful:
        # Mark them all first so they end together, each at its own batch boundary.
        threads = [(q, end_after_current_batch(q)) for q in active]
        deadline = time.monotonic() + timeout
        for query, thread in threads:
            _await_between_batches(query, thread, deadline)
    for query in active:
        query.stop()  # a no-op for a query that has already ended


def end_after_current_batch(query: StreamingQuery) -> Any | None:
    """Let a micro-batch query finish its running batch and start no other.

    Spark's ``stop()`` interrupts the running batch, leaving its offsets logged and its
    commit missing (replayed on restart: correct, but not a clean stop). The query thread
    checks its state before each trigger, so setting that state to TERMINATED ends the
    loop at the next batch boundary. Spark has no public API for it: this returns the
    query's JVM thread, to wait on, or None when the internals differ (a continuous query,
    another Spark version) and the caller falls back to waiting for an idle moment.
    """
    try:
        execution = query._jsq.streamingQuery()
        cls = execution.getClass()
        if cls.getSimpleName() != "MicroBatchExecution":
            return None
        thread = execution.queryExecutionThread()
        terminated_class = cls.forName(f"{cls.getPackage().getName()}.TERMINATED$")
        execution.state().set(terminated_class.getField("MODULE$").get(None))
        return thread
    except Exception:  # any py4j or reflection failure: use the fallback
        return None


def _await_between_batches(query: StreamingQuery, thread: Any | None, deadline: float) -> None:
    """Wait (bounded) until ``query`` has ended or sits idle between two triggers.

    A marked query reports ``isActive`` False at once while its batch still runs, so its
    end is read from its thread instead.
    """
    while time.monotonic() < deadline:
        if not (query.isActive if thread is None else thread.isAlive()):
            return
        if not query.status.get("isTriggerActive"):
            if thread is None:
                return
            # A trigger that passed its state check just before the mark sets
            # isTriggerActive right after: look twice before calling it idle.
            time.sleep(0.2)
            if not query.status.get("isTriggerActive"):
                return
        time.sleep(0.05)


def _query_exception(query: StreamingQuery) -> BaseException | None:
    """The exception that ended ``query``, with its JVM cause chain (``query.exception()``
    keeps only the message, so the failure could not be translated by type)."""
    from pyspark.errors.exceptions.captured import convert_exception

    found = query._jsq.exception()
    return convert_exception(found.get()) if found.isDefined() else None
