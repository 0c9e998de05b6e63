"""Every PromQL expression of the dashboard, in one place.

Three consumers read this table and nothing else: ``build.py`` (the Grafana
JSON), ``render.py`` (the PNG of the main panels) and the test that runs each
query against a real Prometheus. A query edited here therefore changes the
dashboard, the picture and the check at once; none of them can drift.

Expressions use Grafana's built-in variables ``$__rate_interval`` and
``$__range``; :func:`resolve` substitutes them when a query is sent to
Prometheus directly (render, tests). Series names follow docs/metrics.md.

``source`` says which process exports the series: ``pipeline`` (the detector
pipeline: ``fleetepi demo``/``replay --metrics-port`` and every stream
worker), ``worker`` (stream workers only) or ``agent`` (node agents only).
The data test requires every ``pipeline`` query to return samples from a
real pipeline; ``worker``/``agent`` series need a Kafka broker or a node
agent to exist at all, so that test only checks them for syntax and for
names that docs/metrics.md declares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Source = Literal["pipeline", "worker", "agent"]
PanelKind = Literal["timeseries", "table", "bargauge", "heatmap", "stat"]

#: Label sets of the alert gauges that name the alerted entity (docs/metrics.md).
ALERT_LABELS = "kind, signature, host, attribute, value, telemetry_kind, code"
#: What the incidents table groups the firing alerts by: one row per incident and severity.
INCIDENT_LABELS = "incident, severity"


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel.

    :param expr: PromQL, with Grafana's ``$__rate_interval``/``$__range`` where needed.
    :param legend: Grafana legend template (``{{label}}``), also used by the PNG.
    :param instant: evaluate at the end of the range only (tables, bar gauges).
    :param source: which fleetepi process exports the series (see module docstring).
    :param ref: Grafana refId; unique within a panel.
    """

    expr: str
    legend: str = ""
    instant: bool = False
    source: Source = "pipeline"
    ref: str = "A"


@dataclass(frozen=True)
class PanelSpec:
    """A dashboard panel: what it shows, how, and where (Grafana's 24-column grid).

    :param key: stable identifier (panel ``uid``-like; PNG and tests address panels by it).
    :param unit: Grafana unit id (``cps`` counts/s, ``s`` seconds, ``short``).
    :param grid: (x, y, w, h) in Grafana grid units.
    """

    key: str
    title: str
    kind: PanelKind
    queries: tuple[Query, ...]
    description: str
    unit: str = "short"
    grid: tuple[int, int, int, int] = (0, 0, 12, 8)
    row: str = "Epidemiology"
    #: Logarithmic y axis: rates of different kinds differ by orders of magnitude.
    log_scale: bool = False
    #: Tables: the labels shown as columns (the rows' identity), and each query's column name by ref.
    table_labels: tuple[str, ...] = ()
    table_columns: tuple[tuple[str, str], ...] = ()


def _q(expr: str, legend: str = "", *, instant: bool = False, source: Source = "pipeline", ref: str = "A") -> Query:
    return Query(expr=" ".join(expr.split()), legend=legend, instant=instant, source=source, ref=ref)


