"""A tiny deterministic fleet for detector tests: explicit timestamps, no sleeping.

Not the simulator (``fleetepi.simulate``): a few lines per scenario, so each
test says exactly which events it feeds.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from fleetepi.contract import Crash, Event, Host, Telemetry, ts_from_ms

#: 2026-11-01T00:00:00Z
T0 = 1_793_491_200_000
HOUR = 3_600_000
DAY = 24 * HOUR


def hosts(n: int = 200, per_rack: int = 20, t_ms: int = T0) -> list[Host]:
    """n hosts: rack r<i> in datacenter dc<rack // 5>, gpu and bios by rack halves, driver by gpu."""
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
    return Telemetry(ts=ts_from_ms(t_ms), host=host, kind=kind, code=code, count=count, value=value,  # type: ignore[arg-type]
                     device=device)


def background(n_hosts: int, start_ms: int, end_ms: int, seed: int = 1, sig_rate_h: float = 6.0,
               n_sigs: int = 20, bursts_per_day: float = 2.0, daily_amplitude: float = 0.4) -> Iterator[Event]:
    """Poisson crashes over ``n_sigs`` signatures (rates 1/rank), a daily cycle, and job bursts."""
    import math

    rng = random.Random(seed)
    weights = [1.0 / (r + 1) for r in range(n_sigs)]
    tot = sum(weights)
    t = start_ms
    next_burst = start_ms + int(rng.expovariate(bursts_per_day / DAY)) if bursts_per_day else end_ms
    peak = sig_rate_h * (1 + daily_amplitude)
    while True:
        t += int(rng.expovariate(peak / HOUR)) + 1
        while next_burst < t and next_burst < end_ms:
            sig = f"sig{rng.randrange(n_sigs):02d}"
            job = f"job{next_burst}"
            for k in rng.sample(range(n_hosts), min(n_hosts, 64)):
                yield crash(next_burst + rng.randrange(60_000), f"h{k:04d}", sig, job=job)
            next_burst += int(rng.expovariate(bursts_per_day / DAY)) + 1
        if t >= end_ms:
            return
        hour = (t // HOUR) % 24
        if rng.random() > (1 + daily_amplitude * math.sin(2 * math.pi * hour / 24)) / (1 + daily_amplitude):
            continue
        x = rng.random() * tot
        i = 0
        while x > weights[i]:
            x -= weights[i]
            i += 1
        yield crash(t, f"h{rng.randrange(n_hosts):04d}", f"sig{i:02d}")
