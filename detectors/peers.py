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

from detectors.inventory import Inventory
from detectors.stats import nb_sf, nb_threshold
from detectors.windows import HOUR_MS, Ring

#: (host, channel, state, ts_ms, p, observed, expected, notes, evidence) -> Alert
MakePeerAlert = Callable[[str, str, str, int, float | None, float, float, list[str], dict[str, Any]], Any]


class _HostKey:
    __slots__ = ("ring", "odd", "labels", "firing", "fired_ms", "quiet_until_ms", "checked_b", "last_ms", "total")

    def __init__(self, n: int) -> None:
        self.ring = Ring(n)
        self.odd = Ring(n)
        #: distinct labels (signatures) -> bucket last seen, within the window.
        self.labels: dict[str, int] = {}
        self.firing = False
        self.fired_ms = 0
        self.quiet_until_ms = 0
        self.checked_b = -1
        self.last_ms = 0
        self.total = 0.0

    def dump(self) -> list[Any]:
        return [self.ring.dump(), self.odd.dump(), dict(self.labels), self.firing, self.fired_ms,
                self.quiet_until_ms, self.checked_b, self.last_ms, self.total]

    @classmethod
    def load(cls, d: list[Any]) -> "_HostKey":
        k = cls.__new__(cls)
        k.ring, k.odd = Ring.load(d[0]), Ring.load(d[1])
        k.labels = {str(s): int(v) for s, v in d[2].items()}
        k.firing, k.fired_ms, k.quiet_until_ms = bool(d[3]), int(d[4]), int(d[5])
        k.checked_b, k.last_ms, k.total = int(d[6]), int(d[7]), float(d[8])
        return k


class _Channel:
    __slots__ = ("ring", "hosts", "firing", "b", "mu", "k_fire", "k_res")

    def __init__(self, n: int) -> None:
        self.ring = Ring(n)
        self.hosts: dict[str, _HostKey] = {}
        #: hosts of this channel now firing (advance visits only these).
        self.firing: set[str] = set()
        self.b = -1
        self.mu = 0.0
        self.k_fire = 1 << 30
        self.k_res = 0

    def dump(self) -> list[Any]:
        return [self.ring.dump(), {h: k.dump() for h, k in self.hosts.items()}, self.b, self.mu, self.k_fire,
                self.k_res]

    @classmethod
    def load(cls, d: list[Any]) -> "_Channel":
        c = cls.__new__(cls)
        c.ring = Ring.load(d[0])
        c.hosts = {str(h): _HostKey.load(v) for h, v in d[1].items()}
        c.firing = {h for h, k in c.hosts.items() if k.firing}
        c.b, c.mu, c.k_fire, c.k_res = int(d[2]), float(d[3]), int(d[4]), int(d[5])
        return c


