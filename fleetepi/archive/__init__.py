"""The event archive: every accepted event and alert, as Parquet partitioned by table and day.

Written by ``fleetepi replay --archive``, ``fleetepi demo`` and the stream
archiver (``fleetepi archive --broker``); read by ``fleetepi investigate``,
``fleetepi report``, and any engine that reads Parquet (DuckDB, Trino,
Spark). The layout and its invariants are in ``layout.py``; docs/archive.md
is the user's guide.

The writer is imported on first use (``fleetepi.archive.ArchiveWriter``), so
that ``fleetepi investigate`` does not pay for Arrow's JSON and Parquet
writers at start-up.
"""

from typing import Any

from fleetepi.archive.exceptions import ArchiveError, ArchiveFormatError, NoMatch

FORMAT_VERSION = 1  # the writer's; fleetepi.archive.schema.FORMAT_VERSION is the same number (tested)


def __getattr__(name: str) -> Any:
    if name in ("ArchiveWriter", "WriterStats"):
        from fleetepi.archive import writer

        return getattr(writer, name)
    raise AttributeError(name)


__all__ = ["FORMAT_VERSION", "ArchiveError", "ArchiveFormatError", "ArchiveWriter", "NoMatch", "WriterStats"]
