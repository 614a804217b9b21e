"""Expectations: data-quality rules on a flow's result, checked in the flow's own pass.

``@expect(name, condition, on_violation=...)`` under ``@p.flow(...)`` declares one; a
flow may have several. ``condition`` is a SQL boolean over the transform's result columns;
a row passes when it is true (false and NULL fail). Per expectation and batch Spark counts
the rows that passed and failed (``DataFrame.observe``): they arrive with the batch's
progress, in the progress line, the metrics and the event table
``<lake.root>/_eventlake/expectations``. What a failing row does:

- ``warn``: it is written; only counted.
- ``drop``: it is not written.
- ``quarantine``: it goes to ``<layer>/<table>_quarantine`` (with ``failed_expectations``,
  the names it failed) instead of the flow's Delta table; exactly-once like the table.
- ``fail``: the batch fails and the flow stops with EL-EXPECT-001 naming the expectation
  and the first failing row; nothing of the batch is committed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from eventlake.connectors.base import BatchContext, Output, TableRef, Target
from eventlake.connectors.capabilities import Guarantee
from eventlake.connectors.delta import ToDelta, ensure_delta_table
from eventlake.connectors.fanout import FanOut
from eventlake.errors import FAIL_MARK, ErrorCode, EventlakeError
from eventlake.monitoring.observed import EXPECTATIONS, QUARANTINE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig, FlowContext

OnViolation = Literal["warn", "drop", "quarantine", "fail"]
VIOLATIONS: tuple[str, ...] = ("warn", "drop", "quarantine", "fail")
#: The column naming, per row, the quarantine expectations it failed (removed before writes).
FAILED = "_eventlake_failed_expectations"
ATTRIBUTE = "__eventlake_expectations__"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

F_ = TypeVar("F_", bound=Callable[..., Any])


#: Where a row came from: what EL-EXPECT-001 shows of it by default.
POSITION_COLUMNS = ("topic", "partition", "offset")


@dataclass(frozen=True)
class Expectation:
    """One rule: ``name`` (lower-case, unique in its flow), a SQL ``condition`` and what a
    failing row does."""

    name: str
    condition: str
    on_violation: OnViolation = "warn"
    #: The columns of a failing row that EL-EXPECT-001 shows (``fail``): "*" for the
    #: whole row; by default only where it came from (``topic``, ``partition``,
    #: ``offset`` when the frame has them), so no row's data reaches a log.
    show: tuple[str, ...] | Literal["*"] = ()

    def ok(self) -> Column:
        """True for a row that passes (NULL counts as failing)."""
        from pyspark.sql import functions as F

        return F.coalesce(F.expr(self.condition), F.lit(False))


def expect(
    name: str,
    condition: str,
    *,
    on_violation: OnViolation = "warn",
    show: tuple[str, ...] | Literal["*"] = (),
) -> Callable[[F_], F_]:
    """Decorator: attach an expectation to a flow's transform; place it under ``@p.flow``.
    ``show`` names the columns of a failing row the ``fail`` error shows ("*": all)."""
    rule = Expectation(name, condition, on_violation, show if show == "*" else tuple(show))
    _check(rule)

    def attach(fn: F_) -> F_:
        flow = getattr(fn, "__eventlake_flow__", None)
        if flow:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"@expect('{name}') was placed above @flow(...) of '{flow}'.",
                expected="@expect under the @flow decorator, next to the function",
                fix="move @expect(...) below @p.flow(...)",
            )
        rules = (rule, *getattr(fn, ATTRIBUTE, ()))
        if len({r.name for r in rules}) != len(rules):
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"expectation '{name}' is declared twice on one flow.",
                expected="one name per expectation of a flow",
                fix="rename one of them",
            )
        setattr(fn, ATTRIBUTE, rules)
        return fn

    return attach


def _check(rule: Expectation) -> None:
    problem = None
    if not _NAME.match(rule.name):
        problem = f"has the name '{rule.name}'"
    elif rule.on_violation not in VIOLATIONS:
        problem = f"has on_violation='{rule.on_violation}'"
    elif not rule.condition.strip():
        problem = "has no condition"
    if problem:
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"expectation '{rule.name}' {problem}.",
            expected="a lower-case name, a SQL condition and on_violation one of "
            + ", ".join(VIOLATIONS),
            fix="correct the @expect(...) arguments",
        )


def expectations_of(transform: Callable[..., Any]) -> tuple[Expectation, ...]:
    """The expectations attached to ``transform``, in declaration order (top first)."""
    return tuple(getattr(transform, ATTRIBUTE, ()))


def apply_expectations(df: DataFrame, rules: Iterable[Expectation]) -> DataFrame:
    """``df`` counting each rule's passed/failed rows per batch, without the rows ``drop``
    rules reject, failing on the first row a ``fail`` rule rejects, and, with quarantine
    rules, a :data:`FAILED` column naming those a row failed."""
    from pyspark.sql import functions as F

    rules = tuple(rules)
    if not rules:
        return df
    counts = []
    for rule in rules:
        ok = rule.ok()
        counts += [F.count_if(ok).alias(f"{rule.name}.passed"),
                   F.count_if(~ok).alias(f"{rule.name}.failed")]  # fmt: skip
    df = df.observe(EXPECTATIONS, *counts)
    for rule in rules:
        if rule.on_violation == "fail":
            message = _failure_message(df, rule)
            df = df.where(F.when(~rule.ok(), F.raise_error(message)).otherwise(F.lit(True)))
    for rule in rules:
        if rule.on_violation == "drop":
            df = df.where(rule.ok())
    quarantined = [r for r in rules if r.on_violation == "quarantine"]
    if quarantined:
        names = [F.when(~r.ok(), F.lit(r.name)) for r in quarantined]
        df = df.withColumn(FAILED, F.filter(F.array(*names), lambda n: n.isNotNull()))
        df = df.observe(f"{QUARANTINE}_expectations", F.count_if(F.size(FAILED) > 0).alias("rows"))
    return df


def _failure_message(df: DataFrame, rule: Expectation) -> Column:
    from pyspark.sql import functions as F

    head = f"{FAIL_MARK}: '{rule.name}' ({rule.condition}) on row "
    if rule.show == "*":
        columns = list(df.columns)
    else:
        columns = list(rule.show) or [c for c in POSITION_COLUMNS if c in df.columns]
    if not columns:
        return F.lit(head + "(its columns are not shown: @expect(..., show=...) names them)")
    return F.concat(F.lit(head), F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])))


# --- quarantine: the flow's Delta output becomes a fan-out of passing and failing rows ---


def with_quarantine(output: Output, rules: Iterable[Expectation], where: str) -> Output:
    """``output`` writing the rows that failed a quarantine rule to ``<table>_quarantine``
    and the others where it wrote before; ``output`` itself without such rules."""
    if not any(r.on_violation == "quarantine" for r in rules):
        return output
    if output.capabilities.quarantine:
        targets = output.as_targets()
        lake = [t for t in (target.table() for target in targets) if t is not None]
        if lake:
            layer, name = lake[0]
            passing = [Passing(t) for t in targets]
            return FanOut(*passing, Quarantine(layer, f"{name}_quarantine"))
    raise EventlakeError(
        ErrorCode.PIPELINE_INVALID,
        f"{where} quarantines rows but writes to {output.describe()}, not a lake table.",
        expected="a DeltaOutput, or a FanOut with a Delta target, for on_violation='quarantine'",
        fix="write to Delta, or use on_violation='drop' or 'fail'",
    )


@dataclass(frozen=True)
class Passing(Target):
    """``target`` given only the rows that failed no quarantine rule."""

    target: Target

    @property
    def guarantee(self) -> Guarantee:  # type: ignore[override]
        """its target's"""
        return self.target.guarantee

    @property
    def reads(self) -> int:  # type: ignore[override]
        return self.target.reads

    def open(self, ctx: FlowContext) -> None:
        self.target.open(ctx)

    def target_id(self, flow: FlowConfig) -> str:
        return self.target.target_id(flow)

    def describe(self, flow: FlowConfig | None = None) -> str:
        return self.target.describe(flow)

    def table(self) -> TableRef | None:
        return self.target.table()

    def topics(self, flow: FlowConfig) -> list[str]:
        return self.target.topics(flow)

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        return self.target.count_rows(flow)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        from pyspark.sql.types import StructType

        self.target.ensure(ctx, StructType([f for f in schema.fields if f.name != FAILED]))

    def write(self, df: DataFrame, batch: BatchContext) -> None:
        from pyspark.sql import functions as F

        self.target.write(df.where(F.size(FAILED) == 0).drop(FAILED), batch)


@dataclass(frozen=True)
class Quarantine(ToDelta):
    """The rows that failed a quarantine rule, with ``failed_expectations`` (their names).

    Delivery guarantee: exactly-once, as :class:`ToDelta`.
    """

    def rows(self, df: DataFrame, batch: BatchContext) -> DataFrame:
        from pyspark.sql import functions as F

        return df.where(F.size(FAILED) > 0).withColumnRenamed(FAILED, "failed_expectations")

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        from pyspark.sql.types import StructType

        renamed = [f for f in schema.fields if f.name != FAILED]
        failed = next(f for f in schema.fields if f.name == FAILED)
        fields = [*renamed, type(failed)("failed_expectations", failed.dataType, True)]
        path = ctx.table_path(self.layer, self.name)
        ensure_delta_table(ctx.spark, path, StructType(fields))
