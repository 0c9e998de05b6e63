"""``fleetepi demo``: a simulated fleet, the detectors, alerts and metrics, in one process.

The README's first command, so it must show something real within a minute
on a laptop with nothing else installed: a fleet is simulated in accelerated
event time (``fleetepi.simulate``, with labelled outbreaks), the very
``fleetepi.detectors.Engine`` of the stream workers runs in-process, alerts are
printed as they fire, ``/metrics`` is served for Prometheus/Grafana, and at
the end a table says which injected outbreaks were caught and how late.

Pacing is by event time: the run sleeps so that event time advances at
``--speed`` event seconds per wall second (by default, whatever makes the
whole simulated span last about a minute). ``--speed max`` disables pacing,
for tests and for the impatient.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fleetepi.config import config_errors
from fleetepi.console import alert_entity, print_alert, summary_table
from fleetepi.contract import Alert, Event, format_ts, ts_from_ms
from fleetepi.exceptions import FleetepiError
from fleetepi.metrics import PipelineMetrics, serve
from fleetepi.pipeline import FanoutAlertSink, ListAlertSink, Pipeline
from fleetepi.replay import close_archive, load_config, load_maintenance, open_archive

#: Where the demo archives its run unless told otherwise (replaced on each run).
DEMO_ARCHIVE = "fleetepi-demo-archive"
#: Wall seconds the default run aims at.
DEFAULT_WALL_S = 60.0
#: Events between two progress updates.
PACE_EVERY = 256
#: Pacing sleeps only when at least this far ahead of schedule.
MIN_SLEEP_S = 0.02


class TerminalAlertSink:
    """Prints each alert as it fires (colour on a TTY, one plain line on a pipe)."""

    def __init__(self, console: Console, show_resolved: bool = True) -> None:
        self.console = console
        self.show_resolved = show_resolved

    def emit(self, alert: Alert) -> None:
        if alert.state == "resolved" and not self.show_resolved:
            return
        print_alert(self.console, alert)


# ---------------------------------------------------------------------- pacing
def parse_speed(value: str, span_s: float, wall_s: float = DEFAULT_WALL_S) -> float | None:
    """Event seconds per wall second; None means no pacing.

    :param value: ``auto`` (span in about ``wall_s``), ``max``, or a number
        such as ``3600`` (one simulated hour per second).
    """
    v = value.strip().lower()
    if v == "max":
        return None
    if v == "auto":
        return max(span_s / wall_s, 1.0)
    try:
        speed = float(v.rstrip("x"))
    except ValueError:
        raise click.BadParameter(f"{value!r}: use auto, max, or event seconds per wall second (e.g. 3600)") from None
    if speed <= 0:
        raise click.BadParameter("speed must be positive")
    return speed


def paced(events: Iterable[Event], speed: float | None, clock: Any = time) -> Iterator[Event]:
    """Yield events no faster than ``speed`` event seconds per wall second.

    Sleeps only when more than :data:`MIN_SLEEP_S` ahead, so a dense stream
    pays one clock read per event and no syscall storm.
    """
    if speed is None:
        yield from events
        return
    t0_ms: int | None = None
    wall0 = 0.0
    scale = 1.0 / (1000.0 * speed)
    for ev in events:
        ts_ms = ev.ts_ms
        if t0_ms is None:
            t0_ms = ts_ms
            wall0 = clock.monotonic()
        else:
            ahead = wall0 + (ts_ms - t0_ms) * scale - clock.monotonic()
            if ahead > MIN_SLEEP_S:
                clock.sleep(ahead)
        yield ev


# ---------------------------------------------------------------------- scoring
def outbreak_table(truth: list[Any], score: Any) -> Table:
    """Which injected outbreaks were caught and how late, scored like bench/detection.py.

    :param truth: the simulator's ``Outbreak`` list.
    :param score: ``fleetepi.simulate.scoring.score_run`` of the demo's alerts
        (same rules as the detection benchmark: ``accept`` entities detect,
        ``related`` ones are neither detections nor false alerts).
    """
    table = Table(title="injected outbreaks (ground truth of the simulator)", title_justify="left")
    table.add_column("outbreak", no_wrap=True)
    table.add_column("entity", overflow="fold", ratio=1)
    table.add_column("started", no_wrap=True)
    table.add_column("caught", no_wrap=True)
    table.add_column("delay", justify="right", no_wrap=True)
    outcome = {o.id: o for o in score.outbreaks}
    for t in truth:
        o = outcome[t.id]
        started = format_ts(ts_from_ms(t.start_ms))[5:16].replace("T", " ")
        what = alert_entity(Alert(ts=ts_from_ms(t.start_ms), kind=t.kind, score=0.0, signature=t.signature,
                                  host=t.host, attribute=t.attribute, value=t.value,
                                  telemetry_kind=t.telemetry_kind, code=t.code))
        if o.detected:
            table.add_row(t.template, what, started, "[green]yes", f"{(o.delay_s or 0.0) / 60:.0f} min")
        else:
            table.add_row(t.template, what, started, "[red]missed", "")
    caught = [o for o in score.outbreaks if o.detected]
    delays = sorted(o.delay_s for o in caught if o.delay_s is not None)
    median = f", median delay {delays[len(delays) // 2] / 60:.0f} min" if delays else ""
    false = [a for a in score.alerts if a.outcome == "false"]
    related = sum(a.outcome == "related" for a in score.alerts)
    bursts = sum(a.burst for a in false)
    table.caption = (f"{len(caught)}/{len(score.outbreaks)} caught{median}; {related} related alert(s); "
                     f"{len(false)} false alert(s), {bursts} of them during background job bursts")
    return table


# ---------------------------------------------------------------------- command
def _simulation(hosts: int, days: float, seed: int) -> Any:
    try:
        from fleetepi.simulate import SimConfig, simulate
    except ImportError as exc:  # pragma: no cover - the simulator ships with fleetepi
        raise click.ClickException(f"the fleet simulator is not available: {exc}") from None
    try:
        return simulate(SimConfig(hosts=hosts, days=days, seed=seed))
    except (FleetepiError, ValueError) as exc:
        raise click.ClickException(f"cannot simulate this fleet: {exc}") from None


@click.command("demo")
@click.option("--hosts", default=500, show_default=True, type=click.IntRange(20, 100_000),
              help="Simulated GPU hosts.")
@click.option("--days", default=3.0, show_default=True, type=click.FloatRange(0.1, 366),
              help="Simulated days of event time (the first hours are baseline warm-up).")
@click.option("--seed", default=7, show_default=True, help="Random seed: same seed, same fleet, same alerts.")
@click.option("--speed", default="auto", show_default=True, metavar="auto|max|N",
              help="Event seconds per wall second: auto = whole run in about a minute, max = no pacing, "
                   "3600 = one simulated hour per second.")
@click.option("--port", default=9108, show_default=True, type=click.IntRange(0, 65535),
              help="Port of /metrics (0 = any free port).")
@click.option("--bind", default="127.0.0.1", show_default=True,
              help="Address of /metrics; 0.0.0.0 to let another machine's Prometheus scrape it.")
@click.option("--no-metrics", is_flag=True, help="Do not serve /metrics.")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="YAML mapping of detector settings (fields of detectors.DetectorConfig).")
@click.option("--exit", "exit_after", is_flag=True, help="Exit after the summary instead of serving metrics.")
@click.option("--quiet-resolved", is_flag=True, help="Print firing alerts only.")
@click.option("--archive", "archive_dir", type=click.Path(file_okay=False), metavar="DIR",
              help=f"Keep the run's events and alerts in this Parquet archive (appends). Default: {DEMO_ARCHIVE}/, "
                   "replaced on each run.")
@click.option("--no-archive", is_flag=True, help="Do not archive the run.")
@click.option("--maintenance", "maintenance_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Maintenance windows (YAML or CSV, see `fleetepi replay --help`): planned work pages nobody.")
def demo_command(hosts: int, days: float, seed: int, speed: str, port: int, bind: str, no_metrics: bool,
                 config_path: str | None, exit_after: bool, quiet_resolved: bool, archive_dir: str | None,
                 no_archive: bool, maintenance_path: str | None) -> None:
    """Simulate a GPU fleet, detect its outbreaks in-process, serve metrics.

    A fleet of --hosts hosts (GPU model, driver, BIOS, rack, datacenter) runs
    for --days days of event time with background crashes, daily cycles, job
    bursts, driver roll-outs and hardware telemetry, plus injected outbreaks
    of every alert kind: a spiking signature, a sick host, a crash living on
    one BIOS, an Xid storm in one rack. The same detectors as the stream
    workers watch it; alerts print as they fire, and at the end a table
    shows which outbreaks were caught and after how long.

    \b
    While it runs:
      curl -s localhost:9108/metrics | grep ^fleetepi_     what Prometheus sees
      fleetepi_alert_active{...}                          one series per firing alert

    \b
    Examples:
      fleetepi demo                              about a minute, 500 hosts, 3 days
      fleetepi demo --speed max --exit           as fast as possible, then exit
      fleetepi demo --hosts 2000 --days 14 --speed max --no-metrics --exit
      fleetepi report --archive fleetepi-demo-archive -o report.html   the run, as one HTML page
    """
    out = Console()
    if not out.is_terminal:  # a pipe or a file: no wrapping at 80 columns
        out = Console(width=160)
    with config_errors():
        config = load_config(config_path)
        windows = load_maintenance(maintenance_path)
    span_s = days * 86400.0
    pace = parse_speed(speed, span_s)
    metrics = PipelineMetrics()
    server = None
    if not no_metrics:
        try:
            server = serve(metrics.registry, port, bind)
        except OSError as exc:
            raise click.ClickException(
                f"cannot serve metrics on {bind}:{port} ({exc.strerror or exc}); "
                "pick another --port (0 = any free one) or pass --no-metrics") from None
    url = None if server is None else f"http://{_display_host(bind)}:{server.server_port}/metrics"
    sim = _simulation(hosts, days, seed)
    pace_txt = "no pacing" if pace is None else f"x{pace:,.0f} (one simulated hour every {3600 / pace:.1f} s)"
    out.print(f"[bold]fleetepi demo[/]: {hosts} hosts, {days:g} days of event time, seed {seed}, {pace_txt}",
              highlight=False)
    if url:
        out.print(f"metrics: {url}", highlight=False)
    out.print("[dim]detectors warm up on the first hours (baselines learn first); alerts print as they fire.[/]")

    collected = ListAlertSink()
    printer = TerminalAlertSink(out, show_resolved=not quiet_resolved)
    archive, where = _demo_archive(out, archive_dir, no_archive)
    pipe = Pipeline(config=config, metrics=metrics, sink=FanoutAlertSink(collected, printer), archive=archive)
    if windows:
        pipe.set_maintenance(windows)
    interrupted = False
    try:
        _run(pipe, paced(sim.events(), pace), out, span_s)
    except KeyboardInterrupt:
        interrupted = True
        out.print("[yellow]interrupted: summary of what ran so far[/]")
    pipe.finish()
    archived = close_archive(archive, where)
    out.print(summary_table(pipe.summary, title="fleetepi demo"))
    if archived:
        out.print(f"{archived}; look back with: fleetepi report --archive {where} -o report.html", highlight=False,
                  markup=False)
    if sim.truth:
        from fleetepi.simulate.scoring import score_run

        score = score_run(collected.alerts, sim.truth, sim.bursts, hosts, days)
        out.print(outbreak_table(sim.truth, score))
    if server is None or exit_after or interrupted:
        _shutdown(server)
        return
    out.print(f"serving {url} until Ctrl-C (use --exit to stop here)", highlight=False)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        _shutdown(server)


def _run(pipe: Pipeline, events: Iterable[Event], out: Console, span_s: float) -> None:
    feed = pipe.feed_event
    if not out.is_terminal:
        for i, ev in enumerate(events):
            feed(ev)
            if i % PACE_EVERY == 0:
                pipe.report()
        pipe.report()
        return
    progress = Progress(
        TextColumn("[bold]event time"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    )
    with progress:
        task = progress.add_task("demo", total=span_s, status="")
        t0: int | None = None
        for i, ev in enumerate(events):
            feed(ev)
            if t0 is None:
                t0 = ev.ts_ms
            if i % PACE_EVERY == 0:
                pipe.report()
                s = pipe.summary
                elapsed = (ev.ts_ms - t0) / 1000.0
                progress.update(task, completed=elapsed, status=(
                    f"day {elapsed / 86400:.1f} · {sum(s.events.values()):,} events · "
                    f"{sum(s.fired.values())} alerts"))
        pipe.report()


def _demo_archive(out: Console, archive_dir: str | None, no_archive: bool) -> tuple[Any, str | None]:
    """The run's archive writer: ``--archive DIR``, else the demo's own folder (replaced), else none.

    Without the archive extra (pyarrow, duckdb) the demo still runs; it
    says once how to get the archive.
    """
    if no_archive:
        return None, None
    try:
        import duckdb  # noqa: F401 - only checks that the archive extra is installed
        import pyarrow  # noqa: F401
    except ImportError:
        if archive_dir is not None:
            raise click.ClickException("--archive needs the archive extra: pip install 'fleetepi[archive]'") from None
        out.print("[dim]not archiving this run (pip install 'fleetepi[archive]' to keep it for fleetepi report)[/]")
        return None, None
    where = archive_dir
    if where is None:
        where = DEMO_ARCHIVE
        from fleetepi.archive.layout import META_FILE

        if (Path(where) / META_FILE).exists():  # the previous demo's archive: replaced, never appended to
            shutil.rmtree(where)
    return open_archive(where), where


def _display_host(bind: str) -> str:
    return "localhost" if bind in ("0.0.0.0", "127.0.0.1", "", "::") else bind


def _shutdown(server: Any) -> None:
    if server is not None:
        server.shutdown()


__all__ = ["demo_command", "outbreak_table", "parse_speed", "paced"]
