"""The Grafana dashboard, generated from :mod:`fleetepi.dashboard.queries`.

Why generated: the committed JSON (deploy/grafana/fleetepi-dashboard.json,
also shipped by the Helm chart's ConfigMap) is ~2,000 lines that nobody can
review by hand. Here each panel is a few lines, and a test checks that the
committed file is exactly what this module produces, so a query edit that
forgets to regenerate fails CI.

Why grafanalib: it is a small, pure-Python, attrs-based library already in
the ``ops`` extra; it writes deterministic JSON (sorted keys), and where it
lags Grafana (bar gauge and heatmap options of Grafana 9+) ``extraJson``
sets the current fields. grafana-foundation-sdk is generated from Grafana's
own schemas but is versioned per Grafana release and pulls in a much larger
API surface than six panel types need.

Every panel reads the data source from the ``datasource`` template variable,
so one dashboard works against any Prometheus the Grafana knows.
"""

from __future__ import annotations

import json
from typing import Any

from grafanalib import core as g
from grafanalib._gen import DashboardEncoder

from fleetepi.dashboard.queries import PANELS, PanelSpec, Query

#: Dashboard uid: stable, so links and provisioning keep pointing at the same dashboard.
UID = "fleetepi-overview"
TITLE = "fleetepi: crash epidemiology"
#: Grafana dashboard JSON schema version the extraJson fields are written for (Grafana 10/11).
SCHEMA_VERSION = 39

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _targets(spec: PanelSpec) -> list[g.Target]:
    def one(q: Query) -> g.Target:
        return g.Target(
            expr=q.expr,
            legendFormat=q.legend,
            refId=q.ref,
            instant=q.instant,
            format="table" if spec.kind == "table" else "time_series",
            intervalFactor=1,
            datasource=DATASOURCE,
        )

    return [one(q) for q in spec.queries]


def _common(spec: PanelSpec) -> dict[str, Any]:
    x, y, w, h = spec.grid
    return {
        "title": spec.title,
        "description": spec.description,
        "dataSource": DATASOURCE,
        "targets": _targets(spec),
        "gridPos": g.GridPos(h=h, w=w, x=x, y=y),
    }


def _reduce_options(calc: str) -> dict[str, Any]:
    return {"calcs": [calc], "fields": "", "values": False}


def _panel(spec: PanelSpec) -> g.Panel:
    """One grafanalib panel per kind; extraJson fills in what grafanalib 0.7 lacks."""
    common = _common(spec)
    if spec.kind == "timeseries":
        return g.TimeSeries(
            unit=spec.unit,
            fillOpacity=10,
            lineWidth=2,
            legendDisplayMode="table",
            legendPlacement="right" if spec.grid[2] >= 16 else "bottom",
            legendCalcs=["lastNotNull", "max"] if spec.grid[2] >= 16 else [],
            tooltipMode="multi",
            tooltipSort="desc",
            scaleDistributionType="log" if spec.log_scale else "linear",
            scaleDistributionLog=10,
            **common,
        )
    if spec.kind == "stat":
        return g.Stat(format=spec.unit, reduceCalc="lastNotNull", graphMode="none", noValue="0", **common)
    if spec.kind == "bargauge":
        return g.BarGauge(
            displayMode=g.GAUGE_DISPLAY_MODE_GRADIENT,
            orientation=g.ORIENTATION_HORIZONTAL,
            format=spec.unit,
            **common,
            extraJson={
                "options": {
                    "reduceOptions": _reduce_options("lastNotNull"),
                    "showUnfilled": True,
                    "valueMode": "color",
                    "namePlacement": "top",
                },
                "fieldConfig": {"defaults": {"min": 0, "max": None, "unit": spec.unit, "color": {"mode": "continuous-YlRd"}}},
            },
        )
    if spec.kind == "heatmap":
        return g.Heatmap(
            **common,
            extraJson={
                "options": {
                    "calculate": False,
                    "cellGap": 1,
                    "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5},
                    "yAxis": {"axisPlacement": "left"},
                    "rowsFrame": {"layout": "auto"},
                    "tooltip": {"show": True, "yHistogram": False},
                    "legend": {"show": True},
                },
            },
        )
    if spec.kind == "table":
        hidden = {"Time": True, "__name__": True, "instance": True, "job": True}
        columns = dict(spec.table_columns)
        order = {name: i for i, name in enumerate([*spec.table_labels, *(f"Value #{r}" for r in columns)])}
        return g.Table(
            **common,
            filterable=True,
            sortBy=[g.TableSortByField(displayName="severity", desc=False)],
            transformations=[
                {"id": "merge", "options": {}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": hidden,
                        "indexByName": order,
                        "renameByName": {f"Value #{ref}": name for ref, name in columns.items()},
                    },
                },
            ],
        )
    raise ValueError(f"unknown panel kind {spec.kind!r} in panel {spec.key!r}")


def build_dashboard() -> g.Dashboard:
    """The dashboard object: panels in grid order, a row header before pipeline health."""
    panels: list[g.Panel] = []
    row_name = PANELS[0].row
    for spec in PANELS:
        if spec.row != row_name:
            row_name = spec.row
            y = spec.grid[1] - 1
            panels.append(g.RowPanel(title=row_name, gridPos=g.GridPos(h=1, w=24, x=0, y=y)))
        panels.append(_panel(spec))
    return g.Dashboard(
        title=TITLE,
        uid=UID,
        description="Crash and hardware-event epidemiology of a GPU fleet (fleetepi). Generated by fleetepi.dashboard.build.",
        tags=["fleetepi", "gpu", "crashes"],
        timezone="utc",
        refresh="1m",
        schemaVersion=SCHEMA_VERSION,
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        time=g.Time("now-6h", "now"),
        templating=g.Templating(
            list=[
                g.Template(
                    name="datasource",
                    label="Data source",
                    type="datasource",
                    query="prometheus",
                    refresh=g.REFRESH_ON_DASHBOARD_LOAD,
                ),
            ]
        ),
        panels=panels,
    ).auto_panel_ids()


def dashboard_json() -> str:
    """The dashboard as the committed file holds it: sorted keys, 2-space indent, final newline."""
    data = build_dashboard().to_json_data()
    return json.dumps(data, sort_keys=True, indent=2, cls=DashboardEncoder) + "\n"


def dashboard_dict() -> dict[str, Any]:
    """The dashboard as plain data (what Grafana's API and the Helm ConfigMap carry)."""
    result: dict[str, Any] = json.loads(dashboard_json())
    return result


__all__ = ["DATASOURCE", "SCHEMA_VERSION", "TITLE", "UID", "build_dashboard", "dashboard_dict", "dashboard_json"]
