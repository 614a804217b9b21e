"""Connectors declare what they support: checked when a class is defined, printed by
`eventlake connectors`, and README's guarantee table agrees with the declarations."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eventlake.connectors import (
    DeltaOutput,
    FanOut,
    Guarantee,
    KafkaOutput,
    Output,
    OutputCapabilities,
    Target,
    ToDelta,
    ToKafka,
    TriggerKind,
)
from eventlake.connectors.catalog import connector_rows

README = Path(__file__).parents[3] / "README.md"


def test_a_concrete_output_without_capabilities_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="declares no capabilities"):

        @dataclass(frozen=True)
        class Undeclared(Output):
            def describe(self, flow: Any = None) -> str:
                return "x"

            def start_writer(self, writer: Any, ctx: Any, output_mode: str) -> Any:
                return None


def test_a_concrete_target_without_a_guarantee_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="declares no guarantee"):

        class Unsure(Target):
            def describe(self, flow: Any = None) -> str:
                return "x"

            def target_id(self, flow: Any) -> str:
                return "x"

            def write(self, df: Any, batch: Any) -> None:
                return None


def test_capabilities_refuse_an_output_mode_spark_does_not_have() -> None:
    with pytest.raises(ValueError, match="upsert"):
        OutputCapabilities(guarantee=Guarantee.NONE, output_modes=frozenset({"upsert"}))


def test_a_fan_out_gives_its_weakest_target_and_quarantines_beside_a_lake_table() -> None:
    both = FanOut(ToDelta("silver", "t"), ToKafka("topic"))
    assert both.capabilities.guarantee is Guarantee.AT_LEAST_ONCE
    assert both.capabilities.quarantine
    assert not FanOut(ToKafka("topic")).capabilities.quarantine
    assert DeltaOutput("silver", "t").as_targets() == (ToDelta("silver", "t"),)
    assert TriggerKind.REAL_TIME in KafkaOutput("t").capabilities.triggers
    assert TriggerKind.REAL_TIME not in DeltaOutput("s", "t").capabilities.triggers


def _guarantee_table() -> dict[str, str]:
    """README's "Delivery guarantees" table: connector class -> its guarantee cell."""
    text = README.read_text()
    section = text.split("## Delivery guarantees", 1)[1].split("\n## ", 1)[0]
    table: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for name in re.findall(r"`([A-Z]\w+)`", cells[0]):
            table[name] = cells[1]
    return table


def test_readme_guarantee_table_matches_what_each_connector_declares() -> None:
    table = _guarantee_table()
    rows = [r for r in connector_rows() if r.module.startswith("eventlake.connectors")]
    documented = [r for r in rows if r.kind != "input" or r.name in table]
    missing = sorted(r.name for r in documented if r.name not in table)
    assert missing == [], f"README's guarantee table lacks {missing}"
    for row in documented:
        cell = table[row.name].replace("`", "")
        assert cell.startswith(row.guarantee.split(";")[0].removesuffix("'s")), (
            row.name,
            cell,
            row.guarantee,
        )
