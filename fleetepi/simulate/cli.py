"""``fleetepi simulate``: record a simulated fleet's events and its ground truth."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from fleetepi.simulate.config import DEFAULT_OUTBREAKS, SimConfig, outbreak_specs
from fleetepi.simulate.exceptions import SimulationConfigError
from fleetepi.simulate.output import write_jsonl, write_truth
from fleetepi.simulate.simulation import simulate


class _Outbreaks(click.ParamType):
    """``none``, ``default`` or a number of outbreaks."""

    name = "N|none"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if isinstance(value, tuple):
            return value
        text = str(value).strip().lower()
        if text in ("none", "0"):
            return ()
        if text == "default":
            return DEFAULT_OUTBREAKS
        try:
            return outbreak_specs(int(text))
        except (ValueError, SimulationConfigError):
            self.fail(f"{value!r} is not a number of outbreaks, 'default' or 'none'", param, ctx)


@click.command(
    "simulate",
    epilog="""\b
Examples:
  fleetepi simulate -o events.jsonl.gz --truth truth.json
      2,000 hosts, 14 days, one outbreak of each of the 8 templates (~2 M events)
  fleetepi simulate --hosts 200 --days 2 --seed 7 -o - | head
      a small fleet to stdout
  fleetepi simulate --outbreaks none -o quiet.jsonl
      background only: every alert on it is a false alert
  fleetepi simulate --outbreaks 16 -o ev.jsonl --truth truth.json
      two outbreaks of each template
  fleetepi replay -i events.jsonl.gz -o alerts.jsonl
      then run the detectors on the recording

\b
Events follow the contract (fleetepi/contract/schemas): hosts are announced
first (and re-announced when a BIOS or driver roll-out changes them), then
crashes and telemetry in event-time order. The truth file lists each outbreak
with its kind, entity (signature / host / attribute=value / telemetry code),
start_ms and end_ms, plus the background job bursts that are NOT outbreaks.
See docs/simulator.md.""",
)
@click.option("--hosts", type=click.IntRange(min=20), default=2000, show_default=True, help="Fleet size.")
@click.option("--days", type=click.FloatRange(0.1, 366), default=14.0, show_default=True,
              help="Length of the run in days of event time.")
@click.option("--seed", type=int, default=1, show_default=True, help="Everything random derives from it.")
@click.option("--start", default="2026-11-01T00:00:00Z", show_default=True, help="Event time of the first event.")
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Events as JSON lines: FILE.jsonl, FILE.jsonl.gz (gzip) or - for stdout.")
@click.option("--truth", "truth_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the ground truth (outbreaks, job bursts) here as JSON.")
@click.option("--outbreaks", "outbreaks", type=_Outbreaks(), default="default", show_default=True,
              help="Number of outbreaks (cycling through the 8 templates), 'default' (one each) or 'none'.")
def simulate_command(hosts: int, days: float, seed: int, start: str, output: str, truth_path: Path | None,
                     outbreaks: tuple) -> None:
    """Write a simulated GPU fleet's events, with labelled outbreaks of every alert kind.

    The fleet has racks inside datacenters, GPU models per rack, a driver
    rolled out to one GPU model only, a BIOS roll-out rack by rack, a few
    hundred crash signatures with heavy-tailed rates and a daily cycle, job-wide
    aborts on 32-256 hosts (noise, not outbreaks), Xid/ECC/thermal telemetry,
    and injected outbreaks whose timing and strength come from --seed.
    """
    err = Console(stderr=True)
    try:
        cfg = SimConfig(hosts=hosts, days=days, seed=seed, start=start, outbreaks=outbreaks)
    except SimulationConfigError as exc:
        raise click.UsageError(str(exc)) from None
    sim = simulate(cfg)
    to_stdout = output == "-"
    if not to_stdout:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    show = err.is_terminal and not to_stdout
    try:
        if show:
            with Progress(TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                          console=err, transient=True) as progress:
                task = progress.add_task("events", total=len(sim))
                n = write_jsonl(sim, output, progress=lambda k: progress.advance(task, k))
        else:
            n = write_jsonl(sim, output)
        if truth_path is not None:
            truth_path.parent.mkdir(parents=True, exist_ok=True)
            write_truth(sim, truth_path)
    except BrokenPipeError:  # `| head`: the reader has gone, which is fine
        sys.stderr.close()
        return
    except OSError as exc:
        raise click.ClickException(f"cannot write: {exc}") from None
    _summary(err, sim, n, output, truth_path)


def _summary(err: Console, sim: object, n: int, output: str, truth_path: Path | None) -> None:
    counts = sim.counts()  # type: ignore[attr-defined]
    t = Table(title=f"{n:,} events -> {output}", title_justify="left")
    t.add_column("events")
    t.add_column("count", justify="right")
    for k in ("host", "crash", "telemetry"):
        t.add_row(k, f"{counts[k]:,}")
    for k in sorted(c for c in counts if c.startswith("telemetry.")):
        t.add_row(f"  {k.split('.', 1)[1]}", f"{counts[k]:,}")
    t.add_row("job bursts (noise)", str(len(sim.bursts)))  # type: ignore[attr-defined]
    err.print(t)
    truth = sim.truth  # type: ignore[attr-defined]
    if truth:
        o = Table(title="outbreaks" + (f" -> {truth_path}" if truth_path else " (not written: use --truth)"))
        for col in ("id", "kind", "entity", "start", "hours"):
            o.add_column(col, no_wrap=True, overflow="ellipsis", max_width=64 if col == "entity" else None)
        start = sim.start_ms  # type: ignore[attr-defined]
        for x in truth:
            ent = x.signature or ""
            if x.kind == "host_spike" or (x.kind == "telemetry_spike" and x.host):
                ent = x.host
            if x.attribute:
                ent = (f"{ent} @ " if ent else "") + f"{x.attribute}={x.value}"
            if x.telemetry_kind:
                ent = f"{x.telemetry_kind}{'' if x.code is None else ' ' + str(x.code)} {ent}"
            o.add_row(x.id, x.kind, ent[:70], f"day {(x.start_ms - start) / 86_400_000:.1f}",
                      f"{(x.end_ms - x.start_ms) / 3_600_000:.1f}")
        err.print(o)
    else:
        err.print("no outbreaks injected")


__all__ = ["simulate_command"]
