"""Host inventory in event time: who has which attribute value, and when.

Cohorts are built from host announcements. A host may be re-announced with
changed attributes (a BIOS upgrade, a driver roll-out); the announcement in
force at an event's time is the one that counts for that event, so each host
keeps a short, time-sorted history. The fleet-wide cohort sizes (hosts per
``attribute=value``) are kept incrementally for the *latest* announcements,
which is what a cohort's share of the fleet is tested against.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field

#: Attributes in force for a host no one announced.
EMPTY: dict[str, str] = {}


@dataclass
class _History:
    times: list[int] = field(default_factory=list)
    attrs: list[dict[str, str]] = field(default_factory=list)


class Inventory:
    """Attribute history per host plus live cohort sizes.

    :param max_history: announcements kept per host (older ones fold into the
        oldest kept; bounded memory for hosts that flap).
    """

    def __init__(self, max_history: int = 8) -> None:
        self.max_history = max_history
        self._hosts: dict[str, _History] = {}
        #: (attribute, value) -> number of hosts whose latest announcement has it.
        self.cohort_sizes: Counter[tuple[str, str]] = Counter()
        #: attribute -> number of hosts that announce it at all.
        self.attribute_hosts: Counter[str] = Counter()
        #: Bumped whenever a latest announcement changes: caches of cohort membership key on it.
        self.version = 0
        #: Time of the earliest announcement: where the stream starts for every worker
        #: (all of them read the whole hosts topic), so detectors' warm-ups agree.
        self.first_ms: int | None = None
        self._members: tuple[int, dict[tuple[str, str], frozenset[str]], dict[str, frozenset[str]]] | None = None

    def __len__(self) -> int:
        return len(self._hosts)

    def __contains__(self, host: str) -> bool:
        return host in self._hosts

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    def announce(self, host: str, ts_ms: int, attributes: dict[str, str]) -> bool:
        """Record an announcement; returns True if the latest attributes changed."""
        if self.first_ms is None or ts_ms < self.first_ms:
            self.first_ms = ts_ms
        hist = self._hosts.get(host)
        if hist is None:
            hist = self._hosts[host] = _History()
        latest = hist.attrs[-1] if hist.attrs else None
        i = bisect_right(hist.times, ts_ms)
        if latest is not None and i == len(hist.times) and latest == attributes:
            return False
        hist.times.insert(i, ts_ms)
        hist.attrs.insert(i, dict(attributes))
        if len(hist.times) > self.max_history:
            del hist.times[0], hist.attrs[0]
        new_latest = hist.attrs[-1]
        if new_latest is latest:
            return False
        if latest is not None:
            for kv in latest.items():
                self.cohort_sizes[kv] -= 1
            for k in latest:
                self.attribute_hosts[k] -= 1
        for kv in new_latest.items():
            self.cohort_sizes[kv] += 1
        for k in new_latest:
            self.attribute_hosts[k] += 1
        self.version += 1
        return True

    def members(self) -> tuple[dict[tuple[str, str], frozenset[str]], dict[str, frozenset[str]]]:
        """Hosts per ``(attribute, value)`` and per attribute (latest announcements).

        O(hosts x attributes) to build, cached until the next change: the
        correlation detectors need it only when a cohort is about to be
        reported, to tell nested and confounded cohorts apart.
        """
        if self._members is not None and self._members[0] == self.version:
            return self._members[1], self._members[2]
        by_pair: dict[tuple[str, str], set[str]] = {}
        by_attr: dict[str, set[str]] = {}
        for host, hist in self._hosts.items():
            for kv in hist.attrs[-1].items():
                by_pair.setdefault(kv, set()).add(host)
                by_attr.setdefault(kv[0], set()).add(host)
        pairs = {k: frozenset(v) for k, v in by_pair.items()}
        attrs = {k: frozenset(v) for k, v in by_attr.items()}
        self._members = (self.version, pairs, attrs)
        return pairs, attrs

    def attributes_at(self, host: str, ts_ms: int) -> dict[str, str]:
        """Attributes in force for ``host`` at ``ts_ms`` (the earliest known if none yet)."""
        hist = self._hosts.get(host)
        if hist is None:
            return EMPTY
        if ts_ms >= hist.times[-1]:
            return hist.attrs[-1]
        i = bisect_right(hist.times, ts_ms)
        return hist.attrs[max(i - 1, 0)]

    def latest(self, host: str) -> dict[str, str]:
        hist = self._hosts.get(host)
        return hist.attrs[-1] if hist is not None else EMPTY

    def snapshot(self) -> dict:
        return {h: [list(zip(v.times, v.attrs))] for h, v in self._hosts.items()}

    def restore(self, state: dict) -> None:
        self.__init__(self.max_history)  # type: ignore[misc]
        for host, (pairs,) in state.items():
            for ts_ms, attrs in pairs:
                self.announce(host, int(ts_ms), attrs)


def stream_start(inventory: Inventory, ts_ms: int) -> int:
    """Start of the stream as every worker sees it: the first announcement, else this event."""
    first = inventory.first_ms
    return ts_ms if first is None or first > ts_ms else first


__all__ = ["EMPTY", "Inventory", "stream_start"]
