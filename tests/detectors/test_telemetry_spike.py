"""telemetry_host and telemetry_cohort: Xid, ECC and thermal, on the crash detectors' engines."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleetepi.contract import Host, ts_from_ms
from fleetepi.detectors import DetectorConfig
from fleetepi.detectors.cases import ROUTES, Crossings, channel_of


def _trouble(fl: SimpleNamespace, what: str, at: int) -> list:
    t = fl.tel
    if what == "none":
        return []
    if what == "xid79_rack":       # Xid 79 on 8 hosts of rack r07 within an hour: its power or PCIe
        return [t(at + i * 7 * fl.MIN, f"h{140 + i * 2:04d}", "xid", 79) for i in range(8)]
    if what == "ecc_storm":        # one host's HBM failing: corrected errors every 5 min
        return [t(at + i * 5 * fl.MIN, "h0033", "ecc_corrected", count=25) for i in range(24)]
    if what == "app_xid_burst":    # a job burst leaves Xid 43 on 60 rack-packed hosts: application, not hardware
        return [t(at + i * 500, f"h{i:04d}", "xid", 43) for i in range(60)]
    if what == "one_big_report":   # a single report of 12 NVLink errors: one incident, not a storm
        return [t(at, "h0077", "nvlink", count=12)]
    raise AssertionError(what)


@pytest.mark.parametrize(("what", "expected"), [
    ("none", set()),
    ("xid79_rack", {("cohort", "xid", 79, "rack", "r07")}),
    ("ecc_storm", {("host", "ecc_corrected", None, "h0033", None)}),
    ("app_xid_burst", set()),
    ("one_big_report", set()),
])
def test_telemetry_table(fl: SimpleNamespace, what: str, expected: set[tuple]) -> None:
    at = fl.T0 + 2 * fl.DAY
    events = fl.merged(fl.hosts(), fl.telemetry_background(200, fl.T0, at + fl.DAY), _trouble(fl, what, at))
    alerts = fl.firing(fl.run(events, detectors=["telemetry_host", "telemetry_cohort"]))
    got = set()
    for a in alerts:
        assert a.kind == "telemetry_spike" and a.telemetry_kind and a.p_value is not None
        assert a.severity == "page" and a.finding in {"error_storm", "cohort_outbreak", "association_rising",
                                                      "fleet_rise"}
        if a.host is not None:
            got.add(("host", a.telemetry_kind, a.code, a.host, None))
        elif a.attribute is not None:
            got.add(("cohort", a.telemetry_kind, a.code, a.attribute, a.value))
            assert a.lower_ci is not None and a.lower_ci > 2
    # A rack outbreak may also lift the code fleet-wide (a true consequence); nothing else may page.
    fleetwide = {a.telemetry_kind for a in alerts if a.host is None and a.attribute is None}
    assert got == expected, [a.summary for a in alerts]
    assert fleetwide <= ({"xid"} if what == "xid79_rack" else set())


@pytest.mark.parametrize(("readings", "crossings"), [
    ([(0, 70.0), (1, 75.0)], 0),                 # cool: nothing
    ([(0, 95.0), (1, 96.0), (2, 97.0)], 1),      # hot and staying hot: one crossing
    ([(0, 95.0), (1, 60.0), (2, 95.0)], 2),      # hot, cool, hot: two
    ([(0, 95.0), (20, 95.0)], 2),                # hot again after 20 min of quiet: re-armed
    ([(0, None)], 1),                            # a thermal event without a reading: one
])
def test_thermal_crossings(fl: SimpleNamespace, readings: list, crossings: int) -> None:
    th = Crossings(threshold_c=90.0, rearm_ms=600_000)
    n = sum(th.crossing(fl.tel(fl.T0 + m * fl.MIN, "h1", "thermal", value=v, device="GPU3"), fl.T0 + m * fl.MIN)
            for m, v in readings)
    assert n == crossings


def test_channels_and_routes(fl: SimpleNamespace) -> None:
    assert channel_of(fl.tel(fl.T0, "h", "xid", 79)) == "xid:79"
    assert channel_of(fl.tel(fl.T0, "h", "ecc_uncorrected")) == "ecc_uncorrected"
    assert "xid:43" in DetectorConfig().tel_cohort_skip
    # one routing table, owned by the detectors, naming every detector the registry builds
    from fleetepi.detectors.registry import NAMES

    assert set(ROUTES) == set(NAMES) and set(ROUTES.values()) == {"signature", "host", "channel"}


def test_chronic_reporters_leave_the_cohort_counts(fl: SimpleNamespace) -> None:
    """Three hosts re-report Xid 63 every half hour for a week; from day 4 a rack's GPUs wear in on it.

    The chronic hosts are ticketed (``chronic``) and their own rate became
    their baseline, but their units stayed in the channel's cohort counts:
    most of the channel's units on three hosts, so few effective units that
    the rack's twenty hosts (10 % of the fleet, all of its other units) were
    not significant. Out of the counts, the rack pages.
    """
    start, end = fl.T0, fl.T0 + 7 * fl.DAY
    chronic = ["h0001", "h0042", "h0163"]
    rack = [f"h{i:04d}" for i in range(100, 120)]                 # r05
    events = list(fl.hosts(200))
    for t in range(start, end, fl.HOUR // 2):
        events += [fl.tel(t + k * 1000, h, "xid", 63) for k, h in enumerate(chronic)]
    for t in range(start + 4 * fl.DAY, end, fl.HOUR):
        h = rack[(t // fl.HOUR) % len(rack)]                        # a host of the rack every hour, in turn
        events += [fl.tel(t + 500, h, "xid", 63), fl.tel(t + 700, rack[(t // fl.HOUR + 7) % len(rack)], "xid", 63)]
    alerts = fl.run(fl.merged(events[:200], events[200:], fl.heartbeat(start, end)), end_ms=end)
    tickets = {a.host for a in fl.firing(alerts, "telemetry_spike") if a.finding == "chronic"}
    assert tickets == set(chronic)
    pages = [a for a in fl.firing(alerts, "telemetry_spike") if a.severity == "page" and a.code == 63]
    assert any(a.attribute == "rack" and a.value == "r05" for a in pages), [(a.attribute, a.value) for a in pages]


def test_a_month_scale_concentration_is_not_held_to_the_hourly_ceiling(fl: SimpleNamespace) -> None:
    """Xid 79 every 12 hours for a month, 39 of 60 on a third of the fleet (one cage), one host each.

    Only the month-scale count holds enough units: at the end, 31 of 49
    effective units on a cohort of a third (p ~ 1.5e-5). One absolute
    ceiling of 1e-6 for every scale held it back for good (a month's count
    looks afresh once a month, an hour's every hour); a month-scale ceiling
    of 30 x 1e-6 lets Benjamini-Hochberg decide, as it does at every scale.
    """
    start, end = fl.T0, fl.T0 + 32 * fl.DAY
    hosts = [Host(ts=h.ts, host=h.host, attributes={**h.attributes, "cage": str(i % 3)})
             for i, h in enumerate(fl.hosts(300))]
    cage2 = [h.host for i, h in enumerate(hosts) if i % 3 == 2]
    others = [h.host for i, h in enumerate(hosts) if i % 3 != 2]
    failures, k2, k0 = [], 0, 0
    for j in range(60):
        if (j * 39) // 60 != ((j + 1) * 39) // 60:
            host, k2 = cage2[(k2 * 37) % len(cage2)], k2 + 1
        else:
            host, k0 = others[(k0 * 53) % len(others)], k0 + 1
        failures.append(fl.tel(start + 2 * fl.DAY + j * 12 * fl.HOUR, host, "xid", 79))
    events = fl.merged(hosts, failures, fl.heartbeat(start, end))

    def cage2_alerts(look_s: float) -> list:
        alerts = fl.run(events, DetectorConfig(corr_alpha_look_s=look_s), end_ms=end)
        return [a for a in fl.firing(alerts, "telemetry_spike") if (a.attribute, a.value) == ("cage", "2")]

    assert cage2_alerts(86400.0)
    assert not cage2_alerts(0.0)


def test_three_hosts_of_a_rack_with_a_rare_xid_page_on_the_rate_test(fl: SimpleNamespace) -> None:
    """Xid 79 twice on each of three hosts of rack r07 within 95 minutes; the fleet reports ~3 a day.

    1,000 hosts in racks of 20. The channel's units at the hour scale are
    mostly the burst's, too few effective units for the share test (it
    never pages the rack). Against the channel's earlier rate, the rack
    expected ~0.003 units in the hour: it pages on the third report, 25
    minutes in. The same reports on hosts of three racks are a fleet-wide
    matter and page no rack.
    """
    at = fl.T0 + 2 * fl.DAY
    background = [fl.tel(fl.T0 + j * 12 * fl.HOUR + 600_000, f"h{(j * 97 + 11) % 1000:04d}", "xid", 79)
                  for j in range(6)]

    def burst(hosts: list[str]) -> list:
        return [fl.tel(at + (r * 75 + i * 10) * fl.MIN, h, "xid", 79) for r in range(2) for i, h in enumerate(hosts)]

    def rack_pages(trouble: list, config: DetectorConfig | None = None) -> list:
        events = fl.merged(fl.hosts(1000), fl.telemetry_background(1000, fl.T0, at + fl.DAY), background, trouble)
        alerts = fl.firing(fl.run(events, config, detectors=["telemetry_host", "telemetry_cohort"]),
                           "telemetry_spike")
        return [a for a in alerts if a.attribute is not None and a.severity == "page"]

    got = rack_pages(burst(["h0140", "h0143", "h0146"]))
    assert [(a.attribute, a.value, a.code, a.finding) for a in got] == [("rack", "r07", 79, "cohort_outbreak")]
    assert got[0].notes[1].startswith("rate test: ") and got[0].expected < 0.05 and got[0].p_value < 1e-6
    assert got[0].ts <= ts_from_ms(at + 30 * fl.MIN)
    assert rack_pages(burst(["h0140", "h0443", "h0746"])) == []
    assert rack_pages(burst(["h0140", "h0143", "h0146"]), DetectorConfig(tel_cohort_rate_max_s=0.0)) == []
