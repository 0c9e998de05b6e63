"""Data in log lines: a label or a host name must never start a line of its own.

Alertmanager labels are data from whoever can post alerts; written raw, one
with a newline forges a second log line ("... host=x\\nquarantined host=y").
"""

from __future__ import annotations


def printable(text: object, limit: int = 200) -> str:
    """``text`` for a log line: cut at ``limit`` characters, control characters escaped (``\\n``)."""
    s = str(text)[:limit]
    return s if s.isprintable() else s.encode("unicode_escape").decode("ascii")


__all__ = ["printable"]
