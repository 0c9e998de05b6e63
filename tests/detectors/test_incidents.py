"""Incidents, not alert storms: rack escalation, incident ids, and planned maintenance."""

from __future__ import annotations

from types import SimpleNamespace

from fleetepi.contract import Host, ts_from_ms
from fleetepi.detectors import DetectorConfig, Engine
from fleetepi.detectors.maintenance import Window


def _rack_storm(fl: SimpleNamespace, at: int, rack: int = 3, per_host: int = 6) -> list:
    """Every host of rack ``rack`` (20 hosts) reports Xid 79 ``per_host`` times within an hour."""
    return [fl.tel(at + (k * 20 + i) * 25_000, f"h{rack * 20 + i:04d}", "xid", 79, device="0000:17:00.0")
            for k in range(per_host) for i in range(20)]


def test_a_rack_storm_is_one_incident(fl: SimpleNamespace) -> None:
    """Every host of a rack reporting Xid 79 within an hour: the rack's peers rose with each host, so no
    host stands out; the rack's concentration is the page, and the channel's fleet-wide rise groups with it."""
    at = fl.T0 + 2 * fl.DAY
    events = fl.merged(fl.hosts(), fl.telemetry_background(200, fl.T0, at + 6 * fl.HOUR), _rack_storm(fl, at))
    alerts = fl.firing(fl.run(events, end_ms=at + 6 * fl.HOUR))
    pages = [a for a in alerts if a.severity == "page"]
    assert pages and {a.incident for a in pages} == {"telemetry:xid:79"}, [(a.summary, a.incident) for a in pages]
    rack = [a for a in pages if a.attribute == "rack"]
    assert [(a.value, a.escalation) for a in rack] == [("r03", "rack=r03")]
    assert all(a.escalation == "rack=r03" for a in pages if a.host is not None)


def test_half_a_rack_paging_escalates_once(fl: SimpleNamespace) -> None:
    """Host pages of one rack, one after another: once half its hosts paged within the hour, one rack alert;
    later pages of the rack join its incident."""
    from fleetepi.contract import Alert
    from fleetepi.detectors.incidents import Escalation
    from fleetepi.detectors.inventory import Inventory

    inv = Inventory()
    for h in fl.hosts():
        inv.announce(h.host, fl.T0, h.attributes)
    esc = Escalation(window_ms=fl.HOUR, share=0.5, min_hosts=3)

    def page(i: int, t: int) -> Alert:
        return Alert(ts=ts_from_ms(t), kind="host_spike", host=f"h{60 + i:04d}", score=9.0, severity="page",
                     finding="sick_host", incident=f"host:h{60 + i:04d}")

    at = fl.T0 + 2 * fl.DAY
    seen = []
    for i in range(12):   # rack r03 holds hosts h0060..h0079
        seen += esc.process([page(i, at + i * 4 * fl.MIN)], at + i * 4 * fl.MIN, inv)
    escalations = [a for a in seen if a.finding == "rack_escalation"]
    assert [(a.attribute, a.value, a.kind, a.severity) for a in escalations] == [("rack", "r03", "host_spike", "page")]
    fired_at = seen.index(escalations[0])
    assert all(a.escalation == "rack=r03" for a in seen if a.host)
    assert all(a.incident == escalations[0].incident for a in seen[fired_at + 1:] if a.host)
    # no page for an hour: the escalation resolves
    later = esc.process([], at + 3 * fl.HOUR, inv)
    assert [(a.state, a.value) for a in later] == [("resolved", "r03")]


def test_announced_maintenance_pages_nobody(fl: SimpleNamespace) -> None:
    at = fl.T0 + 2 * fl.DAY
    rack3 = [h for h in fl.hosts() if h.attributes["rack"] == "r03"]
    start = [Host(ts=ts_from_ms(at - fl.MIN), host=h.host, attributes={**h.attributes, "maintenance": "planned-reboot"})
             for h in rack3]
    end = [Host(ts=ts_from_ms(at + 3 * fl.HOUR), host=h.host, attributes=h.attributes) for h in rack3]
    events = fl.merged(fl.hosts(), fl.telemetry_background(200, fl.T0, at + 6 * fl.HOUR), start, end,
                       _rack_storm(fl, at))
    eng = Engine()
    alerts = [a for ev in events for a in eng.process(ev)] + eng.advance(at + 6 * fl.HOUR)
    assert fl.firing(alerts) == [], [a.summary for a in alerts]
    assert eng.flags["in_maintenance"] == 120  # counted, not lost


def test_maintenance_windows_from_a_file_or_silences(fl: SimpleNamespace) -> None:
    at = fl.T0 + 2 * fl.DAY
    events = fl.merged(fl.hosts(), fl.telemetry_background(200, fl.T0, at + 6 * fl.HOUR), _rack_storm(fl, at))
    eng = Engine(DetectorConfig())
    eng.set_maintenance([Window(at - fl.HOUR, at + 2 * fl.HOUR, attribute="rack", value="r03", reason="reboot")])
    alerts = [a for ev in events for a in eng.process(ev)] + eng.advance(at + 6 * fl.HOUR)
    assert fl.firing(alerts) == [], [a.summary for a in alerts]
    assert eng.flags["in_maintenance"] == 120
