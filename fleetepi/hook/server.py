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

Hostile clients cost bounded resources: connections are served by a fixed
pool of :data:`MAX_WORKERS` threads with at most :data:`MAX_QUEUED` waiting
(more are closed at once), every socket read times out after
:data:`READ_TIMEOUT_S`, and the token is checked *before* the body is read,
so 1,100 unauthenticated connections announcing 1 MB and sending nothing hold
a few threads for a few seconds, not 1,100 threads forever. A 401 is audited
like every decision.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import queue
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fleetepi.hook.decider import QuarantineHook
from fleetepi.hook.exceptions import InvalidPayload
from fleetepi.hook.payload import MAX_BODY_BYTES, decode_payload
from fleetepi.hook.text import printable

log = logging.getLogger(__name__)

ALERT_PATHS = ("/alerts", "/")
#: Default address: loopback. Every interface only when asked for by name (0.0.0.0 or [::]).
DEFAULT_HOST = "127.0.0.1"
#: Threads serving connections; Alertmanager sends a few notifications a minute.
MAX_WORKERS = 16
#: Accepted connections waiting for a worker; beyond, new ones are closed at once.
MAX_QUEUED = 64
#: Every read of a request (line, headers, body) must progress within this.
READ_TIMEOUT_S = 5.0


def parse_listen(listen: str) -> tuple[str, int]:
    """The address to bind: ``PORT``, ``:PORT``, ``HOST:PORT``, ``[IPv6]:PORT`` -> (host, port).

    A bare port, or an empty host, means loopback (the hook acts on the
    fleet: it listens on every interface only when told ``0.0.0.0`` or
    ``[::]``). ``0:PORT`` is refused rather than guessed.

    :raises ValueError: naming what is wrong with ``listen``.
    """
    text = listen.strip()
    if text.isdigit():
        host, port = "", text
    elif text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"listen address {listen!r}: IPv6 addresses are written [ADDR]:PORT")
        host, port = inner, rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"listen address {listen!r}: {host!r} is not an IPv6 address") from None
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            raise ValueError(f"listen address {listen!r} is not PORT, HOST:PORT or [IPv6]:PORT")
        if ":" in host:
            raise ValueError(f"listen address {listen!r}: write IPv6 addresses in brackets, [ADDR]:PORT")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {listen!r}: port must be a number 0..65535")
    if host in ("0", "0.0", "0.0.0"):
        raise ValueError(f"listen address {listen!r}: say 0.0.0.0:{port} to listen on every interface, "
                         f"or 127.0.0.1:{port} for this host only")
    return host or DEFAULT_HOST, int(port)


class HookServer(HTTPServer):
    """The hook's HTTP server; ``serve_forever`` in a thread or the foreground.

    :param max_workers: threads serving connections.
    :param max_queued: accepted connections allowed to wait for a thread.
    :param read_timeout_s: socket timeout of every read of a request.
    """

    #: listen() backlog: the default 5 makes a burst of clients wait for SYN retransmits (1 s, 3 s, ...).
    request_queue_size = 128

    def __init__(self, listen: str, hook: QuarantineHook, token: str, registry: CollectorRegistry, *,
                 max_workers: int = MAX_WORKERS, max_queued: int = MAX_QUEUED,
                 read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.hook = hook
        self.token = token.encode()
        self.registry = registry
        self.read_timeout_s = read_timeout_s
        host, port = parse_listen(listen)
        if ":" in host:
            self.address_family = socket.AF_INET6
        self._queue: queue.Queue[tuple[socket.socket, Any] | None] = queue.Queue(max_queued)
        super().__init__((host, port), _Handler)
        self._workers = [threading.Thread(target=self._work, name=f"fleetepi-hook-{i}", daemon=True)
                         for i in range(max_workers)]
        for t in self._workers:
            t.start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"

    def start_background(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="fleetepi-hook", daemon=True)
        t.start()
        return t

    # ------------------------------------------------------------------ bounded pool
    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to the pool; when the pool and its queue are full, close it now."""
        try:
            self._queue.put_nowait((request, client_address))
        except queue.Full:
            log.warning("hook busy: %d connections waiting, closing one from %s", self._queue.qsize(), client_address[0])
            self.shutdown_request(request)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, client_address = item
            try:
                request.settimeout(self.read_timeout_s)
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001 - one connection's failure never stops a worker
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("hook: connection from %s failed", client_address[0] if client_address else "?", exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        for _ in self._workers:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break


class _Handler(BaseHTTPRequestHandler):
    server: HookServer
    protocol_version = "HTTP/1.1"
    #: Headers and body are two writes; with Nagle on, keep-alive clients wait for
    #: the delayed ACK (~40 ms) on every response.
    disable_nagle_algorithm = True
    server_version = "fleetepi-hook"

    def setup(self) -> None:
        self.timeout = self.server.read_timeout_s  # every read of the request, not only the first
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.client_address[0], printable(format % args, 500))

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):  # a client that went quiet or away: drop it, quietly
            self.close_connection = True

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif self.path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        else:
            self._json(404, {"error": f"no route GET {self.path}"})

    def do_POST(self) -> None:
        remote = self.client_address[0]
        hook = self.server.hook
        if not self._authorized():  # before reading a byte of the body
            hook.unauthorized(remote=remote, path=self.path)
            self.close_connection = True
            self._json(401, {"error": "missing or wrong bearer token"},
                       extra={"WWW-Authenticate": 'Bearer realm="fleetepi-hook"', "Connection": "close"})
            return
        body = self._read_body()
        if body is None:
            return
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
        if length < 0:
            self.close_connection = True
            self._json(400, {"error": "bad Content-Length"})
            return None
        body = self.rfile.read(length) if length > 0 else b""
        if len(body) < length:  # the client closed early
            self.close_connection = True
            return None
        return body

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


__all__ = ["ALERT_PATHS", "DEFAULT_HOST", "MAX_QUEUED", "MAX_WORKERS", "READ_TIMEOUT_S", "HookServer", "parse_listen"]
