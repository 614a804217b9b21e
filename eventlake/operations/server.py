"""The HTTP endpoint of a run: ``/metrics`` (Prometheus text), ``/api/status`` (JSON),
``/api/lateness?flow=F`` (JSON), ``/`` (the live dashboard), and Kubernetes' probes:
``/healthz`` (200 while the run lives) and ``/readyz`` (200 when every flow runs and is
caught up, else 503 saying which is not)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST

from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from eventlake.operations.run_monitor import RunMonitor

log = logging.getLogger(__name__)


def dashboard_html() -> bytes:
    return resources.files("eventlake.resources").joinpath("dashboard.html").read_bytes()


def serve(monitor: RunMonitor, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving ``monitor`` on ``host:port`` (0: any free port) in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            try:
                if url.path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, monitor.exposition())
                elif url.path == "/api/status":
                    self._json(monitor.status())
                elif url.path == "/api/lateness":
                    flow = parse_qs(url.query).get("flow", [""])[0]
                    self._json(monitor.lateness(flow))
                elif url.path == "/healthz":
                    self._send(200, "text/plain", b"ok\n")
                elif url.path == "/readyz":
                    ready = monitor.readiness()
                    self._json(ready, 200 if ready["ready"] else 503)
                elif url.path in ("/", "/index.html"):
                    self._send(200, "text/html; charset=utf-8", dashboard_html())
                else:
                    self._send(404, "text/plain", b"not found\n")
            except EventlakeError as err:
                self._json({"error": err.render()}, 400)
            except Exception as exc:
                log.exception("serving %s failed", self.path)
                self._json({"error": f"{type(exc).__name__}: {exc}"}, 500)

        def _json(self, data: Any, code: int = 200) -> None:
            self._send(code, "application/json", json.dumps(data, default=str).encode())

        def _send(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    try:
        server = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise EventlakeError(
            ErrorCode.METRICS_PORT_UNAVAILABLE,
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}.",
            expected="a free TCP port for --metrics-port (metrics.port)",
            fix="pick another port, or stop the process that holds it",
        ) from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="eventlake-http", daemon=True).start()
    return server
