"""Prometheus metrics of the pipeline: the "Pipeline" section of docs/metrics.md.

Use one :class:`PipelineMetrics` per process that runs detectors (``fleetepi
demo``, ``fleetepi replay --metrics-port``, each stream worker)::

    metrics = PipelineMetrics(registry=CollectorRegistry())
    metrics.count_event("crash")
    metrics.observe_alert(alert)          # firing -> gauges set, resolved -> series removed
    serve(metrics.registry, port=9108)    # /metrics on 127.0.0.1:9108

Why a custom collector rather than ``Counter(...).labels(...).inc()``: the
pipeline counts ~10^5 events a second, and a labelled prometheus_client
counter costs a lock and a label lookup per call. Here every count is a plain
``dict`` increment on the pipeline thread; the scrape thread copies the dicts
(one C-level, GIL-atomic copy each) and builds the metric families. Exposed
names and types are exactly those of ``prometheus_client`` counters/gauges.

Label cardinality stays bounded: hosts and signatures only appear in the
*firing* alert series (removed on resolve) and in the top-N gauges, which are
read from a sliding one-hour window of event time that expires by itself.
Tickets (``severity: ticket``: chronic hosts, static associations, crash
loops) fire once and never resolve, so their series are removed
``ticket_ttl_s`` of *event time* after they fired (the watermark, as every
other window here: a replay and a worker expire them at the same point of
the stream): a ticket is a notification, not an alert that fires forever.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any, get_args

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fleetepi.contract import Alert, Crash, Telemetry
from fleetepi.contract.codec import REASONS
from fleetepi.contract.models import AlertKind
from fleetepi.detectors.windows import Windows

#: Event kinds counted by ``fleetepi_events_total`` (pre-created at 0).
EVENT_KINDS = ("host", "crash", "telemetry")
#: Alert kinds of the contract (pre-created at 0).
ALERT_KINDS: tuple[str, ...] = get_args(AlertKind)
#: Label names of the per-alert gauges, in order; "" where not applicable. ``severity`` is always
#: ``page`` or ``ticket`` (absent in the alert means page, as the contract says); ``finding``,
#: ``incident`` and ``escalation`` (the place a host alert is held under) are what Alertmanager
#: groups, routes and inhibits on (deploy/alertmanager/alertmanager.yml).
ALERT_LABELS = ("kind", "signature", "host", "attribute", "value", "telemetry_kind", "code",
                "severity", "finding", "incident", "escalation")
#: Event time a ticket's series stays up by default: a day.
TICKET_TTL_S = 86_400.0

#: Default listen address of :func:`serve`: local only. Metrics name hosts and
#: signatures, so exposing them to the network is an explicit choice (``--bind``).
DEFAULT_BIND = "127.0.0.1"


class SlidingCounter:
    """Counts per key over the last ``window_ms`` of event time, for the top-N gauges.

    Each key is one :class:`fleetepi.detectors.windows.Windows` (the
    project's one sliding-window type) with a single window; what this class
    adds is many keys and their expiry. A key's window rolls when it counts,
    and when one of its buckets leaves the window: a heap of (bucket, key)
    says which keys that is, so expiry costs O(log n) per counted bucket, not
    O(keys) per minute of event time (a replay crosses 20,000 minutes in a
    fortnight). Memory is bounded by ``max_keys``: beyond it new keys are not
    tracked (counted in ``dropped``), so a flood of unique signatures cannot
    grow the process.

    :param window_ms: width of the window in event-time milliseconds.
    :param bucket_ms: granularity; the window is exact to one bucket.
    :param max_keys: most distinct keys tracked at once.
    """

    def __init__(self, window_ms: int = 3_600_000, bucket_ms: int = 60_000, max_keys: int = 50_000) -> None:
        if window_ms <= 0 or bucket_ms <= 0 or window_ms % bucket_ms:
            raise ValueError("window_ms must be a positive multiple of bucket_ms")
        self.window_ms = window_ms
        self.bucket_ms = bucket_ms
        self.max_keys = max_keys
        self.dropped = 0
        self._size = window_ms // bucket_ms
        self._windows: dict[str, Windows] = {}
        #: (bucket, key) of every bucket a key first counted in: when the bucket leaves, the key rolls
        self._leaving: list[tuple[int, str]] = []
        self._now_b: int | None = None

    @property
    def totals(self) -> dict[str, int]:
        """Count per tracked key now (one atomic copy of the keys: safe against the writer thread)."""
        return {k: round(w.totals[0]) for k, w in list(self._windows.items())}

    def add(self, key: str, ts_ms: int, n: int = 1) -> None:
        b = ts_ms // self.bucket_ms
        now = self._now_b
        if now is None or b > now:
            self.advance(ts_ms)
            now = b
        if b <= now - self._size:
            return  # older than the window: it would expire at once
        w = self._windows.get(key)
        if w is None:
            if len(self._windows) >= self.max_keys:
                self.dropped += n
                return
            w = self._windows[key] = Windows.new((self._size,))
        if b > w.head - self._size and w.cells[b % self._size] == 0.0:
            heapq.heappush(self._leaving, (b, key))
        w.add(b, float(n))

    def advance(self, now_ms: int) -> None:
        """Event time reached ``now_ms``: roll the keys whose buckets left the window, forget the empty ones."""
        nb = now_ms // self.bucket_ms
        if self._now_b is not None and nb <= self._now_b:
            return
        self._now_b = nb
        horizon = nb - self._size
        leaving, windows = self._leaving, self._windows
        while leaving and leaving[0][0] <= horizon:
            _, key = heapq.heappop(leaving)
            w = windows.get(key)
            if w is None:
                continue
            w.roll(nb)
            if w.totals[0] <= 0.0:
                del windows[key]

    def top(self, n: int) -> list[tuple[str, int]]:
        """The ``n`` largest keys, largest first (ties by key, for stable output)."""
        return heapq.nsmallest(n, self.totals.items(), key=lambda kv: (-kv[1], kv[0]))


def alert_labels(alert: Alert) -> tuple[str, ...]:
    """Label values of an alert's gauges (same order as :data:`ALERT_LABELS`)."""
    return (
        alert.kind,
        alert.signature or "",
        alert.host or "",
        alert.attribute or "",
        alert.value or "",
        alert.telemetry_kind or "",
        "" if alert.code is None else str(alert.code),
        "page" if alert.is_page else "ticket",
        alert.finding or "",
        alert.incident or "",
        alert.escalation or "",
    )


class PipelineMetrics(Collector):
    """Every series of the "Pipeline" section of docs/metrics.md.

    :param registry: where to register; a new private ``CollectorRegistry``
        if None (never the global one, which breeds "Duplicated timeseries"
        when two pipelines live in one process, e.g. in tests).
    :param cohort_attribute: host attribute whose value labels
        ``fleetepi_telemetry_events_total`` (``cohort``); ``rack`` by default
        because the Xid-by-rack heatmap is the panel operators ask for first.
    :param top_n: series kept in the top-N crash gauges.
    :param window_s: event-time window of the top-N crash gauges, seconds.
    :param ticket_ttl_s: event time after which a firing ticket's series are removed
        (tickets never resolve); ``0`` keeps them until they resolve.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        cohort_attribute: str = "rack",
        top_n: int = 20,
        window_s: float = 3600.0,
        ticket_ttl_s: float = TICKET_TTL_S,
    ) -> None:
        if ticket_ttl_s < 0:
            raise ValueError("ticket_ttl_s must be >= 0")
        self.registry = registry if registry is not None else CollectorRegistry()
        self.cohort_attribute = cohort_attribute
        self.top_n = top_n
        self.ticket_ttl_ms = int(ticket_ttl_s * 1000)
        self.events: dict[str, int] = dict.fromkeys(EVENT_KINDS, 0)
        self.invalid: dict[str, int] = dict.fromkeys(REASONS, 0)
        self.alerts: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)
        self.resolved: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)
        #: alerts fired, by severity (page, ticket)
        self.severities: dict[str, int] = {"page": 0, "ticket": 0}
        #: alerts held back because their host or place was in maintenance, by kind
        self.suppressed: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)
        #: ticket series removed after ticket_ttl_s, by kind
        self.expired: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)
        #: events of hosts in maintenance (announced or in a window): neither cases nor baselines
        self.in_maintenance = 0
        #: maintenance windows in force (file and silences)
        self.maintenance_windows = 0
        #: firing tickets: alert key -> event time (ms) its series expires
        self._ticket_expiry: dict[str, int] = {}
        self._next_expiry_ms: int | None = None
        self.telemetry: dict[tuple[str, str, str], int] = {}
        #: alert key -> (label values, alert) for alerts firing now.
        self.firing: dict[str, tuple[tuple[str, ...], Alert]] = {}
        self.watermark_ms: int | None = None
        self.hosts = 0
        window_ms = int(window_s * 1000)
        bucket_ms = max(1000, window_ms // 60)
        window_ms -= window_ms % bucket_ms
        self.signature_crashes = SlidingCounter(window_ms, bucket_ms)
        self.host_crashes = SlidingCounter(window_ms, bucket_ms)
        self.registry.register(self)

    # ------------------------------------------------------------------ counting
    def count_event(self, kind: str, n: int = 1) -> None:
        """An accepted event of ``kind`` (host, crash, telemetry)."""
        self.events[kind] = self.events.get(kind, 0) + n

    def count_invalid(self, reason: str, n: int = 1) -> None:
        """A rejected or flagged event (reason from ``fleetepi.contract.codec.REASONS``)."""
        self.invalid[reason] = self.invalid.get(reason, 0) + n

    def observe_alert(self, alert: Alert) -> None:
        """Count an alert and keep the per-alert gauges of firing alerts only."""
        key = alert.key
        if alert.state == "resolved":
            self.resolved[alert.kind] = self.resolved.get(alert.kind, 0) + 1
            self.firing.pop(key, None)
            self._ticket_expiry.pop(key, None)
            return
        self.alerts[alert.kind] = self.alerts.get(alert.kind, 0) + 1
        severity = "page" if alert.is_page else "ticket"
        self.severities[severity] += 1
        self.firing[key] = (alert_labels(alert), alert)
        if severity == "ticket" and self.ticket_ttl_ms > 0:
            until = alert.ts_ms + self.ticket_ttl_ms
            self._ticket_expiry[key] = until
            if self._next_expiry_ms is None or until < self._next_expiry_ms:
                self._next_expiry_ms = until
            if self.watermark_ms is not None and self.watermark_ms >= until:
                self._expire_tickets(self.watermark_ms)
        else:
            self._ticket_expiry.pop(key, None)

    def count_suppressed(self, kind: str, n: int = 1) -> None:
        """An alert held back because its host or place was in maintenance (``fleetepi.maintenance.AlertGate``)."""
        self.suppressed[kind] = self.suppressed.get(kind, 0) + n

    def set_in_maintenance(self, n: int) -> None:
        """Events dropped for maintenance so far (the engine's ``flags["in_maintenance"]``)."""
        self.in_maintenance = n

    def count_in_maintenance(self, n: int) -> None:
        """More events dropped for maintenance (a stream worker adds each batch's)."""
        self.in_maintenance += n

    def set_maintenance_windows(self, n: int) -> None:
        self.maintenance_windows = n

    def _expire_tickets(self, now_ms: int) -> None:
        """Remove the series of tickets older than ``ticket_ttl_s`` of event time."""
        expiry = self._ticket_expiry
        for key, until in list(expiry.items()):
            if until <= now_ms:
                del expiry[key]
                entry = self.firing.pop(key, None)
                if entry is not None:
                    kind = entry[1].kind
                    self.expired[kind] = self.expired.get(kind, 0) + 1
        self._next_expiry_ms = min(expiry.values(), default=None)

    def observe_crash(self, crash: Crash, ts_ms: int) -> None:
        """Feed the top-N "crashes in the last hour" gauges."""
        self.signature_crashes.add(crash.signature, ts_ms)
        self.host_crashes.add(crash.host, ts_ms)

    def observe_telemetry(self, event: Telemetry, attributes: dict[str, str]) -> None:
        """Count a hardware event by kind, code and the host's cohort (its ``cohort_attribute``)."""
        key = (event.kind, "" if event.code is None else str(event.code), attributes.get(self.cohort_attribute, ""))
        self.telemetry[key] = self.telemetry.get(key, 0) + event.n

    def set_watermark(self, watermark_ms: int | None) -> None:
        """Event time the detectors reached; also expires the top-N windows."""
        if watermark_ms is None:
            return
        self.watermark_ms = watermark_ms
        self.signature_crashes.advance(watermark_ms)
        self.host_crashes.advance(watermark_ms)
        if self._next_expiry_ms is not None and watermark_ms >= self._next_expiry_ms:
            self._expire_tickets(watermark_ms)

    def set_hosts(self, n: int) -> None:
        self.hosts = n

    # ------------------------------------------------------------------ exposition
    def collect(self) -> Iterable[Metric]:
        yield _counter("fleetepi_events", "Events accepted, by kind.", "kind", self.events)
        yield _counter("fleetepi_events_invalid", "Events rejected or flagged, by reason.", "reason", self.invalid)
        yield _counter("fleetepi_alerts", "Alerts fired, by kind.", "kind", self.alerts)
        yield _counter("fleetepi_alerts_resolved", "Alerts resolved, by kind.", "kind", self.resolved)
        yield _counter("fleetepi_alerts_severity", "Alerts fired, by severity (page, ticket).", "severity",
                       self.severities)
        yield _counter("fleetepi_alerts_suppressed", "Alerts held back because their host or place was in "
                       "maintenance, by kind.", "kind", self.suppressed)
        yield _counter("fleetepi_tickets_expired", "Ticket series removed after the ticket TTL (event time), by "
                       "kind.", "kind", self.expired)
        yield CounterMetricFamily("fleetepi_events_in_maintenance", "Events of hosts in maintenance (announced or "
                                  "in a window): neither cases nor baselines.", value=self.in_maintenance)
        yield GaugeMetricFamily("fleetepi_maintenance_windows", "Maintenance windows in force (file and "
                                "Alertmanager silences).", value=self.maintenance_windows)
        yield from self._alert_gauges()
        wm = GaugeMetricFamily("fleetepi_watermark_timestamp_seconds", "Event time the detectors have reached.")
        if self.watermark_ms is not None:
            wm.add_metric([], self.watermark_ms / 1000.0)
        yield wm
        yield GaugeMetricFamily("fleetepi_hosts", "Hosts in the inventory.", value=self.hosts)
        yield _top("fleetepi_signature_crashes", "Crashes of the signature in the last hour of event time (top N).",
                   "signature", self.signature_crashes.top(self.top_n))
        yield _top("fleetepi_host_crashes", "Crashes on the host in the last hour of event time (top N).",
                   "host", self.host_crashes.top(self.top_n))
        tel = CounterMetricFamily("fleetepi_telemetry_events", "Hardware events by kind, code and cohort.",
                                  labels=("kind", "code", "cohort"))
        for labels, n in sorted(dict(self.telemetry).items()):
            tel.add_metric(list(labels), n)
        yield tel

    def _alert_gauges(self) -> Iterator[Metric]:
        firing = list(dict(self.firing).values())
        active = GaugeMetricFamily("fleetepi_alert_active", "1 while the alert fires.", labels=ALERT_LABELS)
        score = GaugeMetricFamily("fleetepi_alert_score", "Evidence score of the firing alert.", labels=ALERT_LABELS)
        p_value = GaugeMetricFamily("fleetepi_alert_p_value", "p-value of the firing alert.", labels=ALERT_LABELS)
        rr = GaugeMetricFamily("fleetepi_alert_relative_risk", "Relative risk of the firing alert.",
                               labels=ALERT_LABELS)
        for labels, alert in firing:
            values = list(labels)
            active.add_metric(values, 1.0)
            score.add_metric(values, alert.score)
            if alert.p_value is not None:
                p_value.add_metric(values, alert.p_value)
            if alert.relative_risk is not None:
                rr.add_metric(values, alert.relative_risk)
        yield from (active, score, p_value, rr)


def _counter(name: str, doc: str, label: str, values: dict[str, int]) -> CounterMetricFamily:
    fam = CounterMetricFamily(name, doc, labels=(label,))
    for key, n in sorted(dict(values).items()):
        fam.add_metric([key], n)
    return fam


def _top(name: str, doc: str, label: str, rows: list[tuple[str, int]]) -> GaugeMetricFamily:
    fam = GaugeMetricFamily(name, doc, labels=(label,))
    for key, n in rows:
        fam.add_metric([key], n)
    return fam


def serve(registry: CollectorRegistry, port: int, addr: str = DEFAULT_BIND) -> Any:
    """Serve ``registry`` on ``http://addr:port/metrics`` from a daemon thread.

    Returns the server (``.shutdown()`` stops it); ``port=0`` picks a free
    port, readable as ``server.server_port``.

    :raises OSError: the port is taken (callers turn it into a clear message).
    """
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server


__all__ = [
    "ALERT_KINDS",
    "ALERT_LABELS",
    "DEFAULT_BIND",
    "EVENT_KINDS",
    "TICKET_TTL_S",
    "PipelineMetrics",
    "SlidingCounter",
    "alert_labels",
    "serve",
]
