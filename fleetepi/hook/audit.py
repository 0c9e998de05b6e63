"""JSON-lines audit log: one line per decision, flushed before the HTTP answer.

The log is the record an on-call person reads after the fact ("why was
gpu-17 cordoned at 03:12?"): every decision, including the refused, the
duplicate and the dry-run ones, with the exact command lines and their exit
codes. Appending one ``orjson`` line and flushing is atomic enough for one
writer; the hook holds its decision lock while writing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import IO, Any

import orjson


class AuditLog:
    """Append decisions to ``path`` (created with its parent directory)."""

    def __init__(self, path: str | Path, clock: Any = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = open(self.path, "ab")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self._clock = clock

    def write(self, record: dict[str, Any]) -> None:
        line = orjson.dumps({"ts": round(self._clock(), 3), **record}, option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def read_audit(path: str | Path) -> list[dict[str, Any]]:
    """Every record of an audit log (for tests and ``jq``-less inspection)."""
    return [orjson.loads(line) for line in Path(path).read_bytes().splitlines() if line.strip()]


__all__ = ["AuditLog", "read_audit"]
