"""Benign phenomena: each one is in the events (not only in the truth), shaped as the truth says."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from fleetepi.contract import Crash, Host, Telemetry
from fleetepi.simulate import SimConfig, Simulation, simulate
from fleetepi.simulate.benign import BACKOFF_CAP_S, crash_loop_times
from fleetepi.simulate.fleet import MAINTENANCE_VALUE
from fleetepi.simulate.tables import BURST, CRASH_LOOP, STATIC

H = 3_600_000

#: One small fleet with every benign knob turned up (drawn once: ~1 s).
CONFIG = SimConfig(
    hosts=240, days=3.0, seed=21, outbreaks=(), hosts_per_rack=24, crash_rate_per_host_day=5.0, signatures=300,
    job_bursts_per_day=3.0, burst_min_hosts=24, burst_max_hosts=96, burst_job_share=0.5, job_share=0.7,
    crash_loops_per_1k_host_day=20.0, crash_loop_hours=(2.0, 6.0), chronic_ecc_share=0.02, chronic_xid_share=0.02,
    static_associations=2, maintenance_rack_share=0.3, kernel_rollout_share=0.5,
    extra_attributes=("node_pool", "nic_firmware"))


@pytest.fixture(scope="module")
def sim() -> Simulation:
    return simulate(CONFIG)


@pytest.fixture(scope="module")
def events(sim: Simulation) -> list:
    return list(sim.events())


def of_type(sim: Simulation, t: str) -> list:
    out = [b for b in sim.benign if b.type == t]
    assert out, f"no {t} drawn"
    return out


def test_every_type_is_labelled_with_unique_ids(sim: Simulation) -> None:
    types = {b.type for b in sim.benign}
    assert types == {"job_abort", "crash_loop", "chronic_ecc", "chronic_xid", "static_association", "rollout",
                     "maintenance"}
    assert len({b.id for b in sim.benign}) == len(sim.benign)
    # none of them is an outbreak, and nothing they add is tagged as one
    assert sim.truth == [] and (sim.crashes.origin >= 0).sum() == 0 and (sim.telemetry.origin >= 0).sum() == 0


def test_crash_loops_back_off_on_one_host(sim: Simulation, events: list) -> None:
    for b in of_type(sim, "crash_loop"):
        mine = sorted(e.ts_ms for e in events if isinstance(e, Crash) and e.host == b.host
                      and e.signature == b.signature and b.start_ms <= e.ts_ms <= b.end_ms)
        assert len(mine) >= b.n_events >= 10
        gaps_s = np.diff(mine) / 1000
        # 10 s, 20 s, 40 s ... back-off plus 5-60 s of running: growing at first, then capped near 5 min
        assert gaps_s[0] < 75 and gaps_s.max() <= BACKOFF_CAP_S + 61
        assert np.median(gaps_s[6:]) > BACKOFF_CAP_S
        assert b.expected == (("host_spike", None, b.host, None, None, None, None),) and b.finding == "crash_loop"
    assert (sim.crashes.origin == CRASH_LOOP).sum() == sum(b.n_events for b in of_type(sim, "crash_loop"))


def test_crash_loop_times_alone() -> None:
    ts = crash_loop_times(0, 10 * H, np.random.default_rng(0))
    assert 100 <= len(ts) <= 130  # ~12 an hour once capped at 5 min
    assert np.all(np.diff(ts) > 0) and ts[-1] < 10 * H


def test_job_aborts_one_job_many_hosts_some_without_job(sim: Simulation, events: list) -> None:
    bursts = of_type(sim, "job_abort")
    crashes = [e for e in events if isinstance(e, Crash)]
    no_job = 0
    for b in bursts:
        mine = [c for c in crashes if c.signature == b.signature and c.host in set(b.hosts)
                and b.start_ms <= c.ts_ms <= b.end_ms]
        assert {c.host for c in mine} == set(b.hosts) and 24 <= len(b.hosts) <= 97
        assert {c.job for c in mine} == {b.job}
        assert b.end_ms - b.start_ms < 15 * 60_000
        no_job += b.job is None
    assert 0 < no_job < len(bursts)
    assert (sim.crashes.origin == BURST).sum() == sum(len(b.hosts) for b in bursts)


def test_background_crashes_without_job(sim: Simulation) -> None:
    bg = sim.crashes.origin == -1
    share = (sim.crashes.job[bg] >= 0).mean()
    assert share == pytest.approx(0.7, abs=0.05)


def test_chronic_ecc_steady_from_day_one(sim: Simulation, events: list) -> None:
    for b in of_type(sim, "chronic_ecc"):
        per_day = defaultdict(int)
        for e in events:
            if isinstance(e, Telemetry) and e.host == b.host and e.kind == "ecc_corrected":
                per_day[(e.ts_ms - sim.start_ms) // 86_400_000] += e.n
        days = [per_day[d] for d in range(3)]
        assert min(days) >= 20 * 24 * 0.7 and max(days) <= 2.0 * min(days)  # steady, every day, >= 20/h
        assert b.start_ms == sim.start_ms and b.end_ms == sim.end_ms and b.finding == "chronic"


def test_chronic_xid_repeats_one_code(sim: Simulation, events: list) -> None:
    for b in of_type(sim, "chronic_xid"):
        ts = [e.ts_ms for e in events if isinstance(e, Telemetry) and e.host == b.host and e.kind == "xid"
              and e.code == b.code]
        assert b.code in (63, 64, 92, 94) and len(ts) >= b.n_events >= 3 * 24 / 6.5
        gaps_h = np.diff(sorted(ts)) / H
        assert gaps_h.min() >= 0.79 * b.strength and gaps_h.max() <= 1.21 * b.strength
        assert ts[0] - sim.start_ms <= 1.2 * b.strength * H


def test_static_association_from_day_one(sim: Simulation, events: list) -> None:
    attrs = {e.host: e.attributes for e in events if isinstance(e, Host) and e.ts_ms == sim.start_ms}
    for b in of_type(sim, "static_association"):
        crashes = [e for e in events if isinstance(e, Crash) and e.signature == b.signature]
        inside = sum(attrs[c.host].get(b.attribute) == b.value for c in crashes)
        n_in = sum(a.get(b.attribute) == b.value for a in attrs.values())
        # per-host rate on the cohort vs the rest: the drawn 2-4x (loose: a few hundred crashes)
        rr = (inside / n_in) / max(1, len(crashes) - inside) * (len(attrs) - n_in)
        assert len(crashes) >= 25 and 1.3 < rr < 8 and 2.0 <= b.strength <= 4.0, (b.description, rr)
        # the first day holds its share already
        day1 = [c for c in crashes if c.ts_ms < sim.start_ms + 86_400_000]
        assert sum(attrs[c.host].get(b.attribute) == b.value for c in day1) > 0
        assert b.expected[0] == ("hardware_correlation", b.signature, None, b.attribute, b.value, None, None)
    assert (sim.crashes.origin == STATIC).sum() > 0


def test_rollouts_reannounce_and_grow(sim: Simulation, events: list) -> None:
    kinds = {b.attribute: b for b in of_type(sim, "rollout")}
    assert {"driver", "bios", "kernel"} <= set(kinds)
    k = kinds["kernel"]
    changed = [e for e in events if isinstance(e, Host) and e.ts_ms > sim.start_ms and e.attributes.get("kernel") == k.value]
    assert len({e.host for e in changed}) >= k.n_events * 0.9 and all(e.ts_ms >= k.start_ms for e in changed)


def test_planned_maintenance_whole_racks_announced(sim: Simulation, events: list) -> None:
    for b in of_type(sim, "maintenance"):
        rack_hosts = set(b.hosts)
        flagged = {e.host for e in events if isinstance(e, Host) and e.attributes.get("maintenance") == MAINTENANCE_VALUE
                   and e.ts_ms == b.start_ms}
        cleared = {e.host for e in events if isinstance(e, Host) and e.ts_ms == b.end_ms and "maintenance" not in e.attributes}
        assert flagged == rack_hosts == cleared
        links = {e.host for e in events if isinstance(e, Telemetry) and e.kind == "nvlink"
                 and b.start_ms <= e.ts_ms <= b.end_ms}
        assert rack_hosts <= links
        assert (b.attribute, b.value) in b.cohorts


def test_unannounced_maintenance_leaves_no_attribute() -> None:
    sim = simulate(CONFIG.replace(maintenance_announced=False, crash_loops_per_1k_host_day=0.0))
    assert of_type(sim, "maintenance")
    assert not any(isinstance(e, Host) and "maintenance" in e.attributes for e in sim.events())


def test_benign_knobs_off_draw_nothing() -> None:
    plain = simulate(SimConfig(hosts=60, days=1.0, seed=3, outbreaks=()))
    assert {b.type for b in plain.benign} <= {"job_abort", "rollout"}
