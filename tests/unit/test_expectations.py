"""@expect declarations: checked when declared, attached to the flow, quarantine turning
a Delta output into a fan-out; their counts in the progress line and the metrics."""

from __future__ import annotations

from typing import Any

import pytest

from eventlake.connectors import DeltaOutput, FanOut, Guarantee, KafkaInput, KafkaOutput
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.monitoring.metrics import PipelineMetrics
from eventlake.monitoring.observed import EXPECTATIONS, expectation_counts
from eventlake.monitoring.progress import BatchProgress
from eventlake.pipelines import Expectation, Pipeline, expect


def identity(ctx: Any, df: Any) -> Any:
    return df


def test_expectations_attach_to_the_flow_in_declaration_order() -> None:
    p = Pipeline("exp")

    @p.flow(input=KafkaInput(), output=DeltaOutput("silver", "t"))
    @expect("a", "x > 0")
    @expect("b", "y IS NOT NULL", on_violation="drop")
    def f(ctx: Any, df: Any) -> Any:
        return df

    assert p.flows["f"].expectations == (
        Expectation("a", "x > 0", "warn"), Expectation("b", "y IS NOT NULL", "drop")
    )  # fmt: skip
    assert p.flows["f"].output == DeltaOutput("silver", "t")  # no quarantine: unchanged


def test_quarantine_turns_the_delta_output_into_a_fan_out() -> None:
    p = Pipeline("exp")
    p.flow(name="f", input=KafkaInput(), output=DeltaOutput("silver", "t"))(
        expect("c", "x IN ('a')", on_violation="quarantine")(identity)
    )
    out = p.flows["f"].output
    assert isinstance(out, FanOut)
    assert out.tables() == [("silver", "t"), ("silver", "t_quarantine")]
    assert out.guarantee is Guarantee.EXACTLY_ONCE


@pytest.mark.parametrize(
    ("build", "what"),
    [
        (lambda: expect("Bad Name", "x > 0"), "has the name"),
        (lambda: expect("a", "x > 0", on_violation="explode"), "on_violation"),  # type: ignore[arg-type]
        (lambda: expect("a", " "), "has no condition"),
    ],
)
def test_bad_expectations_are_refused(build: Any, what: str) -> None:
    with pytest.raises(EventlakeError) as bad:
        build()
    assert bad.value.code == ErrorCode.PIPELINE_INVALID
    assert what in bad.value.what


def test_expect_above_flow_and_quarantine_to_kafka_are_refused() -> None:
    p = Pipeline("exp")
    flowed = p.flow(name="f", input=KafkaInput(), output=DeltaOutput("s", "t"))(identity)
    with pytest.raises(EventlakeError) as above:
        expect("a", "x > 0")(flowed)
    assert "below @p.flow" in (above.value.fix or "")

    with pytest.raises(EventlakeError) as kafka:
        p.flow(name="g", input=KafkaInput(), output=KafkaOutput("t"))(
            expect("c", "x > 0", on_violation="quarantine")(lambda ctx, df: df)
        )
    assert "not a lake table" in kafka.value.what


def test_counts_reach_the_progress_line_and_the_metrics() -> None:
    observed = {EXPECTATIONS: {"a.passed": 98, "a.failed": 2, "b.passed": 100, "b.failed": 0}}
    counts = expectation_counts(observed)
    assert counts == (("a", 98, 2), ("b", 100, 0))
    progress = BatchProgress("exp.f", 3, 100, 0.0, 0.0, 1000, None, 0, 0, expectations=counts)
    assert progress.line().endswith(", a 98/100, b 100/100")
    metrics = PipelineMetrics("exp")
    metrics.batch(progress)
    text = metrics.exposition().decode()
    assert 'eventlake_expectation_rows_total{expectation="a",flow="f",outcome="failed",' \
        'pipeline="exp"} 2.0' in text  # fmt: skip
