"""``fleetepi report``: the command around :func:`fleetepi.report.build.build_report`."""

from __future__ import annotations

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from fleetepi.archive.exceptions import ArchiveError
from fleetepi.investigate import parse_when

#: Sections the progress bar counts (build_report calls step() once per section).
_STEPS = 13


@click.command("report")
@click.option("--archive", "archive", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Archive folder (written by `fleetepi replay --archive`, `demo`, or `fleetepi archive`).")
@click.option("-o", "--output", "output", default="report.html", show_default=True, metavar="FILE.html",
              help="Where the report goes: one self-contained HTML file (opens offline).")
@click.option("--since", metavar="WHEN", help="From this time: 2026-11-02, 2026-11-02T10:00Z, or 30d back from now.")
@click.option("--until", metavar="WHEN", help="Up to this time (exclusive); same forms as --since.")
@click.option("--by", "by", metavar="ATTR", help="Stack epidemic curves by this attribute (default: the coarsest "
              "location, found from how the inventory nests).")
@click.option("--heat", "heat", metavar="ROWS:COLS", help="Heat map axes as two attributes (default: coarsest "
              "location : finest location in it), e.g. datacenter:rack; join attributes with + (row+cage:col).")
@click.option("--top", default=6, show_default=True, type=click.IntRange(1, 50), help="Signatures given a section.")
@click.option("--title", default="fleetepi report", show_default=True, help="Title of the page.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
def report_command(archive: str, output: str, since: str | None, until: str | None, by: str | None,
                   heat: str | None, top: int, title: str, progress: bool | None) -> None:
    """Write one self-contained HTML report of the archive.

    Per top signature (those that raised alerts first): its epidemic curve
    stacked by location, its crash shapes split by host (a shape living on
    one host stands out as one long bar), and the cohorts it
    over-represents with relative risk, CI and denominators. Then: a heat
    map of incidence per host-day by location, suspected bad-silicon
    hosts, Xid/ECC/power by location over time, and what changed (new
    signatures, cohorts whose rate rose).

    \b
    Examples:
      fleetepi report --archive arch -o report.html
      fleetepi report --archive arch --since 30d --by rack --top 10 -o month.html
      fleetepi report --archive titan-arch --heat row+cage:col -o titan.html
    """
    from fleetepi.report.build import ReportOptions, build_report

    heat_axes = None
    if heat:
        rows, sep, cols = heat.partition(":")
        if not sep or not cols:
            raise click.BadParameter(f"{heat!r}: write ROWS:COLS, e.g. datacenter:rack", param_hint="--heat")
        heat_axes = (rows or None, cols)
    opts = ReportOptions(since=parse_when(since), until=parse_when(until), by=by, heat=heat_axes, top=top, title=title)
    err = Console(stderr=True)
    show = err.is_terminal if progress is None else progress
    try:
        if show:
            with Progress(TextColumn("[bold]report"), BarColumn(), TextColumn("{task.fields[what]}"),
                          TimeElapsedColumn(), console=err, transient=True) as bar:
                task = bar.add_task("report", total=_STEPS + top, what="")

                def step(name: str) -> None:
                    bar.update(task, advance=1, what=name)

                result = build_report(archive, output, opts, step)
        else:
            result = build_report(archive, output, opts)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    if result.skipped:
        err.print(Text(f"warning: {result.skipped} damaged archive file(s) skipped (listed in the report)",
                       style="yellow"))
    err.print(Text(f"wrote {result.path} ({result.bytes / 1e6:.1f} MB): {len(result.signatures)} signatures, "
                   f"curves by {result.by or '-'}, heat map {result.heat[0] or '-'} x {result.heat[1] or '-'}"))


__all__ = ["report_command"]
