"""Planned work that must not page: maintenance windows, besides the ``maintenance`` host attribute.

A host announced with a non-empty ``maintenance`` attribute is in maintenance
until announced without it (``detectors.inventory``). Windows come from
elsewhere too: a file of (hosts or cohort, start, end) and Alertmanager's
silences, read by the runners (``fleetepi/maintenance.py``) and handed to the
engine as :class:`Window`s. Events of a host in maintenance count neither as
cases nor in baselines (the engine drops them at fold time and counts them
as ``in_maintenance``), so nothing pages for planned work, and a
reboot does not become the new normal.
"""

from __future__ import annotations

from msgspec import Struct, field

from fleetepi.detectors.inventory import pair_key


class Window(Struct, frozen=True):
    """Hosts (by name, or all hosts with ``attribute=value``) in maintenance from ``start_ms`` to ``end_ms``."""

    start_ms: int
    end_ms: int
    hosts: tuple[str, ...] = ()
    attribute: str | None = None
    value: str | None = None
    reason: str = ""


class Maintenance(Struct):
    """The windows in force, indexed by host and by cohort for a cheap check per event."""

    windows: list[Window] = field(default_factory=list)
    by_host: dict[str, list[Window]] = field(default_factory=dict)
    by_pair: dict[str, list[Window]] = field(default_factory=dict)

    def set(self, windows: list[Window]) -> None:
        """Replace the windows (a runner re-reads its file or Alertmanager's silences)."""
        self.windows = sorted(windows, key=lambda w: (w.start_ms, w.end_ms, w.hosts, w.attribute or "", w.value or ""))
        self.by_host, self.by_pair = {}, {}
        for w in self.windows:
            for h in w.hosts:
                self.by_host.setdefault(h, []).append(w)
            if w.attribute is not None and w.value is not None:
                self.by_pair.setdefault(pair_key(w.attribute, w.value), []).append(w)

    def covers(self, host: str, keys: tuple[str, ...], ts_ms: int) -> bool:
        """Is ``host`` (with pair keys ``keys`` at ``ts_ms``) in a window at ``ts_ms``?"""
        if not self.windows:
            return False
        for w in self.by_host.get(host, ()):
            if w.start_ms <= ts_ms < w.end_ms:
                return True
        if self.by_pair:
            for k in keys:
                for w in self.by_pair.get(k, ()):
                    if w.start_ms <= ts_ms < w.end_ms:
                        return True
        return False


__all__ = ["Maintenance", "Window"]
