"""JSON-lines output: one contract message per line, for replay, tests and ``-``.

Lines are written whole and flushed per event, so a reader tailing the file
(``fleetepi replay``) never sees half a message, and an agent killed with
SIGKILL loses nothing that ``publish`` returned from.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

from fleetepi.agents.exceptions import PublishError
from fleetepi.agents.publish.conform import conforming_bytes
from fleetepi.contract import Event


class JsonlPublisher:
    """Appends ``fleetepi.contract.encode(event)`` + newline to a file or stdout.

    :param path: output file (appended, created with parents) or ``-`` for stdout.
    :param fsync: fsync after every event (durable across power loss; slower).
    """

    def __init__(self, path: str | Path, fsync: bool = False) -> None:
        self.path = str(path)
        self.fsync = fsync
        self._owned = self.path != "-"
        if self._owned:
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                self._fh: BinaryIO = open(self.path, "ab")
            except OSError as exc:
                raise PublishError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        else:
            self._fh = sys.stdout.buffer
        self.count = 0

    def publish(self, event: Event) -> None:
        data = conforming_bytes(event)
        try:
            self._fh.write(data + b"\n")
            self._fh.flush()
            if self.fsync and self._owned:
                os.fsync(self._fh.fileno())
        except BrokenPipeError:
            raise PublishError("output pipe closed") from None
        except OSError as exc:
            raise PublishError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self.count += 1

    def flush(self, timeout_s: float | None = None) -> None:
        try:
            self._fh.flush()
        except OSError:
            pass

    def close(self) -> None:
        self.flush()
        if self._owned:
            self._fh.close()


__all__ = ["JsonlPublisher"]
