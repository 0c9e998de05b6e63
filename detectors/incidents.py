"""Incidents, not alert storms: a rack page instead of one page per host.

When half of a rack's hosts page within an hour, the on-call wants one page
for the rack (its power, its switch, its cooling), with the host alerts
held under it. This layer runs after the detectors at every step boundary:

* every host-level alert gets its *escalation unit* (``Alert.escalation``,
  e.g. ``rack=r07``): the finest attribute of the inventory that nests in
  another (``Inventory.nesting``: detected from the data, never a
  hard-coded name), so Alertmanager's inhibit rule can hold host pages under
  their unit's escalation (deploy/alertmanager);
* a unit where at least ``escalate_share`` of its hosts (and at least
  ``escalate_min_hosts``) paged within ``escalate_window_s`` gets one alert
  with ``finding: rack_escalation`` (the unit's attribute and value, the
  kind of the host alerts under it), and the escalation climbs the nesting
  chain (half of a cluster's racks escalated: the cluster);
* alerts about one thing share an ``incident``: host alerts of an escalated
  unit take the escalation's; the escalation of host alerts that are all
  about one telemetry channel takes that channel's (its fleet-wide and
  cohort alerts group with it).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Set as AbstractSet

import msgspec
from msgspec import Struct, field

from fleetepi.contract import Alert, ts_from_ms
from fleetepi.detectors.findings import PAGE, incident_channel
from fleetepi.detectors.inventory import Inventory, pair_key, split_key


class _Page(Struct, frozen=True):
    host: str
    ts_ms: int
    kind: str
    channel: str  # "kind:code" for telemetry host alerts, "" for crash findings
    finding: str


class Escalation(Struct):
    window_ms: int
    share: float
    min_hosts: int
    #: unit (pair key) -> host -> its latest page
    pages: dict[str, dict[str, _Page]] = field(default_factory=dict)
    #: escalated unit -> (incident, kind, escalation alert's ts, telemetry channel or "")
    escalated: dict[str, tuple[str, str, int, str]] = field(default_factory=dict)
    #: escalated units whose escalation is a detector's cohort alert (it resolves them itself)
    _by_alert: set[str] = field(default_factory=set)
    #: cohort alert key -> the place's incident it joined (its resolution carries the same)
    joined: dict[str, str] = field(default_factory=dict)
    def _chain(self, inventory: Inventory) -> dict[str, str]:
        return inventory.nesting()

    def unit_of(self, host: str, inventory: Inventory) -> str | None:
        """The host's finest place (e.g. ``rack\\x1fr07``): an attribute nested in another, with the most values."""
        chain = self._chain(inventory)
        attrs = inventory.latest(host)
        best: tuple[int, str] | None = None
        for a in chain:
            v = attrs.get(a)
            if v is None:
                continue
            n = sum(1 for k in inventory.sizes if k.startswith(a + "\x1f"))
            if best is None or n > best[0] or (n == best[0] and a < best[1]):
                best = (n, a)
        if best is None:
            return None
        return pair_key(best[1], attrs[best[1]])

    def process(self, alerts: list[Alert], now_ms: int, inventory: Inventory) -> list[Alert]:
        """Label host alerts with their unit, escalate units, and return the alerts (new ones appended)."""
        out: list[Alert] = []
        touched: set[str] = set()
        chain = self._chain(inventory)
        for a in alerts:
            if a.host is None and a.attribute in chain and a.value is not None and a.finding != "rack_escalation":
                # a cohort alert on a place (rack r07 over-represented) already is that place's incident:
                # its hosts' pages are held under it
                # its hosts' pages are held under it, and a second cohort alert on the same place while
                # that incident is open (a rack losing power shows Xid 79 *and* PCIe errors) joins it
                place = pair_key(a.attribute, a.value)
                cohort_changes: dict[str, object] = {"escalation": f"{a.attribute}={a.value}"}
                if a.state == "firing" and a.is_page:
                    if place not in self.escalated:
                        self.escalated[place] = (a.incident or f"{a.attribute}={a.value}", a.kind, now_ms, "")
                        self._by_alert.add(place)
                    else:
                        cohort_changes["incident"] = self.joined[a.key] = self.escalated[place][0]
                elif a.state == "resolved" and a.key in self.joined:
                    cohort_changes["incident"] = self.joined.pop(a.key)
                out.append(msgspec.structs.replace(a, **cohort_changes))  # type: ignore[arg-type]
                continue
            if a.host is None or a.attribute is not None:
                out.append(a)
                continue
            found = self.unit_of(a.host, inventory)
            if found is None:
                out.append(a)
                continue
            unit = found
            attr, value = split_key(unit)
            esc = f"{attr}={value}"
            changes: dict[str, object] = {"escalation": esc}
            if unit in self.escalated and a.state == "firing":
                changes["incident"] = self.escalated[unit][0]
            out.append(msgspec.structs.replace(a, **changes))  # type: ignore[arg-type]
            if a.state == "firing" and a.is_page:
                channel = f"{a.telemetry_kind}:{a.code}" if a.code is not None else (a.telemetry_kind or "")
                self.pages.setdefault(unit, {})[a.host] = _Page(a.host, now_ms, a.kind, channel, a.finding or "")
                touched.add(unit)
        out.extend(self._escalate(touched, now_ms, inventory))
        out.extend(self._expire(now_ms))
        return out

    def _escalate(self, touched: set[str], now_ms: int, inventory: Inventory) -> list[Alert]:
        out: list[Alert] = []
        chain = self._chain(inventory)
        for unit in sorted(touched):
            if unit in self.escalated:
                continue
            pages = {h: p for h, p in self.pages.get(unit, {}).items() if now_ms - p.ts_ms <= self.window_ms}
            size = inventory.sizes.get(unit, 0)
            need = max(self.min_hosts, math.ceil(self.share * size))
            if size == 0 or len(pages) < need:
                continue
            out.append(self._alert(unit, pages, size, now_ms))
            # up the chain: half of the parent's units escalated escalates the parent
            attr, value = split_key(unit)
            parent_attr = chain.get(attr)
            if parent_attr is None:
                continue
            members, _ = inventory.members()
            hosts: AbstractSet[str] = members.get((attr, value), frozenset())
            parent_value = next((inventory.latest(h).get(parent_attr) for h in hosts), None)
            if parent_value is None:
                continue
            parent = pair_key(parent_attr, parent_value)
            siblings = {pair_key(attr, inventory.latest(h).get(attr, "")) for h in members.get(split_key(parent), ())}
            done = sum(1 for s in siblings if s in self.escalated)
            if parent not in self.escalated and len(siblings) >= 2 and done >= math.ceil(self.share * len(siblings)):
                merged = {h: p for s in siblings for h, p in self.pages.get(s, {}).items()}
                out.append(self._alert(parent, merged, inventory.sizes.get(parent, 0), now_ms))
        return out

    def _alert(self, unit: str, pages: dict[str, _Page], size: int, now_ms: int) -> Alert:
        attr, value = split_key(unit)
        kinds = Counter(p.kind for p in pages.values())
        kind = max(kinds.items(), key=lambda kv: (kv[1], kv[0]))[0]
        channels = {p.channel for p in pages.values()}
        findings = Counter(p.finding for p in pages.values())
        channel = next(iter(channels)) if len(channels) == 1 and "" not in channels else None
        incident = incident_channel(channel) if channel else f"{attr}={value}"
        self.escalated[unit] = (incident, kind, now_ms, channel or "")
        top = ", ".join(f"{n} {f}" for f, n in findings.most_common(3))
        summary = (f"{len(pages)} of {size} hosts of {attr}={value} paged within "
                   f"{self.window_ms // 60_000} min ({top}): one problem of the {attr}, not of each host")
        return Alert(ts=ts_from_ms(now_ms), kind=kind, state="firing", attribute=attr, value=value,  # type: ignore[arg-type]
                     telemetry_kind=channel.split(":")[0] if channel else None,
                     code=int(channel.split(":")[1]) if channel and ":" in channel else None,
                     score=float(len(pages)), observed=float(len(pages)), expected=float(size), summary=summary,
                     notes=[f"rack escalation: >= {self.share:.0%} of the {size} hosts of {attr}={value} (and >= "
                            f"{self.min_hosts}) paged within {self.window_ms // 60_000} min; their pages are held "
                            f"under this one (Alertmanager inhibit rule on the escalation label)",
                            "hosts: " + ", ".join(sorted(pages)[:20])],
                     severity=PAGE, finding="rack_escalation", incident=incident, escalation=f"{attr}={value}")

    def _expire(self, now_ms: int) -> list[Alert]:
        """Resolve escalations whose unit had no page within the window; forget old pages."""
        out: list[Alert] = []
        for unit in list(self.pages):
            kept = {h: p for h, p in self.pages[unit].items() if now_ms - p.ts_ms <= self.window_ms}
            if kept:
                self.pages[unit] = kept
            else:
                del self.pages[unit]
        for unit in sorted(self.escalated):
            incident, kind, fired, channel = self.escalated[unit]
            if unit not in self.pages and now_ms - fired > self.window_ms:
                del self.escalated[unit]
                if unit in self._by_alert:
                    self._by_alert.discard(unit)
                    continue  # the cohort alert resolves on its own
                attr, value = split_key(unit)
                out.append(Alert(ts=ts_from_ms(now_ms), kind=kind, state="resolved", attribute=attr,  # type: ignore[arg-type]
                                 value=value, telemetry_kind=channel.split(":")[0] if channel else None,
                                 code=int(channel.split(":")[1]) if ":" in channel else None,
                                 score=0.0, severity=PAGE, incident=incident,
                                 escalation=f"{attr}={value}",
                                 summary=f"{attr}={value}: no host paged within "
                                         f"{self.window_ms // 60_000} min"))
        return out


__all__ = ["Escalation"]
