"""``fleetepi archive``: the stream archiver, and maintenance of an archive folder."""

from __future__ import annotations

import asyncio
import re
import signal

import click
from rich.console import Console
from rich.table import Table

from fleetepi.archive.exceptions import ArchiveError
from fleetepi.brokers import broker_option

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dw]?)\s*$", re.IGNORECASE)


def parse_size(text: str | None) -> int | None:
    """``500GB``, ``2T``, ``800m`` -> bytes (powers of 1024)."""
    if text is None:
        return None
    m = _SIZE.match(text)
    if not m:
        raise click.BadParameter(f"{text!r}: a size such as 500GB, 2TB or 800MB")
    return int(float(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower()))


def parse_age_days(text: str | None) -> float | None:
    """``400d``, ``52w`` or a number of days."""
    if text is None:
        return None
    m = _AGE.match(text)
    if not m:
        raise click.BadParameter(f"{text!r}: an age such as 400d or 52w")
    return float(m.group(1)) * (7 if m.group(2).lower() == "w" else 1)


def _info(root: str) -> Table:
    from pathlib import Path

    from fleetepi.archive.layout import days_of, partition_files, read_meta
    from fleetepi.archive.schema import SCHEMAS

    meta = read_meta(Path(root))
    t = Table(title=f"archive {root} (format {meta.get('format')})", title_justify="left")
    for col in ("table", "days", "first day", "last day", "files", "MB"):
        t.add_column(col, justify="left" if col in ("table", "first day", "last day") else "right")
    for schema in SCHEMAS:
        days = days_of(Path(root), schema)
        files = [f for d in days for f in partition_files(Path(root), schema, d)]
        t.add_row(schema, str(len(days)), days[0] if days else "-", days[-1] if days else "-", str(len(files)),
                  f"{sum(f.size for f in files) / 1e6:.1f}")
    return t


@click.command("archive")
@click.option("--archive", "archive", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Archive folder (created if absent).")
@click.option("--broker", default=None, metavar="kafka://HOST:PORT", callback=broker_option,
              help="Consume the contract topics of this broker into the archive, until Ctrl-C / SIGTERM.")
@click.option("--topic-prefix", default="", help="Prefix of every topic name (as given to the workers).")
@click.option("--group", default="fleetepi-archive", show_default=True, help="Consumer group of the archiver.")
@click.option("--flush-every", default=60.0, show_default=True, type=click.FloatRange(0.1), metavar="SECONDS",
              help="How often consumed records become visible files (and offsets are committed).")
@click.option("--compact-every", default=3600.0, show_default=True, type=click.FloatRange(0), metavar="SECONDS",
              help="How often finished days are compacted and retention applied (0: never).")
@click.option("--compact", "compact_now", is_flag=True, help="Without --broker: compact every partition now.")
@click.option("--max-age", default=None, metavar="AGE", help="Retention: drop days older than this (400d, 52w).")
@click.option("--max-size", default=None, metavar="SIZE", help="Retention: drop oldest days until under this (500GB).")
def archive_command(archive: str, broker: str | None, topic_prefix: str, group: str, flush_every: float,
                    compact_every: float, compact_now: bool, max_age: str | None, max_size: str | None) -> None:
    """Archive the contract topics into Parquet, or maintain an archive folder.

    With --broker, a consumer group of its own reads fleetepi.hosts,
    .crashes, .telemetry and .alerts into DIR (schema=…/day=…/part-….parquet),
    flushing every --flush-every seconds and compacting finished days every
    --compact-every seconds. Without it, one maintenance pass (--compact,
    --max-age, --max-size) or, with none of those, a summary of DIR.

    \b
    Examples:
      fleetepi archive --archive /data/fleetepi --broker kafka://kafka:9092 --max-age 400d
      fleetepi archive --archive /data/fleetepi --compact --max-size 500GB
      fleetepi archive --archive /data/fleetepi                      what is in it
    """
    out = Console(stderr=True)
    age, size = parse_age_days(max_age), parse_size(max_size)
    try:
        if broker is None:
            _maintain(out, archive, compact_now, age, size)
            return
        from fleetepi.archive.consumer import StreamArchiver
        from fleetepi.brokers import bootstrap_of
        from fleetepi.stream.topics import TopicNames

        names = TopicNames(topic_prefix)
        arch = StreamArchiver(bootstrap_of(broker), archive, topics=(names.hosts, names.crashes, names.telemetry,
                                                                      names.alerts),
                              group=group, flush_every_s=flush_every, compact_every_s=compact_every,
                              max_age_days=age, max_bytes=size)
        out.print(f"archiving {broker} (group {group}) into {archive}; Ctrl-C to stop", highlight=False, markup=False)
        stats = asyncio.run(_run_until_signal(arch))
    except ArchiveError as exc:
        raise click.ClickException(str(exc)) from None
    parts = ", ".join(f"{t}: {n:,}" for t, n in sorted(stats.records.items()))
    bad = ", ".join(f"{r}: {n}" for r, n in sorted(stats.invalid.items()))
    out.print(f"archived {stats.total:,} records ({parts})" + (f"; invalid {bad}" if bad else ""), highlight=False,
              markup=False)


async def _run_until_signal(arch: object) -> object:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await arch.run(stop)  # type: ignore[attr-defined]


def _maintain(out: Console, archive: str, compact_now: bool, age: float | None, size: int | None) -> None:
    from fleetepi.archive.maintenance import compact, retain

    if compact_now:
        rep = compact(archive, wait_s=30)
        if rep.locked:
            raise click.ClickException(f"{archive}: another compaction holds the lock; try later")
        out.print(f"compacted {rep.compacted_partitions} partitions: {rep.files_in} files -> {rep.files_out}"
                  + (f", {rep.duplicates_dropped} duplicate rows dropped" if rep.duplicates_dropped else "")
                  + (f", {len(rep.corrupt_moved)} damaged files moved to _corrupt/" if rep.corrupt_moved else ""),
                  highlight=False, markup=False)
    if age is not None or size is not None:
        rep = retain(archive, max_age_days=age, max_bytes=size, wait_s=30)
        out.print(f"retention: removed {len(rep.days_removed)} days ({rep.bytes_removed / 1e6:.1f} MB)"
                  + (f": {rep.days_removed[0]} .. {rep.days_removed[-1]}" if rep.days_removed else ""),
                  highlight=False, markup=False)
    Console().print(_info(archive))


__all__ = ["archive_command", "parse_age_days", "parse_size"]
