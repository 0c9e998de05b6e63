"""Presets: every one deterministic, structurally different, and at the background rate its docstring states."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from fleetepi.cli import main
from fleetepi.contract import Host, encode
from fleetepi.simulate import (
    PRESETS,
    SimConfig,
    SimulationConfigError,
    preset,
    preset_names,
    simulate,
    truth_document,
)
from fleetepi.simulate.config import REQUIRED_ATTRIBUTES

#: Small enough for every preset to draw in a fraction of a second, large enough for racks and cohorts.
SMALL = {"hosts": 100, "days": 1.0}


def digest(cfg: SimConfig) -> str:
    """Hash of the events and the truth file (which must serialize: plain numbers, no numpy scalars)."""
    sim = simulate(cfg)
    h = hashlib.sha256()
    for e in sim.events():
        h.update(encode(e))
    h.update(orjson.dumps(truth_document(sim)))
    return h.hexdigest()


@pytest.mark.parametrize("name", list(PRESETS))
def test_equal_configs_give_identical_bytes(name: str) -> None:
    a, b = preset(name, seed=7, **SMALL), preset(name, seed=7, **SMALL)
    assert a == b
    assert digest(a) == digest(b)


def test_classic_is_the_default_config() -> None:
    assert preset("classic", seed=4) == SimConfig(seed=4)


@pytest.mark.parametrize("name", list(PRESETS))
def test_docstring_states_the_rate_and_the_fleet(name: str) -> None:
    p = PRESETS[name]
    cfg = p.config(1)
    first = p.summary
    assert f"~{p.crashes_per_host_day:g} crash" in first, first
    assert f"{cfg.hosts:,} hosts" in first and re.search(rf"\b{cfg.days:g} days\b", first), first


# Background rate (benign phenomena included, outbreaks excluded) against the docstring: counted in the
# tables, not the events, so each fleet is drawn at its full size (shorter runs where a full one is slow).
RATE_RUNS = {"classic": {}, "quiet": {"days": 6.0}, "noisy": {"days": 4.0}, "large": {"days": 2.0},
             "hot": {"days": 4.0}, "tiny": {}, "longhaul": {"days": 30.0}, "deploy": {}, "steady": {"days": 4.0},
             "weekly": {"days": 7.0}, "swinging": {"days": 4.0}, "maintenance": {}, "sparse": {},
             "scaling-500": {}, "scaling-2000": {}, "scaling-8000": {"days": 1.0}, "scaling-32000": {"days": 1.0},
             "huge": {"days": 1.0}}


def test_every_preset_has_a_rate_run() -> None:
    assert set(RATE_RUNS) == set(PRESETS)


@pytest.mark.parametrize("name", list(RATE_RUNS))
def test_background_rate_within_30_percent_of_the_docstring(name: str) -> None:
    sim = simulate(preset(name, seed=11, **RATE_RUNS[name]))
    cfg = sim.config
    rate = float((sim.crashes.origin < 0).sum()) / cfg.hosts / cfg.days
    assert rate == pytest.approx(PRESETS[name].crashes_per_host_day, rel=0.3)


def _announced(sim) -> list[dict[str, str]]:
    return [e.attributes for e in sim.events() if isinstance(e, Host)]


def test_fleet_structure_differs_between_presets() -> None:
    keys, racks = {}, {}
    for name in ("quiet", "noisy", "large", "tiny"):
        sim = simulate(preset(name, seed=3, hosts=300, days=0.5))
        ann = _announced(sim)
        keys[name] = set().union(*ann)
        racks[name] = sim.config.hosts_per_rack
        # some fleets leave attributes out on some hosts
        if sim.config.missing_attribute_share > 0:
            assert len({frozenset(a) for a in ann}) > 1
    assert {"zone", "node_pool", "switch"} <= keys["quiet"] and "datacenter" not in keys["quiet"]
    assert {"firmware", "rack_id", "cuda", "pdu", "nic_firmware"} <= keys["noisy"] and "bios" not in keys["noisy"]
    assert {"site", "pod", "os_kernel"} <= keys["large"] and "sku" not in keys["large"]
    assert keys["tiny"] == {"gpu_model", "driver", "bios", "kernel", "rack"}
    assert len(set(racks.values())) == 4 and all(16 <= r <= 64 for r in racks.values())


def test_cuda_follows_the_driver_and_the_driver_one_gpu_model() -> None:
    sim = simulate(preset("noisy", seed=2, hosts=300, days=6.0, outbreaks=()))
    latest: dict[str, dict[str, str]] = {}
    for e in sim.events():
        if isinstance(e, Host):
            latest[e.host] = e.attributes
    pairs = {(a["driver"], a["cuda"]) for a in latest.values()}
    assert len({d for d, _ in pairs}) == len(pairs)  # one cuda per driver: exactly confounded
    assert {a["gpu_model"] for a in latest.values() if a["driver"] == "560.35.03"} == {"H100-SXM5-80GB"}


def test_telemetry_cadence() -> None:
    base = SimConfig(hosts=60, days=2.0, seed=5, outbreaks=())
    periodic = simulate(base)
    changed = simulate(base.replace(thermal_mode="on_change", ecc_zero_deltas=False, power_interval_s=900.0))
    k = {n: i for i, n in enumerate(("xid", "ecc_corrected", "ecc_uncorrected", "thermal", "nvlink", "pcie",
                                     "other", "power"))}
    th_p = (periodic.telemetry.kind == k["thermal"]).sum()
    th_c = (changed.telemetry.kind == k["thermal"]).sum()
    assert th_c < 0.5 * th_p
    # every host still reports at least every heartbeat (6 h)
    m = changed.telemetry.kind == k["thermal"]
    for h in range(60):
        ts = np.sort(changed.telemetry.ts_ms[m & (changed.telemetry.host == h)])
        assert len(ts) and np.diff(ts).max(initial=0) <= 6 * 3_600_000 + 1_800_000
    ecc = changed.telemetry.count[changed.telemetry.kind == k["ecc_corrected"]]
    assert len(ecc) and ecc.min() > 0
    assert (periodic.telemetry.count[periodic.telemetry.kind == k["ecc_corrected"]] == 0).any()
    pm = changed.telemetry.kind == k["power"]
    power = changed.telemetry.value[pm]
    # power readings (watts, on change like thermal) from every host, below the board limit
    assert 60 * 2 * 4 <= len(power) < 60 * 2 * 96 and set(changed.telemetry.host[pm].tolist()) == set(range(60))
    assert power.min() > 50 and power.max() < 700


def test_overrides_and_errors() -> None:
    assert preset("noisy", seed=9, hosts=200).hosts == 200
    assert preset("noisy", seed=9, hosts=200).attribute_name("bios") == "firmware"
    with pytest.raises(SimulationConfigError, match="unknown preset"):
        preset("enormous")
    with pytest.raises(SimulationConfigError):
        preset("quiet", dropped_attributes=("rack",))
    with pytest.raises(SimulationConfigError, match="unknown GPU model"):
        SimConfig(gpu_mix=(("Voodoo-2", 1.0),))
    assert "rack" in REQUIRED_ATTRIBUTES
    assert preset_names("scaling") == ["scaling-500", "scaling-2000", "scaling-8000", "scaling-32000"]


def test_cli_preset_and_list(tmp_path) -> None:
    r = CliRunner().invoke(main, ["simulate", "--list-presets"])
    assert r.exit_code == 0 and all(n in r.output for n in ("quiet", "noisy", "large", "longhaul"))
    out, truth = tmp_path / "ev.jsonl", tmp_path / "t.json"
    r = CliRunner().invoke(main, ["simulate", "--preset", "noisy", "--hosts", "80", "--days", "0.5", "--seed", "4",
                                  "-o", str(out), "--truth", str(truth)])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(truth.read_text())
    assert doc["schema"] == "fleetepi.simulate.truth/v2" and doc["config"]["preset"] == "noisy"
    assert doc["config"]["hosts"] == 80 and len(doc["outbreaks"]) == 18 and doc["benign"]
    first = json.loads(out.read_text().splitlines()[0])
    assert "firmware" in first["attributes"] or "rack_id" in first["attributes"]
    r = CliRunner().invoke(main, ["simulate", "--preset", "nope", "-o", str(out)])
    assert r.exit_code == 2 and "unknown preset" in r.output


def _weekend_over_weekday(name: str) -> float:
    """Background crashes per weekend day over per weekday, in a week from a Sunday (days 0 and 6 the weekend)."""
    cfg = preset(name, seed=5, hosts=400, days=7.0, outbreaks=())
    assert cfg.start == "2026-11-01T00:00:00Z"  # a Sunday
    sim = simulate(cfg)
    c = sim.crashes
    bg = c.origin == -1  # background signatures only (loops and aborts are scheduled, not load-shaped)
    per_day = np.bincount(((c.ts_ms[bg] - sim.start_ms) // 86_400_000).astype(int), minlength=7)[:7]
    return float(per_day[[0, 6]].mean() / per_day[1:6].mean())


def test_weekends_carry_weekend_load_of_a_weekdays_background() -> None:
    """Saturday and Sunday (UTC) run at ``weekend_load``: Monday's return is what the baselines must not page on."""
    assert _weekend_over_weekday("weekly") == pytest.approx(0.5, rel=0.15)
    assert _weekend_over_weekday("noisy") == pytest.approx(1.0, rel=0.15)


