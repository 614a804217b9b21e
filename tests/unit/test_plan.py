"""What planning decides before Spark starts: each flow's trigger and whether a run ends."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from eventlake.config import Settings
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline
from eventlake.pipelines.plan import ends, trigger_of
from eventlake.testing import settings_for


def _pipeline() -> Pipeline:
    p = Pipeline("mixed")
    inbox = FilesInput("inbox", "json", "id STRING")

    @p.flow(name="a", input=inbox, output=DeltaOutput("silver", "a"))
    def a(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(name="b", input=inbox, output=DeltaOutput("silver", "b"), trigger="available-now")
    def b(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    return p


def test_a_run_ends_when_every_flow_it_starts_has_an_ending_trigger(tmp_path: Any) -> None:
    p = _pipeline()
    settings: Settings = settings_for(tmp_path)
    configs = p.configs(settings)
    assert trigger_of(p.flows["a"], configs["a"]) == "10 seconds"  # the pipeline's default
    assert trigger_of(p.flows["b"], configs["b"]) == "available-now"  # its code's
    assert not ends(p, configs, None, None)
    assert ends(p, configs, ["b"], None)
    assert ends(p, configs, None, "once")
    assert not ends(p, configs, ["b"], "0 seconds")
    # The config's trigger for a flow is over its code's.
    by_config = p.configs(settings_for(tmp_path, mixed={"triggers": {"a": "available-now"}}))
    assert ends(p, by_config, None, None)


def test_the_orders_pipeline_runs_the_hops_a_reader_waits_on_continuously(tmp_path: Any) -> None:
    from eventlake.reference.orders import orders

    configs = orders.configs(settings_for(tmp_path, orders={"trigger": "1 minute"}))
    triggers = {name: trigger_of(spec, configs[name]) for name, spec in orders.flows.items()}
    assert triggers == {
        "bronze": "1 minute",
        "silver": "0 seconds",
        "quarantine": "1 minute",
        "revenue_hourly": "0 seconds",
        "category_sliding": "1 minute",
        "high_value": "1 minute",
        "enriched": "1 minute",
    }
    # A flow's config is over its code's, and the run's trigger over both.
    slow = orders.configs(settings_for(tmp_path, orders={"triggers": {"silver": "10 seconds"}}))
    assert trigger_of(orders.flows["silver"], slow["silver"]) == "10 seconds"
    assert trigger_of(orders.flows["revenue_hourly"], slow["revenue_hourly"]) == "0 seconds"
    assert trigger_of(orders.flows["silver"], slow["silver"], "available-now") == "available-now"
