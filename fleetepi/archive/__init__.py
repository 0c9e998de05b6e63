"""The event archive: every accepted event and alert, as Parquet partitioned by table and day.

Written by ``fleetepi replay --archive``, ``fleetepi demo`` and the stream
archiver (``fleetepi archive --broker``); read by ``fleetepi investigate``,
``fleetepi report``, and any engine that reads Parquet (DuckDB, Trino,
Spark). The layout and its invariants are in ``layout.py``; docs/archive.md
is the user's guide.
"""

from fleetepi.archive.exceptions import ArchiveError, ArchiveFormatError, NoMatch
from fleetepi.archive.schema import FORMAT_VERSION
from fleetepi.archive.writer import ArchiveWriter, WriterStats

__all__ = ["FORMAT_VERSION", "ArchiveError", "ArchiveFormatError", "ArchiveWriter", "NoMatch", "WriterStats"]
