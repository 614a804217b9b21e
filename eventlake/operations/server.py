"""The HTTP endpoint of a run: ``/metrics`` (Prometheus text), ``/api/status`` (JSON, the
monitor's cached record), ``POST /api/lateness`` (JSON; one measure at a time, bounded),
``/`` (the live dashboard), and Kubernetes' probes: ``/healthz`` (200 while the run lives)
and ``/readyz`` (200 when every flow runs and is caught up, else 503 saying which is not).

With ``metrics.token`` set, ``/metrics`` and ``/api/*`` need ``Authorization: Bearer
<token>``; the probes and the dashboard's page (which holds no data) do not. Any host but
loopback needs a token. ``metrics.tls_cert`` and ``tls_key`` serve HTTPS. Clients never see
an exception's text: it goes to the run's log.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from prometheus_client import CONTENT_TYPE_LATEST

from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from eventlake.config.model import MetricsSettings
    from eventlake.operations.run_monitor import RunMonitor

log = logging.getLogger(__name__)

#: Paths served without the token: the probes, and the page whose script asks for data.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/index.html"})
#: The largest request body read (a lateness request is a flow's name).
MAX_BODY = 4096
#: Seconds a client has to complete the TLS handshake and send its request.
CLIENT_TIMEOUT = 10.0


def dashboard_html() -> bytes:
    return resources.files("eventlake.resources").joinpath("dashboard.html").read_bytes()


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the endpoint on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to any interface
        return False


def check_exposure(settings: MetricsSettings) -> None:
    """EL-MONITOR-002 when the endpoint would be reachable from other hosts unprotected."""
    if settings.token is None and not is_loopback(settings.host):
        raise EventlakeError(
            ErrorCode.METRICS_UNPROTECTED,
            f"metrics.host is {settings.host}, which other hosts can reach, and "
            "metrics.token is not set: anyone could read the run's status and metrics.",
        )


def tls_context(settings: MetricsSettings) -> ssl.SSLContext | None:
    """The server's TLS context from ``tls_cert``/``tls_key`` (None: plain HTTP)."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(settings.tls_cert), str(settings.tls_key))
    except (OSError, ssl.SSLError) as exc:
        raise EventlakeError(
            ErrorCode.METRICS_TLS_INVALID,
            f"cannot load metrics.tls_cert {settings.tls_cert} with metrics.tls_key "
            f"{settings.tls_key}: {getattr(exc, 'strerror', None) or exc}.",
        ) from None
    return context


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The handshake runs on the request's thread, so a slow client holds only its own.
        request.settimeout(CLIENT_TIMEOUT)
        if self.tls is not None:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                log.debug("TLS handshake with %s failed: %s", client_address, exc)
                return
        super().finish_request(request, client_address)


def serve(monitor: RunMonitor, settings: MetricsSettings, port: int) -> ThreadingHTTPServer:
    """Start serving ``monitor`` on ``settings.host:port`` (0: any free port) in a daemon
    thread; refused (EL-MONITOR-002/003) when it would be exposed or its TLS is broken."""
    check_exposure(settings)
    context = tls_context(settings)
    token = settings.token.get_secret_value().encode() if settings.token else None
    measuring = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server_version = "eventlake"
        sys_version = ""
        _body = b""

        def do_GET(self) -> None:
            path = urlparse(self.path).path
            if path == "/api/lateness":
                self._send(405, "text/plain", b"POST a JSON body {\"flow\": \"...\"}\n",
                           Allow="POST")  # fmt: skip
            elif self._allowed(path):
                self._guarded(lambda: self._get(path))

        def do_POST(self) -> None:
            path = urlparse(self.path).path
            # Read the body first: closing on unread bytes resets the connection, and the
            # client would never see the answer.
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                self.close_connection = True
                self._json({"error": f"a JSON body of at most {MAX_BODY} bytes"}, 413)
                return
            self._body = self.rfile.read(length)
            if path != "/api/lateness":
                self._send(405 if path in OPEN_PATHS or path.startswith("/api/") else 404,
                           "text/plain", b"not found\n")  # fmt: skip
            elif self._allowed(path):
                self._guarded(self._lateness)

        def _get(self, path: str) -> None:
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, monitor.exposition())
            elif path == "/api/status":
                self._json(monitor.status())
            elif path == "/healthz":
                self._send(200, "text/plain", b"ok\n")
            elif path == "/readyz":
                ready = monitor.readiness()
                self._json(ready, 200 if ready["ready"] else 503)
            elif path in ("/", "/index.html"):
                self._send(200, "text/html; charset=utf-8", dashboard_html())
            else:
                self._send(404, "text/plain", b"not found\n")

        def _lateness(self) -> None:
            # A JSON body: a cross-site form cannot send one without a preflight we refuse.
            if self.headers.get_content_type() != "application/json":
                self._json({"error": "send Content-Type: application/json"}, 415)
                return
            try:
                flow = json.loads(self._body)["flow"]
            except (ValueError, KeyError, TypeError):
                self._json({"error": 'the body is {"flow": "<flow>"}'}, 400)
                return
            if not isinstance(flow, str):
                self._json({"error": 'the body is {"flow": "<flow>"}'}, 400)
                return
            if not measuring.acquire(blocking=False):
                busy = EventlakeError(ErrorCode.LATENESS_BUSY, "a lateness measure runs now.")
                self._json(_client_error(busy), 409)
                return
            try:
                self._json(monitor.lateness(flow))
            finally:
                measuring.release()

        def _allowed(self, path: str) -> bool:
            if token is None or path in OPEN_PATHS:
                return True
            offered = self.headers.get("Authorization", "")
            if offered.startswith("Bearer ") and hmac.compare_digest(
                offered.removeprefix("Bearer ").strip().encode(), token
            ):
                return True
            self._send(401, "application/json", b'{"error": "a bearer token is required"}',
                       **{"WWW-Authenticate": 'Bearer realm="eventlake"'})  # fmt: skip
            return False

        def _guarded(self, action: Any) -> None:
            try:
                action()
            except EventlakeError as err:
                log.warning("serving %s: %s", self.path, err.render())
                self._json(_client_error(err), 400)
            except Exception:
                log.exception("serving %s failed", self.path)
                self._json({"error": "internal error; the run's log file has it"}, 500)

        def _json(self, data: Any, code: int = 200) -> None:
            self._send(code, "application/json", json.dumps(data, default=str).encode())

        def _send(self, code: int, content_type: str, body: bytes, **headers: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    class Server(_Server):
        address_family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET

    try:
        server = Server((settings.host, port), Handler)
    except OSError as exc:
        raise EventlakeError(
            ErrorCode.METRICS_PORT_UNAVAILABLE,
            f"cannot serve metrics on {settings.host}:{port}: {exc.strerror or exc}.",
            expected="a free TCP port for --metrics-port (metrics.port)",
            fix="pick another port, or stop the process that holds it",
        ) from None
    server.tls = context
    threading.Thread(target=server.serve_forever, name="eventlake-http", daemon=True).start()
    return server


def _client_error(err: EventlakeError) -> dict[str, str]:
    """What a client sees of an error: its code and what happened, not a cause's text."""
    return {"code": err.code, "error": f"{err.code}: {err.what.splitlines()[0]}"}
