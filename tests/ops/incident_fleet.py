"""Fleets for the incident tests: a planned rolling reboot with a real outbreak, and a rack-wide Xid 79 storm.

Each builder returns exactly the events its test needs, with explicit
timestamps (no simulator: the simulator's ``maintenance`` preset covers the
statistics, these cover the operations chain).

What a reboot looks like in events (decided here, documented in
docs/operations.md): the jobs running on the host die with it, so one crash
per host with the NCCL watchdog signature their ranks leave (a job per rack,
``origin: watchdog``); while the host powers down its GPUs fall off the bus
(Xid 79 on two devices) and its PCIe links go down; five minutes later it is
back, quiet. An *announced* reboot wraps this in two announcements: the host
with ``maintenance=planned-reboot`` a minute before, and without it ten
minutes after.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
#: The rolling reboot starts here (after the detectors' day of warm-up).
REBOOT_AT = T0 + timedelta(hours=26)
WATCHDOG = "watchdog | c10d::ProcessGroupNCCL::ncclCommWatchdog | libtorch_cuda.so"


@dataclass
class Scenario:
    events: list[Any]
    #: host -> rack
    racks: dict[str, str]
    #: hosts rebooted, and their racks
    rebooted: list[str] = field(default_factory=list)
    rebooted_racks: list[str] = field(default_factory=list)
    #: the real outbreak's host
    sick_host: str = ""
    end: datetime = T0


def _host_attrs(i: int, per_rack: int) -> dict[str, str]:
    rack = i // per_rack + 1
    return {"rack": f"r{rack:02d}", "datacenter": f"dc{(rack - 1) // 3 + 1}", "gpu_model": "H100",
            "driver": "550.54"}


def _background(hosts: list[str], end_s: float, rng: random.Random) -> list[tuple[float, Any]]:
    from fleetepi.contract import Crash, Telemetry

    sigs = [f"SIGABRT | trainer::step{j} | libtorch_cuda.so" for j in range(8)]
    out: list[tuple[float, Any]] = []
    for h in hosts:
        t = rng.expovariate(0.4 / 3600.0)
        while t < end_s:
            out.append((t, Crash(ts=T0 + timedelta(seconds=t), host=h, signature=rng.choice(sigs),
                                 signal="SIGABRT", job=f"bg{rng.randrange(500)}")))
            t += rng.expovariate(0.4 / 3600.0)
        t = rng.expovariate(0.2 / 3600.0)
        while t < end_s:
            out.append((t, Telemetry(ts=T0 + timedelta(seconds=t), host=h, kind="xid", code=13)))
            t += rng.expovariate(0.2 / 3600.0)
    for k in range(int(end_s // 3600) + 1):  # a cool reading every hour from each host: event time moves
        for i, h in enumerate(hosts):
            out.append((k * 3600.0 + i, Telemetry(ts=T0 + timedelta(seconds=k * 3600.0 + i), host=h,
                                                  kind="thermal", value=55.0)))
    return out


def reboot_events(host: str, at: datetime, job: str) -> list[tuple[float, Any]]:
    """One host's reboot at ``at``: its job's watchdog crash, Xid 79 on two GPUs, PCIe link down."""
    from fleetepi.contract import Crash, Telemetry

    base = (at - T0).total_seconds()
    return [
        (base, Crash(ts=at, host=host, signature=WATCHDOG, signal="SIGABRT", origin="watchdog", job=job)),
        (base + 30, Telemetry(ts=at + timedelta(seconds=30), host=host, kind="xid", code=79, device="0000:17:00.0",
                              message="GPU has fallen off the bus.")),
        (base + 31, Telemetry(ts=at + timedelta(seconds=31), host=host, kind="xid", code=79, device="0000:65:00.0",
                              message="GPU has fallen off the bus.")),
        (base + 40, Telemetry(ts=at + timedelta(seconds=40), host=host, kind="pcie", device="0000:17:00.0",
                              message="PCIe link down")),
    ]


def rolling_reboot(announced: bool, n_hosts: int = 60, per_rack: int = 10, share: float = 0.6,
                   seed: int = 11) -> Scenario:
    """``share`` of the hosts rebooted rack after rack (one rack every 20 min, a host a minute), plus a bad CPU.

    60 hosts in 6 racks (two datacenters): racks r01-r03 whole and 6 hosts of
    r04 reboot (60 %); the outbreak is a host of r06 whose CPU silently
    miscomputes (40 odd-shaped crashes of different signatures in 45
    minutes, during the reboot). The recording ends 40 minutes after the
    last reboot, while the alerts it caused still fire (a Prometheus scraping
    the exporter sees the end state).
    """
    from fleetepi.contract import Host

    rng = random.Random(seed)
    hosts = [f"gpu-{i:03d}" for i in range(n_hosts)]
    attrs = {h: _host_attrs(i, per_rack) for i, h in enumerate(hosts)}
    n_reboot = round(share * n_hosts)
    rebooted = hosts[:n_reboot]
    timed: list[tuple[float, Any]] = []
    last = REBOOT_AT
    for k, h in enumerate(rebooted):
        rack_index, slot = divmod(k, per_rack)
        at = REBOOT_AT + timedelta(minutes=20 * rack_index + slot)
        last = max(last, at)
        timed += reboot_events(h, at, job=f"train-{attrs[h]['rack']}")
        if announced:
            before, after = at - timedelta(minutes=1), at + timedelta(minutes=10)
            timed.append(((before - T0).total_seconds(), Host(ts=before, host=h, attributes={
                **attrs[h], "maintenance": "planned-reboot"})))
            timed.append(((after - T0).total_seconds(), Host(ts=after, host=h, attributes=attrs[h])))
    sick = hosts[-5]
    timed += _bad_cpu(sick, REBOOT_AT + timedelta(minutes=30))
    end = last + timedelta(minutes=40)
    timed += _background(hosts, (end - T0).total_seconds(), rng)
    timed.sort(key=lambda te: te[0])
    events = [Host(ts=T0, host=h, attributes=attrs[h]) for h in hosts] + [e for _, e in timed]
    return Scenario(events=events, racks={h: a["rack"] for h, a in attrs.items()}, rebooted=rebooted,
                    rebooted_racks=sorted({attrs[h]["rack"] for h in rebooted}), sick_host=sick, end=end)


def _bad_cpu(host: str, start: datetime) -> list[tuple[float, Any]]:
    """40 odd-shaped crashes of different signatures in 45 minutes: a CPU that silently miscomputes."""
    from fleetepi.contract import Crash

    out: list[tuple[float, Any]] = []
    for k in range(40):
        t = start + timedelta(seconds=67 * k)
        out.append(((t - T0).total_seconds(), Crash(
            ts=t, host=host, signal="SIGSEGV", signature=f"SIGSEGV | fn_{k} | libfoo.so",
            fault_address=f"0x{(1 << 40) + (1 << (k % 40)):x}", shape_flags=["misaligned_sp", "bit_flip_address"],
            bitflip_score=0.9)))
    return out


def rack_xid_storm(n_hosts: int = 60, per_rack: int = 10, rack: str = "r03", seed: int = 13,
                   sick_in_rack: bool = False) -> Scenario:
    """Every host of one rack reports Xid 79 (six times each) within an hour.

    With ``sick_in_rack`` one host of that rack also has a bad CPU during the
    storm (a host page under the rack's page: what the inhibit rule holds).
    The recording ends 20 minutes after the storm, while everything still fires.
    """
    from fleetepi.contract import Telemetry

    rng = random.Random(seed)
    hosts = [f"gpu-{i:03d}" for i in range(n_hosts)]
    attrs = {h: _host_attrs(i, per_rack) for i, h in enumerate(hosts)}
    members = [h for h in hosts if attrs[h]["rack"] == rack]
    at = REBOOT_AT
    timed: list[tuple[float, Any]] = []
    for k in range(6):
        for i, h in enumerate(members):
            t = at + timedelta(seconds=(k * len(members) + i) * 50)
            timed.append(((t - T0).total_seconds(), Telemetry(ts=t, host=h, kind="xid", code=79,
                                                              device="0000:17:00.0")))
    end = at + timedelta(seconds=6 * len(members) * 50) + timedelta(minutes=20)
    sick = members[len(members) // 2] if sick_in_rack else ""
    if sick:
        timed += _bad_cpu(sick, end - timedelta(minutes=50))
    timed += _background(hosts, (end - T0).total_seconds(), rng)
    timed.sort(key=lambda te: te[0])
    from fleetepi.contract import Host

    events = [Host(ts=T0, host=h, attributes=attrs[h]) for h in hosts] + [e for _, e in timed]
    return Scenario(events=events, racks={h: a["rack"] for h, a in attrs.items()}, rebooted=members,
                    rebooted_racks=[rack], sick_host=sick, end=end)


def about_racks(alert: Any, racks: dict[str, str]) -> set[str]:
    """The racks an alert (an ``Alert`` or Alertmanager labels) is about: its host's, or the place it names."""
    get = alert.get if isinstance(alert, dict) else (lambda k, d=None: getattr(alert, k, d))
    out: set[str] = set()
    host = get("host")
    if host:
        out.add(racks.get(host, "?"))
    esc = get("escalation") or ""
    if esc.startswith("rack="):
        out.add(esc.removeprefix("rack="))
    if get("attribute") == "rack" and get("value"):
        out.add(get("value"))
    return out


__all__ = ["REBOOT_AT", "T0", "WATCHDOG", "Scenario", "about_racks", "rack_xid_storm", "reboot_events",
           "rolling_reboot"]
