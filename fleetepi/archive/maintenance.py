"""Compaction and retention: fewer, bigger files; old days dropped first; safe beside live writers and readers.

A stream archiver flushes every minute, so a day partition collects over a
thousand small files; reading those costs more than their bytes. Compaction
merges a partition's files into one, by the marker protocol of
``layout.py`` (write the merged file hidden, write the marker, rename,
remove the inputs, remove the marker), holding the maintenance lock so two
compactors never work at once. Writers are never blocked: a file they add
while a partition is compacted is simply not among its inputs. A damaged
input is moved to ``_corrupt/`` (kept, not read) and the rest is merged.
When the rows carry Kafka coordinates (``src_partition``/``src_offset``,
written by the stream archiver), rows redelivered after a restart are
dropped here, so the stream's at-least-once becomes exactly-once once a
day is compacted.

Retention removes whole days, oldest first, across every table but the
inventory (``host``: a few KB a day, and the population at risk of every
later day, so it is kept): by age
(days older than ``max_age_days`` before the newest day) and by size
(until the archive is under ``max_bytes``). A day folder is renamed out of
the tree before it is deleted, so a reader never sees half a day.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fleetepi.archive.layout import (
    CORRUPT_DIR,
    MARKER_PREFIX,
    TMP_SUFFIX,
    days_of,
    maintenance_lock,
    new_part_name,
    partition_dir,
    partition_files,
    publish,
    tmp_path_for,
)
from fleetepi.archive.schema import FORMAT_VERSION, SCHEMAS, SORT_KEYS

log = logging.getLogger(__name__)

#: Temporary files older than this are a killed writer's leftovers (a live writer renames within seconds).
STALE_TMP_S = 3600.0


@dataclass
class MaintenanceReport:
    compacted_partitions: int = 0
    files_in: int = 0
    files_out: int = 0
    duplicates_dropped: int = 0
    corrupt_moved: list[str] = field(default_factory=list)
    days_removed: list[str] = field(default_factory=list)
    bytes_removed: int = 0
    locked: bool = False  # another maintainer held the lock: nothing done


def _finish_markers(folder: Path) -> None:
    """Complete (or undo) compactions a killed compactor left half done."""
    for marker in folder.glob(f"{MARKER_PREFIX}*.json"):
        try:
            spec = json.loads(marker.read_text())
        except (OSError, ValueError):
            marker.unlink(missing_ok=True)
            continue
        if (folder / spec.get("output", "")).exists():
            for name in spec.get("inputs", []):
                (folder / name).unlink(missing_ok=True)
        else:
            (folder / f".{spec.get('output', '')}{TMP_SUFFIX}").unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
    now = time.time()
    for tmp in folder.glob(f".*{TMP_SUFFIX}"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink()
        except FileNotFoundError:
            pass


def _dedup(table: pa.Table) -> tuple[pa.Table, int]:
    if "src_offset" not in table.column_names or "src_partition" not in table.column_names:
        return table, 0
    keyed = pc.is_valid(table.column("src_offset"))
    if not pc.any(keyed).as_py():
        return table, 0
    idx = pa.array(range(table.num_rows), type=pa.int64())
    t = table.append_column("_i", idx)
    firsts = (t.filter(keyed).group_by(["src_partition", "src_offset"], use_threads=False)
              .aggregate([("_i", "min")]).column("_i_min"))
    keep = pc.or_(pc.invert(keyed), pc.is_in(idx, value_set=firsts))
    out = table.filter(keep)
    return out, table.num_rows - out.num_rows


def compact_partition(root: Path, schema: str, day: str, *, min_files: int = 2, fsync: bool = True,
                      report: MaintenanceReport | None = None) -> bool:
    """Merge one partition's files into one (caller holds the maintenance lock). True if it merged."""
    report = report or MaintenanceReport()
    folder = partition_dir(root, schema, day)
    _finish_markers(folder)
    files = partition_files(root, schema, day)
    if len(files) < min_files:
        return False
    tables, inputs = [], []
    for f in files:
        try:
            tables.append(pq.read_table(f.path))
            inputs.append(f.path.name)
        except Exception as exc:  # noqa: BLE001 - a damaged file is moved aside, the rest merged
            dest = root / CORRUPT_DIR / f"schema={schema}" / f"day={day}"
            dest.mkdir(parents=True, exist_ok=True)
            os.replace(f.path, dest / f.path.name)
            report.corrupt_moved.append(str(f.path))
            log.warning("archive: moved damaged %s to %s: %s", f.path, dest, exc)
    if len(tables) < 2:
        return False
    table = pa.concat_tables(tables, promote_options="permissive")
    table, dropped = _dedup(table)
    sort = [k for k in SORT_KEYS[schema] if k[0] in table.column_names]
    if sort:
        table = table.take(pc.sort_indices(table, sort_keys=sort))
    table = table.replace_schema_metadata({b"fleetepi.format": str(FORMAT_VERSION).encode(),
                                           b"fleetepi.schema": schema.encode()})
    final = folder / new_part_name("compact")
    tmp = tmp_path_for(final)
    pq.write_table(table, tmp, compression="zstd", row_group_size=256_000, write_statistics=True)
    marker = folder / f"{MARKER_PREFIX}{final.stem}.json"
    mtmp = folder / f".{marker.name}{TMP_SUFFIX}"
    mtmp.write_text(json.dumps({"output": final.name, "inputs": inputs}))
    os.replace(mtmp, marker)
    publish(tmp, final, fsync=fsync)
    for name in inputs:
        (folder / name).unlink(missing_ok=True)
    marker.unlink(missing_ok=True)
    report.compacted_partitions += 1
    report.files_in += len(inputs)
    report.files_out += 1
    report.duplicates_dropped += dropped
    return True


