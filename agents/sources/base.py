"""What an agent source is: something that, polled, yields contract events.

Sources register by name (``fleetepi.agents.sources.registry``); one config entry is
one instance (node-problem-detector's monitors). A source that cannot run on
this host (no GPU, no EDAC, no permission) raises ``SourceUnavailable`` from
``__init__`` or its first ``poll``; the agent says so once and goes on
without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol

from fleetepi.contract import Crash, Host, Telemetry


class Source(Protocol):
    #: Registry name, e.g. "coredir", "kmsg", "edac", "nvml", "hwmon", "inventory".
    kind: ClassVar[str]

    def poll(self, now_ms: int) -> Iterable[Host | Crash | Telemetry]:
        """Return what happened since the last poll; never blocks for long, never raises on bad input."""

    def close(self) -> None:
        """Release files and handles."""
