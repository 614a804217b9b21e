"""Declaring pipelines: a Pipeline is a set of named flows (input -> transform -> output).

    orders = Pipeline("orders", params=OrdersParams)

    @orders.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))
    def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return kafka_records(df)

A flow's name keys its checkpoint folder (``<checkpoints.root>/<pipeline>/<flow>``), its
query name (``<pipeline>.<flow>``) and its progress lines. Loading a module collects the
pipelines it declares into a :class:`Registry`; a Pipeline created inside
``with registration(registry):`` joins that registry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from eventlake.config import Settings
from eventlake.config.params import PipelineParams
from eventlake.connectors.base import Input, Output
from eventlake.connectors.capabilities import Guarantee
from eventlake.context import FlowConfig
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.expectations import Expectation, expectations_of, with_quarantine
from eventlake.storage import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.context import FlowContext

Transform: TypeAlias = "Callable[[FlowContext, DataFrame], DataFrame]"
OUTPUT_MODES = ("append", "update", "complete")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class FlowSpec:
    """One flow as declared: where it reads, what it does, where it writes."""

    pipeline: str
    name: str
    input: Input
    output: Output
    transform: Transform
    output_mode: str = "append"
    trigger: str | None = None
    description: str = ""
    #: Further streaming inputs by role (stream-stream joins, unions): ``ctx.stream(role)``.
    inputs: tuple[tuple[str, Input], ...] = ()
    #: The delivery guarantee the flow must give; EL-W105 warns when its output is weaker.
    guarantee: Guarantee | None = None
    #: Data-quality rules on the transform's result (``@expect``), top first.
    expectations: tuple[Expectation, ...] = ()
    #: Write the rows its watermark drops to ``<layer>/<table>_late``
    #: (:mod:`eventlake.operations.late_rows`).
    keep_late: bool = True

    def all_inputs(self) -> list[Input]:
        return [self.input, *(i for _, i in self.inputs)]

    def describe_inputs(self, flow: FlowConfig | None = None) -> str:
        return " + ".join(i.describe(flow) for i in self.all_inputs())

    @property
    def query_name(self) -> str:
        return f"{self.pipeline}.{self.name}"


def _check_name(kind: str, name: str) -> None:
    if not _NAME.match(name):
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"{kind} name '{name}' is not allowed.",
            expected="lower-case letters, digits and '_', starting with a letter",
            fix=f"rename the {kind}; the name keys its checkpoint folder and metrics",
        )


def _definition_error(where: str, what: str, expected: str, fix: str) -> EventlakeError:
    return EventlakeError(
        ErrorCode.PIPELINE_INVALID, f"{where} {what}.", expected=expected, fix=fix
    )


@dataclass
class Pipeline:
    """A named set of flows; joins the active registry (:func:`registration`), if any."""

    name: str
    params: type[PipelineParams] = PipelineParams
    description: str = ""
    flows: dict[str, FlowSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_name("pipeline", self.name)
        active = _ACTIVE.get()
        if active is not None:
            active.add(self)

    def flow(
        self,
        *,
        input: Input,
        output: Output,
        name: str | None = None,
        output_mode: str = "append",
        trigger: str | None = None,
        description: str = "",
        inputs: dict[str, Input] | None = None,
        guarantee: Guarantee | str | None = None,
        keep_late: bool = True,
    ) -> Callable[[Transform], Transform]:
        """Decorator: declare the decorated transform as a flow of this pipeline.

        The transform receives ``input`` as its DataFrame; each of ``inputs`` is a
        further stream it reads with ``ctx.stream(role)``. ``guarantee`` is the delivery
        guarantee the flow must give (validated against the output's). The rows its
        watermark drops are written to ``<layer>/<table>_late`` unless ``keep_late`` is
        False.
        """

        def decorate(fn: Transform) -> Transform:
            flow_name: str = name or str(getattr(fn, "__name__", ""))
            _check_name("flow", flow_name)
            where = f"flow '{self.name}.{flow_name}'"
            if flow_name in self.flows:
                raise _definition_error(
                    f"pipeline '{self.name}'", f"declares flow '{flow_name}' twice",
                    "one flow per name", "give one of them another name (name=...)",
                )  # fmt: skip
            if output_mode not in OUTPUT_MODES:
                raise _definition_error(
                    where, f"has output mode '{output_mode}'",
                    " or ".join(OUTPUT_MODES), "use one of Spark's output modes",
                )  # fmt: skip
            doc = (fn.__doc__ or "").strip().splitlines()
            rules = expectations_of(fn)
            written = with_quarantine(output, rules, where)
            if written is not output and output_mode != "append":
                raise _definition_error(
                    where, f"quarantines rows in {output_mode} mode",
                    "append mode for on_violation='quarantine'", "use drop or fail instead",
                )  # fmt: skip
            self.flows[flow_name] = FlowSpec(
                self.name, flow_name, input, written, fn, output_mode, trigger,
                description=description or (doc[0] if doc else ""),
                inputs=tuple(sorted((inputs or {}).items())),
                guarantee=_guarantee(where, guarantee), expectations=rules,
                keep_late=keep_late,
            )  # fmt: skip
            setattr(fn, "__eventlake_flow__", f"{self.name}.{flow_name}")  # noqa: B010
            return fn

        return decorate

    def parse_params(self, raw: dict[str, Any] | None) -> PipelineParams:
        """Validate ``pipelines.<name>`` against this pipeline's params model."""
        from pydantic import ValidationError

        try:
            return self.params.model_validate(raw or {})
        except ValidationError as exc:
            unknown = [e for e in exc.errors() if e["type"] == "extra_forbidden"]
            keys = [
                ".".join([f"pipelines.{self.name}", *(str(p) for p in e["loc"])])
                for e in (unknown or exc.errors())
            ]
            if unknown:
                known = ", ".join(sorted(self.params.model_fields))
                raise EventlakeError(
                    ErrorCode.CONFIG_UNKNOWN_KEY,
                    f"unknown config key(s): {', '.join(keys)}.",
                    expected=f"keys of pipelines.{self.name}: {known}",
                ) from None
            msgs = "; ".join(f"{k}: {e['msg']}" for k, e in zip(keys, exc.errors(), strict=True))
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_VALUE, f"invalid config value(s): {msgs.rstrip('.')}."
            ) from None

    def configs(
        self, settings: Settings, lake_root: Location | Path | None = None
    ) -> dict[str, FlowConfig]:
        """Every flow's config, by flow name; the params are parsed once, here."""
        params = self.parse_params(settings.pipelines.get(self.name))
        unknown = sorted(set(params.triggers) - set(self.flows))
        if unknown:
            raise EventlakeError(
                ErrorCode.CONFIG_UNKNOWN_KEY,
                f"pipelines.{self.name}.triggers names no flow of the pipeline: "
                f"{', '.join(unknown)}.",
                expected=f"flows of {self.name}: {', '.join(sorted(self.flows))}",
                fix="spell the flow as `eventlake list` shows it, or remove the key",
            )
        root = settings.lake.root if lake_root is None else Location(lake_root)
        return {
            flow: FlowConfig(
                pipeline=self.name, flow=flow, settings=settings, params=params, lake_root=root
            )
            for flow in self.flows
        }


