from __future__ import annotations

from typing import Any

import pytest

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines import DeltaInput, DeltaOutput, KafkaInput, Pipeline, PipelineParams
from eventlake.pipelines.api import REGISTRY
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.plan import dependency_order


def identity(ctx: Any, df: Any) -> Any:
    return df


def make(name: str = "p", register: bool = False) -> Pipeline:
    return Pipeline(name, register=register)


def test_flows_are_ordered_by_the_tables_they_read() -> None:
    p = make()
    p.flow(name="gold", source=DeltaInput("silver", "t"), sink=DeltaOutput("gold", "t"))(identity)
    p.flow(name="silver", source=DeltaInput("bronze", "t"), sink=DeltaOutput("silver", "t"))(
        identity
    )
    p.flow(name="bronze", source=KafkaInput(), sink=DeltaOutput("bronze", "t"))(identity)
    order = [(spec.name, level, ups) for spec, level, ups in dependency_order(p)]
    assert order == [("bronze", 0, ()), ("silver", 1, ("bronze",)), ("gold", 2, ("silver",))]


def test_cycle_is_an_error_naming_the_flows() -> None:
    p = make()
    p.flow(name="a", source=DeltaInput("x", "b"), sink=DeltaOutput("x", "a"))(identity)
    p.flow(name="b", source=DeltaInput("x", "a"), sink=DeltaOutput("x", "b"))(identity)
    with pytest.raises(EventlakeError) as info:
        dependency_order(p)
    assert info.value.code == ErrorCode.PIPELINE_INVALID
    assert "cycle" in info.value.what


def test_two_writers_of_one_table_is_an_error() -> None:
    p = make()
    p.flow(name="a", source=KafkaInput(), sink=DeltaOutput("x", "t"))(identity)
    p.flow(name="b", source=KafkaInput(), sink=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="both write table x/t"):
        dependency_order(p)


def test_flow_names_and_modes_are_checked() -> None:
    p = make()
    with pytest.raises(EventlakeError):
        p.flow(name="Bad-Name", source=KafkaInput(), sink=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="output mode"):
        p.flow(name="f", source=KafkaInput(), sink=DeltaOutput("x", "t"), output_mode="upsert")(
            identity
        )
    p.flow(name="f", source=KafkaInput(), sink=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="twice"):
        p.flow(name="f", source=KafkaInput(), sink=DeltaOutput("x", "u"))(identity)
    assert p.flows["f"].query_name == "p.f"


def test_params_reject_unknown_keys_with_the_full_key() -> None:
    class Params(PipelineParams):
        delay: str = "1 minute"

    p = Pipeline("typed", params=Params, register=False)
    assert p.parse_params({"delay": "2 minutes"}).delay == "2 minutes"  # type: ignore[attr-defined]
    with pytest.raises(EventlakeError) as info:
        p.parse_params({"dealy": "2 minutes"})
    assert info.value.code == ErrorCode.CONFIG_UNKNOWN_KEY
    assert "pipelines.typed.dealy" in str(info.value)
    assert "delay" in str(info.value)
    with pytest.raises(EventlakeError) as bad:
        p.parse_params({"max_offsets_per_trigger": 0})
    assert bad.value.code == ErrorCode.CONFIG_INVALID_VALUE


def test_registry_knows_the_shipped_pipeline_and_rejects_duplicates() -> None:
    registry = load_pipelines()
    assert "orders" in registry.names()
    assert set(registry.get("orders").flows) == {
        "bronze", "silver", "quarantine", "revenue_hourly", "category_sliding", "high_value",
        "enriched",
    }  # fmt: skip
    with pytest.raises(EventlakeError) as info:
        registry.get("nope")
    assert info.value.code == ErrorCode.PIPELINE_NOT_FOUND
    with pytest.raises(EventlakeError, match="two pipelines"):
        Pipeline("orders")
    assert REGISTRY.get("orders") is registry.get("orders")


def test_user_module_loading_errors_are_actionable(tmp_path: Any) -> None:
    from eventlake.pipelines.loader import load_module

    with pytest.raises(EventlakeError) as missing:
        load_module(tmp_path / "absent.py")
    assert missing.value.code == ErrorCode.PIPELINE_MODULE
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(EventlakeError, match="boom"):
        load_module(broken)


def test_durations_and_triggers_are_checked_in_config() -> None:
    orders = load_pipelines().get("orders")
    assert orders.parse_params({"dedup_delay": "45  minutes"}).dedup_delay == "45 minutes"  # type: ignore[attr-defined]
    for bad in ({"dedup_delay": "1h"}, {"window_delay": "soon"}, {"trigger": "sometimes"}):
        with pytest.raises(EventlakeError) as info:
            orders.parse_params(bad)
        assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
        assert f"pipelines.orders.{next(iter(bad))}" in str(info.value)


def test_ads_ctr_watermark_must_cover_the_outcome_lag() -> None:
    ads = load_pipelines().get("ads")
    assert ads.parse_params({"ctr_watermark": "16 minutes"})
    with pytest.raises(EventlakeError) as info:
        ads.parse_params({"watermark": "20 minutes", "ctr_watermark": "25 minutes"})
    assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
    message = str(info.value)
    assert "pipelines.ads: " in message
    assert "must exceed watermark (20 minutes) + attribution_window (5 minutes)" in message


def test_shipped_config_has_a_section_per_pipeline_holding_its_defaults() -> None:
    """eventlake.yaml documents every shipped pipeline's settings; its values are the code's
    defaults, so the two cannot drift apart."""
    from pathlib import Path

    from eventlake.config import load_settings

    settings = load_settings(Path(__file__).parents[2] / "eventlake.yaml")
    registry = load_pipelines()
    assert set(settings.pipelines) == set(registry.names())
    for name in registry.names():
        pipeline = registry.get(name)
        assert pipeline.parse_params(settings.pipelines[name]) == pipeline.params(), name
