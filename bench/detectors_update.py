"""Per-event update cost of each detector, in ns/event, on synthetic events.

The replay target (>= 100,000 events/s on one core, JSON decode included)
leaves the detectors together ~4-5 us per event. This prints, per detector,
the cost of ``update`` on a stream shaped like the simulator's (Zipf
signatures, job bursts, mostly telemetry), next to the cost of the cheapest
possible keyed reducer (a dict increment) measured in the same process:
the ratio is the figure that survives a change of machine.

    .venv/bin/python bench/detectors_update.py                 # simulator stream, 2,000 hosts x 3 days
    .venv/bin/python bench/detectors_update.py --synthetic     # no simulator: a crash-heavy synthetic mix

CPU time of this process (``time.process_time``), so other load on the
machine does not inflate the figures.
"""

from __future__ import annotations

import argparse
import platform
import random
import time
from collections import Counter

from fleetepi.contract import Crash, Host, Telemetry, ts_from_ms
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.engine import Engine
from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.registry import build_detectors

T0 = 1_793_491_200_000


def synthetic(n_events: int, n_hosts: int, seed: int = 7) -> tuple[list[Host], list[tuple[object, int]]]:
    rng = random.Random(seed)
    hosts = [Host(ts=ts_from_ms(T0), host=f"h{i:05d}", attributes={
        "rack": f"r{i // 40:03d}", "datacenter": f"dc{i // 400}", "gpu_model": ("H100", "A100")[i % 2],
        "driver": ("550.54", "535.129")[i % 2], "bios": ("2.3", "2.4")[i % 3 == 0]}) for i in range(n_hosts)]
    sigs = [f"libfoo.so!f{r} | libbar.so!g{r}" for r in range(400)]
    weights = [1.0 / (r + 1) ** 1.1 for r in range(400)]
    events: list[tuple[object, int]] = []
    t = T0
    # The simulator's density: ~2 M events in 14 days on 2,000 hosts (143,000 a day).
    span_ms = int(n_events / 143_000 * 86_400_000 * n_hosts / 2000)
    step = span_ms // n_events
    for _ in range(n_events):
        t += rng.randrange(1, 2 * step)
        h = f"h{rng.randrange(n_hosts):05d}"
        x = rng.random()
        if x < 0.15:  # crashes: a fraction of the stream, as in the simulator
            job = f"job{rng.randrange(50)}" if rng.random() < 0.3 else None
            sig = rng.choices(sigs, weights)[0]
            ev: object = Crash(ts=ts_from_ms(t), host=h, signature=sig, job=job)
        elif x < 0.55:
            ev = Telemetry(ts=ts_from_ms(t), host=h, kind="thermal", device=f"GPU{rng.randrange(8)}",
                           value=rng.gauss(65, 10))
        elif x < 0.95:
            ev = Telemetry(ts=ts_from_ms(t), host=h, kind="ecc_corrected", count=rng.randrange(3))
        else:
            ev = Telemetry(ts=ts_from_ms(t), host=h, kind="xid", code=rng.choice((13, 31, 43, 45, 79)))
        events.append((ev, t))
    return hosts, events


def simulated(n_hosts: int, days: float, seed: int = 1) -> tuple[list[Host], list[tuple[object, int]]]:
    """The simulator's stream (its mix: ~2/3 thermal readings, ~1/3 ECC counters, <1 % crashes)."""
    from fleetepi.simulate import SimConfig, simulate  # noqa: PLC0415

    sim = simulate(SimConfig(hosts=n_hosts, days=days, seed=seed))
    hosts: list[Host] = []
    events: list[tuple[object, int]] = []
    for ev in sim.events():
        if isinstance(ev, Host):
            hosts.append(ev)
        else:
            events.append((ev, ev.ts_ms))
    return hosts, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000, help="synthetic events (with --synthetic)")
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--days", type=float, default=3.0, help="simulated days")
    ap.add_argument("--synthetic", action="store_true", help="synthetic crash-heavy mix instead of the simulator")
    args = ap.parse_args()
    if args.synthetic:
        hosts, events = synthetic(args.events, args.hosts)
        source = "synthetic (15 % crashes)"
    else:
        hosts, events = simulated(args.hosts, args.days)
        source = f"fleetepi.simulate, {args.days:g} days"
    cfg = DetectorConfig()

    # Reference: the cheapest keyed reducer (dict increment per event).
    ref: Counter[str] = Counter()
    t = time.process_time_ns()
    for ev, _ in events:
        ref[ev.host] += 1  # type: ignore[attr-defined]
    ref_ns = (time.process_time_ns() - t) / len(events)

    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"{len(events):,} events ({source}) over {args.hosts:,} hosts; "
          f"reference dict increment {ref_ns:.0f} ns/event")
    print(f"{'detector':<22}{'wanted':>9}{'ns/event':>11}{'ns/wanted':>11}{'x ref':>8}{'alerts':>8}")
    total = 0.0
    for name in ("signature_spike", "hardware_correlation", "host_spike", "telemetry_host", "telemetry_cohort"):
        inv = Inventory(cfg.inventory_history)
        for h in hosts:
            inv.announce(h.host, T0, h.attributes)
        (det,) = build_detectors(cfg, [name])
        types = getattr(det, "event_types", (Crash, Telemetry))
        wanted = [(ev, ts) for ev, ts in events if type(ev) in types and det.route(ev) is not None]  # type: ignore[arg-type]
        step_ms = int(cfg.step_s * 1000)
        next_tick = T0 + step_ms
        alerts = 0
        t = time.process_time_ns()
        for ev, ts in events:
            if ts >= next_tick:
                alerts += len(det.advance(ts, inv))
                next_tick = ts - ts % step_ms + step_ms
            if type(ev) in types and det.route(ev) is not None:  # type: ignore[arg-type]
                alerts += len(det.update(ev, ts, inv))  # type: ignore[arg-type]
        ns = (time.process_time_ns() - t) / len(events)
        total += ns
        per_wanted = ns * len(events) / max(len(wanted), 1)
        print(f"{name:<22}{len(wanted):>9,}{ns:>11.0f}{per_wanted:>11.0f}{ns / ref_ns:>8.1f}{alerts:>8}")
    print(f"{'all five':<22}{'':>9}{total:>11.0f}{'':>11}{total / ref_ns:>8.1f}")

    # The whole Engine (admission, inventory, dispatch, ticks) with and without the detectors.
    stream = [*hosts, *(ev for ev, _ in events)]
    for label, names in (("Engine, no detectors", []), ("Engine, all five", None)):
        eng = Engine(cfg, detectors=names)
        t = time.process_time_ns()
        for ev in stream:
            eng.process(ev)  # type: ignore[arg-type]
        ns = (time.process_time_ns() - t) / len(stream)
        print(f"{label:<22}{'':>9}{ns:>11.0f}{'':>11}{ns / ref_ns:>8.1f}{sum(eng.alerts.values()):>8}")


if __name__ == "__main__":
    main()
