"""The one way to run a pipeline: load it, check topics, plan and validate, run.

The CLI's ``run``, ``make demo`` and :mod:`eventlake.testing` all go through
:func:`run_pipeline`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from eventlake.config import Settings
from eventlake.connectors.delta.tables import plain_delta_rs_errors
from eventlake.errors import EventlakeError
from eventlake.monitoring import ProgressListener
from eventlake.operations.late_rows import LateKeeper
from eventlake.operations.log_rotation import LogRotation
from eventlake.operations.native_trim import NativeTrim
from eventlake.operations.run_monitor import RunMonitor
from eventlake.operations.server import check_exposure, tls_context
from eventlake.pipelines.api import Pipeline, Registry
from eventlake.pipelines.loader import project_pipelines
from eventlake.pipelines.plan import Plan, build_plan, check_flow_names, ends
from eventlake.pipelines.runner import (
    PipelineRunner,
    RunResult,
    preflight_inputs,
    preflight_topics,
)
from eventlake.scope import OutputCreation, RunScope
from eventlake.session import SparkStart, driver_allocators
from eventlake.transforms.heartbeat import IdleWatch
from eventlake.validation import Report, check_pipeline, require_valid

#: Called once the plan is built (and checked, with its report), before any query starts.
OnPlan = Callable[[Plan, Report | None], None]


def run_pipeline(
    pipeline: str | Pipeline,
    settings: Settings,
    *,
    trigger: str | None = None,
    flows: list[str] | None = None,
    validate: bool = True,
    listener: ProgressListener | None = None,
    stop: threading.Event | None = None,
    registry: Registry | None = None,
    modules: Iterable[Path] = (),
    on_plan: OnPlan | None = None,
    metrics_port: int | None = None,
    on_serve: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``pipeline`` (a name, looked up in ``registry`` or the loaded pipelines).

    Before Spark starts: the params are parsed and the flows named; while its JVM starts,
    every Kafka topic is checked to exist (a missing one fails the run at once). Then the
    plan is built and, with ``validate``, checked against the production rules (any
    error: EL-VALIDATE-001, nothing started). Finite triggers (``available-now``,
    ``once``) return once every flow has processed its input; others run until ``stop``
    is set. In a run whose flows all end, an output no flow reads is created while its
    flow's query starts (:class:`~eventlake.scope.OutputCreation`), and the driver JVM
    collects with Parallel (``spark.gc``). ``trigger`` overrides every flow's; ``flows``
    runs a subset.
    ``metrics_port`` (else ``metrics.port``; 0 picks a free one) serves ``/metrics``,
    ``/api/status`` and the dashboard while the run lasts; ``on_serve`` gets its URL.
    delta-rs's errors come without a backtrace unless ``RUST_LIB_BACKTRACE`` is set
    (:func:`~eventlake.connectors.delta.tables.plain_delta_rs_errors`), and the process's
    allocators are set before its first thread (:func:`~eventlake.session.driver_allocators`).
    """
    plain_delta_rs_errors()
    driver_allocators(settings)
    if isinstance(pipeline, str):
        registry = registry if registry is not None else project_pipelines(settings, modules)
        pipeline = registry.get(pipeline)
    check_flow_names(pipeline, flows)
    port = metrics_port if metrics_port is not None else settings.metrics.port
    if port is not None:  # an exposed endpoint or a broken certificate: refused up front
        check_exposure(settings.metrics)
        tls_context(settings.metrics)
    configs = pipeline.configs(settings)
    # The JVM starts while the broker is asked (the topics, what the inputs will need). A
    # run that ends collects for throughput, and its leaf outputs are created while their
    # queries start.
    finite = ends(pipeline, configs, flows, trigger)
    starting = SparkStart(settings, finite=finite)
    with RunScope() as run:
        preflight_topics(pipeline, configs, flows)
        preflight_inputs(pipeline, configs, run, flows, trigger)
        spark = starting.result()
        report: Report | None = None
        if validate:
            plan, report = check_pipeline(
                pipeline, settings, spark, flows=flows, trigger=trigger, run=run,
                defer_creation=finite,
            )  # fmt: skip
        else:
            plan = build_plan(pipeline, settings, spark, flows=flows, trigger=trigger, run=run,
                              defer_creation=finite)  # fmt: skip
        if on_plan is not None:
            on_plan(plan, report)
        if report is not None:
            require_valid(report)
        return run_plan(plan, stop=stop, listener=listener, metrics_port=port, on_serve=on_serve)


def run_plan(
    plan: Plan,
    *,
    stop: threading.Event | None = None,
    listener: ProgressListener | None = None,
    metrics_port: int | None = None,
    on_serve: Callable[[str], None] | None = None,
) -> RunResult:
    """Run ``plan`` with a progress listener, the run's monitor, late-row keeper, log
    rotation and the driver's C-heap trim for its duration; the plan's run scope is closed
    at the end (its services drained)."""
    spark = plan.flows[0].ctx.spark
    settings = plan.flows[0].ctx.settings
    own = listener is None
    listener = listener or ProgressListener()
    spark.streams.addListener(listener)

    def restarted(name: str, error: EventlakeError, _restart: int, delay: float) -> None:
        monitor.restarted(name, error, delay)

    runner = PipelineRunner(plan, listener, on_restart=restarted)
    host = settings.metrics.host
    run = plan.run
    rotation = None
    if settings.log.max_bytes is not None:
        rotation = run.add_service(
            LogRotation(settings.log_file(), settings.log.max_bytes, settings.log.keep)
        )
    trim = run.add_service(NativeTrim(settings.spark.native_trim_seconds))
    monitor = run.add_service(
        RunMonitor(plan, listener, port=metrics_port, host=host, running=runner.active)
    )
    keeper = run.add_service(LateKeeper(plan.chosen(), listener, metrics=monitor.metrics))
    try:
        if rotation is not None:
            rotation.start()
        trim.start()
        monitor.start()
        keeper.start()
        idle = run.find(IdleWatch)
        if idle is not None:  # flows with idle_timeout registered while planned
            idle.start()
        if monitor.url and on_serve is not None:
            on_serve(monitor.url)
        result = runner.run(stop)
        creation = run.find(OutputCreation)
        if creation is not None:  # a flow that wrote no batch never waited for its output
            creation.wait_all()
        keeper.close()
        result.late_rows_kept = dict(keeper.kept)
        return result
    finally:
        # Newest first: the log checkpoints (one about done is let finish; one cut short
        # is redone by a later run), the late keeper, then the monitor.
        run.close()
        spark.streams.removeListener(listener)
        if own:
            listener.close()
