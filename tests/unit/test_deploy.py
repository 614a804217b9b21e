"""The deployment files in docs/deploy: systemd's own verifier accepts the unit, and the
Kubernetes Deployment has what a streaming run needs (one replica, probes on the run's
endpoint, a grace period for a stop between batches)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

DEPLOY = Path(__file__).parents[2] / "docs" / "deploy"


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: make test-tools installs Debian's systemd"
    unit = (DEPLOY / "eventlake-orders.service").read_text()
    assert "KillMode=control-group" in unit
    assert "TimeoutStopSec=180" in unit
    # Verify it with this venv's eventlake in place of /srv/eventlake's.
    eventlake = Path(sys.executable).parent / "eventlake"
    assert eventlake.exists()
    local = tmp_path / "eventlake-orders.service"
    local.write_text(unit.replace("/srv/eventlake/.venv/bin/eventlake", str(eventlake)))
    checked = subprocess.run([analyze, "verify", str(local)], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.strip() == "", checked.stderr  # unknown keys are only warned about


def test_systemd_analyze_refuses_a_broken_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze
    broken = tmp_path / "broken.service"
    broken.write_text("[Service]\nExecStart=/nonexistent/eventlake run orders\n")
    checked = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
    assert checked.returncode != 0


def test_the_kubernetes_deployment_probes_the_run_and_stops_it_gracefully() -> None:
    [deployment] = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"]["type"] == "Recreate"
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= 120
    [container] = pod["containers"]
    assert container["args"][2:4] == ["run", "orders"]
    port = int(container["args"][container["args"].index("--metrics-port") + 1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == port
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    secrets = [e for e in container["env"] if "valueFrom" in e]
    assert all("secretKeyRef" in e["valueFrom"] for e in secrets)
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {v["name"] for v in pod["volumes"]}