PANELS: tuple[PanelSpec, ...] = (
    # ------------------------------------------------------------- headline stats
    PanelSpec(
        key="hosts",
        title="Hosts in inventory",
        kind="stat",
        queries=(_q("max(fleetepi_hosts)", "hosts", instant=True),),
        description="Hosts announced to the detectors (fleetepi_hosts). A drop means agents stopped announcing.",
        grid=(0, 0, 4, 4),
    ),
    PanelSpec(
        key="incidents_paging",
        title="Incidents paging",
        kind="stat",
        queries=(_q('count(count by (incident) (fleetepi_alert_active{severity="page"})) or vector(0)', "paging",
                    instant=True),),
        description="Distinct incidents with a page firing now: what Alertmanager notifies (it groups by incident), "
                    "however many alerts each holds.",
        grid=(4, 0, 5, 4),
    ),
    PanelSpec(
        key="tickets_open",
        title="Tickets open",
        kind="stat",
        queries=(_q('count(count by (incident) (fleetepi_alert_active{severity="ticket"})) or vector(0)', "tickets",
                    instant=True),),
        description="Incidents with a ticket (chronic host, static association, crash loop) fired within the ticket "
                    "TTL (a day of event time): standing conditions for working hours, never a page.",
        grid=(9, 0, 5, 4),
    ),
    PanelSpec(
        key="crash_rate",
        title="Crashes / s (fleet)",
        kind="stat",
        queries=(_q('sum(rate(fleetepi_events_total{kind="crash"}[$__rate_interval]))', "crashes/s"),),
        description="Crash events accepted per second, whole fleet.",
        unit="cps",
        grid=(14, 0, 5, 4),
    ),
    PanelSpec(
        key="watermark_stat",
        title="Event time reached",
        kind="stat",
        queries=(_q("max(fleetepi_watermark_timestamp_seconds) * 1000", "watermark", instant=True),),
        description="Event time the detectors have reached (the watermark). Frozen = no input.",
        unit="dateTimeAsIso",
        grid=(19, 0, 5, 4),
    ),
    # ------------------------------------------------------------- epidemiology
    PanelSpec(
        key="incidence",
        title="Fleet incidence: crashes and hardware events per second, by kind",
        kind="timeseries",
        queries=(
            _q('sum(rate(fleetepi_events_total{kind="crash"}[$__rate_interval]))', "crashes", ref="A"),
            _q("sum by (kind) (rate(fleetepi_telemetry_events_total[$__rate_interval]))", "{{kind}}", ref="B"),
        ),
        description=(
            "Crash events and hardware telemetry events (Xid, ECC, thermal, NVLink, PCIe) accepted per second. "
            "A step in one line with the others flat is where to look first."
        ),
        unit="cps",
        grid=(0, 4, 24, 8),
        log_scale=True,
    ),
    PanelSpec(
        key="incidents",
        title="Incidents (firing alerts grouped by incident)",
        kind="table",
        queries=(
            _q(f"count by ({INCIDENT_LABELS}) (fleetepi_alert_active)", instant=True, ref="A"),
            _q(f'count by ({INCIDENT_LABELS}) (count by ({INCIDENT_LABELS}, host) (fleetepi_alert_active{{host!=""}}))',
               instant=True, ref="B"),
            _q(f"max by ({INCIDENT_LABELS}) (fleetepi_alert_score)", instant=True, ref="C"),
        ),
        description=(
            "One row per incident (alerts about one problem: a signature's spike and the cohort that explains it, a "
            "host's crashes and Xids, a rack's escalation and the hosts under it), pages and tickets apart: "
            "how many alerts and hosts it holds and its strongest evidence score. This is what Alertmanager "
            "notifies (it groups by incident); the alerts themselves are in Alertmanager."
        ),
        grid=(0, 12, 24, 8),
        table_labels=("incident", "severity"),
        table_columns=(("A", "alerts"), ("B", "hosts"), ("C", "max score")),
    ),
    PanelSpec(
        key="top_signatures",
        title="Top signatures (crashes, last hour of event time)",
        kind="bargauge",
        queries=(_q("topk(10, max by (signature) (fleetepi_signature_crashes))", "{{signature}}", instant=True),),
        description="The 10 crash signatures with the most crashes in the last hour of event time.",
        grid=(0, 20, 12, 9),
    ),
    PanelSpec(
        key="top_hosts",
        title="Hosts by crashes (last hour of event time)",
        kind="bargauge",
        queries=(_q("topk(10, max by (host) (fleetepi_host_crashes))", "{{host}}", instant=True),),
        description="The 10 hosts with the most crashes in the last hour of event time: a sick host stands alone.",
        grid=(12, 20, 12, 9),
    ),
    PanelSpec(
        key="xid_heatmap",
        title="Xid errors by rack and code",
        kind="heatmap",
        queries=(
            _q(
                'sum by (cohort, code) (increase(fleetepi_telemetry_events_total{kind="xid"}[$__rate_interval]))',
                "{{cohort}} Xid {{code}}",
            ),
        ),
        description=(
            "NVIDIA Xid events per rack (the host's cohort attribute, default 'rack') and Xid code. "
            "A hot cell confined to one rack points at shared power, cooling or a bad batch."
        ),
        grid=(0, 29, 12, 9),
    ),
    PanelSpec(
        key="cohort_risk",
        title="Cohort relative risks (firing)",
        kind="bargauge",
        queries=(
            _q(
                'max by (kind, attribute, value, signature, telemetry_kind, code) (fleetepi_alert_relative_risk{attribute!=""})',
                "{{attribute}}={{value}} {{signature}}{{telemetry_kind}} {{code}}",
                instant=True,
            ),
        ),
        description=(
            "Relative risk of each firing cohort alert: how many times more often the crash or hardware "
            "event happens on hosts with attribute=value than on the rest of the fleet."
        ),
        grid=(12, 29, 12, 9),
    ),
    # ------------------------------------------------------------- pipeline health
    PanelSpec(
        key="events_rate",
        title="Events accepted / s",
        kind="timeseries",
        queries=(_q("sum by (kind) (rate(fleetepi_events_total[$__rate_interval]))", "{{kind}}"),),
        description="Host, crash and telemetry events the detectors accepted per second.",
        unit="cps",
        grid=(0, 39, 8, 7),
        row="Pipeline health",
    ),
    PanelSpec(
        key="invalid_rate",
        title="Invalid events / s, by reason",
        kind="timeseries",
        queries=(_q("sum by (reason) (rate(fleetepi_events_invalid_total[$__rate_interval]))", "{{reason}}"),),
        description="Events rejected or flagged (schema, out_of_order, future_timestamp, unknown_host, ...).",
        unit="cps",
        grid=(8, 39, 8, 7),
        row="Pipeline health",
    ),
    PanelSpec(
        key="watermark_delay",
        title="Watermark delay",
        kind="timeseries",
        queries=(_q("time() - max(fleetepi_watermark_timestamp_seconds)", "now - event time"),),
        description="Wall time minus the event time the detectors reached. Growing = the pipeline falls behind.",
        unit="s",
        grid=(16, 39, 8, 7),
        row="Pipeline health",
    ),
    PanelSpec(
        key="deadletters",
        title="Dead letters / s",
        kind="timeseries",
        queries=(
            _q(
                "sum by (topic, reason) (rate(fleetepi_stream_deadletters_total[$__rate_interval]))",
                "{{topic}} {{reason}}",
                source="worker",
            ),
        ),
        description="Messages the stream workers sent to fleetepi.deadletter, by input topic and reason.",
        unit="cps",
        grid=(0, 46, 8, 7),
        row="Pipeline health",
    ),
    PanelSpec(
        key="consumer_lag",
        title="Consumer lag",
        kind="timeseries",
        queries=(_q("sum by (topic) (fleetepi_stream_consumer_lag)", "{{topic}}", source="worker"),),
        description="Messages behind the log end, per input topic (all partitions).",
        grid=(8, 46, 8, 7),
        row="Pipeline health",
    ),
    PanelSpec(
        key="spool_depth",
        title="Agent spool depth",
        kind="timeseries",
        queries=(
            _q("sum(fleetepi_agent_spool_messages)", "spooled (fleet)", source="agent", ref="A"),
            _q("max(fleetepi_agent_spool_messages)", "worst host", source="agent", ref="B"),
        ),
        description="Events waiting in node agents' on-disk spools: the broker is away or too slow.",
        grid=(16, 46, 8, 7),
        row="Pipeline health",
    ),
)

