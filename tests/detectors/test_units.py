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


def test_a_job_abort_that_names_no_job_is_one_case_per_step_on_a_rare_key() -> None:
    """224 ranks of a job that sets no job id abort within four minutes, on a key seen a few times a day.

    Without a job id the step's cap is all that holds it: the cap is the
    count the key's rate makes implausible, and admitting up to it let two
    units through per step, five in all (a page on noisy tuning seed 1). A
    case without a job id is held to what the rate makes plausible: one
    here (the burst going on into the next step adds nothing). A job's
    cases keep the cap (a new crash spreading over jobs).
    """
    f = _filter()
    t0 = 10 * 86_400_000
    for k in range(4):  # a few ordinary cases the days before
        f.unit("rare", f"x{k}", None, t0 - (k + 1) * 6 * 3_600_000)
    units = sum(f.unit("rare", f"h{i}", None, t0 + 200_000 + i * 1_000) for i in range(224))  # two steps
    assert units == 1.0
    g = _filter()
    for k in range(4):
        g.unit("rare", f"x{k}", None, t0 - (k + 1) * 6 * 3_600_000)
    assert sum(g.unit("rare", f"h{i}", f"j{i}", t0 + 30_000 + i * 100_000) for i in range(3)) == 2.0  # the cap


def test_the_agents_power_crossing_weighs_one_error_and_its_samples_none() -> None:
    """The agent's events for a GPU pinned at its limit, as the detectors weigh them: one crossing, then nothing."""
    tracker = PowerTracker("h1", 60, PowerThresholds())
    events = []
    for i, watts in enumerate([300.0, 690.0, 699.0, 700.0, 698.0, 310.0]):
        events += tracker.update("0", watts, 700.0, i * 120_000)
    maker = CaseMaker.new(DetectorConfig())
    weights = [maker.case(e, i * 120_000, ()).errors for i, e in enumerate(events)]
    assert sum(weights) == 1.0 and len(events) > 2
