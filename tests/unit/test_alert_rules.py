"""The shipped Prometheus rules and Grafana dashboard: checked by Debian's promtool, and
every metric they use is one a run exports."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from eventlake.monitoring.lag import PartitionLag
from eventlake.monitoring.metrics import PipelineMetrics
from eventlake.monitoring.progress import BatchProgress

DOCS = Path(__file__).parents[2] / "docs"
RULES = DOCS / "prometheus" / "eventlake-alerts.yml"
DASHBOARD = DOCS / "grafana" / "eventlake-dashboard.json"


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60, check=False)  # fmt: skip


def exported_names() -> set[str]:
    """The series names a run's /metrics carries (histogram parts included)."""
    metrics = PipelineMetrics("p")
    metrics.flow_started("f", "10 seconds")
    metrics.lag("f", [PartitionLag("t", 0, 1, 2, 1, 0.5)])
    metrics.restarts.labels("p", "f", "EL-KAFKA-003").inc()
    metrics.batch(BatchProgress(
        query="p.f", batch_id=0, input_rows=1, input_rows_per_second=1.0,
        processed_rows_per_second=1.0, batch_duration_ms=10, watermark=None, state_rows=0,
        dropped_by_watermark=0,
    ))  # fmt: skip
    metrics.tables([{"table": "bronze/t", "files": 3, "bytes": 10, "small_files": 3,
                     "last_compact": {"at": 1.0}, "last_vacuum": {"at": 2.0}}])  # fmt: skip
    metrics.maintenance_failures({"bronze/t": {"counts": {"compact": 1}, "last": None}})
    return {s.name for family in metrics.registry.collect() for s in family.samples}


def used_names(expr: str) -> set[str]:
    return set(re.findall(r"\beventlake_[a-z_]+\b", expr))


def test_alert_rules_pass_promtool_check_and_their_unit_tests() -> None:
    checked = promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout
    tested = promtool("test", "rules", "eventlake-alerts.test.yml", cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_rules_and_dashboard_use_only_exported_metrics() -> None:
    exported = exported_names()
    rules = yaml.safe_load(RULES.read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {"EventlakeKafkaLagGrowing", "EventlakeNoBatchCommitted",
            "EventlakeQuarantineRateHigh", "EventlakeFlowRestartLoop",
            "EventlakeSmallFilesPilingUp", "EventlakeMaintenanceFailing"} <= alerts  # fmt: skip
    dashboard = json.loads(DASHBOARD.read_text())
    exprs += [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        assert used_names(expr), expr
        assert used_names(expr) <= exported, (expr, used_names(expr) - exported)


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"]
    assert dashboard["templating"]["list"]
    targets = [t for p in dashboard["panels"] for t in p["targets"]]
    assert len(targets) >= 12
    # Grafana's variables replaced by what Grafana substitutes, then each query checked by
    # promtool as the expression of a recording rule.
    rules = [
        {"record": f"eventlake:panel_{i}",
         "expr": t["expr"].replace("$pipeline", ".+").replace("$__rate_interval", "5m")}
        for i, t in enumerate(targets)
    ]  # fmt: skip
    path = tmp_path / "panels.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    checked = promtool("check", "rules", path.name, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
