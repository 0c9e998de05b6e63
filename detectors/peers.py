"""Host against peers: one host's windowed count compared with its peers' mean.

The engine of ``host_spike`` (channel ``crash``) and ``telemetry_host`` (one
channel per telemetry kind and code). Peers are every host this instance
sees, and, when a host crosses the fleet threshold, the hosts sharing each of
its attribute values (its rack, its BIOS, its GPU model): the host must stand
out against the *busiest* of these peer groups. A fleet-wide wave raises the
fleet mean, a rack-wide one raises the rack's mean, so neither pages per
host; one sick host does.

Fleet aggregates come from the events this instance sees: under the stream
workers, a partition of hundreds of hosts stands for the fleet (the one
place where a decision about a key uses other keys; see docs/detectors.md).

Hot path: two ring additions and one comparison with a per-channel threshold
computed once per bucket. The peer-group scan and scipy run only when a host
crosses that threshold, at most once per bucket per host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.lifecycle import Lifecycle
from fleetepi.detectors.stats import nb_sf, nb_threshold
from fleetepi.detectors.windows import HOUR_MS, Ring

#: (host, channel, state, ts_ms, p, observed, expected, notes, evidence) -> Alert
MakePeerAlert = Callable[[str, str, str, int, float | None, float, float, list[str], dict[str, Any]], Any]


class _HostKey:
    __slots__ = ("rings", "events", "odd", "labels", "firing", "fired_ms", "quiet_until_ms", "checked_b",
                 "last_ms", "total", "base")

    def __init__(self, sizes: tuple[int, ...]) -> None:
        #: one sliding window per configured width, shortest first
        self.rings = [Ring(n) for n in sizes]
        #: events (not units) and odd-shape units over the longest window
        self.events = Ring(sizes[-1])
        self.odd = Ring(sizes[-1])
        #: distinct labels (signatures) -> bucket last seen, within the longest window.
        self.labels: dict[str, int] = {}
        self.firing = False
        self.fired_ms = 0
        self.quiet_until_ms = 0
        self.checked_b = -1
        self.last_ms = 0
        self.total = 0.0
        #: units seen so far: the host's own long-run rate (an outbreak already paged
        #: once may raise it: that is how a chronic host stops paging)
        self.base = 0.0

    def dump(self) -> list[Any]:
        return [[r.dump() for r in self.rings], self.events.dump(), self.odd.dump(), dict(self.labels), self.firing,
                self.fired_ms, self.quiet_until_ms, self.checked_b, self.last_ms, self.total, self.base]

    @classmethod
    def load(cls, d: list[Any]) -> _HostKey:
        k = cls.__new__(cls)
        k.rings = [Ring.load(r) for r in d[0]]
        k.events, k.odd = Ring.load(d[1]), Ring.load(d[2])
        k.labels = {str(s): int(v) for s, v in d[3].items()}
        k.firing, k.fired_ms, k.quiet_until_ms = bool(d[4]), int(d[5]), int(d[6])
        k.checked_b, k.last_ms, k.total, k.base = int(d[7]), int(d[8]), float(d[9]), float(d[10])
        return k


class _Channel:
    __slots__ = ("rings", "hosts", "firing", "b", "mu", "k_fire", "k_res")

    def __init__(self, sizes: tuple[int, ...]) -> None:
        self.rings = [Ring(n) for n in sizes]
        self.hosts: dict[str, _HostKey] = {}
        #: hosts of this channel now firing (advance visits only these).
        self.firing: set[str] = set()
        self.b = -1
        self.mu = [0.0] * len(sizes)
        self.k_fire = [1 << 30] * len(sizes)
        self.k_res = [0] * len(sizes)

    def dump(self) -> list[Any]:
        return [[r.dump() for r in self.rings], {h: k.dump() for h, k in self.hosts.items()}, self.b, list(self.mu),
                list(self.k_fire), list(self.k_res)]

    @classmethod
    def load(cls, d: list[Any]) -> _Channel:
        c = cls.__new__(cls)
        c.rings = [Ring.load(r) for r in d[0]]
        c.hosts = {str(h): _HostKey.load(v) for h, v in d[1].items()}
        c.firing = {h for h, k in c.hosts.items() if k.firing}
        c.b, c.mu = int(d[2]), [float(x) for x in d[3]]
        c.k_fire, c.k_res = [int(x) for x in d[4]], [int(x) for x in d[5]]
        return c


class PeerSpike(Lifecycle):
    """Per (host, channel) windowed counts against the peers' mean and the host's own past.

    The expected count of a host is the largest of: the fleet's mean per
    host, the mean of each attribute peer group it belongs to, and its own
    long-run rate (shrunk toward the fleet's), so a host that always runs
    crashier jobs is not a new finding every day.

    :param windows_s: sliding windows side by side (fire on any, resolve on all).
    :param floor_per_h: the expected rate never drops below this (units per
        host per hour), so a quiet fleet does not page on 3 crashes.
    :param min_events: events (not units) the host needs in the longest window.
    :param own_prior_h: hours of the fleet's rate mixed into the host's own rate.
    """

    def __init__(self, *, bucket_s: float, windows_s: tuple[float, ...], alpha: float, resolve_alpha: float,
                 min_count: float, min_ratio: float, floor_per_h: float, min_peers: int, min_events: int,
                 own_prior_h: float, nb_size: float, warmup_s: float, cooldown_s: float, key_ttl_s: float,
                 max_keys: int, make_alert: MakePeerAlert) -> None:
        super().__init__(warmup_s=warmup_s, cooldown_s=cooldown_s, key_ttl_s=key_ttl_s, max_keys=max_keys)
        self.set_windows(bucket_s, windows_s)
        self.alpha, self.resolve_alpha = alpha, resolve_alpha
        self.min_count, self.min_ratio = min_count, min_ratio
        self.floors = tuple(floor_per_h * w / 3600.0 for w in self.windows_s)
        self.min_peers, self.min_events, self.own_prior_h = min_peers, min_events, own_prior_h
        self.nb_size = nb_size
        self.make_alert = make_alert
        self.channels: dict[str, _Channel] = {}
        #: host -> last event time (any channel): the peers' denominator.
        self.active: dict[str, int] = {}
        self.late = 0

    # ------------------------------------------------------------------ hot path
    def observe(self, host: str, channel: str, w: float, ts_ms: int, inventory: Inventory,
                label: str | None = None, odd: float = 0.0) -> list[Any]:
        if self.start_ms is None:
            self.start(ts_ms)
        b = ts_ms // self.bucket_ms
        ch = self.channels.get(channel)
        if ch is None:
            ch = self.channels[channel] = _Channel(self.sizes)
        if b > ch.b:
            self._channel_roll(ch, b)
        st = ch.hosts.get(host)
        if st is None:
            if len(self.active) >= self.max_keys and host not in self.active:
                self._evict()
            st = ch.hosts[host] = _HostKey(self.sizes)
        out: list[Any] = []
        if b > st.rings[0].head:
            self._host_roll(host, channel, ch, st, b, out)
        crossed = -1
        counted = False
        for i, ring in enumerate(st.rings):
            if ring.add(b, w):
                counted = True
                ch.rings[i].add(b, w)
                if crossed < 0 and ring.total >= ch.k_fire[i]:
                    crossed = i
        if not counted:
            self.late += 1
            return out
        st.events.add(b, 1.0)
        if odd:
            st.odd.add(b, odd)
        if label is not None:
            st.labels[label] = b
        st.total += w
        st.base += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        if ts_ms > self.active.get(host, -1):
            self.active[host] = ts_ms
        if crossed >= 0 and not st.firing and st.checked_b != b:
            self._maybe_fire(host, channel, ch, st, b, ts_ms, inventory, out)
        return out

    # ------------------------------------------------------------------ decisions
    def _peer_groups(self, host: str, ch: _Channel, b: int, inventory: Inventory) -> list[tuple[list[float], str, int]]:
        """Per-window mean counts of the hosts sharing each attribute value of ``host``."""
        mine = inventory.latest(host)
        if not mine:
            return []
        k = len(self.sizes)
        sums: dict[tuple[str, str], list[float]] = {}
        sizes: dict[tuple[str, str], int] = {}
        for other in self.active:
            if other == host:
                continue
            attrs = inventory.latest(other)
            ost = ch.hosts.get(other)
            vals = [r.total_at(b) for r in ost.rings] if ost is not None else None
            for kv in mine.items():
                if attrs.get(kv[0]) == kv[1]:
                    sizes[kv] = sizes.get(kv, 0) + 1
                    if vals is not None:
                        acc = sums.setdefault(kv, [0.0] * k)
                        for i in range(k):
                            acc[i] += vals[i]
        return [([x / sizes[kv] for x in sums.get(kv, [0.0] * k)], f"{kv[0]}={kv[1]}", sizes[kv])
                for kv in sorted(sizes) if sizes[kv] >= self.min_peers]

    def _maybe_fire(self, host: str, channel: str, ch: _Channel, st: _HostKey, b: int, ts_ms: int,
                    inventory: Inventory, out: list[Any]) -> None:
        st.checked_b = b
        if not self.warm(ts_ms) or ts_ms < st.quiet_until_ms:
            return
        if st.events.total < self.min_events:
            return
        n_peers = max(len(self.active) - 1, 1)
        age_h = max((ts_ms - self.start_ms) / HOUR_MS, 0.0)  # type: ignore[operator]  # warm() held: start_ms is set
        # Cheap expectations first (fleet mean, the host's own past); the peer-group
        # scan is O(hosts) and only runs for a host that already stands out.
        base: list[tuple[float, str]] = []
        for i, ring in enumerate(st.rings):
            obs = ring.total
            fleet = max((ch.rings[i].total_at(b) - obs) / n_peers, self.floors[i])
            exp, basis = fleet, f"fleet mean ({n_peers} peer hosts)"
            wh = self.windows_s[i] / 3600.0
            own = (st.base - obs + self.own_prior_h * fleet / wh) / (age_h + self.own_prior_h) * wh
            if own > exp:
                exp, basis = own, f"the host's own past rate ({age_h:.0f} h)"
            base.append((exp, basis))
        if not any(self._passes(ring.total, base[i][0]) for i, ring in enumerate(st.rings)):
            return
        groups = self._peer_groups(host, ch, b, inventory)
        best: tuple[float, int, float, float, str] | None = None
        for i, ring in enumerate(st.rings):
            obs = ring.total
            exp, basis = base[i]
            for means, name, size in groups:
                if means[i] > exp:
                    exp, basis = means[i], f"peers with {name} ({size} hosts)"
            if not self._passes(obs, exp):
                continue
            p = nb_sf(obs, exp, self.nb_size)
            if p < self.alpha and (best is None or p < best[0]):
                best = (p, i, obs, exp, basis)
        if best is None:
            return
        p, i, obs, exp, basis = best
        st.firing, st.fired_ms = True, ts_ms
        ch.firing.add(host)
        w = self.windows_s[i]
        notes = [f"peer test: {obs:g} units in {w:g} s vs {exp:.3g} expected from {basis}, "
                 f"negative binomial size {self.nb_size:g}, p={p:.3g} < alpha={self.alpha:g}"]
        evidence = {"labels": sum(1 for v in st.labels.values() if v > b - self.n), "odd": st.odd.total_at(b),
                    "window_s": w, "events": st.events.total}
        out.append(self.make_alert(host, channel, "firing", ts_ms, p, obs, exp, notes, evidence))

    def _passes(self, obs: float, exp: float) -> bool:
        """Support, effect size and the count test (via the memoized threshold)."""
        return (obs >= self.min_count and obs >= self.min_ratio * exp
                and obs >= nb_threshold(exp, self.nb_size, self.alpha))

    def _channel_roll(self, ch: _Channel, b: int) -> None:
        n_hosts = max(len(self.active), 1)
        for i, ring in enumerate(ch.rings):
            ring.roll(b)
            mu = max(ring.total / n_hosts, self.floors[i])
            ch.mu[i] = mu
            ch.k_fire[i] = max(math.ceil(self.min_count), math.ceil(self.min_ratio * mu),
                               nb_threshold(mu, self.nb_size, self.alpha))
            ch.k_res[i] = nb_threshold(mu, self.nb_size, self.resolve_alpha)
        ch.b = b

    def _quiet_at(self, ch: _Channel, st: _HostKey, j: int) -> bool:
        return all(r.total_at(j) < k for r, k in zip(st.rings, ch.k_res))

    def _host_roll(self, host: str, channel: str, ch: _Channel, st: _HostKey, b: int, out: list[Any]) -> None:
        head = st.rings[0].head
        if st.firing and head >= 0:
            hold_ms = self.windows_s[0] * 1000
            j, stop = head + 1, min(b, head + self.n)
            t_res = None
            while j <= stop:
                if j * self.bucket_ms - st.fired_ms >= hold_ms and self._quiet_at(ch, st, j):
                    t_res = j * self.bucket_ms
                    break
                j += 1
            if t_res is None and b > head + self.n:
                t_res = max((head + self.n) * self.bucket_ms, st.fired_ms + int(hold_ms))
            if t_res is not None:
                obs = st.rings[0].total_at(t_res // self.bucket_ms)
                st.firing = False
                ch.firing.discard(host)
                st.quiet_until_ms = t_res + self.cooldown_ms
                notes = [f"resolved: every window below its resolve threshold against peers "
                         f"({', '.join(map(str, ch.k_res))}; p >= {self.resolve_alpha:g})"]
                out.append(self.make_alert(host, channel, "resolved", t_res, None, obs, ch.mu[0], notes, {}))
        for ring in st.rings:
            ring.roll(b)
        st.events.roll(b)
        st.odd.roll(b)
        if len(st.labels) > 16:
            old = b - self.n
            st.labels = {s: v for s, v in st.labels.items() if v > old}

    # ------------------------------------------------------------------ time and memory
    def advance(self, watermark_ms: int, inventory: object = None) -> list[Any]:
        out: list[Any] = []
        b = watermark_ms // self.bucket_ms
        for channel in sorted(self.channels):
            ch = self.channels[channel]
            if b > ch.b:
                self._channel_roll(ch, b)
            for host in sorted(ch.firing):
                st = ch.hosts[host]
                if b > st.rings[0].head:
                    self._host_roll(host, channel, ch, st, b, out)
        if self.sweep_due(watermark_ms):
            cutoff = watermark_ms - self.ttl_ms
            for ch in self.channels.values():
                for h in [h for h, s in ch.hosts.items() if not s.firing and s.last_ms < cutoff]:
                    del ch.hosts[h]
            for h in [h for h, t in self.active.items() if t < cutoff]:
                del self.active[h]
            for name in [c for c, ch in self.channels.items() if not ch.hosts]:
                del self.channels[name]
        return out

    def _evict(self) -> None:
        """Forget the least recently active tenth of the hosts (never a firing one)."""
        firing = {h for ch in self.channels.values() for h in ch.firing}
        victims = sorted((h for h in self.active if h not in firing), key=lambda h: (self.active[h], h))
        for h in victims[: max(1, len(self.active) // 10)]:
            del self.active[h]
            for ch in self.channels.values():
                ch.hosts.pop(h, None)

    # ------------------------------------------------------------------ state
    def dump(self) -> dict[str, Any]:
        return {**self.dump_lifecycle(), "late": self.late,
                "active": dict(self.active), "channels": {c: ch.dump() for c, ch in self.channels.items()}}

    def load(self, d: dict[str, Any]) -> None:
        self.load_lifecycle(d)
        self.late = int(d["late"])
        self.active = {str(h): int(t) for h, t in d["active"].items()}
        self.channels = {str(c): _Channel.load(v) for c, v in d["channels"].items()}

    def counts(self) -> dict[str, float]:
        return {f"{h}|{c}": s.total for c, ch in self.channels.items() for h, s in ch.hosts.items()}


def peer_spike_from_config(cfg: Any, *, windows_s: tuple[float, ...], alpha: float, resolve_alpha: float,
                           min_count: float, min_ratio: float, floor_per_h: float, min_events: int,
                           make_alert: MakePeerAlert) -> PeerSpike:
    return PeerSpike(bucket_s=cfg.bucket_s, windows_s=windows_s, alpha=alpha, resolve_alpha=resolve_alpha,
                     min_count=min_count, min_ratio=min_ratio, floor_per_h=floor_per_h,
                     min_peers=cfg.host_min_peers, min_events=min_events, own_prior_h=cfg.host_own_prior_h,
                     nb_size=cfg.nb_size, warmup_s=cfg.warmup_s, cooldown_s=cfg.cooldown_s,
                     key_ttl_s=cfg.key_ttl_s, max_keys=cfg.max_keys, make_alert=make_alert)


__all__ = ["MakePeerAlert", "PeerSpike", "peer_spike_from_config"]
