"""``fleetepi replay``: the detectors over a recorded stream, alerts out.

The offline twin of the stream workers: same contract in (JSON lines, as
recorded from the topics or written by ``fleetepi simulate``), same
``fleetepi.detectors.Engine``, same alerts out. stdout may carry the alerts, so
everything meant for a person (progress bar, summary table, errors) goes to
stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from fleetepi.config import config_errors, load
from fleetepi.console import summary_table
from fleetepi.detectors import DetectorConfig
from fleetepi.detectors.maintenance import Window
from fleetepi.jsonl import DamagedInput, JsonlFileError, LineSource, open_input, open_output
from fleetepi.metrics import DEFAULT_BIND, TICKET_TTL_S, PipelineMetrics, serve
from fleetepi.pipeline import JsonlAlertSink, Pipeline, StrictModeError, batch_gc


def load_config(path: str | Path | None) -> DetectorConfig:
    """Detector settings from a YAML mapping of ``DetectorConfig`` fields (defaults if None).

    :raises ConfigFileError: one line naming the file and the field, so a bad
        config fails before any event is read (``fleetepi.config``).
    """
    if path is None:
        return DetectorConfig()
    return load(path, DetectorConfig)


def load_maintenance(path: str | None) -> list[Window]:
    """The windows of ``--maintenance FILE`` (none without it); a bad file is one ``ConfigFileError`` line."""
    if path is None:
        return []
    from fleetepi.maintenance import load_windows

    return load_windows(path)


def open_archive(archive_dir: str | None) -> Any:
    """An ``ArchiveWriter`` for ``--archive DIR`` (None without it); a clear error if pyarrow is missing."""
    if archive_dir is None:
        return None
    try:
        from fleetepi.archive import ArchiveError, ArchiveWriter
    except ImportError as exc:
        raise click.ClickException(f"--archive needs the archive extra ({exc}): pip install 'fleetepi[archive]'") from None
    try:
        return ArchiveWriter(archive_dir)
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None


def close_archive(archive: Any, archive_dir: str | None) -> str:
    """Write what the archive still stages; returns the line for the summary ('' without an archive)."""
    if archive is None:
        return ""
    from fleetepi.archive import ArchiveError

    try:
        archive.close()
    except ArchiveError as exc:
        raise click.ClickException(f"archive {archive_dir}: {exc}") from None
    st = archive.stats
    return (f"archived {sum(v for k, v in st.rows.items() if k != 'hostday'):,} rows to {archive_dir} "
            f"({st.files} files, {st.bytes / 1e6:.1f} MB)")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]replay"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
        transient=True,
    )


@click.command("replay")
@click.option("-i", "--input", "input_path", required=True, metavar="EVENTS.jsonl[.gz]",
              help="Recorded events, one contract JSON object per line; .gz is read as gzip; '-' is stdin.")
@click.option("-o", "--output", "output_path", default="-", show_default=True, metavar="ALERTS.jsonl",
              help="Where alerts go (fleetepi.alert/v1 JSON lines); '-' is stdout; .gz compresses.")
@click.option("--strict", is_flag=True,
              help="Stop at the first bad line or dropped event with 'line N: reason: detail' and exit 1.")
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="YAML mapping of detector settings (fields of detectors.DetectorConfig).")
@click.option("--metrics-port", type=int, default=None, metavar="PORT",
              help="Serve Prometheus metrics on this port while replaying.")
@click.option("--metrics-bind", default=DEFAULT_BIND, show_default=True, help="Address for --metrics-port.")
@click.option("--ticket-ttl", "ticket_ttl_s", default=TICKET_TTL_S, show_default=True, type=click.FloatRange(0.0),
              metavar="SECONDS", help="Event time a ticket's alert series stays up (tickets never resolve); 0: forever.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: only when stderr is a terminal).")
@click.option("--archive", "archive_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Also keep every accepted event and alert in this Parquet archive (for `fleetepi investigate` "
                   "and `fleetepi report`); appends if it exists.")
@click.option("--maintenance", "maintenance_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Maintenance windows (YAML or CSV: hosts or attribute=value, start, end, reason; see "
                   "fleetepi/maintenance.py): their events count neither as cases nor in baselines.")
@click.option("-q", "--quiet", is_flag=True, help="No summary table.")
def replay_command(input_path: str, output_path: str, strict: bool, config_path: str | None,
                   metrics_port: int | None, metrics_bind: str, progress: bool | None, quiet: bool,
                   archive_dir: str | None, maintenance_path: str | None, ticket_ttl_s: float) -> None:
    """Run the detectors over recorded events and write the alerts.

    Bad lines (malformed JSON, unknown schema, missing or invalid fields,
    timestamps out of order or far in the future, crashes of hosts never
    announced) are counted by reason and skipped; the summary on stderr shows
    the first line of each. With --strict the first one stops the run.

    \b
    Examples:
      fleetepi simulate -o events.jsonl.gz && fleetepi replay -i events.jsonl.gz -o alerts.jsonl
      zcat events.jsonl.gz | fleetepi replay -i - | jq -c 'select(.state=="firing")'
      fleetepi replay -i events.jsonl.gz -o alerts.jsonl --archive arch && fleetepi report --archive arch
      fleetepi replay -i events.jsonl.gz --maintenance reboots.yaml    planned work pages nobody
    """
    err = Console(stderr=True)
    with config_errors():
        config = load_config(config_path)
        windows = load_maintenance(maintenance_path)
    metrics = None
    server = None
    if metrics_port is not None:
        metrics = PipelineMetrics(ticket_ttl_s=ticket_ttl_s)
        try:
            server = serve(metrics.registry, metrics_port, metrics_bind)
        except OSError as exc:
            raise click.ClickException(f"cannot serve metrics on {metrics_bind}:{metrics_port}: {exc}") from None
    show_progress = err.is_terminal if progress is None else progress
    damaged: str | None = None
    archive = open_archive(archive_dir)
    try:
        with batch_gc(), open_input(input_path) as source, open_output(output_path) as out:
            pipe = Pipeline(config=config, sink=JsonlAlertSink(out), metrics=metrics, strict=strict, archive=archive)
            if windows:
                pipe.set_maintenance(windows)
            try:
                if show_progress:
                    _run_with_progress(pipe, source, err)
                else:
                    pipe.run(source)
            except DamagedInput as exc:  # keep what was read: alerts so far, resolutions, summary
                damaged = f"{input_path}: unreadable after line {pipe.last_line}: {exc}"
            pipe.finish()
    except StrictModeError as exc:
        raise click.ClickException(str(exc)) from None
    except JsonlFileError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl-C: no traceback, no half-written output (it was a .partial)
        raise click.Abort() from None
    except BrokenPipeError:  # the reader of stdout went away (| head -1): stop quietly, like cat
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        raise SystemExit(0) from None
    finally:
        if server is not None:
            server.shutdown()
        archived = close_archive(archive, archive_dir)
    if not quiet:
        err.print(summary_table(pipe.summary, title=f"fleetepi replay {input_path}"))
        if archived:
            err.print(archived, highlight=False, markup=False)
    if damaged:
        raise click.ClickException(damaged)


def _run_with_progress(pipe: Pipeline, source: LineSource, err: Console) -> None:
    with _progress(err) as bar:
        task = bar.add_task("replay", total=source.total_bytes, status="")

        def tick() -> None:
            s = pipe.summary
            bar.update(task, completed=source.position(), status=f"{s.lines:,} lines, {sum(s.fired.values())} alerts")

        pipe.run(source, tick)


__all__ = ["close_archive", "load_config", "load_maintenance", "open_archive", "replay_command"]
