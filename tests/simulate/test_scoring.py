"""The scorer's matching rules on a hand-made table of outbreaks, bursts and alerts."""

from __future__ import annotations

import pytest

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.simulate import Benign, JobBurst, Outbreak, entity
from fleetepi.simulate.scoring import classify, score_run, summarize

H = 3_600_000
T0 = 1_000 * H

SIG = Outbreak("o0", "signature_spike", "signature_spike/new", T0, T0 + 4 * H, "new sig", signature="a!b | c!d",
               accept=(entity("signature_spike", "a!b | c!d"),))
HW = Outbreak("o1", "hardware_correlation", "hardware_correlation/bios_rack", T0 + 10 * H, T0 + 30 * H, "bios",
              signature="x!y | z!w", attribute="bios", value="2.4",
              accept=(entity("hardware_correlation", "x!y | z!w", attribute="bios", value="2.4"),
                      entity("hardware_correlation", "x!y | z!w", attribute="rack", value="r07")),
              related=(entity("hardware_correlation", "x!y | z!w", attribute="datacenter", value="dc1"),
                       entity("signature_spike", "x!y | z!w")))
TEL = Outbreak("o2", "telemetry_spike", "telemetry_spike/xid79_rack", T0, T0 + 2 * H, "xid79", attribute="rack",
               value="r03", telemetry_kind="xid", code=79,
               accept=(entity("telemetry_spike", attribute="rack", value="r03", telemetry_kind="xid", code=79),),
               related=(entity("host_spike", host="h1"),))
OUTBREAKS = [SIG, HW, TEL]
BURST = JobBurst("pretrain-llm-7", "nccl!watchdog | torch!loop", ("h5", "h6"), T0 + 50 * H, T0 + 50 * H + 60_000)


def alert(kind: str, ts: int, state: str = "firing", **ent: object) -> Alert:
    return Alert(ts=ts_from_ms(ts), kind=kind, score=1.0, state=state, **ent)  # type: ignore[arg-type]


GRACE = 2 * H


@pytest.mark.parametrize(("a", "expected"), [
    # exact entity inside the window: a detection
    (alert("signature_spike", T0 + H, signature="a!b | c!d"), ("detect", "o0")),
    # same entity, within the grace after the end
    (alert("signature_spike", T0 + 5 * H, signature="a!b | c!d"), ("detect", "o0")),
    # same entity, after end + grace: false
    (alert("signature_spike", T0 + 7 * H, signature="a!b | c!d"), ("false", None)),
    # same entity, before the start: false (no credit for luck)
    (alert("signature_spike", T0 - 1, signature="a!b | c!d"), ("false", None)),
    # right entity, wrong kind: false
    (alert("host_spike", T0 + H, signature="a!b | c!d"), ("false", None)),
    # the accepted alternative of an intersection (rack of the bios cohort): a detection
    (alert("hardware_correlation", T0 + 11 * H, signature="x!y | z!w", attribute="rack", value="r07"),
     ("detect", "o1")),
    # the datacenter the rack is nested in: related, not a detection, not false
    (alert("hardware_correlation", T0 + 11 * H, signature="x!y | z!w", attribute="datacenter", value="dc1"),
     ("related", "o1")),
    # the outbreak's signature rising fleet-wide: related
    (alert("signature_spike", T0 + 12 * H, signature="x!y | z!w"), ("related", "o1")),
    # right signature, another cohort: false
    (alert("hardware_correlation", T0 + 11 * H, signature="x!y | z!w", attribute="kernel", value="6.8"),
     ("false", None)),
    # telemetry: code must match
    (alert("telemetry_spike", T0 + H, telemetry_kind="xid", code=79, attribute="rack", value="r03"),
     ("detect", "o2")),
    (alert("telemetry_spike", T0 + H, telemetry_kind="xid", code=43, attribute="rack", value="r03"),
     ("false", None)),
    (alert("host_spike", T0 + H, host="h1"), ("related", "o2")),
])
def test_classify(a: Alert, expected: tuple[str, str | None]) -> None:
    what, o = classify((a.kind, a.signature, a.host, a.attribute, a.value, a.telemetry_kind, a.code),
                       a.ts_ms, OUTBREAKS, GRACE)
    assert (what, o.id if o else None) == expected


