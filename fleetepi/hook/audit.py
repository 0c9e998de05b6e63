"""JSON-lines audit log: one line per decision, flushed before the HTTP answer.

The log is the record an on-call person reads after the fact ("why was
gpu-17 cordoned at 03:12?"): every decision, including the refused, the
duplicate and the dry-run ones, with the exact command lines and their exit
codes. Appending one ``orjson`` line and flushing is atomic enough for one
writer; the hook holds its decision lock while writing.

Recovery: a hook killed mid-write leaves a cut-off last line. Reading the
log back says so (file and line) and goes on; the next record starts on a
line of its own. Any *other* line that is not a JSON object is damage the
hook cannot reason past (its memory of quarantined hosts would be wrong), so
it refuses to start with :class:`AuditLogError` naming the file and line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import orjson

from fleetepi.exceptions import ConfigError

#: The record written after a cut-off line when the log is reopened.
RECOVERED = "audit_log_recovered"


class AuditLogError(ConfigError):
    """A line of the audit log that is not a record: the hook does not start on a log it cannot read."""


class AuditLog:
    """Append decisions to ``path`` (created with its parent directory)."""

    def __init__(self, path: str | Path, clock: Any = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = open(self.path, "ab")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self._clock = clock
        if self._fh.tell() > 0 and not _ends_with_newline(self.path):
            self._fh.write(b"\n")  # the cut-off record stays alone on its line, marked as such
            self.write({"decision": RECOVERED, "reason": "the line before this one was cut off (hook stopped mid-write)"})

    def write(self, record: dict[str, Any]) -> None:
        line = orjson.dumps({"ts": round(self._clock(), 3), **record}, option=orjson.OPT_APPEND_NEWLINE)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _decision(line: bytes) -> object:
    try:
        rec = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return rec.get("decision") if isinstance(rec, dict) else None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


def read_audit(path: str | Path, on_cut_tail: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every record of an audit log.

    :param on_cut_tail: told (one sentence naming file and line) when the
        last line is cut off, as a hook killed mid-write leaves it; that line
        is skipped. Without it, such a line is an error too.
    :raises AuditLogError: a line that is not a JSON object, naming file and line.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise AuditLogError(f"audit log {p}: cannot read: {exc.strerror or exc}") from None
    lines = raw.split(b"\n")
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            rec, why = None, f"not JSON ({exc})"
        else:
            why = f"a JSON {type(rec).__name__}, not an object"
        if isinstance(rec, dict):
            out.append(rec)
            continue
        rest = [x for x in lines[i:] if x.strip()]
        cut = rec is None and (not rest or rest[0].startswith(b'{"ts":') and _decision(rest[0]) == RECOVERED)
        if cut and on_cut_tail is not None:
            on_cut_tail(f"audit log {p} line {i}: cut off (the hook stopped mid-write); that record is skipped")
            continue
        raise AuditLogError(f"audit log {p} line {i}: {why}; move the file aside or fix that line to start the hook")
    return out


__all__ = ["RECOVERED", "AuditLog", "AuditLogError", "read_audit"]
