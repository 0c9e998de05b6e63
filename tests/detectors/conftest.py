"""A tiny deterministic fleet for detector tests: explicit timestamps, no sleeping.

Not the simulator (``fleetepi.simulate``): a few lines per scenario, so each
test says exactly which events it feeds. Helpers are handed out by the
``fl`` fixture (pytest's importlib mode does not import sibling modules).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Iterator
from types import SimpleNamespace

import pytest

from fleetepi.contract import Alert, Crash, Event, Host, Telemetry, ts_from_ms
from fleetepi.detectors import DetectorConfig, Engine

#: 2026-11-01T00:00:00Z
T0 = 1_793_491_200_000
MIN = 60_000
HOUR = 3_600_000
DAY = 24 * HOUR


def hosts(n: int = 200, per_rack: int = 20, t_ms: int = T0) -> list[Host]:
    """n hosts: rack rNN in datacenter dc<rack // 5>; gpu by rack parity; driver = f(gpu) (confounded)."""
    out = []
    for i in range(n):
        rack = i // per_rack
        gpu = "H100" if rack % 2 == 0 else "A100"
        out.append(Host(ts=ts_from_ms(t_ms), host=f"h{i:04d}", attributes={
            "rack": f"r{rack:02d}", "datacenter": f"dc{rack // 5}", "gpu_model": gpu,
            "driver": "550.54" if gpu == "H100" else "535.129", "bios": "2.4" if i % 3 == 0 else "2.3"}))
    return out


def crash(t_ms: int, host: str, signature: str, job: str | None = None, **kw: object) -> Crash:
    return Crash(ts=ts_from_ms(t_ms), host=host, signature=signature, job=job, **kw)  # type: ignore[arg-type]


def tel(t_ms: int, host: str, kind: str, code: int | None = None, count: int | None = None,
        value: float | None = None, device: str | None = None) -> Telemetry:
    return Telemetry(ts=ts_from_ms(t_ms), host=host, kind=kind, code=code, count=count,  # type: ignore[arg-type]
                     value=value, device=device)


def background(n_hosts: int, start_ms: int, end_ms: int, seed: int = 1, rate_h: float = 6.0, n_sigs: int = 20,
               daily_amplitude: float = 0.4) -> Iterator[Event]:
    """Poisson crashes over ``n_sigs`` signatures (rates ~ 1/rank) with a daily cycle, plus hourly ECC readings."""
    rng = random.Random(seed)
    weights = [1.0 / (r + 1) for r in range(n_sigs)]
    peak = rate_h * (1 + daily_amplitude)
    t = start_ms
    while True:
        t += int(rng.expovariate(peak / HOUR)) + 1
        if t >= end_ms:
            return
        load = 1 + daily_amplitude * math.sin(2 * math.pi * ((t // HOUR) % 24) / 24)
        if rng.random() > load / (1 + daily_amplitude):
            continue
        sig = rng.choices(range(n_sigs), weights)[0]
        yield crash(t, f"h{rng.randrange(n_hosts):04d}", f"sig{sig:02d}", job=f"bg{rng.randrange(300)}")


def telemetry_background(n_hosts: int, start_ms: int, end_ms: int, seed: int = 2) -> Iterator[Event]:
    """A cool thermal reading per host every hour and rare Xid 31/79: the telemetry a healthy fleet sends."""
    rng = random.Random(seed)
    for t in range(start_ms, end_ms, HOUR):
        for i in range(n_hosts):
            yield tel(t + i * 1000, f"h{i:04d}", "thermal", value=60.0 + rng.random() * 10, device="GPU0")
        if rng.random() < 0.03:
            yield tel(t + 500, f"h{rng.randrange(n_hosts):04d}", "xid", 79)


def heartbeat(start_ms: int, end_ms: int, host: str = "h0000") -> Iterator[Event]:
    """A cool thermal reading every hour: keeps event time moving (the engine rejects
    events more than ``max_future_s`` past the watermark)."""
    for t in range(start_ms, end_ms, HOUR):
        yield tel(t, host, "thermal", value=50.0, device="GPU0")


def merged(*streams: Iterable[Event]) -> list[Event]:
    return sorted((e for s in streams for e in s), key=lambda e: e.ts_ms)


def run(events: Iterable[Event], config: DetectorConfig | None = None, detectors: list[str] | None = None,
        end_ms: int | None = None) -> list[Alert]:
    eng = Engine(config or DetectorConfig(), detectors=detectors)
    out: list[Alert] = []
    for ev in events:
        out.extend(eng.process(ev))
    if end_ms is not None:
        out.extend(eng.advance(end_ms))
    return out


def firing(alerts: Iterable[Alert], kind: str | None = None) -> list[Alert]:
    return [a for a in alerts if a.state == "firing" and (kind is None or a.kind == kind)]


@pytest.fixture
def fl() -> SimpleNamespace:
    return SimpleNamespace(T0=T0, MIN=MIN, HOUR=HOUR, DAY=DAY, hosts=hosts, crash=crash, tel=tel,
                           background=background, telemetry_background=telemetry_background, heartbeat=heartbeat, merged=merged,
                           run=run, firing=firing)
