"""The generated Grafana dashboard: committed file up to date, well-formed, written against docs/metrics.md."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetepi.cli import main
from fleetepi.dashboard.build import DATASOURCE, UID, dashboard_dict, dashboard_json
from fleetepi.dashboard.queries import MAIN_PANELS, PANELS, metric_names, panel, resolve

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "deploy" / "grafana" / "fleetepi-dashboard.json"
METRICS_DOC = REPO / "docs" / "metrics.md"

#: Grafana panel type of each PanelSpec kind.
GRAFANA_TYPE = {"timeseries": "timeseries", "table": "table", "bargauge": "bargauge", "heatmap": "heatmap",
                "stat": "stat"}


def test_committed_dashboard_is_what_build_generates() -> None:
    assert COMMITTED.read_text() == dashboard_json(), (
        "deploy/grafana/fleetepi-dashboard.json is stale: run `fleetepi dashboard build -o "
        "deploy/grafana/fleetepi-dashboard.json` then scripts/sync-helm-files.sh")


def test_build_check_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "d.json"
    assert runner.invoke(main, ["dashboard", "build", "-o", str(out)]).exit_code == 0
    assert runner.invoke(main, ["dashboard", "build", "-o", str(out), "--check"]).exit_code == 0
    out.write_text(out.read_text().replace("fleetepi_hosts", "fleetepi_host"))
    result = runner.invoke(main, ["dashboard", "build", "-o", str(out), "--check"])
    assert result.exit_code == 1 and "out of date" in result.output
    # stdout is the same JSON
    assert json.loads(runner.invoke(main, ["dashboard", "build"]).output) == dashboard_dict()


def test_datasource_variable_and_every_panel_uses_it() -> None:
    d = dashboard_dict()
    assert d["uid"] == UID
    (var,) = d["templating"]["list"]
    assert var["name"] == "datasource" and var["type"] == "datasource" and var["query"] == "prometheus"
    for p in d["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"] == DATASOURCE, p["title"]
        for t in p["targets"]:
            assert t["datasource"] == DATASOURCE and t["expr"], p["title"]


def test_panels_match_the_query_table_one_to_one() -> None:
    d = dashboard_dict()
    panels = [p for p in d["panels"] if p["type"] != "row"]
    assert len(panels) == len(PANELS)
    for p, spec in zip(panels, PANELS):
        assert p["title"] == spec.title
        assert p["type"] == GRAFANA_TYPE[spec.kind]
        assert [t["expr"] for t in p["targets"]] == [q.expr for q in spec.queries]
        assert [t["refId"] for t in p["targets"]] == [q.ref for q in spec.queries]
        assert all(t["instant"] == q.instant for t, q in zip(p["targets"], spec.queries))
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))


def test_grid_positions_fit_and_do_not_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    for p in dashboard_dict()["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & taken, f"{p['title']} overlaps another panel"
        taken |= cells


def test_every_series_is_in_the_metrics_contract() -> None:
    """Each name a query reads is declared in docs/metrics.md (counters under their _total name)."""
    doc = METRICS_DOC.read_text()
    declared = set(re.findall(r"`(fleetepi_[a-z0-9_]+)`", doc))
    for spec in PANELS:
        for q in spec.queries:
            unknown = metric_names(q.expr) - declared
            assert not unknown, f"panel {spec.key}: {sorted(unknown)} not in docs/metrics.md"


def test_required_panels_are_there() -> None:
    keys = {p.key for p in PANELS}
    # The list: incidence, top signatures, firing alerts (as incidents: issue 13), hosts, Xid heatmap by
    # rack, cohort RR, pipeline health; pages vs tickets.
    assert {"incidence", "top_signatures", "incidents", "incidents_paging", "tickets_open", "top_hosts", "xid_heatmap", "cohort_risk",
            "events_rate", "invalid_rate", "deadletters", "consumer_lag", "spool_depth", "watermark_delay"} <= keys
    assert set(MAIN_PANELS) <= keys
    assert 'kind="xid"' in panel("xid_heatmap").queries[0].expr and "cohort" in panel("xid_heatmap").queries[0].expr
    with pytest.raises(KeyError, match="known"):
        panel("nope")


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # rate windows become the given interval
        ("rate(x[$__rate_interval])", "rate(x[2m])"),
        # the range variable, and one that merely starts like it, are told apart
        ("increase(x[$__range]) + $__rangeX", "increase(x[6h]) + $__rangeX"),
        # nothing to replace
        ("max(fleetepi_hosts)", "max(fleetepi_hosts)"),
    ],
)
def test_resolve_grafana_variables(expr: str, expected: str) -> None:
    assert resolve(expr, rate_interval="2m", range_="6h") == expected


# ---------------------------------------------------------------------- history (event-time metrics)
def test_history_writes_openmetrics_in_event_time_and_counts_bad_lines(tmp_path: Path) -> None:
    """A small recording with one garbage line: the run goes on, the line is counted, timestamps are event time."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from fleetepi.contract import Crash, Host, encode
    from fleetepi.contract.codec import REASONS

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    events = [Host(ts=t0, host="gpu-1", attributes={"rack": "r01"}), Host(ts=t0, host="gpu-2", attributes={"rack": "r02"})]
    events += [Crash(ts=t0 + timedelta(minutes=3 * i), host=f"gpu-{1 + i % 2}", signature="SIGSEGV | f | libx.so",
                     signal="SIGSEGV") for i in range(20)]
    lines = [encode(e) for e in events]
    lines.insert(5, b"{not json")
    src = tmp_path / "events.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp_path / "metrics.om"
    res = CliRunner().invoke(main, ["dashboard", "history", "-i", str(src), "-o", str(out), "--step", "4m"])
    assert res.exit_code == 0, res.output
    assert "22 events" in res.output and "2026-03-02T00:00:00+00:00" in res.output

    families = {f.name: f for f in text_string_to_metric_families(out.read_text())}
    crashes = [s for s in families["fleetepi_events"].samples if s.labels == {"kind": "crash"}]
    assert [s.value for s in crashes][-1] == 20
    assert all(s.timestamp is not None for s in crashes)
    times = [float(s.timestamp) for s in crashes]
    assert times == sorted(times) and times[0] == t0.timestamp() + 240
    assert all(b - a == 240 for a, b in zip(times, times[1:]))
    invalid = {s.labels["reason"]: s.value for s in families["fleetepi_events_invalid"].samples
               if s.name.endswith("_total") and float(s.timestamp) == times[-1]}
    assert set(invalid) == set(REASONS)  # every reason pre-created at 0 (docs/metrics.md)
    assert invalid["malformed_json"] == 1
    assert {s.value for s in families["fleetepi_hosts"].samples if float(s.timestamp) == times[-1]} == {2}


def test_history_refuses_an_empty_recording(tmp_path: Path) -> None:
    src = tmp_path / "empty.jsonl"
    src.write_bytes(b"")
    res = CliRunner().invoke(main, ["dashboard", "history", "-i", str(src), "-o", str(tmp_path / "m.om")])
    assert res.exit_code == 1 and "no events" in res.output
