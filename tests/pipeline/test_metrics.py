"""The "Pipeline" metrics of docs/metrics.md, asserted on a fresh registry."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client import CollectorRegistry

from fleetepi.contract import Alert
from fleetepi.contract.codec import REASONS
from fleetepi.metrics import ALERT_KINDS, PipelineMetrics, SlidingCounter, serve
from fleetepi.pipeline import Pipeline

from .conftest import crash_line, host_line, telemetry_line

HOUR_MS = 3_600_000


@pytest.fixture
def metrics() -> PipelineMetrics:
    return PipelineMetrics(registry=CollectorRegistry())


def value(m: PipelineMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def alert(state: str = "firing", **fields: object) -> Alert:
    base: dict[str, object] = {"kind": "hardware_correlation", "signature": "a!b", "attribute": "bios",
                               "value": "2.4", "score": 12.5, "p_value": 1e-9, "relative_risk": 40.0}
    base.update(fields)
    return Alert(ts=datetime(2026, 11, 22, 10, tzinfo=UTC), state=state, **base)  # type: ignore[arg-type]


def test_every_reason_and_kind_exists_at_zero(metrics: PipelineMetrics) -> None:
    for reason in REASONS:
        assert value(metrics, "fleetepi_events_invalid_total", reason=reason) == 0
    for kind in ("host", "crash", "telemetry"):
        assert value(metrics, "fleetepi_events_total", kind=kind) == 0
    for kind in ALERT_KINDS:
        assert value(metrics, "fleetepi_alerts_total", kind=kind) == 0
        assert value(metrics, "fleetepi_alerts_resolved_total", kind=kind) == 0


def test_pipeline_counts_events_and_invalid(metrics: PipelineMetrics) -> None:
    pipe = Pipeline(metrics=metrics)
    pipe.run([host_line("h1", 0, rack="r17"), crash_line("h1", 1), b"{nope", crash_line("ghost", 2),
              telemetry_line("h1", 3, code=79), telemetry_line("h1", 4, code=79), crash_line("h1", -30)])
    pipe.finish()
    assert value(metrics, "fleetepi_events_total", kind="host") == 1
    assert value(metrics, "fleetepi_events_total", kind="crash") == 2  # the unknown host's crash is used
    assert value(metrics, "fleetepi_events_total", kind="telemetry") == 2
    assert value(metrics, "fleetepi_events_invalid_total", reason="malformed_json") == 1
    assert value(metrics, "fleetepi_events_invalid_total", reason="unknown_host") == 1
    assert value(metrics, "fleetepi_events_invalid_total", reason="out_of_order") == 1
    assert value(metrics, "fleetepi_telemetry_events_total", kind="xid", code="79", cohort="r17") == 2
    assert value(metrics, "fleetepi_hosts") == 1
    assert value(metrics, "fleetepi_watermark_timestamp_seconds") == datetime(
        2026, 11, 22, 10, 4, tzinfo=UTC).timestamp()
    assert value(metrics, "fleetepi_host_crashes", host="h1") == 1
    assert value(metrics, "fleetepi_signature_crashes", signature="libc.so.6!abort | trainer!main") == 2


def test_cohort_attribute_is_configurable() -> None:
    m = PipelineMetrics(registry=CollectorRegistry(), cohort_attribute="datacenter")
    pipe = Pipeline(metrics=m)
    pipe.run([host_line("h1", 0, rack="r1", datacenter="dc2"), telemetry_line("h1", 1, kind="ecc_uncorrected",
                                                                                code=None)])
    assert value(m, "fleetepi_telemetry_events_total", kind="ecc_uncorrected", code="", cohort="dc2") == 1


def test_alert_gauges_exist_only_while_firing(metrics: PipelineMetrics) -> None:
    labels = {"kind": "hardware_correlation", "signature": "a!b", "host": "", "attribute": "bios", "value": "2.4",
              "telemetry_kind": "", "code": "", "severity": "page", "finding": "", "incident": "", "escalation": ""}
    metrics.observe_alert(alert())
    assert value(metrics, "fleetepi_alert_active", **labels) == 1
    assert value(metrics, "fleetepi_alert_score", **labels) == 12.5
    assert value(metrics, "fleetepi_alert_p_value", **labels) == 1e-9
    assert value(metrics, "fleetepi_alert_relative_risk", **labels) == 40.0
    assert value(metrics, "fleetepi_alerts_total", kind="hardware_correlation") == 1
    metrics.observe_alert(alert(state="resolved"))
    for name in ("fleetepi_alert_active", "fleetepi_alert_score", "fleetepi_alert_p_value",
                 "fleetepi_alert_relative_risk"):
        assert value(metrics, name, **labels) is None
    assert value(metrics, "fleetepi_alerts_resolved_total", kind="hardware_correlation") == 1


def test_alert_without_p_value_has_no_p_value_series(metrics: PipelineMetrics) -> None:
    metrics.observe_alert(alert(kind="host_spike", signature=None, attribute=None, value=None, host="gpu-7",
                                p_value=None, relative_risk=None))
    labels = {"kind": "host_spike", "signature": "", "host": "gpu-7", "attribute": "", "value": "",
              "telemetry_kind": "", "code": "", "severity": "page", "finding": "", "incident": "", "escalation": ""}
    assert value(metrics, "fleetepi_alert_active", **labels) == 1
    assert value(metrics, "fleetepi_alert_p_value", **labels) is None


def test_alert_series_carry_severity_finding_incident_and_escalation(metrics: PipelineMetrics) -> None:
    """What Alertmanager groups (incident), routes (severity) and inhibits on (escalation) rides on the series."""
    metrics.observe_alert(alert(kind="host_spike", signature=None, attribute=None, value=None, host="gpu-7",
                                severity="page", finding="sick_host", incident="rack=r07", escalation="rack=r07"))
    labels = {"kind": "host_spike", "signature": "", "host": "gpu-7", "attribute": "", "value": "",
              "telemetry_kind": "", "code": "", "severity": "page", "finding": "sick_host", "incident": "rack=r07",
              "escalation": "rack=r07"}
    assert value(metrics, "fleetepi_alert_active", **labels) == 1
    assert value(metrics, "fleetepi_alerts_severity_total", severity="page") == 1
    assert value(metrics, "fleetepi_alerts_severity_total", severity="ticket") == 0


def test_a_ticket_series_expires_after_its_ttl_of_event_time() -> None:
    """Tickets never resolve: their series go after ticket_ttl_s of event time; pages stay until resolved."""
    m = PipelineMetrics(registry=CollectorRegistry(), ticket_ttl_s=3600)
    t0 = datetime(2026, 11, 22, 10, tzinfo=UTC)
    ticket = alert(severity="ticket", finding="static_association", incident="signature:abc")
    page = alert(signature="c!d", finding="cohort_outbreak")
    m.observe_alert(ticket)
    m.observe_alert(page)
    t_labels = {"kind": "hardware_correlation", "signature": "a!b", "host": "", "attribute": "bios", "value": "2.4",
                "telemetry_kind": "", "code": "", "severity": "ticket", "finding": "static_association",
                "incident": "signature:abc", "escalation": ""}
    p_labels = {**t_labels, "signature": "c!d", "severity": "page", "finding": "cohort_outbreak", "incident": ""}
    m.set_watermark(int(t0.timestamp() * 1000) + 3599_000)
    assert value(m, "fleetepi_alert_active", **t_labels) == 1
    m.set_watermark(int(t0.timestamp() * 1000) + 3600_000)
    assert value(m, "fleetepi_alert_active", **t_labels) is None
    assert value(m, "fleetepi_alert_score", **t_labels) is None
    assert value(m, "fleetepi_alert_active", **p_labels) == 1  # a page waits for its resolution
    assert value(m, "fleetepi_tickets_expired_total", kind="hardware_correlation") == 1
    assert value(m, "fleetepi_alerts_severity_total", severity="ticket") == 1


def test_a_ticket_older_than_its_ttl_is_never_shown(metrics: PipelineMetrics) -> None:
    metrics.set_watermark(int(datetime(2026, 11, 25, tzinfo=UTC).timestamp() * 1000))
    metrics.observe_alert(alert(severity="ticket"))  # fired 2.5 days of event time ago (a late replay)
    assert not [s for fam in metrics.registry.collect() if fam.name == "fleetepi_alert_active" for s in fam.samples]


def test_maintenance_series_start_at_zero_and_follow_the_pipeline(metrics: PipelineMetrics) -> None:
    assert value(metrics, "fleetepi_events_in_maintenance_total") == 0
    assert value(metrics, "fleetepi_maintenance_windows") == 0
    for kind in ALERT_KINDS:
        assert value(metrics, "fleetepi_alerts_suppressed_total", kind=kind) == 0
    pipe = Pipeline(metrics=metrics)
    from fleetepi.detectors.maintenance import Window

    pipe.set_maintenance([Window(0, 2**62, hosts=("h2",), reason="test")])
    pipe.run([host_line("h1", 0, rack="r1"), host_line("h2", 0, rack="r1", maintenance="planned-reboot"),
              telemetry_line("h1", 1), telemetry_line("h2", 2), crash_line("h2", 3)])
    pipe.finish()
    assert value(metrics, "fleetepi_events_in_maintenance_total") == 2
    assert value(metrics, "fleetepi_maintenance_windows") == 1
    assert pipe.summary.in_maintenance == 2 and pipe.summary.maintenance_windows == 1


def test_top_crash_gauges_are_bounded_to_top_n(metrics: PipelineMetrics) -> None:
    pipe = Pipeline(metrics=metrics)
    lines = [host_line(f"h{i}", 0) for i in range(30)]
    for i in range(30):  # host h{i} crashes i+1 times, each with its own signature
        lines += [crash_line(f"h{i}", 1 + k * 0.01, signature=f"sig{i}") for k in range(i + 1)]
    pipe.run(sorted(lines, key=lambda b: b.split(b'"ts":"')[1][:24]))
    samples = [s for fam in metrics.registry.collect() if fam.name == "fleetepi_host_crashes" for s in fam.samples]
    assert len(samples) == 20
    assert {s.labels["host"] for s in samples} == {f"h{i}" for i in range(10, 30)}
    assert value(metrics, "fleetepi_signature_crashes", signature="sig29") == 30


def test_crash_gauges_forget_after_an_hour_of_event_time() -> None:
    window = SlidingCounter(window_ms=HOUR_MS, bucket_ms=60_000)
    window.add("sig", 0)
    window.add("sig", 30 * 60_000)
    assert window.top(20) == [("sig", 2)]
    window.advance(HOUR_MS + 60_000)  # the first crash left the window
    assert window.top(20) == [("sig", 1)]
    window.add("late", 10)  # older than the window: ignored, not resurrected
    window.advance(2 * HOUR_MS)
    assert window.top(20) == [] and window.totals == {}


def test_sliding_counter_caps_keys() -> None:
    window = SlidingCounter(window_ms=HOUR_MS, bucket_ms=60_000, max_keys=3)
    for i in range(5):
        window.add(f"k{i}", 1000)
    assert len(window.totals) == 3 and window.dropped == 2


def test_late_event_goes_to_its_own_bucket() -> None:
    window = SlidingCounter(window_ms=HOUR_MS, bucket_ms=60_000)
    window.add("a", 10 * 60_000)
    window.add("a", 5 * 60_000)  # late, but within the window
    window.advance(HOUR_MS + 6 * 60_000)  # the late one (bucket 5 min) expired, the other not
    assert window.top(5) == [("a", 1)]


def test_served_over_http(metrics: PipelineMetrics) -> None:
    metrics.count_event("crash", 3)
    server = serve(metrics.registry, 0)
    try:
        body = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).text
    finally:
        server.shutdown()
    assert 'fleetepi_events_total{kind="crash"} 3.0' in body
