"""Host inventory in event time: who has which attribute value, when, and for how long.

Cohorts are built from host announcements. A host may be re-announced with
changed attributes (a BIOS upgrade, a driver roll-out); the announcement in
force at an event's time is the one that counts for that event, so each host
keeps a short, time-sorted history.

Every announced host is a peer and a denominator, whether it ever sends an
event or not: a fleet where only failing hosts report (most real ones) must
still compare a host with the thousands that stayed quiet. So the inventory
keeps *exposure*: decayed host-time per attribute value, per attribute and
for the fleet, at the engine's time scales (``detectors.decay``), integrated
exactly as hosts come, change and go into maintenance. A cohort's share of
the fleet over a week is then its share of the week's host-time, right
through a roll-out.

Hosts in maintenance (a non-empty ``maintenance`` attribute, issue 13) are
out of every group: no exposure, and the detectors do not count their
events.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping

from msgspec import Struct

from fleetepi.detectors.decay import DecayClock, scale_in_place
from fleetepi.detectors.windows import HOUR_MS

#: Attributes in force for a host no one announced.
EMPTY: dict[str, str] = {}
#: The attribute that puts a host in maintenance while it is non-empty.
MAINTENANCE = "maintenance"
#: Group key of the whole fleet in the exposure tables.
FLEET = ("", "")

Pair = tuple[str, str]


class _History(Struct):
    times: list[int]
    attrs: list[dict[str, str]]
    #: pair keys (``pair_key``) of each announcement, maintenance excluded: built once, used per event
    keys: list[tuple[str, ...] | None]


SEP = "\x1f"


def pair_key(attribute: str, value: str) -> str:
    """One string for ``attribute=value`` (state keys are strings, so snapshots are JSON)."""
    return attribute + SEP + value


def split_key(key: str) -> Pair:
    a, _, v = key.partition(SEP)
    return a, v


def _keys_of(attrs: dict[str, str]) -> tuple[str, ...] | None:
    if in_maintenance(attrs):
        return None
    return tuple(pair_key(a, v) for a, v in sorted(attrs.items()) if a != MAINTENANCE)


class _Exposure(Struct):
    """Host-time of one group: ``stored`` is inflated host-hours per scale, ``n`` hosts since ``t_ms``."""

    stored: list[float]
    n: int = 0
    t_ms: int = 0


def in_maintenance(attrs: dict[str, str]) -> bool:
    return bool(attrs.get(MAINTENANCE))


class Inventory:
    """Attribute history per host, live cohort sizes and decayed exposure per cohort.

    :param max_history: announcements kept per host (older ones fold into the oldest kept).
    :param clock: the engine's decay clock; without one, no exposure is kept.
    """

    def __init__(self, max_history: int = 8, clock: DecayClock | None = None) -> None:
        self.max_history = max_history
        self.clock = clock
        self._hosts: dict[str, _History] = {}
        #: (attribute, value) -> hosts whose latest announcement has it (maintenance excluded).
        self.cohort_sizes: Counter[Pair] = Counter()
        #: pair_key -> the same sizes, by string key (what the detectors' state uses).
        self.sizes: Counter[str] = Counter()
        #: attribute -> hosts that announce it at all (maintenance excluded).
        self.attribute_hosts: Counter[str] = Counter()
        #: hosts counted in the groups (announced, not in maintenance).
        self.active_hosts = 0
        #: Bumped whenever a latest announcement changes: caches of cohort membership key on it.
        self.version = 0
        #: Time of the earliest announcement: where the stream starts for every detector.
        self.first_ms: int | None = None
        #: First time each host was seen (announced or sending): its own exposure starts there.
        self.since: dict[str, int] = {}
        self._exposure: dict[Pair, _Exposure] = {}
        #: hosts that sent events but were never announced (their stand-in entry waits for one)
        self._unannounced: set[str] = set()
        #: (time, exposure per group, the clock's reference, factors per time of last change, exposure per
        #: pair key: ``exposure_of``)
        self._exp_cache: tuple[int, dict[Pair, list[float]], int, dict[int, tuple[float, ...]],
                               dict[str, list[float]]] = (-1, {}, 0, {}, {})
        self._by_pair: dict[Pair, set[str]] = {}
        self._by_attr: dict[str, set[str]] = {}
        self._nesting: tuple[int, int, dict[str, str]] = (-1, -1, {})
        #: group -> pair key -> how many of the group's hosts hold it (``overlaps``; kept once asked for)
        self._overlaps: dict[Pair, Counter[str]] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def __contains__(self, host: str) -> bool:
        return host in self._hosts

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    # ------------------------------------------------------------------ announcements
    def announce(self, host: str, ts_ms: int, attributes: dict[str, str]) -> bool:
        """Record an announcement; returns True if the host's latest attributes changed."""
        if self.first_ms is None or ts_ms < self.first_ms:
            self.first_ms = ts_ms
        if host not in self.since or ts_ms < self.since[host]:
            self.since[host] = ts_ms
        hist = self._hosts.get(host)
        if hist is not None and host in self._unannounced:
            # it sent events before its first announcement: the announcement replaces the stand-in,
            # and the host keeps its place in the fleet's groups
            self._unannounced.discard(host)
            hist.times, hist.attrs, hist.keys = [ts_ms], [dict(attributes)], [_keys_of(attributes)]
            self._regroup(host, {}, hist.attrs[-1], ts_ms)
            self.version += 1
            return True
        if hist is None:
            hist = self._hosts[host] = _History([], [], [])
        latest = hist.attrs[-1] if hist.attrs else None
        i = bisect_right(hist.times, ts_ms)
        if latest is not None and i == len(hist.times) and latest == attributes:
            return False
        hist.times.insert(i, ts_ms)
        hist.attrs.insert(i, dict(attributes))
        hist.keys.insert(i, _keys_of(attributes))
        if len(hist.times) > self.max_history:
            del hist.times[0], hist.attrs[0], hist.keys[0]
        new_latest = hist.attrs[-1]
        if new_latest is latest:
            return False
        self._regroup(host, latest, new_latest, ts_ms)
        self.version += 1
        return True

    def _regroup(self, host: str, old: dict[str, str] | None, new: dict[str, str], ts_ms: int) -> None:
        """Move one host from the groups of ``old`` to those of ``new`` (exposure integrated up to now)."""
        old_groups = self._groups(old) if old is not None and not in_maintenance(old) else ()
        new_groups = self._groups(new) if not in_maintenance(new) else ()
        if old_groups == new_groups:
            return
        if self._overlaps:
            for group, table in self._overlaps.items():
                if group in old_groups:
                    table.subtract(_keys_of(old) or ())  # type: ignore[arg-type]
                if group in new_groups:
                    table.update(_keys_of(new) or ())
        for g in old_groups:
            self._count(g, -1, ts_ms)
            self._member(g, host, False)
        for g in new_groups:
            self._count(g, +1, ts_ms)
            self._member(g, host, True)

    def _member(self, group: Pair, host: str, present: bool) -> None:
        """Keep the member sets of every value and attribute current (``members``)."""
        a, v = group
        if not a:
            return
        table: dict = self._by_attr if v == "" else self._by_pair
        key: object = a if v == "" else group
        hosts = table.get(key)
        if present:
            if hosts is None:
                hosts = table[key] = set()
            hosts.add(host)
        elif hosts is not None:
            hosts.discard(host)
            if not hosts:
                del table[key]

    @staticmethod
    def _groups(attrs: dict[str, str]) -> tuple[Pair, ...]:
        """Exposure groups of a host: the fleet, each attribute (as ``(a, "")``) and each value."""
        out: list[Pair] = [FLEET]
        for kv in attrs.items():
            if kv[0] == MAINTENANCE:
                continue
            out.append((kv[0], ""))
            out.append(kv)
        return tuple(out)

    def _count(self, group: Pair, delta: int, ts_ms: int) -> None:
        a, v = group
        if group == FLEET:
            self.active_hosts += delta
        elif v == "":
            self.attribute_hosts[a] += delta
            if not self.attribute_hosts[a]:
                del self.attribute_hosts[a]
        else:
            self.cohort_sizes[group] += delta
            self.sizes[pair_key(a, v)] += delta
            if not self.cohort_sizes[group]:
                del self.cohort_sizes[group]
                del self.sizes[pair_key(a, v)]
        clock = self.clock
        if clock is None:
            return
        ex = self._exposure.get(group)
        if ex is None:
            ex = self._exposure[group] = _Exposure([0.0] * len(clock.scales_s), 0, ts_ms)
        self._integrate(ex, ts_ms)
        ex.n += delta
        self._exp_cache[1].pop(group, None)
        self._exp_cache[4].clear()

    def _integrate(self, ex: _Exposure, ts_ms: int) -> None:
        """Add ``n`` hosts' host-time from ``ex.t_ms`` to ``ts_ms`` (inflated, hours)."""
        clock = self.clock
        if clock is None or ts_ms <= ex.t_ms:
            return
        if ex.n:
            g1, g0 = clock.g(ts_ms), clock.at(ex.t_ms)
            for i, tau_ms in enumerate(clock.taus_ms):
                ex.stored[i] += ex.n * tau_ms / HOUR_MS * (g1[i] - g0[i])
        ex.t_ms = ts_ms

    def exposure(self, group: Pair, ts_ms: int) -> list[float]:
        """Decayed host-hours of ``group`` at ``ts_ms``, per scale of the clock (zeros if unknown).

        Cached for one (time, inventory version): the detectors ask the same
        groups for many hosts and pairs at one step boundary.
        """
        clock = self.clock
        if clock is None:
            return []
        cache = self._exp_cache
        if cache[0] != ts_ms or cache[2] != clock.ref_ms:
            cache = self._exp_cache = (ts_ms, {}, clock.ref_ms, {}, {})
        hit = cache[1].get(group)
        if hit is not None:
            return hit
        ex = self._exposure.get(group)
        if ex is None:
            out = [0.0] * len(clock.scales_s)
        else:
            g1 = clock.g(ts_ms)
            g0 = None
            if ex.n and ts_ms > ex.t_ms:
                # groups last changed at the same time (a fleet announced at once) share their factors
                g0 = cache[3].get(ex.t_ms)
                if g0 is None:
                    g0 = cache[3][ex.t_ms] = clock.at(ex.t_ms)
            out = []
            for i, tau_ms in enumerate(clock.taus_ms):
                val = ex.stored[i]
                if g0 is not None:
                    val += ex.n * tau_ms / HOUR_MS * (g1[i] - g0[i])
                out.append(val / g1[i])
        cache[1][group] = out
        return out

    def exposure_of(self, key: str, ts_ms: int) -> list[float]:
        """``exposure`` of a pair key (``""``: the whole fleet), cached by the string itself.

        The host detectors ask for every group of every host they test, at
        every step: splitting and hashing the pair each time cost them more
        than the lookup.
        """
        cache = self._exp_cache
        clock = self.clock
        if cache[0] == ts_ms and clock is not None and cache[2] == clock.ref_ms:
            hit = cache[4].get(key)
            if hit is not None:
                return hit
        out = self.exposure(split_key(key), ts_ms)
        self._exp_cache[4][key] = out
        return out

    def rebase(self, factors: tuple[float, ...]) -> None:
        self._exp_cache = (-1, {}, 0, {}, {})
        for ex in self._exposure.values():
            scale_in_place(ex.stored, factors)

    def seen(self, host: str, ts_ms: int) -> bool:
        """A host sent an event: remember when it was first seen. False if it was never announced.

        A host that sends events without an announcement still counts in the
        fleet from then on (with no attributes), so that the denominators
        hold every host the detectors hear from.
        """
        if host in self._hosts:
            return True
        self._hosts[host] = _History([ts_ms], [{}], [()])
        self._unannounced.add(host)
        self.since[host] = ts_ms
        if self.first_ms is None:
            self.first_ms = ts_ms
        self._regroup(host, None, {}, ts_ms)
        self.version += 1
        return False

    # ------------------------------------------------------------------ queries
    def members(self) -> tuple[dict[Pair, set[str]], dict[str, set[str]]]:
        """Hosts per ``(attribute, value)`` and per attribute (latest announcements, maintenance excluded).

        Kept current as hosts come and change (a roll-out re-announces
        thousands of hosts: rebuilding per change would cost O(hosts) each).
        The sets are the inventory's own: read them, never change them.
        """
        return self._by_pair, self._by_attr

    def overlaps(self, group: Pair) -> Mapping[str, int]:
        """``pair_key`` -> how many hosts of ``group`` hold it now (latest announcements, maintenance excluded).

        What a static association's cohort shares with every other cohort
        (``cohorts.statics.inside_static``). Counted once when first
        asked for and kept current as hosts move, so that a roll-out does not
        cost a scan of the group's hosts per re-announced host.
        """
        table = self._overlaps.get(group)
        if table is None:
            table = self._overlaps[group] = Counter()
            for host in self._by_pair.get(group, ()):
                table.update(self.latest_keys(host))
        return table

    def attributes_at(self, host: str, ts_ms: int) -> dict[str, str]:
        """Attributes in force for ``host`` at ``ts_ms`` (the earliest known if none yet)."""
        hist = self._hosts.get(host)
        if hist is None:
            return EMPTY
        if ts_ms >= hist.times[-1]:
            return hist.attrs[-1]
        i = bisect_right(hist.times, ts_ms)
        return hist.attrs[max(i - 1, 0)]

    def keys_at(self, host: str, ts_ms: int) -> tuple[str, ...] | None:
        """``pair_key``s in force for ``host`` at ``ts_ms``: None in maintenance, empty if unknown."""
        hist = self._hosts.get(host)
        if hist is None:
            return ()
        if ts_ms >= hist.times[-1]:
            return hist.keys[-1]
        i = bisect_right(hist.times, ts_ms)
        return hist.keys[max(i - 1, 0)]

    def held_since(self, host: str, key: str) -> int | None:
        """Since when ``host`` has held ``key`` (a ``pair_key``) without a break, as far as its history goes.

        A roll-out's cohort grows for days: a host that took the new driver
        this morning has been at risk on it for hours, not for the month.
        """
        hist = self._hosts.get(host)
        if hist is None or key not in (hist.keys[-1] or ()):
            return None
        i = len(hist.keys) - 1
        while i > 0 and key in (hist.keys[i - 1] or ()):
            i -= 1
        return hist.times[i] if i > 0 else min(hist.times[0], self.since.get(host, hist.times[0]))

    def latest_keys(self, host: str) -> tuple[str, ...]:
        hist = self._hosts.get(host)
        return (hist.keys[-1] or ()) if hist is not None else ()

    def in_maintenance_at(self, host: str, ts_ms: int) -> bool:
        return in_maintenance(self.attributes_at(host, ts_ms))

    def latest(self, host: str) -> dict[str, str]:
        hist = self._hosts.get(host)
        return hist.attrs[-1] if hist is not None else EMPTY

    def nesting(self) -> dict[str, str]:
        """attribute -> the attribute that contains it (rack -> cluster -> datacenter), from the data.

        An attribute A is nested in B when every value of A determines one
        value of B and B has fewer values (B is the nearest container: of
        several, the one with the most values). Used to escalate and to explain
        cohorts; never hard-coded names. Recomputed only when the set of
        values or the fleet's size changed noticeably: roll-outs re-announce
        hosts all day without changing what nests in what.
        """
        shape = (len(self._by_pair), len(self._hosts) // 100)
        if self._nesting[:2] == shape:
            return self._nesting[2]
        values: dict[str, list[str]] = {}
        for a, v in self._by_pair:
            values.setdefault(a, []).append(v)
        out: dict[str, str] = {}
        for a, vals in values.items():
            best: tuple[int, str] | None = None
            for b, bvals in values.items():
                if b == a or len(bvals) >= len(vals) or len(bvals) < 2:
                    continue
                ok = True
                for v in vals:
                    seen: set[str | None] = set()
                    for h in self._by_pair[(a, v)]:
                        seen.add(self.latest(h).get(b))
                        if len(seen) > 1:
                            break
                    if len(seen) != 1 or None in seen:
                        ok = False
                        break
                if ok and (best is None or len(bvals) > best[0] or (len(bvals) == best[0] and b < best[1])):
                    best = (len(bvals), b)
            if best is not None:
                out[a] = best[1]
        self._nesting = (shape[0], shape[1], out)
        return out

    # ------------------------------------------------------------------ state
    def snapshot(self) -> dict:
        return {"hosts": {h: [list(zip(v.times, v.attrs))] for h, v in self._hosts.items()},
                "since": dict(self.since), "unannounced": sorted(self._unannounced),
                "exposure": {f"{a}\x1f{v}": [ex.stored, ex.n, ex.t_ms] for (a, v), ex in self._exposure.items()},
                "first_ms": self.first_ms}

    def restore(self, state: dict) -> None:
        clock = self.clock
        self.__init__(self.max_history, clock)  # type: ignore[misc]
        for host, (pairs,) in state["hosts"].items():
            hist = self._hosts[host] = _History([], [], [])
            for ts_ms, attrs in pairs:
                hist.times.append(int(ts_ms))
                hist.attrs.append(dict(attrs))
                hist.keys.append(_keys_of(hist.attrs[-1]))
            latest = hist.attrs[-1]
            if not in_maintenance(latest):
                for a, v in self._groups(latest):
                    self._member((a, v), host, True)
                    if (a, v) == FLEET:
                        self.active_hosts += 1
                    elif v == "":
                        self.attribute_hosts[a] += 1
                    else:
                        self.cohort_sizes[(a, v)] += 1
                        self.sizes[pair_key(a, v)] += 1
        self.since = {str(h): int(t) for h, t in state["since"].items()}
        self._unannounced = set(state.get("unannounced", ()))
        for key, (stored, n, t_ms) in state["exposure"].items():
            a, v = key.split("\x1f", 1)
            self._exposure[(a, v)] = _Exposure([float(x) for x in stored], int(n), int(t_ms))
        self.first_ms = state["first_ms"]
        self.version += 1


def stream_start(inventory: Inventory, ts_ms: int) -> int:
    """Start of the stream as every worker sees it: the first announcement, else this event."""
    first = inventory.first_ms
    return ts_ms if first is None or first > ts_ms else first


__all__ = ["EMPTY", "FLEET", "MAINTENANCE", "SEP", "Inventory", "Pair", "in_maintenance", "pair_key", "split_key",
           "stream_start"]