class PeerSpike:
    """Per (host, channel) windowed count against the peers' mean.

    :param floor_per_h: the peers' expected rate never drops below this
        (units per host per hour), so a quiet fleet does not page on 3 crashes.
    """

    def __init__(self, *, bucket_s: float, window_s: float, alpha: float, resolve_alpha: float, min_count: float,
                 min_ratio: float, floor_per_h: float, min_peers: int, nb_size: float, warmup_s: float,
                 cooldown_s: float, key_ttl_s: float, max_keys: int, make_alert: MakePeerAlert) -> None:
        self.bucket_ms = int(bucket_s * 1000)
        self.n = max(1, round(window_s / bucket_s))
        self.window_s = self.n * self.bucket_ms / 1000.0
        self.alpha, self.resolve_alpha = alpha, resolve_alpha
        self.min_count, self.min_ratio = min_count, min_ratio
        self.floor = floor_per_h * self.window_s / 3600.0
        self.min_peers, self.nb_size = min_peers, nb_size
        self.warmup_ms, self.cooldown_ms = int(warmup_s * 1000), int(cooldown_s * 1000)
        self.ttl_ms, self.max_keys = int(key_ttl_s * 1000), max_keys
        #: Forgetting idle hosts scans them all: do it a few times per TTL only.
        self.sweep_ms = max(HOUR_MS, self.ttl_ms // 8)
        self.make_alert = make_alert
        self.channels: dict[str, _Channel] = {}
        #: host -> last event time (any channel): the peers' denominator.
        self.active: dict[str, int] = {}
        self.start_ms: int | None = None
        self.next_sweep_ms = 0
        self.late = 0

    # ------------------------------------------------------------------ hot path
    def observe(self, host: str, channel: str, w: float, ts_ms: int, inventory: Inventory,
                label: str | None = None, odd: float = 0.0) -> list[Any]:
        if self.start_ms is None:
            self.start_ms = ts_ms
            self.next_sweep_ms = ts_ms + HOUR_MS
        b = ts_ms // self.bucket_ms
        ch = self.channels.get(channel)
        if ch is None:
            ch = self.channels[channel] = _Channel(self.n)
        if b > ch.b:
            self._channel_roll(ch, b)
        st = ch.hosts.get(host)
        if st is None:
            if len(self.active) >= self.max_keys and host not in self.active:
                self._evict()
            st = ch.hosts[host] = _HostKey(self.n)
        out: list[Any] = []
        if b > st.ring.head:
            self._host_roll(host, channel, ch, st, b, out)
        if not st.ring.add(b, w):
            self.late += 1
            return out
        ch.ring.add(b, w)
        if odd:
            st.odd.add(b, odd)
        if label is not None:
            st.labels[label] = b
        st.total += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        if ts_ms > self.active.get(host, -1):
            self.active[host] = ts_ms
        if not st.firing and st.ring.total >= ch.k_fire and st.checked_b != b:
            self._maybe_fire(host, channel, ch, st, b, ts_ms, inventory, out)
        return out

    # ------------------------------------------------------------------ decisions
    def _fleet_mean(self, ch: _Channel, st: _HostKey, b: int) -> float:
        n_peers = max(len(self.active) - 1, 1)
        return max((ch.ring.total_at(b) - st.ring.total) / n_peers, self.floor)

    def _peer_groups(self, host: str, ch: _Channel, b: int, inventory: Inventory) -> list[tuple[float, str, int]]:
        """Mean count of the hosts sharing each attribute value of ``host`` (groups with enough hosts)."""
        mine = inventory.latest(host)
        if not mine:
            return []
        sums: dict[tuple[str, str], float] = {}
        sizes: dict[tuple[str, str], int] = {}
        for other in self.active:
            if other == host:
                continue
            attrs = inventory.latest(other)
            ost = ch.hosts.get(other)
            v = ost.ring.total_at(b) if ost is not None else 0.0
            for a, val in mine.items():
                if attrs.get(a) == val:
                    sizes[(a, val)] = sizes.get((a, val), 0) + 1
                    sums[(a, val)] = sums.get((a, val), 0.0) + v
        return sorted(((sums[k] / sizes[k], f"{k[0]}={k[1]}", sizes[k]) for k in sizes if sizes[k] >= self.min_peers),
                      reverse=True)

    def _maybe_fire(self, host: str, channel: str, ch: _Channel, st: _HostKey, b: int, ts_ms: int,
                    inventory: Inventory, out: list[Any]) -> None:
        st.checked_b = b
        if self.start_ms is None or ts_ms < self.start_ms + self.warmup_ms or ts_ms < st.quiet_until_ms:
            return
        obs = st.ring.total
        fleet = self._fleet_mean(ch, st, b)
        groups = self._peer_groups(host, ch, b, inventory)
        exp, basis = fleet, f"fleet ({max(len(self.active) - 1, 1)} peer hosts)"
        if groups and groups[0][0] > exp:
            exp, basis = groups[0][0], f"peers with {groups[0][1]} ({groups[0][2]} hosts)"
        if obs < self.min_count or obs < self.min_ratio * exp:
            return
        p = nb_sf(obs, exp, self.nb_size)
        if p >= self.alpha:
            return
        st.firing, st.fired_ms = True, ts_ms
        ch.firing.add(host)
        notes = [f"peer test: {obs:g} units in {self.window_s:g} s vs {exp:.3g} per host among {basis}, "
                 f"negative binomial size {self.nb_size:g}, p={p:.3g} < alpha={self.alpha:g}",
                 f"fleet mean {fleet:.3g}" + (f"; busiest peer group {groups[0][1]} mean {groups[0][0]:.3g}"
                                              if groups else "; no attribute peer group")]
        evidence = {"labels": sum(1 for v in st.labels.values() if v > b - self.n), "odd": st.odd.total_at(b)}
        out.append(self.make_alert(host, channel, "firing", ts_ms, p, obs, exp, notes, evidence))

    def _channel_roll(self, ch: _Channel, b: int) -> None:
        ch.ring.roll(b)
        ch.b = b
        mu = max(ch.ring.total / max(len(self.active), 1), self.floor)
        ch.mu = mu
        ch.k_fire = max(math.ceil(self.min_count), math.ceil(self.min_ratio * mu), nb_threshold(mu, self.nb_size, self.alpha))
        ch.k_res = nb_threshold(mu, self.nb_size, self.resolve_alpha)

    def _host_roll(self, host: str, channel: str, ch: _Channel, st: _HostKey, b: int, out: list[Any]) -> None:
        ring = st.ring
        if st.firing and ring.head >= 0:
            j, stop = ring.head + 1, min(b, ring.head + self.n)
            resolved_at = None
            while j <= stop:
                if ring.total_at(j) < ch.k_res and j * self.bucket_ms - st.fired_ms >= self.window_s * 1000:
                    resolved_at = j
                    break
                j += 1
            if resolved_at is None and b > ring.head + self.n:
                resolved_at = max(ring.head + self.n, -(-(st.fired_ms + int(self.window_s * 1000)) // self.bucket_ms))
                resolved_at = resolved_at if resolved_at <= b else None
            if resolved_at is not None:
                t_ms = resolved_at * self.bucket_ms
                obs = ring.total_at(resolved_at)
                st.firing = False
                ch.firing.discard(host)
                st.quiet_until_ms = t_ms + self.cooldown_ms
                notes = [f"resolved: {obs:g} units in the window, below the resolve threshold {ch.k_res} "
                         f"(p >= {self.resolve_alpha:g} against peers)"]
                out.append(self.make_alert(host, channel, "resolved", t_ms, None, obs, ch.mu, notes, {}))
        ring.roll(b)
        st.odd.roll(b)
        if len(st.labels) > 16:
            old = b - self.n
            st.labels = {s: v for s, v in st.labels.items() if v > old}

    # ------------------------------------------------------------------ time and memory
    def advance(self, watermark_ms: int) -> list[Any]:
        out: list[Any] = []
        b = watermark_ms // self.bucket_ms
        for channel in sorted(self.channels):
            ch = self.channels[channel]
            if b > ch.b:
                self._channel_roll(ch, b)
            for host in sorted(ch.firing):
                st = ch.hosts[host]
                if b > st.ring.head:
                    self._host_roll(host, channel, ch, st, b, out)
        if watermark_ms >= self.next_sweep_ms:
            self.next_sweep_ms = watermark_ms + self.sweep_ms
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
        firing = {h for ch in self.channels.values() for h, s in ch.hosts.items() if s.firing}
        victims = sorted((h for h in self.active if h not in firing), key=lambda h: (self.active[h], h))
        for h in victims[: max(1, len(self.active) // 10)]:
            del self.active[h]
            for ch in self.channels.values():
                ch.hosts.pop(h, None)

    # ------------------------------------------------------------------ state
    def dump(self) -> dict[str, Any]:
        return {"start_ms": self.start_ms, "next_sweep_ms": self.next_sweep_ms, "late": self.late,
                "active": dict(self.active), "channels": {c: ch.dump() for c, ch in self.channels.items()}}

    def load(self, d: dict[str, Any]) -> None:
        self.start_ms = None if d["start_ms"] is None else int(d["start_ms"])
        self.next_sweep_ms, self.late = int(d["next_sweep_ms"]), int(d["late"])
        self.active = {str(h): int(t) for h, t in d["active"].items()}
        self.channels = {str(c): _Channel.load(v) for c, v in d["channels"].items()}

    def counts(self) -> dict[str, float]:
        return {f"{h}|{c}": s.total for c, ch in self.channels.items() for h, s in ch.hosts.items()}


def peer_spike_from_config(cfg: Any, *, window_s: float, alpha: float, resolve_alpha: float, min_count: float,
                           min_ratio: float, floor_per_h: float, make_alert: MakePeerAlert) -> PeerSpike:
    return PeerSpike(bucket_s=cfg.bucket_s, window_s=window_s, alpha=alpha, resolve_alpha=resolve_alpha,
                     min_count=min_count, min_ratio=min_ratio, floor_per_h=floor_per_h,
                     min_peers=cfg.host_min_peers, nb_size=cfg.nb_size, warmup_s=cfg.warmup_s,
                     cooldown_s=cfg.cooldown_s, key_ttl_s=cfg.key_ttl_s, max_keys=cfg.max_keys,
                     make_alert=make_alert)


__all__ = ["MakePeerAlert", "PeerSpike", "peer_spike_from_config"]
