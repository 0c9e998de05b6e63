"""Maintenance windows in a stream worker: read at start, re-read every ``refresh_s``, pushed to the fleet engines.

The windows come from ``--maintenance FILE`` and ``--alertmanager URL``
(its silences, ``fleetepi.maintenance``). The file is read at start-up (a
bad one stops the worker there); afterwards a bad edit or an unreachable
Alertmanager keeps the last good windows, logged, and the worker goes on.

Silences change while the worker runs, so what it folds depends on when it
read them: two workers (or a worker and a replay of the same log) can
disagree about events dated near a silence's creation, and a partition
rebuilt from the log folds its old events under the windows known *now*.
A replay with the same file and no silences decides exactly as the
worker would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from fleetepi.contract import Alert
from fleetepi.detectors.maintenance import Window
from fleetepi.maintenance import AlertGate, MaintenanceSources, windows_summary
from fleetepi.metrics import PipelineMetrics

log = logging.getLogger(__name__)


class WorkerMaintenance:
    """Windows for every fleet engine of a worker, and the alert gate of each partition.

    :param path: maintenance file (YAML/CSV) or None.
    :param alertmanager_url: Alertmanager whose silences are read, or None.
    :param metrics: where the window count, events dropped and alerts suppressed go.
    """

    def __init__(self, path: str | None, alertmanager_url: str | None, metrics: PipelineMetrics) -> None:
        self.sources = MaintenanceSources(path, alertmanager_url)
        self.metrics = metrics
        self.windows: list[Window] = self.sources.load() if self.sources.enabled else []
        self._gates: dict[tuple[str, int], AlertGate] = {}
        metrics.set_maintenance_windows(len(self.windows))
        if self.sources.enabled:
            log.info("maintenance: %s", windows_summary(self.windows))

    @property
    def enabled(self) -> bool:
        return self.sources.enabled

    def apply(self, engine: Any) -> None:
        """Give a fleet engine the windows in force (a new or restored partition state)."""
        if self.enabled:
            engine.set_maintenance(self.windows)

    async def refresh(self, states: Iterable[Any]) -> None:
        """Re-read the sources (in a thread: HTTP and file I/O) and hand changed windows to ``states``."""
        windows = await asyncio.to_thread(self.sources.refresh)
        if windows == self.windows:
            return
        self.windows = windows
        self.metrics.set_maintenance_windows(len(windows))
        log.info("maintenance: now %s", windows_summary(windows))
        for st in states:
            async with st.lock:
                st.engine.set_maintenance(windows)

    def gate(self, key: tuple[str, int], engine: Any, alerts: list[Alert], dropped_before: int) -> list[Alert]:
        """The alerts to send: those about planned work held back (counted); also counts the events dropped."""
        self.metrics.count_in_maintenance(engine.flags["in_maintenance"] - dropped_before)
        if not alerts:
            return alerts
        gate = self._gates.setdefault(key, AlertGate())
        out: list[Alert] = []
        for a in alerts:
            if gate.admit(a, engine):
                out.append(a)
            elif a.state == "firing":
                self.metrics.count_suppressed(a.kind)
        return out


__all__ = ["WorkerMaintenance"]
