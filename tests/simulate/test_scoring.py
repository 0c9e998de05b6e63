"""The scorer's matching rules on a hand-made table of outbreaks, bursts and alerts."""

from __future__ import annotations

import pytest

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.simulate import JobBurst, Outbreak, entity
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