def test_score_run_table() -> None:
    alerts = [
        alert("signature_spike", T0 + 2 * H, signature="a!b | c!d"),         # detects o0, delay 2 h
        alert("signature_spike", T0 + H, signature="a!b | c!d"),             # earlier: delay 1 h wins
        alert("signature_spike", T0 + 3 * H, state="resolved", signature="a!b | c!d"),  # not a page
        alert("hardware_correlation", T0 + 14 * H, signature="x!y | z!w", attribute="bios", value="2.4"),
        alert("hardware_correlation", T0 + 14 * H, signature="x!y | z!w", attribute="datacenter", value="dc1"),
        alert("signature_spike", T0 + 50 * H + 1000, signature="nccl!watchdog | torch!loop"),  # burst: false
        alert("host_spike", T0 + 80 * H, host="h9"),                          # plain false alert
    ]
    run = score_run(alerts, OUTBREAKS, [BURST], hosts=500, days=4.0, grace_s=GRACE / 1000)
    got = {o.id: (o.detected, o.delay_s) for o in run.outbreaks}
    assert got == {"o0": (True, 3600.0), "o1": (True, 4 * 3600.0), "o2": (False, None)}
    s = summarize([run])
    assert (s.outbreaks, s.detected, s.alerts, s.true_alerts, s.false_alerts, s.burst_false) == (3, 2, 6, 4, 2, 1)
    assert s.recall == pytest.approx(2 / 3)
    assert s.precision == pytest.approx(4 / 6)
    assert s.false_per_1k_host_day == pytest.approx(2 / (500 * 4.0) * 1000)
    assert s.median_delay_s == pytest.approx(2.5 * 3600)
    assert summarize([run], "telemetry_spike").recall == 0.0
    assert summarize([run], "host_spike").false_alerts == 1


def test_uncovered_kinds_are_reported_not_counted() -> None:
    alerts = [alert("signature_spike", T0 + H, signature="a!b | c!d")]
    run = score_run(alerts, OUTBREAKS, [], hosts=100, days=1.0, kinds=("signature_spike", "telemetry_spike"))
    assert summarize([run]).outbreaks == 2  # o1 (hardware_correlation) is not covered
    assert summarize([run], "hardware_correlation").covered is False
    assert summarize([run], "signature_spike").recall == 1.0
    # pooled runs add outbreaks and host-days
    both = summarize([run, run])
    assert (both.outbreaks, both.detected, both.host_days) == (4, 2, 200.0)


# ---------------------------------------------------------------------------------------------- pages vs tickets
LOOP = Benign("b1", "crash_loop", T0 + 20 * H, T0 + 26 * H, "loop", signature="app!cfg | app!main", host="h7",
              hosts=("h7",), finding="crash_loop", expected=(entity("host_spike", host="h7"),))
CHRONIC = Benign("b2", "chronic_ecc", T0 - 100 * H, T0 + 200 * H, "ecc", host="h8", telemetry_kind="ecc_corrected",
                 hosts=("h8",), finding="chronic",
                 expected=(entity("telemetry_spike", host="h8", telemetry_kind="ecc_corrected"),),
                 cohorts=(("rack", "r09"), ("gpu_model", "A100")))
STATIC = Benign("b3", "static_association", T0 - 100 * H, T0 + 200 * H, "static", signature="s!t | u!v",
                attribute="gpu_model", value="H200", finding="static_association",
                expected=(entity("hardware_correlation", "s!t | u!v", attribute="gpu_model", value="H200"),))
# a static association that turns acute at T0 + 60 h: the same entity is a ticket before and a page inside
RISE = Outbreak("o3", "hardware_correlation", "hardware_correlation/rising_static", T0 + 60 * H, T0 + 80 * H, "rise",
                signature="s!t | u!v", attribute="gpu_model", value="H200",
                accept=(entity("hardware_correlation", "s!t | u!v", attribute="gpu_model", value="H200"),),
                related=(entity("signature_spike", "s!t | u!v"),))


def ticket(kind: str, ts: int, finding: str | None = None, **ent: object) -> Alert:
    return Alert(ts=ts_from_ms(ts), kind=kind, score=1.0, severity="ticket", finding=finding, **ent)  # type: ignore[arg-type]


