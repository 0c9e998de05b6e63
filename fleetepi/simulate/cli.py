"""``fleetepi simulate``: record a simulated fleet's events and its ground truth."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from fleetepi.simulate.config import CLASSIC_TEMPLATES, outbreak_specs
from fleetepi.simulate.exceptions import SimulationConfigError
from fleetepi.simulate.output import write_jsonl, write_truth
from fleetepi.simulate.presets import PRESETS, preset
from fleetepi.simulate.simulation import simulate


class _Outbreaks(click.ParamType):
    """``none``, ``default`` (the preset's) or a number of outbreaks (cycling through the preset's templates)."""

    name = "N|none"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> object:
        if isinstance(value, (tuple, int)):
            return value
        text = str(value).strip().lower()
        if text in ("none", "0"):
            return ()
        if text == "default":
            return "default"
        try:
            n = int(text)
            outbreak_specs(n)
            return n
        except (ValueError, SimulationConfigError):
            self.fail(f"{value!r} is not a number of outbreaks, 'default' or 'none'", param, ctx)


def _presets_table() -> Table:
    t = Table(title="presets (fleetepi simulate --preset NAME)", title_justify="left")
    for col in ("preset", "hosts", "days", "crashes/host-day", "what"):
        t.add_column(col, justify="right" if col in ("hosts", "days", "crashes/host-day") else "left")
    for name, p in PRESETS.items():
        cfg = p.config(1)
        t.add_row(name, f"{cfg.hosts:,}", f"{cfg.days:g}", f"{p.crashes_per_host_day:g}", escape(p.summary))
    return t


@click.command(
    "simulate",
    epilog="""\b
Examples:
  fleetepi simulate -o events.jsonl.gz --truth truth.json
      the classic fleet: 2,000 hosts, 14 days, one outbreak of each of the 8 classic templates (~2 M events)
  fleetepi simulate --preset noisy --seed 101 -o noisy.jsonl.gz --truth noisy-truth.json
      a named fleet: ~5 crashes per host-day, crash loops, chronic hosts, 17 outbreak templates
  fleetepi simulate --list-presets
      every preset: quiet, noisy, large, hot, tiny, longhaul, deploy, scaling-*, ...
  fleetepi simulate --preset large --hosts 1000 --days 3 -o - | head
      a preset's structure at another size, to stdout
  fleetepi simulate --outbreaks none -o quiet.jsonl
      background only: every page on it is a false page
  fleetepi simulate --outbreaks 16 -o ev.jsonl --truth truth.json
      two outbreaks of each of the preset's templates
  fleetepi replay -i events.jsonl.gz -o alerts.jsonl
      then run the detectors on the recording

\b
Events follow the contract (fleetepi/contract/schemas): hosts are announced
first (and re-announced when a roll-out or maintenance changes them), then
crashes and telemetry in event-time order. The truth file lists each outbreak
with its kind, entity (signature / host / attribute=value / telemetry code),
start_ms and end_ms, and the benign phenomena (crash loops, job-wide aborts,
chronic hosts, static associations, roll-outs) that must NOT page, with the
ticket each one should get. See docs/simulator.md.""",
)
@click.option("--preset", "preset_name", default="classic", show_default=True, metavar="NAME",
              help="Named fleet (--list-presets); --hosts/--days/--seed/--outbreaks override it.")
@click.option("--list-presets", is_flag=True, help="Print the presets and exit.")
@click.option("--hosts", type=click.IntRange(min=20), default=None, help="Fleet size (default: the preset's).")
@click.option("--days", type=click.FloatRange(0.1, 366), default=None,
              help="Length of the run in days of event time (default: the preset's).")
@click.option("--seed", type=int, default=1, show_default=True, help="Everything random derives from it.")
@click.option("--start", default=None, help="Event time of the first event (default: 2026-11-01T00:00:00Z).")
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Events as JSON lines: FILE.jsonl, FILE.jsonl.gz (gzip) or - for stdout.")
@click.option("--truth", "truth_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              metavar="FILE", help="Write the ground truth (outbreaks, benign phenomena, job bursts) here as JSON.")
@click.option("--outbreaks", "outbreaks", type=_Outbreaks(), default="default", show_default=True,
              help="Number of outbreaks (cycling through the preset's templates), 'default' (the preset's) or 'none'.")
def simulate_command(preset_name: str, list_presets: bool, hosts: int | None, days: float | None, seed: int,
                     start: str | None, output: str | None, truth_path: Path | None, outbreaks: object) -> None:
    """Write a simulated GPU fleet's events, with labelled outbreaks and benign phenomena.

    The fleet has racks inside datacenters, GPU models per rack, a driver
    rolled out to one GPU model only, a BIOS roll-out rack by rack, crash
    signatures with heavy-tailed rates and a daily cycle, job-wide aborts,
    Xid/ECC/thermal telemetry, and injected outbreaks whose timing and strength
    come from --seed. Presets change all of it: size, time scale, background
    rate, crash loops, chronic hosts, attribute names, telemetry cadence.
    """
    err = Console(stderr=True)
    if list_presets:
        Console().print(_presets_table())
        return
    if output is None:
        raise click.UsageError("Missing option '-o' / '--output'.")
    if preset_name not in PRESETS:
        raise click.UsageError(f"unknown preset {preset_name!r}; known: {', '.join(PRESETS)}")
    changes: dict[str, object] = {}
    if hosts is not None:
        changes["hosts"] = hosts
    if days is not None:
        changes["days"] = days
    if start is not None:
        changes["start"] = start
    try:
        cfg = preset(preset_name, seed, **changes)
        if isinstance(outbreaks, int):
            templates = tuple(dict.fromkeys(o.template for o in cfg.outbreaks)) or CLASSIC_TEMPLATES
            cfg = cfg.replace(outbreaks=outbreak_specs(outbreaks, templates))
        elif outbreaks != "default":
            cfg = cfg.replace(outbreaks=outbreaks)
        sim = simulate(cfg)
    except SimulationConfigError as exc:
        raise click.UsageError(str(exc)) from None
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
    kinds = Counter(b.type for b in sim.benign if b.type != "job_abort")  # type: ignore[attr-defined]
    for k, v in sorted(kinds.items()):
        t.add_row(f"benign: {k}", str(v))
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
            o.add_row(escape(x.id), x.kind, escape(ent[:70]), f"day {(x.start_ms - start) / 86_400_000:.1f}",
                      f"{(x.end_ms - x.start_ms) / 3_600_000:.1f}")
        err.print(o)
    else:
        err.print("no outbreaks injected")


__all__ = ["simulate_command"]
