"""The medallion benchmark's settings: `shipped` is what ships, README's Low latency config
is `every-10s`."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bench.medallion import CONTINUOUS_FLOWS, SETTINGS
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


def _triggers(config: dict[str, object]) -> dict[str, str]:
    orders = load_pipelines(examples=True).get("orders")
    configs = orders.configs(settings_from_dict(config))
    return {name: trigger_of(spec, configs[name]) for name, spec in orders.flows.items()}


def test_the_shipped_setting_is_the_shipped_pipeline() -> None:
    _what, trigger, conf, params = SETTINGS["shipped"]
    assert (trigger, conf, params) == (None, {}, {})
    shipped = _triggers({})
    assert {n for n, t in shipped.items() if t == "0 seconds"} == set(CONTINUOUS_FLOWS)
    assert {t for n, t in shipped.items() if n not in CONTINUOUS_FLOWS} == {"10 seconds"}


def test_readme_low_latency_config_runs_the_flows_as_the_bench_measured() -> None:
    _what, _trigger, conf, params = SETTINGS["every-10s"]
    readme = _triggers(_low_latency_config())
    assert readme == _triggers({"pipelines": {"orders": params}})
    assert set(readme.values()) == {"10 seconds"}
    assert conf == {}
