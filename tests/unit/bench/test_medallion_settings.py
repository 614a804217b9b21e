"""README's Low latency config is the medallion benchmark's `silver-gold` setting."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bench.medallion import POLLING_DELAY, SETTINGS
from eventlake.config.loader import settings_from_dict
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.plan import trigger_of

README = Path(__file__).parents[3] / "README.md"


def _low_latency_config() -> dict[str, object]:
    text = README.read_text()
    start = text.index("### Low latency\n")
    block = re.search(r"```yaml\n(.*?)```", text[start : text.index("\n### ", start + 1)], re.S)
    assert block is not None
    data = yaml.safe_load(block.group(1))
    assert isinstance(data, dict)
    return data


def test_readme_low_latency_config_runs_the_flows_as_the_bench_measured() -> None:
    orders = load_pipelines(examples=True).get("orders")
    readme = settings_from_dict(_low_latency_config())
    _what, _trigger, conf, params = SETTINGS["silver-gold"]
    bench = settings_from_dict({"pipelines": {"orders": params}})

    readme_configs, bench_configs = orders.configs(readme), orders.configs(bench)
    triggers = {name: trigger_of(spec, readme_configs[name]) for name, spec in orders.flows.items()}
    assert triggers == {
        name: trigger_of(spec, bench_configs[name]) for name, spec in orders.flows.items()
    }
    assert {n for n, t in triggers.items() if t == "0 seconds"} == {"silver", "revenue_hourly"}
    assert readme.spark.conf[POLLING_DELAY] == conf[POLLING_DELAY] == "250ms"
