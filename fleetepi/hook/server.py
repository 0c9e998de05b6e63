"""HTTP front of the hook: stdlib ``ThreadingHTTPServer``, four routes.

::

    POST /alerts          Alertmanager webhook v4 (bearer token) -> decisions as JSON
    POST /breaker/reset   close the circuit breaker (bearer token)
    GET  /metrics         Prometheus exposition of the hook's registry
    GET  /healthz         "ok"

Why the standard library: the hook answers a few notifications a minute,
its work is blocking subprocesses (threads fit), it has four routes, and a
server with no extra dependency is one less thing to patch on a host that can
drain the fleet. aiohttp (present through faust) would bring an event loop
for no gain.

Status codes follow what Alertmanager does with them: 2xx done, 4xx not
retried (bad token, bad payload: retrying cannot help), 5xx retried (a
command failed; idempotency makes the retry safe).
"""

from __future__ import annotations

import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fleetepi.hook.decider import QuarantineHook
from fleetepi.hook.exceptions import InvalidPayload
from fleetepi.hook.payload import MAX_BODY_BYTES, decode_payload

log = logging.getLogger(__name__)

ALERT_PATHS = ("/alerts", "/")


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9109`` for IPv6) -> (host, port)."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"listen address {listen!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


class HookServer(ThreadingHTTPServer):
    """The hook's HTTP server; ``serve_forever`` in a thread or the foreground."""

    daemon_threads = True

    def __init__(self, listen: str, hook: QuarantineHook, token: str, registry: CollectorRegistry) -> None:
        self.hook = hook
        self.token = token.encode()
        self.registry = registry
        super().__init__(parse_listen(listen), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start_background(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="fleetepi-hook", daemon=True)
        t.start()
        return t


class _Handler(BaseHTTPRequestHandler):
    server: HookServer
    protocol_version = "HTTP/1.1"
    #: Headers and body are two writes; with Nagle on, keep-alive clients wait for
    #: the delayed ACK (~40 ms) on every response.
    disable_nagle_algorithm = True
    server_version = "fleetepi-hook"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s " + format, self.client_address[0], *args)

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        else:
            self._json(404, {"error": f"no route GET {self.path}"})

    def do_POST(self) -> None:
        body = self._read_body()
        if body is None:
            return
        if not self._authorized():
            self._json(401, {"error": "missing or wrong bearer token"},
                       extra={"WWW-Authenticate": 'Bearer realm="fleetepi-hook"'})
            return
        remote = self.client_address[0]
        hook = self.server.hook
        if self.path == "/breaker/reset":
            hook.reset_breaker(remote=remote)
            self._json(200, {"breaker": "closed"})
            return
        if self.path not in ALERT_PATHS:
            self._json(404, {"error": f"no route POST {self.path}"})
            return
        try:
            payload = decode_payload(body)
        except InvalidPayload as exc:
            hook.reject(str(exc), remote=remote)
            self._json(400, {"error": str(exc)})
            return
        decisions = hook.handle(payload, remote=remote)
        failed = any(d.outcome == "failed" for d in decisions)
        self._json(500 if failed else 200, {"decisions": decisions})  # orjson serializes dataclasses

    # ------------------------------------------------------------------ helpers
    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        return hmac.compare_digest(token.strip().encode(), self.server.token)

    def _read_body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            self._json(400, {"error": "bad Content-Length"})
            return None
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._json(413, {"error": f"body of {length} bytes exceeds {MAX_BODY_BYTES}"})
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _json(self, code: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        self._send(code, orjson.dumps(obj), "application/json", extra)

    def _send(self, code: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


__all__ = ["ALERT_PATHS", "HookServer", "parse_listen"]
