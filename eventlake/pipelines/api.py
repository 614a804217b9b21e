"""Declaring pipelines: a Pipeline is a set of named flows (source -> transform -> sink).

    orders = Pipeline("orders", params=OrdersParams)

    @orders.flow(source=KafkaInput(), sink=DeltaOutput("bronze", "orders"))
    def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return kafka_records(df)

Creating a Pipeline registers it by name. A flow's name keys its checkpoint folder
(``<checkpoints.root>/<pipeline>/<flow>``), its query name (``<pipeline>.<flow>``) and its
progress lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines.context import FlowContext
    from eventlake.pipelines.io import Input, Output

Transform: TypeAlias = "Callable[[FlowContext, DataFrame], DataFrame]"
OUTPUT_MODES = ("append", "update", "complete")
_INTERVAL = re.compile(r"^\d+ (millisecond|second|minute|hour|day|week)s?$")


def _spark_interval(value: str) -> str:
    text = " ".join(value.split())
    if not _INTERVAL.match(text):
        raise ValueError(
            f"'{value}' is not a Spark interval; write a number and a unit, e.g. '10 minutes'"
        )
    return text


#: A duration Spark accepts for watermarks and windows: "10 minutes", "1 hour".
SparkInterval = Annotated[str, AfterValidator(_spark_interval)]
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class PipelineParams(BaseModel):
    """A pipeline's config section, ``pipelines.<name>``; subclass it to add keys.

    Unknown keys are rejected, so a typo in the YAML is an error naming the key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str | None = Field(default=None, description="The input topic, for one input.")
    topics: dict[str, str] = Field(
        default_factory=dict, description="Input topics by role, for several inputs."
    )
    trigger: str = Field(default="10 seconds", description="Default trigger of every flow.")
    max_offsets_per_trigger: int | None = Field(default=10_000, ge=1)
    starting_offsets: str = "earliest"
    fail_on_data_loss: bool = True
    data_loss_note: str | None = Field(
        default=None, description="Why fail_on_data_loss=false is acceptable here."
    )
    max_files_per_trigger: int | None = Field(default=None, ge=1)

    @field_validator("trigger")
    @classmethod
    def _known_trigger(cls, value: str) -> str:
        from eventlake.triggers import parse_trigger

        try:
            parse_trigger(value)
        except EventlakeError as exc:
            raise ValueError(exc.what) from None
        return value


@dataclass(frozen=True)
class FlowSpec:
    """One flow as declared: where it reads, what it does, where it writes."""

    pipeline: str
    name: str
    source: Input
    sink: Output
    transform: Transform
    output_mode: str = "append"
    trigger: str | None = None
    description: str = ""
    #: Further streaming inputs by role (stream-stream joins, unions): ``ctx.stream(role)``.
    inputs: tuple[tuple[str, Input], ...] = ()

    def all_inputs(self) -> list[Input]:
        return [self.source, *(i for _, i in self.inputs)]

    def describe_inputs(self, ctx: FlowContext | None = None) -> str:
        return " + ".join(i.describe(ctx) for i in self.all_inputs())

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


@dataclass
class Pipeline:
    """A named set of flows, registered on creation."""

    name: str
    params: type[PipelineParams] = PipelineParams
    description: str = ""
    flows: dict[str, FlowSpec] = field(default_factory=dict)
    register: bool = True

    def __post_init__(self) -> None:
        _check_name("pipeline", self.name)
        if self.register:
            REGISTRY.add(self)

    def flow(
        self,
        *,
        source: Input,
        sink: Output,
        name: str | None = None,
        output_mode: str = "append",
        trigger: str | None = None,
        description: str = "",
        inputs: dict[str, Input] | None = None,
    ) -> Callable[[Transform], Transform]:
        """Decorator: declare the decorated transform as a flow of this pipeline.

        The transform receives ``source`` as its DataFrame; each of ``inputs`` is a
        further stream it reads with ``ctx.stream(role)``.
        """

        def decorate(fn: Transform) -> Transform:
            flow_name: str = name or str(getattr(fn, "__name__", ""))
            _check_name("flow", flow_name)
            if flow_name in self.flows:
                raise EventlakeError(
                    ErrorCode.PIPELINE_INVALID,
                    f"pipeline '{self.name}' declares flow '{flow_name}' twice.",
                    fix="give one of them another name (name=...)",
                )
            if output_mode not in OUTPUT_MODES:
                raise EventlakeError(
                    ErrorCode.PIPELINE_INVALID,
                    f"flow '{self.name}.{flow_name}' has output mode '{output_mode}'.",
                    expected=" or ".join(OUTPUT_MODES),
                    fix="use one of Spark's output modes",
                )
            doc = (fn.__doc__ or "").strip().splitlines()
            self.flows[flow_name] = FlowSpec(
                pipeline=self.name,
                name=flow_name,
                source=source,
                sink=sink,
                transform=fn,
                output_mode=output_mode,
                trigger=trigger,
                description=description or (doc[0] if doc else ""),
                inputs=tuple(sorted((inputs or {}).items())),
            )
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
                    fix="correct or remove the key",
                ) from None
            msgs = "; ".join(f"{k}: {e['msg']}" for k, e in zip(keys, exc.errors(), strict=True))
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_VALUE,
                f"invalid config value(s): {msgs.rstrip('.')}.",
                fix="correct the value in the config file or --set",
            ) from None


class Registry:
    """Pipelines by name."""

    def __init__(self) -> None:
        self._pipelines: dict[str, Pipeline] = {}

    def add(self, pipeline: Pipeline) -> None:
        existing = self._pipelines.get(pipeline.name)
        if existing is not None and existing is not pipeline:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"two pipelines are named '{pipeline.name}'.",
                fix="rename one of them; pipeline names key checkpoints and config sections",
            )
        self._pipelines[pipeline.name] = pipeline

    def get(self, name: str) -> Pipeline:
        try:
            return self._pipelines[name]
        except KeyError:
            known = ", ".join(sorted(self._pipelines)) or "none"
            raise EventlakeError(
                ErrorCode.PIPELINE_NOT_FOUND,
                f"no pipeline named '{name}' (known: {known}).",
                fix="check `eventlake list`; load your own with --module path/to/file.py",
            ) from None

    def names(self) -> list[str]:
        return sorted(self._pipelines)

    def remove(self, name: str) -> None:
        self._pipelines.pop(name, None)


REGISTRY = Registry()
