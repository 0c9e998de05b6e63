"""Every panel's PromQL, run by a real Prometheus over real detector output, returns data.

Two real Prometheus servers:

* ``history_prom`` holds a simulated fleet's metrics *in event time*: the
  fleet (with labelled outbreaks, ``fleetepi simulate``) goes through the real
  pipeline and ``fleetepi dashboard history`` records its metrics every 10
  event minutes; promtool backfills them into TSDB blocks and Prometheus
  (the e2e test's ``start_prometheus`` helper) serves them. That gives the
  time series panels days of history, and cohort alerts (relative risks)
  that the e2e stream does not make. The PNG is rendered from it too.
* ``ops_stack.prometheus`` is the end-to-end test's server, scraping a live
  exporter every second: the same queries must work on live scrapes.

Exempt from "returns data": the ``worker`` and ``agent`` panels (dead
letters, consumer lag, agent spool). Those series exist only in
``fleetepi worker`` (needs the Kafka broker) and ``fleetepi agent``
processes; they are covered for syntax (Prometheus parses them) and for their
names (test_dashboard_build checks them against docs/metrics.md).
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

import servers
from fleetepi.cli import main
from fleetepi.dashboard.prom import PrometheusAPI
from fleetepi.dashboard.queries import MAIN_PANELS, PANELS, Query, resolve
from fleetepi.dashboard.render import Window, render
from fleetepi.simulate import SimConfig

pytestmark = pytest.mark.integration

#: Event seconds between two recorded snapshots (the backfilled "scrape interval"):
#: under Prometheus' 5-minute lookback, so every instant sees a sample.
STEP_S = 240
#: $__rate_interval for the backfilled data: several snapshots wide.
RATE_INTERVAL = "1h"

EXEMPT_REASON = {
    "worker": "series of `fleetepi worker` only (Kafka consumer lag, dead letters)",
    "agent": "series of `fleetepi agent` only (node spool)",
}


@dataclass
class HistoryProm:
    prom: servers.Prometheus
    api: PrometheusAPI
    #: The instant the checks look at: the one with the most firing alerts.
    at_s: float
    start_s: float
    end_s: float


def _finite(series: list) -> bool:
    return any(any(not math.isnan(v) for v in s.values) for s in series)


@pytest.fixture(scope="module")
def history_prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HistoryProm]:
    promtool = servers.require_binary("promtool")
    servers.require_binary("prometheus")
    work = tmp_path_factory.mktemp("dashboard-history")
    runner = CliRunner()
    events = work / "events.jsonl.gz"
    res = runner.invoke(main, ["simulate", "--hosts", "300", "--days", "3", "--seed", "7", "-o", str(events)])
    assert res.exit_code == 0, res.output
    om = work / "metrics.om"
    res = runner.invoke(main, ["dashboard", "history", "-i", str(events), "-o", str(om), "--step", f"{STEP_S}s"])
    assert res.exit_code == 0, res.output
    assert om.read_bytes().rstrip().endswith(b"# EOF")
    prom_dir = work / "prometheus"
    (prom_dir / "data").mkdir(parents=True)
    proc = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(om), str(prom_dir / "data")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    prom = servers.start_prometheus(prom_dir, servers.prometheus_config({}, [], None, interval_s=60))
    api = PrometheusAPI(prom.url)
    try:
        # The recording's span (the simulator's default start, --days 3), then its busiest instant.
        start_s = SimConfig().start_ms / 1000
        end_s = start_s + 3 * 86400
        busy_q = 'count(fleetepi_alert_active) + (count(fleetepi_alert_relative_risk{attribute!=""}) or vector(0))'
        (busy,) = api.range(busy_q, start_s, end_s, STEP_S)
        at_s = float(busy.times[busy.values.argmax()])
        yield HistoryProm(prom, api, at_s, start_s, end_s)
    finally:
        api.close()
        prom.stop()


def _queries(sources: tuple[str, ...]) -> list[tuple[str, Query]]:
    return [(p.key, q) for p in PANELS for q in p.queries if q.source in sources]


def _id(item: tuple[str, Query]) -> str:
    return f"{item[0]}-{item[1].ref}"


@pytest.mark.parametrize("item", _queries(("pipeline",)), ids=_id)
def test_pipeline_query_returns_data_over_event_time(history_prom: HistoryProm, item: tuple[str, Query]) -> None:
    key, q = item
    h = history_prom
    expr = resolve(q.expr, rate_interval=RATE_INTERVAL, range_="6h")
    if q.instant:
        series = h.api.instant(expr, at_s=h.at_s)
    else:
        series = h.api.range(expr, h.at_s - 6 * 3600, h.at_s, STEP_S)
    assert _finite(series), f"panel {key} query {q.ref} returned no data: {expr}"


@pytest.mark.parametrize("item", _queries(("worker", "agent")), ids=_id)
def test_worker_and_agent_queries_parse(history_prom: HistoryProm, item: tuple[str, Query]) -> None:
    """Exempt from returning data (see EXEMPT_REASON); Prometheus must still accept them."""
    key, q = item
    assert q.source in EXEMPT_REASON
    # PrometheusAPI raises PrometheusQueryError on a parse error.
    h = history_prom
    h.api.range(resolve(q.expr, rate_interval=RATE_INTERVAL), h.at_s - 3600, h.at_s, STEP_S)


def test_cohort_panel_shows_a_relative_risk(history_prom: HistoryProm) -> None:
    """The simulated fleet has cohort outbreaks: at the busiest instant one fires with RR > 1."""
    from fleetepi.dashboard.queries import panel

    q = panel("cohort_risk").queries[0]
    series = history_prom.api.instant(q.expr, at_s=history_prom.at_s)
    assert series and max(float(s.values[-1]) for s in series) > 1.0
    assert all(s.labels.get("attribute") for s in series)


def test_render_png_of_the_main_panels(history_prom: HistoryProm, tmp_path: Path) -> None:
    import matplotlib.image

    out = tmp_path / "dashboard.png"
    h = history_prom
    counts = render(h.api, out, Window(max(h.start_s, h.at_s - 2 * 86400), h.at_s, RATE_INTERVAL))
    assert set(counts) == set(MAIN_PANELS)
    assert all(n > 0 for n in counts.values()), counts
    img = matplotlib.image.imread(out)
    assert img.shape[0] > 800 and img.shape[1] > 1000


def test_render_cli_reports_a_bad_prometheus_url(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["dashboard", "render", "--prometheus", f"http://127.0.0.1:{servers.free_port()}",
                                    "-o", str(tmp_path / "x.png"), "--range", "1h"])
    assert res.exit_code == 1 and "cannot reach Prometheus" in res.output
    assert not (tmp_path / "x.png").exists()


# ---------------------------------------------------------------------- the e2e test's live Prometheus
#: Panels the e2e stream (one sick host, no cohort outbreak) cannot fill: relative
#: risk only exists for cohort alerts (hardware_correlation / cohort telemetry).
E2E_EMPTY = {("cohort_risk", "A")}


@pytest.mark.parametrize("item", _queries(("pipeline",)), ids=_id)
def test_pipeline_query_on_the_e2e_prometheus(ops_stack: servers.OpsStack, item: tuple[str, Query]) -> None:
    key, q = item
    prom = ops_stack.prometheus
    # rate() needs two scrapes inside the window.
    servers.wait_until("two scrapes of the exporter",
                       lambda: prom.query('count_over_time(up{job="fleetepi"}[1m]) >= 3'), timeout_s=60)
    expr = resolve(q.expr, rate_interval="30s", range_="5m")
    result = prom.query(expr)  # raises on a query Prometheus rejects
    if (key, q.ref) in E2E_EMPTY:
        return
    assert result, f"panel {key} query {q.ref} returned nothing on the live e2e Prometheus: {expr}"
