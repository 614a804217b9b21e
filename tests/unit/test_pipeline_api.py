from __future__ import annotations

from typing import Any

import pytest

from eventlake.connectors import (
    DeltaInput,
    DeltaOutput,
    FanOut,
    Guarantee,
    KafkaInput,
    KafkaOutput,
    MemoryOutput,
    ToDelta,
    ToKafka,
)
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines import Pipeline, PipelineParams, Registry, registration
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.plan import dependency_order


def identity(ctx: Any, df: Any) -> Any:
    return df


def make(name: str = "p") -> Pipeline:
    return Pipeline(name)


def test_flows_are_ordered_by_the_tables_they_read() -> None:
    p = make()
    p.flow(name="gold", input=DeltaInput("silver", "t"), output=DeltaOutput("gold", "t"))(identity)
    p.flow(name="silver", input=DeltaInput("bronze", "t"), output=DeltaOutput("silver", "t"))(
        identity
    )
    p.flow(name="bronze", input=KafkaInput(), output=DeltaOutput("bronze", "t"))(identity)
    order = [(spec.name, level, ups) for spec, level, ups in dependency_order(p)]
    assert order == [("bronze", 0, ()), ("silver", 1, ("bronze",)), ("gold", 2, ("silver",))]


def test_cycle_is_an_error_naming_the_flows() -> None:
    p = make()
    p.flow(name="a", input=DeltaInput("x", "b"), output=DeltaOutput("x", "a"))(identity)
    p.flow(name="b", input=DeltaInput("x", "a"), output=DeltaOutput("x", "b"))(identity)
    with pytest.raises(EventlakeError) as info:
        dependency_order(p)
    assert info.value.code == ErrorCode.PIPELINE_INVALID
    assert "cycle" in info.value.what


def test_two_writers_of_one_table_is_an_error() -> None:
    p = make()
    p.flow(name="a", input=KafkaInput(), output=DeltaOutput("x", "t"))(identity)
    p.flow(name="b", input=KafkaInput(), output=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="both write table x/t"):
        dependency_order(p)


def test_flow_names_and_modes_are_checked() -> None:
    p = make()
    with pytest.raises(EventlakeError):
        p.flow(name="Bad-Name", input=KafkaInput(), output=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="output mode"):
        p.flow(name="f", input=KafkaInput(), output=DeltaOutput("x", "t"), output_mode="upsert")(
            identity
        )
    p.flow(name="f", input=KafkaInput(), output=DeltaOutput("x", "t"))(identity)
    with pytest.raises(EventlakeError, match="twice"):
        p.flow(name="f", input=KafkaInput(), output=DeltaOutput("x", "u"))(identity)
    assert p.flows["f"].query_name == "p.f"


def test_params_reject_unknown_keys_with_the_full_key() -> None:
    class Params(PipelineParams):
        delay: str = "1 minute"

    p = Pipeline("typed", params=Params)
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
    registry = load_pipelines(examples=True)
    assert "orders" in registry.names()
    assert set(registry.get("orders").flows) == {
        "bronze", "silver", "quarantine", "revenue_hourly", "category_sliding", "high_value",
        "enriched",
    }  # fmt: skip
    with pytest.raises(EventlakeError) as info:
        registry.get("nope")
    assert info.value.code == ErrorCode.PIPELINE_NOT_FOUND
    with pytest.raises(EventlakeError, match="two pipelines"), registration(registry):
        Pipeline("orders")
    # Each load has a registry of its own, with the same declared pipeline objects.
    again = load_pipelines(examples=True)
    assert again is not registry
    assert again.get("orders") is registry.get("orders")


def test_registration_is_scoped_to_the_registry_passed_in() -> None:
    mine = Registry()
    outside = Pipeline("outside")
    with registration(mine) as reg:
        inside = Pipeline("inside")
    assert reg is mine
    assert mine.names() == ["inside"]
    assert mine.get("inside") is inside
    assert "outside" not in load_pipelines(examples=True).names()
    assert outside.name not in mine.names()


def test_user_module_pipelines_go_into_the_registry_passed_in(tmp_path: Any) -> None:
    module = tmp_path / "mine.py"
    module.write_text(
        "from eventlake.connectors import MemoryOutput, RateInput\n"
        "from eventlake.pipelines import Pipeline\n"
        "mine = Pipeline('mine')\n"
        "mine.flow(name='f', input=RateInput(), output=MemoryOutput())(lambda c, df: df)\n"
    )
    first = load_pipelines([module])
    assert "mine" in first.names()
    assert "mine" not in load_pipelines(examples=True).names()
    assert load_pipelines([module]).get("mine") is first.get("mine")


