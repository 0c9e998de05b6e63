"""Human output of the embedded commands: alert lines and the summary table.

Two renderings of the same facts: rich (colour, aligned columns) when the
stream is a terminal, and plain tab-free text when it is a pipe or a file,
so ``fleetepi demo | grep host_spike`` works and logs stay greppable. rich
already drops colour on a non-TTY; the plain form additionally keeps one
alert per line with ``key=value`` fields.

Data never goes through rich's markup parser: a host named ``[/x]`` made
``replay`` exit 1 (``MarkupError``) after writing its alerts. Every string
that holds data (host names, signatures, decoder messages, file names) is
wrapped with :func:`data` or assembled with :func:`styled`, which build
``Text`` objects; markup strings are only ever our own literals.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text, TextType

from fleetepi.contract import Alert, format_ts, ts_from_ms
from fleetepi.pipeline import RunSummary

_STATE_STYLE = {"firing": "bold red", "resolved": "green"}
_KIND_STYLE = {
    "signature_spike": "magenta",
    "host_spike": "yellow",
    "hardware_correlation": "cyan",
    "telemetry_spike": "blue",
}


def data(value: object, style: str = "") -> Text:
    """``value`` as text printed verbatim: never parsed as markup, whatever it holds."""
    return Text(str(value), style=style)


def styled(*parts: str | tuple[str, str] | Text) -> Text:
    """One line from parts: plain strings are *data* (verbatim), ``(text, style)`` pairs are styled data.

    ``styled(("signature", "bold"), "  ", crash.signature)`` where an f-string
    with ``[bold]`` would have let the signature's brackets act as markup.
    """
    return Text.assemble(*parts)


def print_data(console: Console, *parts: str | tuple[str, str] | Text, **kwargs: object) -> None:
    """Print one line of :func:`styled` parts: the one printer for lines that carry data."""
    console.print(styled(*parts), highlight=False, **kwargs)  # type: ignore[arg-type]


def alert_entity(alert: Alert) -> str:
    """The alerted entity in one short string, as an SRE would say it."""
    if alert.kind == "signature_spike":
        return alert.signature or "?"
    if alert.kind == "host_spike":
        return alert.host or "?"
    if alert.kind == "hardware_correlation":
        return f"{alert.signature} @ {alert.attribute}={alert.value}"
    parts = [alert.telemetry_kind or "telemetry"]
    if alert.code is not None:
        parts[0] += f" {alert.code}"
    if alert.host:
        parts.append(f"on {alert.host}")
    elif alert.attribute:
        parts.append(f"in {alert.attribute}={alert.value}")
    return " ".join(parts)


def _numbers(alert: Alert) -> str:
    out = [f"score={alert.score:.1f}"]
    if alert.p_value is not None:
        out.append(f"p={alert.p_value:.2g}")
    if alert.relative_risk is not None:
        out.append(f"rr={alert.relative_risk:.1f}")
    if alert.observed is not None and alert.expected is not None:
        out.append(f"obs={alert.observed:g}/exp={alert.expected:.2g}")
    return " ".join(out)


def alert_plain(alert: Alert) -> str:
    """One line for pipes and logs: time, state, kind, entity, numbers, summary."""
    line = f"{format_ts(alert.ts)} {alert.state.upper():8} {alert.kind:20} {alert_entity(alert)}  {_numbers(alert)}"
    if alert.summary:
        line += f"  | {alert.summary}"
    return line


def alert_rich(alert: Alert) -> Text:
    """The same line with colour: red for firing, green for resolved, one colour per kind."""
    text = Text()
    text.append(format_ts(alert.ts)[:19].replace("T", " "), style="dim")
    text.append(" ")
    text.append(f"{alert.state.upper():8}", style=_STATE_STYLE.get(alert.state, ""))
    text.append(" ")
    text.append(f"{alert.kind:20}", style=_KIND_STYLE.get(alert.kind, ""))
    text.append(" ")
    text.append(alert_entity(alert), style="bold")
    text.append("  ")
    text.append(_numbers(alert), style="dim")
    if alert.summary and alert.state == "firing":
        text.append("\n    ")
        text.append(alert.summary, style="italic")
    return text


def print_alert(console: Console, alert: Alert) -> None:
    """Print one alert the way ``console`` is best read (TTY or not)."""
    if console.is_terminal:
        console.print(alert_rich(alert), highlight=False, soft_wrap=True)
    else:
        console.print(alert_plain(alert), highlight=False, soft_wrap=True, markup=False)


def summary_table(summary: RunSummary, title: TextType = "fleetepi run") -> Table:
    """Events by kind, invalid by reason (first line + sample), alerts by kind, throughput."""
    table = Table(title=data(title) if isinstance(title, str) else title, title_justify="left", show_lines=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_column("note", overflow="fold")
    table.add_row(data("records read", "bold"), str(summary.lines), "")
    for kind in ("host", "crash", "telemetry"):
        table.add_row(f"  events: {kind}", str(summary.events.get(kind, 0)), "accepted")
    for sample in sorted(summary.invalid.values(), key=lambda s: -s.count):
        where = f"first at line {sample.first_line}" if sample.first_line is not None else ""
        note = f"{where}: {sample.detail}" if where else sample.detail
        table.add_row(data(f"  invalid: {sample.reason}"), str(sample.count), data(_shorten(note, 160)))
    if not summary.invalid:
        table.add_row("  invalid", "0", "")
    kinds = sorted(set(summary.fired) | set(summary.resolved))
    for kind in kinds:
        table.add_row(f"  alerts: {kind}", str(summary.fired.get(kind, 0)),
                      f"{summary.resolved.get(kind, 0)} resolved")
    if not kinds:
        table.add_row("  alerts", "0", "")
    if kinds:
        table.add_row("  pages", str(summary.pages), f"{len(summary.paged_incidents)} incident(s) paged; "
                      f"{summary.tickets} ticket(s)")
    suppressed = sum(summary.suppressed.values())
    table.add_row("in maintenance", str(summary.in_maintenance),
                  f"events of hosts in maintenance (neither cases nor baselines); {suppressed} alert(s) suppressed"
                  + (f"; {summary.maintenance_windows} window(s) from file/silences"
                     if summary.maintenance_windows else ""))
    table.add_row("hosts in inventory", str(summary.hosts), "")
    if summary.watermark_ms is not None:
        table.add_row("event time reached", "", format_ts_ms(summary.watermark_ms))
    table.add_row("throughput", f"{summary.lines_per_s:,.0f}", f"records/s over {summary.elapsed_s:.2f} s wall")
    return table


def format_ts_ms(ts_ms: int) -> str:
    return format_ts(ts_from_ms(ts_ms))


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


__all__ = ["alert_entity", "alert_plain", "alert_rich", "data", "format_ts_ms", "print_alert", "print_data", "styled", "summary_table"]
