"""The run's HTTP endpoint off loopback: refused without a token; with one (and TLS), the
probes and the page are open, data needs the bearer token, lateness is a bounded POST,
status is served from the monitor's cache, and errors carry no exception text."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from eventlake.config.model import MetricsSettings
from eventlake.errors import EventlakeError
from eventlake.kafka import produce
from eventlake.testing import running_pipeline, settings_for, wait_until
from eventlake.testing.tls import make_tls_files
from tests.integration.cli_helpers import run_cli, write_config
from tests.integration.guarded_pipeline import guarded

pytestmark = pytest.mark.integration

TOKEN = "s3cret-for-the-test-only"
GUARDED_MODULE = Path(__file__).parent / "guarded_pipeline.py"


def _request(
    url: str, *, token: str | None = None, cafile: Path | None = None,
    method: str = "GET", body: bytes | None = None, content_type: str | None = None,
) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    request = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if content_type is not None:
        request.add_header("Content-Type", content_type)
    context = ssl.create_default_context(cafile=str(cafile)) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=60, context=context) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_an_endpoint_off_loopback_without_a_token_is_refused_before_spark_starts(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path, "127.0.0.1:1", guarded={"topic": "t"})
    exposed = settings.model_copy(update={"metrics": MetricsSettings(host="0.0.0.0")})
    with pytest.raises(EventlakeError) as refused, running_pipeline(guarded, exposed):
        pass
    assert refused.value.code == "EL-MONITOR-002"
    assert "metrics.token" in refused.value.render()


def test_token_tls_bounded_lateness_and_cached_status(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2, prefix="guarded")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    stamps = [(start + timedelta(seconds=i)).isoformat() for i in range(200)]
    records = [(f"k{i}", json.dumps({"id": f"e{i}", "ts": ts})) for i, ts in enumerate(stamps)]
    produce(bootstrap, topic, records)
    tls = make_tls_files(tmp_path / "tls")
    chain = tmp_path / "tls" / "chain.pem"  # the server's certificate, then its CA's
    chain.write_text((tmp_path / "tls" / "broker.pem").read_text() + tls.ca.read_text())
    metrics = MetricsSettings(host="0.0.0.0", token=TOKEN, tls_cert=chain,
                              tls_key=tmp_path / "tls" / "broker.key",
                              lateness_max_rows=50)  # fmt: skip
    settings = settings_for(tmp_path, bootstrap, guarded={"topic": topic}).model_copy(
        update={"metrics": metrics}
    )
    with running_pipeline(guarded, settings, trigger="1 second") as run:
        assert run.url.startswith("https://127.0.0.1:")
        wait_until(lambda: run.status()["flows"][0]["last_batch"] is not None, timeout=120,
                   what="a first batch")  # fmt: skip
        url, ca = run.url, tls.ca

        # Plain HTTP on the TLS port gets nothing.
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(url.replace("https:", "http:") + "healthz", timeout=10)
        # The probes and the page are open; data needs the token.
        assert _request(url + "healthz", cafile=ca)[0] == 200
        assert _request(url + "readyz", cafile=ca)[0] in (200, 503)
        page = _request(url, cafile=ca)
        assert page[0] == 200
        assert b"<html" in page[2]
        for path in ("metrics", "api/status"):
            code, headers, body = _request(url + path, cafile=ca)
            assert code == 401, path
            assert headers["WWW-Authenticate"].startswith("Bearer")
            assert b"eventlake_" not in body
            assert _request(url + path, token="wrong", cafile=ca)[0] == 401
        code, _, body = _request(url + "metrics", token=TOKEN, cafile=ca)
        assert code == 200
        assert b"eventlake_input_rows_total{" in body

        # Status comes from the monitor's cache: a burst of requests gets one record.
        times = {json.loads(_request(url + "api/status", token=TOKEN, cafile=ca)[2])["time"]
                 for _ in range(10)}  # fmt: skip
        assert len(times) == 1

        # Lateness: never a GET; a POST with a JSON body and the token, bounded in rows.
        assert _request(url + "api/lateness?flow=deduplicated", token=TOKEN, cafile=ca)[0] == 405
        ask = json.dumps({"flow": "deduplicated"}).encode()
        assert _request(url + "api/lateness", method="POST", body=ask, cafile=ca,
                        content_type="application/json")[0] == 401  # fmt: skip
        assert _request(url + "api/lateness", method="POST", body=ask, token=TOKEN, cafile=ca,
                        content_type="text/plain")[0] == 415  # fmt: skip
        code, _, body = _request(url + "api/lateness", method="POST", body=ask, token=TOKEN,
                                 cafile=ca, content_type="application/json")  # fmt: skip
        assert code == 200, body
        [measured] = json.loads(body)["watermarks"]
        assert measured["records"] == 50  # lateness_max_rows of the 200 sent
        # An error is its code and what happened; no exception text, no traceback.
        unknown = json.dumps({"flow": "nope"}).encode()
        code, _, body = _request(url + "api/lateness", method="POST", body=unknown, token=TOKEN,
                                 cafile=ca, content_type="application/json")  # fmt: skip
        error = json.loads(body)
        assert code == 400
        assert error["code"].startswith("EL-")
        assert "Traceback" not in error["error"]
        assert "Exception" not in error["error"]

        # `eventlake status` reaches the live run with the config's token and certificate.
        cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, guarded={"topic": topic})
        config = yaml.safe_load(cfg.read_text())
        key = tmp_path / "tls" / "broker.key"
        config["metrics"] = {"host": "0.0.0.0", "token": "${EVENTLAKE_TEST_METRICS_TOKEN}",
                             "tls_cert": str(chain), "tls_key": str(key)}  # fmt: skip
        cfg.write_text(yaml.safe_dump(config))
        secret = {"EVENTLAKE_TEST_METRICS_TOKEN": TOKEN}
        shown = run_cli("--config", str(cfg), "status", "guarded", "--module", str(GUARDED_MODULE),
                        "--format", "json", env=secret)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        record = json.loads(shown.stdout)
        assert record["source"].startswith("metrics endpoint")
        assert TOKEN not in shown.stdout + shown.stderr


def test_a_lateness_measure_past_its_time_bound_is_cancelled(
    spark: Any, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    from eventlake.operations.lateness_report import measure_lateness

    topic = make_topic(prefix="guarded-slow")
    produce(bootstrap, topic, [("k", json.dumps({"id": "e", "ts": "2026-11-01T00:00:00"}))])
    settings = settings_for(tmp_path, bootstrap, guarded={"topic": topic})
    with pytest.raises(EventlakeError) as cancelled:
        measure_lateness(guarded, "deduplicated", settings, spark, timeout=0.05)
    assert cancelled.value.code == "EL-LATENESS-003"
    # Unbounded, the same measure completes: it was the bound, not the flow.
    [found] = measure_lateness(guarded, "deduplicated", settings, spark)
    assert found.records == 1