#: Panels of the PNG (render.py), in reading order of its 3x2 grid.
MAIN_PANELS: tuple[str, ...] = (
    "incidence",
    "incidents",
    "top_signatures",
    "top_hosts",
    "xid_heatmap",
    "cohort_risk",
)

_GRAFANA_VARS = re.compile(r"\$(__rate_interval|__range|__interval)\b")


def panel(key: str) -> PanelSpec:
    """The panel named ``key``; ``KeyError`` names the known keys."""
    for p in PANELS:
        if p.key == key:
            return p
    raise KeyError(f"no panel {key!r}; known: {', '.join(p.key for p in PANELS)}")


def resolve(expr: str, *, rate_interval: str = "5m", range_: str = "1h", interval: str = "1m") -> str:
    """Replace Grafana's built-in variables so Prometheus can run ``expr`` directly.

    :param rate_interval: stands for ``$__rate_interval`` (at least 4 scrape intervals).
    :param range_: stands for ``$__range`` (the dashboard's time range).
    """
    values = {"__rate_interval": rate_interval, "__range": range_, "__interval": interval}
    return _GRAFANA_VARS.sub(lambda m: values[m.group(1)], expr)


def metric_names(expr: str) -> set[str]:
    """The fleetepi series an expression reads (for the check against docs/metrics.md)."""
    return set(re.findall(r"\bfleetepi_[a-z0-9_]+", expr))


__all__ = [
    "ALERT_LABELS",
    "INCIDENT_LABELS",
    "MAIN_PANELS",
    "PANELS",
    "PanelSpec",
    "Query",
    "metric_names",
    "panel",
    "resolve",
]