def test_weekly_is_noisy_with_weekends() -> None:
    assert preset("weekly", seed=3) == preset("noisy", seed=3).replace(preset="weekly", weekend_load=0.5)
    with pytest.raises(SimulationConfigError, match="weekend_load"):
        SimConfig(weekend_load=0.0)
    with pytest.raises(SimulationConfigError, match="weekend_load"):
        SimConfig(weekend_load=1.5)


def _day_to_day_phi(name: str) -> float:
    """Pooled phi of ``var = mu + phi mu^2`` of the busiest background signatures' daily counts (moments)."""
    days = 10
    sim = simulate(preset(name, seed=5, hosts=400, days=float(days), outbreaks=()))
    c = sim.crashes
    bg = c.origin == -1
    day = ((c.ts_ms[bg] - sim.start_ms) // 86_400_000).astype(int)
    counts = np.zeros((int(c.sig.max()) + 1, days))
    np.add.at(counts, (c.sig[bg], np.minimum(day, days - 1)), 1.0)
    busy = counts[counts.mean(axis=1) >= 20.0]
    mu, var = busy.mean(axis=1), busy.var(axis=1, ddof=1)
    return float(np.sum(var - mu) / np.sum(mu * mu))


def test_swinging_is_noisy_whose_signatures_swing_twice_as_widely() -> None:
    """The swinging fleet's busy signatures swing from day to day at phi ~0.67 (gamma shape 1.5), noisy's at ~0.33."""
    assert preset("swinging", seed=3) == preset("noisy", seed=3).replace(preset="swinging", day_to_day_shape=1.5)
    swinging, noisy = _day_to_day_phi("swinging"), _day_to_day_phi("noisy")
    assert 0.45 < swinging < 0.95 and 0.2 < noisy < 0.45 and swinging > 1.5 * noisy, (swinging, noisy)
