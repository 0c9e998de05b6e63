"""Cases to units: a job is one case, a restart that fails again on other hosts is another."""

from __future__ import annotations

from fleetepi.agents.telemetry.power import PowerThresholds, PowerTracker
from fleetepi.detectors import DetectorConfig
from fleetepi.detectors.cases import CaseMaker
from fleetepi.detectors.units import UnitFilter

MIN = 60_000


def _filter() -> UnitFilter:
    c = DetectorConfig()
    return UnitFilter.new(c.unit_span_s, c.job_span_s, c.step_s, c.burst_alpha)


def _restarts(f: UnitFilter, hosts: list[str], restarts: int, every_ms: int) -> float:
    units = 0.0
    for r in range(restarts):
        t0 = r * every_ms
        units += sum(f.unit("hang", h, "job-7", t0 + 10_000 + 500 * i) for i, h in enumerate(hosts))
    return units


def test_a_job_abort_on_64_hosts_is_one_case() -> None:
    f = _filter()
    assert _restarts(f, [f"h{i}" for i in range(64)], restarts=1, every_ms=0) == 1.0
    assert f.dropped_job == 63


def test_each_restart_of_a_deadlocked_job_that_hangs_again_is_a_new_case() -> None:
    """The watchdog aborts all 64 ranks, the job restarts and hangs again 20 min later: 6 restarts, 6 cases."""
    hosts = [f"h{i}" for i in range(64)]
    f = _filter()
    assert _restarts(f, hosts, restarts=6, every_ms=20 * MIN) == 6.0
    # the same on one rank per restart (a crash-looping pod): the host is the unit, one case
    g = _filter()
    assert _restarts(g, ["h0"], restarts=6, every_ms=20 * MIN) == 1.0


def test_reports_of_one_abort_spread_over_two_minutes_stay_one_case() -> None:
    f = _filter()
    units = sum(f.unit("hang", f"h{i}", "job-7", i * 2_000) for i in range(64))  # 128 s of rank reports
    assert units == 1.0


def test_the_agents_power_crossing_weighs_one_error_and_its_samples_none() -> None:
    """The agent's events for a GPU pinned at its limit, as the detectors weigh them: one crossing, then nothing."""
    tracker = PowerTracker("h1", 60, PowerThresholds())
    events = []
    for i, watts in enumerate([300.0, 690.0, 699.0, 700.0, 698.0, 310.0]):
        events += tracker.update("0", watts, 700.0, i * 120_000)
    maker = CaseMaker.new(DetectorConfig())
    weights = [maker.case(e, i * 120_000, ()).errors for i, e in enumerate(events)]
    assert sum(weights) == 1.0 and len(events) > 2
