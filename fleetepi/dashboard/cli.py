"""``fleetepi dashboard build|render``: the Grafana JSON and a PNG of its main panels."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from fleetepi.exceptions import FleetepiError

#: Where the committed dashboard lives (relative to the repository root).
DEFAULT_JSON = Path("deploy/grafana/fleetepi-dashboard.json")


def _parse_time(text: str | None, default: float) -> float:
    """Unix seconds, ISO 8601 (``2026-03-01T12:00:00Z``) or ``now``."""
    if text is None or text == "now":
        return default
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither unix seconds nor an ISO 8601 time") from None


def _parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``6h``, ``3d`` -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        return float(text[:-1]) * units[text[-1]]
    except (KeyError, ValueError, IndexError):
        raise click.BadParameter(f"{text!r}: use a number with s, m, h or d (e.g. 6h)") from None


@click.group("dashboard")
def dashboard_command() -> None:
    """Generate the Grafana dashboard and render its main panels to PNG."""


@dashboard_command.command("build")
@click.option("-o", "--output", default="-", type=click.Path(dir_okay=False, allow_dash=True),
              show_default=True, help=f"Where to write the JSON ('-' = stdout; the committed copy is {DEFAULT_JSON}).")
@click.option("--check", is_flag=True, help="Do not write: exit 1 if OUTPUT differs from what would be generated.")
def build_cmd(output: str, check: bool) -> None:
    """Write the Grafana dashboard JSON generated from fleetepi.dashboard.queries."""
    from fleetepi.dashboard.build import dashboard_json

    text = dashboard_json()
    if check:
        if output == "-":
            raise click.UsageError("--check needs -o FILE")
        current = Path(output).read_text() if Path(output).exists() else ""
        if current != text:
            click.echo(f"{output} is out of date: run `fleetepi dashboard build -o {output}`", err=True)
            sys.exit(1)
        click.echo(f"{output} is up to date", err=True)
        return
    if output == "-":
        click.echo(text, nl=False)
        return
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(output).write_text(text)
    click.echo(f"wrote {output}", err=True)


@dashboard_command.command("render")
@click.option("--prometheus", "prom_url", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="PNG to write.")
@click.option("--end", default=None, help="End of the range: unix seconds, ISO 8601 or 'now' (default).")
@click.option("--range", "range_", default="6h", show_default=True, help="Length of the range (s, m, h, d).")
@click.option("--rate-interval", default="5m", show_default=True,
              help="What $__rate_interval stands for (at least 4 scrape intervals).")
def render_cmd(prom_url: str, output: str, end: str | None, range_: str, rate_interval: str) -> None:
    """Draw the main panels (3x2) from their own PromQL, run against PROMETHEUS."""
    from fleetepi.dashboard.prom import PrometheusAPI
    from fleetepi.dashboard.render import Window, render

    end_s = _parse_time(end, time.time())
    window = Window(end_s - _parse_duration(range_), end_s, rate_interval)
    try:
        with PrometheusAPI(prom_url) as api:
            counts = render(api, Path(output), window)
    except FleetepiError as exc:
        raise click.ClickException(str(exc)) from None
    empty = [k for k, n in counts.items() if n == 0]
    click.echo(f"wrote {output}: " + ", ".join(f"{k}={n}" for k, n in counts.items()) + " series", err=True)
    if empty:
        click.echo(f"note: no data for {', '.join(empty)} in this range", err=True)


@dashboard_command.command("history")
@click.option("-i", "--input", "input_path", required=True, metavar="EVENTS.jsonl[.gz]",
              help="Recorded events (JSON lines, '-' = stdin), in event-time order.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), metavar="METRICS.om",
              help="OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`.")
@click.option("--step", default="5m", show_default=True, help="Event time between two snapshots (s, m, h).")
def history_cmd(input_path: str, output: str, step: str) -> None:
    """Replay a recording and write its metrics as they were in event time.

    \b
    Then look at it with the dashboard:
      promtool tsdb create-blocks-from openmetrics METRICS.om DATA/
      prometheus --storage.tsdb.path=DATA/ --storage.tsdb.retention.time=10y ...
      fleetepi dashboard render --prometheus http://127.0.0.1:9090 --end <last event> ...
    """
    from fleetepi.dashboard.history import record_history
    from fleetepi.jsonl import open_input

    try:
        with open_input(input_path) as src:
            summary = record_history(src, Path(output), step_s=_parse_duration(step))
    except FleetepiError as exc:
        raise click.ClickException(str(exc)) from None
    start_s, end_s = (summary.start_ms or 0) / 1000, (summary.end_ms or 0) / 1000

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="seconds")

    click.echo(f"wrote {output}: {summary.events} events, {summary.snapshots} snapshots, "
               f"{summary.series} series, {summary.alerts_fired} alerts fired; "
               f"event time {iso(start_s)} .. {iso(end_s)}", err=True)


__all__ = ["dashboard_command"]
