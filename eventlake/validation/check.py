"""Plan a pipeline and check every flow: all findings at once, before any query starts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from typing_extensions import Unpack

from eventlake.config import Settings
from eventlake.errors import Category, ErrorCode, EventlakeError
from eventlake.pipelines.api import FlowSpec, Pipeline
from eventlake.pipelines.plan import Plan, PlannedFlow, PlanOptions, build_plan
from eventlake.validation.rules import (
    ERROR,
    WARNING,
    Finding,
    Issue,
    check_flow,
    finding,
    slide_finding,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Report:
    pipeline: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == WARNING]

    def exit_code(self, strict: bool = False) -> int:
        if self.errors:
            return 1
        return 2 if strict and self.warnings else 0

    def to_json(self) -> str:
        return json.dumps([f.as_dict() for f in self.findings], indent=2)


def check_pipeline(
    pipeline: Pipeline, settings: Settings, spark: SparkSession, **options: Unpack[PlanOptions]
) -> tuple[Plan, Report]:
    """Build the plan, checking each flow before its output is created."""
    report = Report(pipeline.name)

    def on_error(spec: FlowSpec, error: EventlakeError) -> None:
        if error.category is Category.CONNECTOR:  # not the plan's fault: nothing to analyse
            raise error
        analysed = Issue(f"the flow cannot be analysed: {error.what}", fix=error.fix)
        found = slide_finding(spec.query_name, error)
        report.findings.append(found or finding("EL-V000", spec.query_name, analysed))

    def inspect(flow: PlannedFlow) -> bool:
        found = check_flow(flow)
        report.findings.extend(found)
        return not any(f.severity == ERROR for f in found)

    plan = build_plan(pipeline, settings, spark, on_error=on_error, inspect=inspect, **options)
    flows = options.get("flows")
    if flows:
        report.findings = [f for f in report.findings if f.flow.split(".", 1)[1] in flows]
    return plan, report


def require_valid(report: Report) -> None:
    """Raise EL-VALIDATE-001 listing every error; warnings pass."""
    if not report.errors:
        return
    lines = [f"{f.code} {f.flow}: {f.what}. Fix: {f.fix}" for f in report.errors]
    raise EventlakeError(
        ErrorCode.VALIDATION_FAILED,
        f"pipeline '{report.pipeline}' has {len(report.errors)} error(s); no query was "
        "started:\n    " + "\n    ".join(lines),
        fix=f"fix them; `eventlake validate {report.pipeline}` lists every finding",
    )