def compact(root: str | Path, *, min_files: int = 2, skip_days: set[str] | None = None, fsync: bool = True,
            wait_s: float = 0.0) -> MaintenanceReport:
    """Compact every partition with at least ``min_files`` files (``skip_days``: e.g. today, still being written)."""
    root = Path(root)
    report = MaintenanceReport()
    with maintenance_lock(root, wait_s) as held:
        if not held:
            report.locked = True
            return report
        for schema in SCHEMAS:
            for day in days_of(root, schema):
                if skip_days and day in skip_days:
                    continue
                compact_partition(root, schema, day, min_files=min_files, fsync=fsync, report=report)
    return report


def archive_bytes(root: Path) -> dict[str, int]:
    """Bytes per day over every table retention removes (all but the inventory)."""
    sizes: dict[str, int] = {}
    for schema in SCHEMAS:
        if schema == "host":
            continue
        for day in days_of(root, schema):
            sizes[day] = sizes.get(day, 0) + sum(f.size for f in partition_files(root, schema, day))
    return sizes


def retain(root: str | Path, *, max_age_days: float | None = None, max_bytes: int | None = None,
           today: date | None = None, wait_s: float = 0.0) -> MaintenanceReport:
    """Drop whole days, oldest first, older than ``max_age_days`` or until the archive fits ``max_bytes``.

    Age is counted back from ``today`` (default: the archive's newest day, so
    replaying an old recording never wipes it on the spot).
    """
    root = Path(root)
    report = MaintenanceReport()
    with maintenance_lock(root, wait_s) as held:
        if not held:
            report.locked = True
            return report
        sizes = archive_bytes(root)
        days = sorted(sizes)  # days with removable data (the inventory's own days are kept)
        if not days:
            return report
        newest = today or date.fromisoformat(days[-1])
        drop: list[str] = []
        if max_age_days is not None:
            cutoff = (newest - timedelta(days=max_age_days)).isoformat()
            drop = [d for d in days if d < cutoff]
        if max_bytes is not None:
            kept = sum(f.size for d in days_of(root, "host") for f in partition_files(root, "host", d))
            total = kept + sum(sizes.values()) - sum(sizes.get(d, 0) for d in drop)
            for d in days:
                if total <= max_bytes:
                    break
                if d not in drop:
                    drop.append(d)
                    total -= sizes.get(d, 0)
        for d in sorted(drop):
            _remove_day(root, d)
            report.days_removed.append(d)
            report.bytes_removed += sizes.get(d, 0)
    return report


def _remove_day(root: Path, day: str) -> None:
    for schema in SCHEMAS:
        if schema == "host":
            continue  # the inventory (KB a day) stays: it is the population at risk of every later day
        folder = partition_dir(root, schema, day)
        if not folder.exists():
            continue
        trash = folder.with_name(f".deleting-{folder.name}-{os.getpid()}")
        os.replace(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)


__all__ = ["MaintenanceReport", "archive_bytes", "compact", "compact_partition", "retain"]