def test_every_output_and_target_states_its_guarantee() -> None:
    assert DeltaOutput("x", "t").guarantee is Guarantee.EXACTLY_ONCE
    assert KafkaOutput("topic").guarantee is Guarantee.AT_LEAST_ONCE
    assert MemoryOutput().guarantee is Guarantee.NONE
    assert ToDelta("x", "t").guarantee is Guarantee.EXACTLY_ONCE
    assert ToKafka("topic").guarantee is Guarantee.AT_LEAST_ONCE
    # A fan-out is as strong as its weakest target.
    assert FanOut(ToDelta("x", "t")).guarantee is Guarantee.EXACTLY_ONCE
    assert FanOut(ToDelta("x", "t"), ToKafka("topic")).guarantee is Guarantee.AT_LEAST_ONCE
    users = load_pipelines(examples=True).get("users").flows["silver"].output
    assert users.guarantee is Guarantee.AT_LEAST_ONCE  # Delta + PostgreSQL + Kafka


def test_flow_guarantee_must_be_a_known_one() -> None:
    p = make()
    p.flow(name="f", input=KafkaInput(), output=DeltaOutput("x", "t"), guarantee="exactly-once")(
        identity
    )
    assert p.flows["f"].guarantee is Guarantee.EXACTLY_ONCE
    with pytest.raises(EventlakeError, match="guarantee 'twice'") as info:
        p.flow(name="g", input=KafkaInput(), output=DeltaOutput("x", "u"), guarantee="twice")(
            identity
        )
    assert info.value.code == ErrorCode.PIPELINE_INVALID


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
    orders = load_pipelines(examples=True).get("orders")
    assert orders.parse_params({"dedup_delay": "45  minutes"}).dedup_delay == "45 minutes"  # type: ignore[attr-defined]
    # One duration grammar: "1h" is an hour here too; Spark's interval text needs whole units.
    assert orders.parse_params({"dedup_delay": "1h"}).dedup_delay == "1 hour"  # type: ignore[attr-defined]
    for bad in ({"dedup_delay": "1.5 hours"}, {"window_delay": "soon"}, {"trigger": "sometimes"}):
        with pytest.raises(EventlakeError) as info:
            orders.parse_params(bad)
        assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
        assert f"pipelines.orders.{next(iter(bad))}" in str(info.value)


def test_triggers_by_flow_are_checked_triggers_of_known_flows() -> None:
    from eventlake.config.loader import settings_from_dict

    orders = load_pipelines(examples=True).get("orders")
    params = orders.parse_params({"triggers": {"silver": "0 seconds", "enriched": "1 minute"}})
    assert params.triggers == {"silver": "0 seconds", "enriched": "1 minute"}
    with pytest.raises(EventlakeError) as bad:
        orders.parse_params({"triggers": {"silver": "sometimes"}})
    assert bad.value.code == ErrorCode.CONFIG_INVALID_VALUE
    assert "pipelines.orders.triggers" in str(bad.value)
    assert "flow 'silver'" in str(bad.value)

    settings = settings_from_dict(
        {"pipelines": {"orders": {"triggers": {"silver": "0 seconds", "sliver": "1 second"}}}}
    )
    with pytest.raises(EventlakeError) as unknown:
        orders.configs(settings)
    assert unknown.value.code == ErrorCode.CONFIG_UNKNOWN_KEY
    assert "pipelines.orders.triggers names no flow of the pipeline: sliver." in str(unknown.value)
    assert "quarantine" in str(unknown.value)  # the flows it could have named


def test_ads_ctr_watermark_must_cover_the_outcome_lag() -> None:
    ads = load_pipelines(examples=True).get("ads")
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
    registry = load_pipelines(examples=True)
    assert set(settings.pipelines) == set(registry.names())
    for name in registry.names():
        pipeline = registry.get(name)
        assert pipeline.parse_params(settings.pipelines[name]) == pipeline.params(), name


def test_json_decoder_is_a_checked_choice_and_users_takes_from_json_only() -> None:
    registry = load_pipelines(examples=True)
    clickstream = registry.get("clickstream")
    assert clickstream.parse_params({}).json_decoder == "bytes"
    assert clickstream.parse_params({"json_decoder": "arrow"}).json_decoder == "arrow"
    assert clickstream.parse_params({"json_decoder": "spark"}).json_decoder == "spark"
    with pytest.raises(EventlakeError) as unknown:
        clickstream.parse_params({"json_decoder": "simdjson"})
    assert unknown.value.code == ErrorCode.CONFIG_INVALID_VALUE
    with pytest.raises(EventlakeError) as nested:
        registry.get("users").parse_params({"json_decoder": "arrow"})
    assert nested.value.code == ErrorCode.CONFIG_INVALID_VALUE
