"""Quarantine hook: decisions per second and latency of a webhook POST.

Prints:
* decisions/s of ``QuarantineHook.handle`` in-process (dry run: policy,
  breaker, idempotency, audit line; no subprocess), against msgspec decoding
  of the same payloads alone (the floor);
* p50/p99 latency of a real HTTP POST of one alert to a running
  ``HookServer`` (dry run), against GET /healthz on the same server (the HTTP
  floor), and of a POST that runs a real (fake, recording) kubectl twice.

Usage: .venv/bin/python bench/hook.py [--n 3000] [--posts 400]
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
from prometheus_client import CollectorRegistry

from fleetepi.hook.audit import AuditLog
from fleetepi.hook.config import parse_config
from fleetepi.hook.decider import QuarantineHook
from fleetepi.hook.payload import decode_payload
from fleetepi.hook.server import HookServer

TOKEN = "bench-token"
RULE = {"name": "k8s", "match": {"alertname": "FleetepiHostSick"},
        "actions": [{"type": "kubernetes", "cordon": True, "taint": "fleetepi.io/quarantine=true:NoSchedule"}]}


def body(i: int, status: str = "firing") -> bytes:
    return orjson.dumps({
        "version": "4", "status": status, "receiver": "quarantine-hook", "groupKey": f"g{i}",
        "alerts": [{"status": status, "fingerprint": f"{i:016x}",
                    "labels": {"alertname": "FleetepiHostSick", "host": f"gpu-{i:05d}", "severity": "page"},
                    "annotations": {"summary": f"Host gpu-{i:05d} is sick"},
                    "startsAt": "2026-03-02T08:15:00Z", "endsAt": "0001-01-01T00:00:00Z"}]})


def make_hook(tmp: Path, dry_run: bool) -> tuple[QuarantineHook, CollectorRegistry]:
    cfg = parse_config({"token_env": "X", "dry_run": dry_run, "audit_log": str(tmp / f"audit-{dry_run}.jsonl"),
                        "release_on_resolved": True, "rules": [RULE],
                        "breaker": {"fleet_size": 10**9, "max_hosts": 10**9, "max_percent": 100}})
    reg = CollectorRegistry()
    return QuarantineHook(cfg, reg, AuditLog(cfg.audit_log)), reg


def decisions_per_s(tmp: Path, n: int) -> None:
    bodies = [body(i) for i in range(n)]
    t = time.perf_counter()
    for b in bodies:
        decode_payload(b)
    floor = n / (time.perf_counter() - t)
    hook, _ = make_hook(tmp, dry_run=True)
    t = time.perf_counter()
    for b in bodies:
        hook.handle(decode_payload(b))
    rate = n / (time.perf_counter() - t)
    print(f"decisions/s (dry run, in-process): {rate:,.0f}   decode only: {floor:,.0f}   "
          f"ratio {rate / floor:.3f}")


def latencies(client: httpx.Client, method: str, path: str, bodies: list[bytes] | None, n: int) -> list[float]:
    out = []
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    for i in range(n):
        t = time.perf_counter()
        r = client.request(method, path, content=None if bodies is None else bodies[i], headers=headers)
        out.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
    return out


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] * 1000


def post_latency(tmp: Path, n: int) -> None:
    bindir = tmp / "bin"
    bindir.mkdir()
    fake = bindir / "kubectl"
    fake.write_text(f"#!{sys.executable} -IS\nimport sys\nprint(' '.join(sys.argv[1:]))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    os.environ["PATH"] = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    for dry in (True, False):
        hook, reg = make_hook(tmp, dry_run=dry)
        server = HookServer("127.0.0.1:0", hook, TOKEN, reg)
        server.start_background()
        try:
            with httpx.Client(base_url=server.url, timeout=30) as client:
                m = n if dry else max(20, n // 10)
                floor = latencies(client, "GET", "/healthz", None, m)
                post = latencies(client, "POST", "/alerts", [body(i) for i in range(m)], m)
        finally:
            server.shutdown()
            server.server_close()
        label = "dry run" if dry else "acting, 2 x fake kubectl"
        print(f"POST /alerts ({label}, n={m}): p50 {pct(post, 50):.2f} ms  p99 {pct(post, 99):.2f} ms   "
              f"GET /healthz: p50 {pct(floor, 50):.2f} ms  p99 {pct(floor, 99):.2f} ms   "
              f"p99 ratio {pct(post, 99) / pct(floor, 99):.1f}x")


def main() -> None:
    logging.getLogger("fleetepi.hook").setLevel(logging.ERROR)  # one line per decision otherwise
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="in-process decisions")
    ap.add_argument("--posts", type=int, default=400, help="HTTP POSTs (dry run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        decisions_per_s(Path(d), args.n)
        post_latency(Path(d), args.posts)


if __name__ == "__main__":
    main()