def _guarantee(where: str, value: Guarantee | str | None) -> Guarantee | None:
    if value is None or isinstance(value, Guarantee):
        return value
    try:
        return Guarantee(value)
    except ValueError:
        known = ", ".join(g.value for g in Guarantee)
        raise _definition_error(
            where, f"declares guarantee '{value}'", known, "use one of those guarantees"
        ) from None


class Registry:
    """Pipelines by name; passed to what loads modules, never global."""

    def __init__(self, pipelines: Iterable[Pipeline] = ()) -> None:
        self._pipelines: dict[str, Pipeline] = {}
        #: How to get a pipeline this registry lacks, by name (an example left out).
        self.hints: dict[str, str] = {}
        for pipeline in pipelines:
            self.add(pipeline)

    def add(self, pipeline: Pipeline) -> None:
        existing = self._pipelines.get(pipeline.name)
        if existing is not None and existing is not pipeline:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"two pipelines are named '{pipeline.name}'.",
                fix="rename one of them; pipeline names key checkpoints and config sections",
            )
        self._pipelines[pipeline.name] = pipeline

    def collect(self, module: ModuleType) -> None:
        """Add every Pipeline ``module`` declares at its top level."""
        for value in vars(module).values():
            if isinstance(value, Pipeline):
                self.add(value)

    def get(self, name: str) -> Pipeline:
        found = self._pipelines.get(name)
        if found is None:
            known = ", ".join(self.names()) or "none"
            what = f"no pipeline named '{name}' (known: {known})."
            raise EventlakeError(ErrorCode.PIPELINE_NOT_FOUND, what, fix=self.hints.get(name))
        return found

    def names(self) -> list[str]:
        return sorted(self._pipelines)


_ACTIVE: ContextVar[Registry | None] = ContextVar("eventlake_registry", default=None)


@contextmanager
def registration(registry: Registry) -> Iterator[Registry]:
    """Pipelines created inside the block join ``registry``."""
    token = _ACTIVE.set(registry)
    try:
        yield registry
    finally:
        _ACTIVE.reset(token)
