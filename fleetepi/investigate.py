"""``fleetepi investigate``: one signature, host or cohort, looked at over the archive's months.

The on-call question after an alert resolves ("since March, which hosts
crashed like this?", "is this crash over-represented on one BIOS, and out of
how many hosts?") answered in the terminal from the archive, in about a
second: counts over time as a sparkline, distinct hosts and jobs, crash
shapes (and how much of it is one host's), the cohorts it over-represents
with relative risk, 95 % CI and denominators, and the alerts it raised.
``--json`` prints the same answer for scripts.

User data (signatures, host names, attribute values) is never read as rich
markup: signatures contain brackets.
"""

from __future__ import annotations

import math
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetepi.archive.epi import sparkline
from fleetepi.archive.exceptions import ArchiveError

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_when(text: str | None, now: datetime | None = None) -> datetime | None:
    """``2026-11-02``, ``2026-11-02T10:00Z`` or a span back from now (``30d``, ``12h``); UTC if no zone."""
    if text is None:
        return None
    t = text.strip()
    m = _REL.match(t)
    if m:
        return (now or datetime.now(UTC)) - timedelta(seconds=float(m.group(1)) * _UNIT_S[m.group(2)])
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r}: use a date (2026-11-02), a time (2026-11-02T10:00Z) "
                                 "or a span back from now (30d, 12h)") from None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _fmt_ts(t: datetime | None) -> str:
    return "-" if t is None else t.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _ci(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "-"
    return f"{lo:.1f}–{hi:.1f}" if hi < 1000 else f"{lo:.1f}–∞"


def _series_text(s: Any) -> Text:
    if not s.counts:
        return Text("(no cases)")
    line = Text(sparkline(s.counts), style="bold magenta")
    line.append(f"  per {s.bin}, {_fmt_ts(s.starts[0])} → {_fmt_ts(s.starts[-1])}, peak {max(s.counts)}", style="dim")
    return line


def _cohort_table(rows: list[Any], title: str, what: str = "cohort") -> Table:
    t = Table(title=title, title_justify="left")
    for col, just in ((what, "left"), ("cases", "right"), ("hosts hit", "right"), ("hosts in cohort", "right"),
                      ("host-days", "right"), ("per 1k host-days", "right"), ("RR", "right"), ("95 % CI", "right")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for r in rows:
        name = r.value if r.attribute == "signature" else f"{r.attribute}={r.value}"
        t.add_row(Text(name), str(r.cases), str(r.hosts_affected), str(r.hosts), str(r.host_days),
                  f"{r.rate_per_1000_host_days:.1f}", f"{r.relative_risk:.1f}", _ci(r.ci_low, r.ci_high))
    if not rows:
        t.caption = "no over-represented cohort (or no host attributes in the archive)"
    return t


def _shapes_table(shapes: list[Any], share: float) -> Table:
    t = Table(title=f"crash shapes (bit-flip share {share:.0%})", title_justify="left")
    for col in ("signal", "fault class", "flags", "cases", "hosts", "top host (its cases)"):
        t.add_column(col, justify="right" if col in ("cases", "hosts") else "left", overflow="fold")
    for s in shapes:
        one = s.hosts == 1 and s.cases > 1
        t.add_row(Text(s.signal or "-"), Text(s.fault_class or "-"), Text(s.flags or "-"), str(s.cases),
                  Text(str(s.hosts), style="bold red" if one else ""), Text(f"{s.top_host} ({s.top_host_cases})"))
    t.caption = "a shape on one host only (red) with bit flips points at the host's silicon, not the code"
    return t


def _alerts_table(alerts: list[Any]) -> Table:
    t = Table(title="alerts it raised", title_justify="left")
    for col in ("time", "state", "kind", "entity", "score"):
        t.add_column(col, overflow="fold")
    for a in alerts:
        t.add_row(_fmt_ts(a.ts), a.state, a.kind, Text(a.entity), f"{a.score:.1f}")
    if not alerts:
        t.caption = "none in the period"
    return t


def _hosts_table(hosts: list[Any]) -> Table:
    t = Table(title="hosts with most cases", title_justify="left")
    for col in ("host", "cases", "shapes", "first", "last"):
        t.add_column(col, overflow="fold")
    for h in hosts:
        t.add_row(Text(h.host), str(h.cases), str(h.shapes), _fmt_ts(h.first), _fmt_ts(h.last))
    return t


# ---------------------------------------------------------------------- rendering
def print_signature(out: Console, a: Any) -> None:
    out.print(Text.assemble(("signature  ", "bold"), (a.signature, "bold cyan")))
    if a.other_matches:
        more = "; ".join(f"{s} ({n})" for s, n in a.other_matches[:3])
        out.print(Text(f"  (prefix matched {len(a.other_matches) + 1} signatures; the most frequent is shown; "
                       f"others: {more})", style="yellow"))
    out.print(Text(f"{a.cases} crashes on {a.hosts} hosts in {a.jobs} jobs; first seen {_fmt_ts(a.first_seen)}, "
                   f"last seen {_fmt_ts(a.last_seen)}"))
    out.print(_series_text(a.series))
    out.print(_shapes_table(a.shapes, a.bitflip_share))
    if a.cpus:
        out.print(Text("CPUs: " + ", ".join(f"cpu {c}: {n} on {h} host(s)" for c, n, h in a.cpus)))
    out.print(_hosts_table(a.top_hosts))
    out.print(_cohort_table(a.cohorts, "cohorts it over-represents (hosts hit / hosts in cohort vs the rest)"))
    out.print(_alerts_table(a.alerts))


def print_host(out: Console, a: Any) -> None:
    out.print(Text.assemble(("host  ", "bold"), (a.host, "bold cyan")))
    for ts, attrs in a.attributes:
        out.print(Text(f"  from {_fmt_ts(ts)}: " + ", ".join(f"{k}={v}" for k, v in sorted(attrs.items())), style="dim"))
    rate = 1000 * a.crashes / a.host_days if a.host_days else float("nan")
    out.print(Text(f"{a.crashes} crashes over {a.host_days} days observed ({rate:.1f} per 1k host-days; fleet "
                   f"{a.fleet_rate_per_1000_host_days:.1f}); first {_fmt_ts(a.first_seen)}, last {_fmt_ts(a.last_seen)}"))
    out.print(_series_text(a.series))
    t = Table(title="signatures", title_justify="left")
    t.add_column("signature", overflow="fold")
    t.add_column("cases", justify="right")
    for s, n in a.signatures:
        t.add_row(Text(s), str(n))
    out.print(t)
    out.print(_shapes_table(a.shapes, a.bitflip_share))
    t = Table(title="hardware telemetry (thermal readings left out)", title_justify="left")
    for col in ("kind", "code", "events", "errors"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for k, c, e, x in a.telemetry:
        t.add_row(k, "-" if c is None else str(c), str(e), str(x))
    out.print(t)
    out.print(_alerts_table(a.alerts))


def print_cohort(out: Console, a: Any) -> None:
    out.print(Text.assemble(("cohort  ", "bold"), (f"{a.attribute}={a.value}", "bold cyan")))
    out.print(Text(f"{a.hosts} hosts, {a.host_days} host-days observed; {a.crashes} crashes: "
                   f"{a.rate_per_1000_host_days:.1f} per 1k host-days (rest of the fleet "
                   f"{a.rest_rate_per_1000_host_days:.1f})"))
    out.print(_series_text(a.series))
    out.print(_cohort_table(a.signatures, "signatures the cohort over-represents", what="signature"))
    t = Table(title="hardware telemetry per 1k host-days (thermal readings left out)", title_justify="left")
    for col in ("kind", "events", "in cohort", "rest"):
        t.add_column(col, justify="left" if col == "kind" else "right")
    for k, n, i, o in a.telemetry:
        t.add_row(k, str(n), f"{i:.1f}", f"{o:.1f}")
    out.print(t)
    out.print(_hosts_table(a.top_hosts))
    out.print(_alerts_table(a.alerts))


# ---------------------------------------------------------------------- command
def _open(ctx: click.Context) -> Any:
    from fleetepi.archive.reader import Archive

    o = ctx.obj
    try:
        return Archive(o["archive"], since=o["since"], until=o["until"])
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None


def _finish(ctx: click.Context, arc: Any, answer: Any, printer: Any) -> None:
    err = Console(stderr=True)
    for s in arc.skipped:
        err.print(Text(f"warning: skipped {s.path}: {s.reason}", style="yellow"))
    if ctx.obj["json"]:
        payload = msgspec.to_builtins(answer)
        payload["skipped_files"] = [{"path": s.path, "reason": s.reason} for s in arc.skipped]
        sys.stdout.buffer.write(msgspec.json.encode(_no_nan(payload)) + b"\n")
        return
    out = Console() if sys.stdout.isatty() else Console(width=160)
    printer(out, answer)


def _no_nan(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, dict):
        return {k: _no_nan(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_no_nan(x) for x in v]
    return v


def _answer(ctx: click.Context, fn: Any, printer: Any, *args: Any) -> None:
    arc = _open(ctx)
    try:
        answer = fn(arc, *args)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        arc.close()
    _finish(ctx, arc, answer, printer)


@click.group("investigate")
@click.option("--archive", "archive", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Archive folder (written by `fleetepi replay --archive`, `demo`, or `fleetepi archive`).")
@click.option("--since", metavar="WHEN", help="From this time: 2026-11-02, 2026-11-02T10:00Z, or 30d / 12h back from now.")
@click.option("--until", metavar="WHEN", help="Up to this time (exclusive); same forms as --since.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object (for scripts).")
@click.pass_context
def investigate_command(ctx: click.Context, archive: str, since: str | None, until: str | None, as_json: bool) -> None:
    """Look back at one signature, host or cohort over the archive's months.

    \b
    Examples:
      fleetepi investigate --archive arch signature 'libunwind'      a prefix is enough
      fleetepi investigate --archive arch --since 2026-03-01 host dc1-r17-n05
      fleetepi investigate --archive arch cohort bios=2.4 --json | jq .signatures
    """
    ctx.obj = {"archive": archive, "since": parse_when(since), "until": parse_when(until), "json": as_json}


_json_here = click.option("--json", "as_json", is_flag=True, help="Same as investigate --json.")


@investigate_command.command("signature")
@click.argument("signature")
@click.option("--cohorts", default=10, show_default=True, help="Cohort rows to show.")
@_json_here
@click.pass_context
def signature_cmd(ctx: click.Context, signature: str, cohorts: int, as_json: bool) -> None:
    """A crash signature (exact, a prefix, or a part of it): curve, shapes, hosts, cohorts, alerts."""
    from fleetepi.archive.queries import signature_answer

    ctx.obj["json"] |= as_json
    _answer(ctx, signature_answer, print_signature, signature, cohorts)


@investigate_command.command("host")
@click.argument("host")
@_json_here
@click.pass_context
def host_cmd(ctx: click.Context, host: str, as_json: bool) -> None:
    """One host: its attributes over time, crashes, shapes, hardware telemetry, alerts."""
    from fleetepi.archive.queries import host_answer

    ctx.obj["json"] |= as_json
    _answer(ctx, host_answer, print_host, host)


@investigate_command.command("cohort")
@click.argument("cohort", metavar="ATTR=VALUE")
@_json_here
@click.pass_context
def cohort_cmd(ctx: click.Context, cohort: str, as_json: bool) -> None:
    """Hosts with one attribute value: their rate against the rest, signatures they over-represent."""
    from fleetepi.archive.queries import cohort_answer

    ctx.obj["json"] |= as_json
    attr, sep, value = cohort.partition("=")
    if not sep or not attr:
        raise click.BadParameter(f"{cohort!r}: write ATTR=VALUE, e.g. bios=2.4", param_hint="ATTR=VALUE")
    _answer(ctx, cohort_answer, print_cohort, attr, value)


__all__ = ["investigate_command", "parse_when"]
