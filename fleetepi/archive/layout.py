"""Where things are in an archive directory, and the rules that keep it readable while it changes.

::

    ARCHIVE/
      _fleetepi_archive.json                    {"format": 1, ...}  written once, atomically
      schema=crash/day=2026-11-02/part-20261102T101500-3f9c....parquet
      schema=telemetry/day=2026-11-02/...
      schema=host/..., schema=alert/..., schema=hostday/...
      schema=crash/day=2026-11-02/_compaction-<id>.json   only while a compaction swaps files
      _corrupt/                                  damaged files moved aside by compaction (kept, not read)

Hive-style ``key=value`` folders, so DuckDB (``hive_partitioning``),
Spark and Trino read the same tree, locally or on S3-compatible storage.

The invariants:

* **Atomic files.** A file is written under a hidden temporary name
  (``.part-….parquet.tmp``) in its final folder and renamed into place, so a
  killed writer leaves at most a temporary file no reader lists (hidden,
  wrong suffix; Spark and Trino skip ``.``/``_`` names too).
* **Unique names.** Each file name carries the writer's time and 96 random
  bits: two writers, in one process or on two machines, never write the same
  name, so they never overwrite each other's files.
* **Compaction swaps by marker.** The merged file is written under a temporary
  name; then a marker naming the output and its inputs is written; then the
  output is renamed into place; then the inputs and the marker are removed.
  A reader that finds a marker whose output exists ignores the marker's
  inputs, so at no instant is a row counted twice or missing, and a
  compaction killed at any step is finished (or undone) by the next one.
* **One maintainer at a time.** Compaction and retention hold an exclusive
  ``flock`` on ``_maintenance.lock``; writers never take it (they only add
  new files, which a running compaction does not list).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleetepi.archive.exceptions import ArchiveError, ArchiveFormatError
from fleetepi.archive.schema import FORMAT_VERSION, SCHEMAS

META_FILE = "_fleetepi_archive.json"
LOCK_FILE = "_maintenance.lock"
CORRUPT_DIR = "_corrupt"
MARKER_PREFIX = "_compaction-"
PART_SUFFIX = ".parquet"
TMP_SUFFIX = ".tmp"


@dataclass(frozen=True)
class PartFile:
    """One data file of a partition."""

    path: Path
    schema: str
    day: str
    size: int


def partition_dir(root: Path, schema: str, day: str) -> Path:
    return root / f"schema={schema}" / f"day={day}"


def new_part_name(prefix: str = "part") -> str:
    """A name no other writer will ever pick: UTC time to the second + 96 random bits."""
    return f"{prefix}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(12)}{PART_SUFFIX}"


def tmp_path_for(final: Path) -> Path:
    return final.with_name(f".{final.name}{TMP_SUFFIX}")


def publish(tmp: Path, final: Path, fsync: bool = True) -> None:
    """Make a fully written temporary file visible under its final name (atomic rename)."""
    if fsync:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    os.replace(tmp, final)


# ---------------------------------------------------------------------- metadata
def ensure_meta(root: Path) -> dict:
    """Create the archive folder and its metadata file if absent; return the metadata.

    Two writers starting together both try: the file is created with
    ``O_EXCL`` from a complete temporary file (``link``), so exactly one wins
    and the other reads the winner's.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ArchiveError(f"{root}: cannot create the archive folder: {exc.strerror or exc}") from None
    path = root / META_FILE
    if not path.exists():
        import fleetepi

        meta = {"format": FORMAT_VERSION, "created_by": f"fleetepi {getattr(fleetepi, '__version__', '?')}",
                "created": datetime.now(UTC).isoformat(timespec="seconds"), "layout": "schema=<name>/day=<YYYY-MM-DD>"}
        tmp = root / f".{META_FILE}.{secrets.token_hex(6)}{TMP_SUFFIX}"
        tmp.write_text(json.dumps(meta, indent=1) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    return read_meta(root)


def read_meta(root: Path) -> dict:
    """The archive's metadata; an archive without the file (written before it existed) reads as format 0.

    :raises ArchiveFormatError: the archive is of a newer format than this fleetepi reads.
    """
    path = root / META_FILE
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        return {"format": 0}
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{path}: unreadable archive metadata: {exc}") from None
    version = meta.get("format")
    if not isinstance(version, int):
        raise ArchiveError(f"{path}: no integer 'format' in the archive metadata")
    if version > FORMAT_VERSION:
        raise ArchiveFormatError(f"{root}: archive format {version} is newer than this fleetepi reads "
                                 f"(up to {FORMAT_VERSION}); upgrade fleetepi")
    return meta


# ---------------------------------------------------------------------- listing
def days_of(root: Path, schema: str) -> list[str]:
    base = root / f"schema={schema}"
    try:
        names = [e.name for e in os.scandir(base) if e.is_dir() and e.name.startswith("day=")]
    except FileNotFoundError:
        return []
    return sorted(n[4:] for n in names)


def _markers(folder: Path, names: list[str]) -> set[str]:
    """Inputs to ignore: those of every marker whose output is already in place."""
    hidden: set[str] = set()
    present = set(names)
    for n in names:
        if not n.startswith(MARKER_PREFIX):
            continue
        try:
            marker = json.loads((folder / n).read_text())
        except (OSError, ValueError):
            continue  # a marker being written: its output is not in place yet either
        if marker.get("output") in present:
            hidden.update(marker.get("inputs", ()))
    return hidden


def partition_files(root: Path, schema: str, day: str) -> list[PartFile]:
    """The visible data files of one partition (no temporaries, no superseded inputs)."""
    folder = partition_dir(root, schema, day)
    try:
        entries = {e.name: e for e in os.scandir(folder)}
    except FileNotFoundError:
        return []
    names = list(entries)
    hidden = _markers(folder, names) if any(n.startswith(MARKER_PREFIX) for n in names) else set()
    out = []
    for n, e in entries.items():
        if n.startswith((".", "_")) or not n.endswith(PART_SUFFIX) or n in hidden:
            continue
        try:
            size = e.stat().st_size
        except FileNotFoundError:  # removed by a compaction since the scan
            continue
        out.append(PartFile(folder / n, schema, day, size))
    out.sort(key=lambda p: p.path.name)
    return out


def list_files(root: Path, schema: str, since_day: str | None = None, until_day: str | None = None) -> list[PartFile]:
    """Visible data files of one table, oldest day first, optionally within ``[since_day, until_day]``."""
    files: list[PartFile] = []
    for day in days_of(root, schema):
        if since_day is not None and day < since_day:
            continue
        if until_day is not None and day > until_day:
            continue
        files.extend(partition_files(root, schema, day))
    return files


def archive_days(root: Path) -> list[str]:
    """Every day any table has a partition for, oldest first."""
    days: set[str] = set()
    for schema in SCHEMAS:
        days.update(days_of(root, schema))
    return sorted(days)


# ---------------------------------------------------------------------- locking
@contextlib.contextmanager
def maintenance_lock(root: Path, wait_s: float = 0.0) -> Iterator[bool]:
    """Hold the archive's maintenance lock; yields False (and holds nothing) if another holds it.

    ``flock`` is released by the kernel when its holder dies, so a killed
    compactor never leaves the archive locked.
    """
    path = root / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


__all__ = [
    "CORRUPT_DIR",
    "LOCK_FILE",
    "MARKER_PREFIX",
    "META_FILE",
    "PART_SUFFIX",
    "TMP_SUFFIX",
    "PartFile",
    "archive_days",
    "days_of",
    "ensure_meta",
    "list_files",
    "maintenance_lock",
    "new_part_name",
    "partition_dir",
    "partition_files",
    "publish",
    "read_meta",
    "tmp_path_for",
]
