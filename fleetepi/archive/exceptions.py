"""Errors of the archive.

::

    FleetepiError
     └── ArchiveError            the archive cannot be written or read at all
          ├── ArchiveFormatError  written by a newer fleetepi (format version unknown here)
          └── NoMatch             a query named a signature, host or cohort the archive does not hold

A single damaged file is not an error: readers skip it with a warning and
count it (``Archive.skipped``).
"""

from __future__ import annotations

from fleetepi.exceptions import FleetepiError


class ArchiveError(FleetepiError):
    """The archive cannot be written or read (missing directory, disk full, writer thread failed)."""


class ArchiveFormatError(ArchiveError):
    """The archive says it was written in a format version newer than this fleetepi reads."""


class NoMatch(ArchiveError):
    """Nothing in the archive matches what the query named (with candidates in the message)."""


__all__ = ["ArchiveError", "ArchiveFormatError", "NoMatch"]
