"""A deadlocked job on 64 hosts, replayed: one signature spike for the hang, rack alerts for the surge (issue 12).

The job hangs in an all-reduce; the collective watchdog aborts every rank
10 minutes later (64 crash events, ``origin: watchdog``, one ``job``), the
job restarts and hangs again, 13 times in 5 hours, while its GPUs spin at
their power limit and 86-95 °C. What the on-call should see: the hang
signature paged once (each restart that fails again is one case, not 64),
and the power/thermal surge as alerts on the job's two racks, in one
incident: not on the cluster the racks are in, not as a fleet-wide rise,
and not a host alert per rank.
"""

from __future__ import annotations

from collections import Counter

from fleetepi.contract import Alert, encode
from fleetepi.pipeline import ListAlertSink, Pipeline
from fleetepi.simulate import OutbreakSpec, SimConfig, simulate
from fleetepi.simulate.outbreaks import HANG_SIGNATURE


def _replay() -> tuple[list[Alert], object]:
    sim = simulate(SimConfig(hosts=480, days=5.0, seed=11, warmup_days=2.0, hosts_per_rack=32,
                             crash_rate_per_host_day=1.0, signatures=300, power_interval_s=1800.0,
                             outbreaks=(OutbreakSpec("signature_spike/deadlock_job", start_day=3.0),)))
    sink = ListAlertSink()
    pipe = Pipeline(sink=sink)
    pipe.run(encode(e) for e in sim.events())
    pipe.finish()
    return [a for a in sink.alerts if a.state == "firing"], sim


def test_the_deadlocked_job_pages_its_hang_once_and_its_racks_surge() -> None:
    alerts, sim = _replay()
    truth = {o.id: o for o in sim.truth}  # type: ignore[attr-defined]
    job_hosts = set(truth["o0"].hosts)
    racks = {h.split("-")[1] for h in job_hosts}
    assert len(job_hosts) == 64 and racks == {"r10", "r11"}

    hang = [a for a in alerts if a.kind == "signature_spike" and a.signature == HANG_SIGNATURE]
    assert len(hang) == 1 and hang[0].severity == "page", hang
    assert hang[0].ts.timestamp() * 1000 >= truth["o0"].start_ms

    surge = [a for a in alerts if a.kind == "telemetry_spike" and a.telemetry_kind in ("power", "thermal")
             and a.severity == "page"]
    assert Counter((a.attribute, a.value) for a in surge) == {("rack", "r10"): 2, ("rack", "r11"): 2}, \
        [(a.attribute, a.value, a.telemetry_kind, a.finding) for a in surge]
    assert {a.telemetry_kind for a in surge} == {"power", "thermal"}
    assert len({a.incident for a in surge}) == 1
    # the ranks' repeated hang reports are no host page
    assert not [a for a in alerts if a.kind == "host_spike" and a.host in job_hosts and a.severity == "page"]
