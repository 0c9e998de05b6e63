"""Local snapshots of partition state: they bound recovery time, never its correctness.

A checkpoint is :meth:`fleetepi.stream.state.PartitionState.snapshot` (plain data,
msgpack) in ``<data-dir>/checkpoints/<stage>-<partition>.msgpack``, written
by the stage's own loop *after* a batch's outputs were acknowledged by the
broker, so every record it covers has had its forwards and alerts
delivered. Because a state is a pure function of its log prefix, a
snapshot for prefix ``[0, n)`` stays valid forever for that log: a restart
loads it and reads only ``[n, committed)`` from the broker instead of the
whole retained log. If the snapshot is missing, unreadable, of another
version or config, the worker rebuilds from the log instead: checkpoints
are an optimisation, the log is the truth.

Files are written to a temporary name and renamed, so a kill -9 during a
write leaves the previous checkpoint intact. A data directory belongs to
one cluster and topic prefix (don't point two clusters at one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import msgspec

log = logging.getLogger(__name__)


class CheckpointStore:
    """Snapshots of partition states under ``directory``.

    :param directory: created if missing.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._enc = msgspec.msgpack.Encoder()

    def path(self, stage: str, partition: int) -> Path:
        return self.directory / f"{stage}-{partition}.msgpack"

    def encode(self, snapshot: dict[str, Any]) -> bytes:
        """Serialize on the caller's thread (the state must not change while encoding)."""
        return self._enc.encode(snapshot)

    def write(self, stage: str, partition: int, blob: bytes) -> None:
        """Atomically replace the checkpoint (safe to run in a worker thread)."""
        target = self.path(stage, partition)
        tmp = target.with_name(target.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)

    def load(self, stage: str, partition: int) -> dict[str, Any] | None:
        """The last snapshot, or None if there is none or it cannot be read."""
        p = self.path(stage, partition)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("checkpoint %s unreadable (%s): rebuilding from the log", p, exc)
            return None
        try:
            snap = msgspec.msgpack.decode(data)
        except msgspec.DecodeError as exc:
            log.warning("checkpoint %s corrupt (%s): rebuilding from the log", p, exc)
            return None
        return snap if isinstance(snap, dict) else None


__all__ = ["CheckpointStore"]