@pytest.mark.parametrize(("a", "expected"), [
    # severity absent: a page (the contract's default)
    (alert("host_spike", T0 + 21 * H, host="h7"), ("false", None, "crash_loop")),
    # severity page: a page; on the crash loop's signature: a benign-caused false page
    (Alert(ts=ts_from_ms(T0 + 21 * H), kind="signature_spike", score=1.0, severity="page",
           signature="app!cfg | app!main"), ("false", None, "crash_loop")),
    # the crash loop's expected ticket
    (ticket("host_spike", T0 + 21 * H, "crash_loop", host="h7"), ("ticket", "expected", "crash_loop")),
    # a ticket on the loop's signature: not the expected one, explained by it
    (ticket("signature_spike", T0 + 21 * H, signature="app!cfg | app!main"), ("ticket", "unexpected", "crash_loop")),
    # the chronic host's channel on its rack: a benign-caused false page
    (alert("telemetry_spike", T0 + 30 * H, telemetry_kind="ecc_corrected", attribute="rack", value="r09"),
     ("false", None, "chronic_ecc")),
    # another channel of the chronic host's rack: plain false
    (alert("telemetry_spike", T0 + 30 * H, telemetry_kind="xid", code=79, attribute="rack", value="r09"),
     ("false", None, None)),
    # static association paged before it rose: benign false page
    (alert("hardware_correlation", T0 + 10 * H, signature="s!t | u!v", attribute="gpu_model", value="H200"),
     ("false", None, "static_association")),
    # ... and paged once it rose: a detection of the outbreak
    (alert("hardware_correlation", T0 + 61 * H, signature="s!t | u!v", attribute="gpu_model", value="H200"),
     ("detect", None, None)),
    # a ticket on the outbreak's entity inside its window: an outbreak ticket (found only by a ticket)
    (ticket("hardware_correlation", T0 + 61 * H, signature="s!t | u!v", attribute="gpu_model", value="H200"),
     ("ticket", "outbreak", None)),
    # a ticket on nothing
    (ticket("host_spike", T0 + 61 * H, host="h99"), ("ticket", "unexpected", None)),
])
def test_pages_and_tickets(a: Alert, expected: tuple[str, str | None, str | None]) -> None:
    run = score_run([a], [RISE], [LOOP, CHRONIC, STATIC], hosts=100, days=10.0)
    (out,) = run.alerts
    assert (out.outcome, out.ticket, out.benign) == expected
    assert out.page == (a.severity != "ticket")


def test_tickets_counted_once_per_phenomenon_and_ticket_only_outbreaks() -> None:
    alerts = [
        ticket("host_spike", T0 + 22 * H, "crash_loop", host="h7"),                    # expected
        ticket("host_spike", T0 + 23 * H, "crash_loop", host="h7"),                    # repeat
        ticket("telemetry_spike", T0, "chronic", host="h8", telemetry_kind="ecc_corrected"),  # expected
        ticket("hardware_correlation", T0 + 5 * H, "static_association", signature="s!t | u!v",
               attribute="gpu_model", value="H200"),                                   # expected (before the rise)
        ticket("hardware_correlation", T0 + 62 * H, signature="s!t | u!v", attribute="gpu_model",
               value="H200"),                                                          # finds o3, by a ticket only
        alert("signature_spike", T0 + 62 * H, signature="s!t | u!v"),                  # related page
        alert("host_spike", T0 + 90 * H, host="h50"),                                  # false page on nothing
    ]
    run = score_run(alerts, [RISE], [LOOP, CHRONIC, STATIC], hosts=100, days=10.0)
    (o,) = run.outbreaks
    assert not o.detected and o.ticket_only and o.ticket_delay_s == 2 * 3600.0
    s = summarize([run])
    assert (s.pages, s.true_pages, s.false_pages, s.tickets) == (2, 1, 1, 5)
    assert dict(s.ticket_classes) == {"expected": 3, "repeat": 1, "outbreak": 1}
    assert (s.recall, s.ticket_only, s.benign_expecting, s.benign_ticketed) == (0.0, 1, 3, 3)
    assert s.false_per_1k_host_day == pytest.approx(1000 * 1 / 1000.0)
    assert s.tickets_per_1k_host_day == pytest.approx(5.0)
    assert s.unexpected_tickets_per_1k_host_day == pytest.approx(1.0)  # the repeat
    assert sum(s.benign_pages.values()) == 0
    assert s.wrong_finding == 0
    # the crash loop's ticket with another finding is still the expected one, counted apart
    other = score_run([ticket("host_spike", T0 + 22 * H, "suspected_bad_silicon", host="h7")], [RISE], [LOOP],
                      hosts=100, days=10.0)
    assert other.alerts[0].ticket == "expected" and summarize([other]).wrong_finding == 1


def test_benign_pages_are_reported_by_type() -> None:
    alerts = [alert("host_spike", T0 + 21 * H, host="h7"),
              alert("signature_spike", T0 + 50 * H + 1000, signature="nccl!watchdog | torch!loop"),
              alert("telemetry_spike", T0 + 50 * H + 2000, telemetry_kind="xid", code=43, host="h1")]
    run = score_run(alerts, [], [BURST, LOOP], hosts=100, days=10.0)
    s = summarize([run])
    assert s.false_pages == 3 and dict(s.benign_pages) == {"crash_loop": 1, "job_abort": 2} and s.burst_false == 2
