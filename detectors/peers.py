"""A host against its peers and its own past: the engine of host_spike and telemetry_host.

Per channel (``crash`` for host_spike; ``kind:code`` for telemetry_host) and
host, decayed counts at the engine's scales (``detectors.decay``): an hour,
six hours and a day for the acute test, a month for the host's own long-run
rate and the chronic test. Per channel and attribute value (and for the
fleet), the same counts summed over the hosts that had the value at the
case's time, kept incrementally, and host-time from the inventory: a peer
group's rate is a division, never a scan over hosts, so the cost of an
event does not grow with the fleet. Every announced host is a peer, whether
it sent anything or not.

Acute (a page): the host's count at some scale against the largest of the
fleet's rate, each of its peer groups' rates (rack, GPU model, BIOS, ... with
at least ``min_peers`` hosts; the host itself left out) and its own rate over
the history before that scale. A fleet-wide wave raises the first, a
rack-wide one the second, a host that always runs crashier jobs the third:
none pages per host; one host that changed does.

Chronic (a ticket): once a day, a host whose own long-run rate stands far
above its peers' over days is reported once (a steady corrected-ECC rate, a
GPU that keeps re-reporting one Xid), and leaves the peer sums so that it
does not hide its neighbours. Its own rate is then its baseline: it pages
only if it gets worse.

Counts are weighed honestly: one report of 500 ECC errors is one report
(``kish_n``: the effective number of independent reports is
``(sum w)^2 / sum w^2``), and a crash with an odd shape weighs more than a
plain one (``host_spike`` sets the weights).
"""

from __future__ import annotations

from operator import add
from typing import Literal

from msgspec import Struct, field

from fleetepi.detectors.decay import DecayClock, exposure_hours, kish_n, scale_in_place
from fleetepi.detectors.inventory import Inventory, split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import nb_sf_real, poisson_sf_real

DAY_MS = 86_400_000


class HostCounts(Struct):
    #: inflated decayed units and squared units per clock scale
    c: list[float]
    d: list[float]
    #: the counts already reported (at the last resolution): news is what came after
    reported: list[float] = field(default_factory=list)
    reported_d: list[float] = field(default_factory=list)
    last_ms: int = 0
    firing: bool = False
    fired_ms: int = 0
    fired_scale: int = 0
    quiet_until_ms: int = 0
    #: chronic: reported as a ticket, out of the peer sums, its own rate is its baseline
    chronic: bool = False
    ticket_until_ms: int = 0
    total: float = 0.0
    #: the last day's units, (ms, inflated long-run weight), not yet in ``old``
    young: list[tuple[int, float]] = field(default_factory=list)
    #: inflated long-run units older than a day: the host's own earlier rate (``HostPeers._older``)
    old: float = 0.0


class Channel(Struct):
    hosts: dict[str, HostCounts] = field(default_factory=dict)
    firing: set[str] = field(default_factory=set)
    #: pair_key (or "" for the fleet) -> inflated decayed units of the hosts in it, per scale
    groups: dict[str, list[float]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)


class PeerVerdict(Struct, frozen=True):
    """A decision about one host on one channel, for the owning detector to word."""

    host: str
    channel: str
    state: Literal["firing", "resolved", "chronic"]
    ts_ms: int
    observed: float
    expected: float
    window_s: float
    basis: str
    p_value: float | None = None
    notes: tuple[str, ...] = ()


class HostPeers(Struct):
    """Per (channel, host) decayed counts against peer groups, the fleet and the host's own past.

    :param acute: indices of the clock's scales used by the acute test (shortest first).
    :param longrun: index of the scale of the host's own long-run rate.
    :param chronic: index of the scale of the chronic test.
    """

    acute: list[int]
    longrun: int
    chronic: int
    alpha: float
    resolve_alpha: float
    min_units: float
    min_ratio: float
    nb_size: float
    #: the most a host's past may sharpen its test (its propensity drifts as its jobs change)
    nb_max_size: float
    min_peers: int
    chronic_alpha: float
    chronic_min_ratio: float
    chronic_min_units: float
    chronic_min_ms: int
    warmup_ms: int
    cooldown_ms: int
    ticket_cooldown_ms: int
    ttl_ms: int
    channels: dict[str, Channel] = field(default_factory=dict)
    start_ms: int | None = None
    next_chronic_ms: int = 0
    #: channels tested against peers and the fleet only, not the host's own earlier rate: a count that
    #: has no healthy level of its own (odd-shaped crashes), where the host's past holds only an earlier
    #: episode's units
    peers_only: tuple[str, ...] = ()
    #: channels with a support of their own (0 or absent: ``min_units``): a rare count (odd-shaped crashes,
    #: a host's hardware errors), where three independent reports in hours are already news and the shared
    #: support of four waited hours more for a failing host's fourth
    channel_min_units: dict[str, float] = field(default_factory=dict)
    #: channels with an alpha of their own (absent: ``alpha``): a rare count is tested far less often
    channel_alpha: dict[str, float] = field(default_factory=dict)
    #: a unit is part of its host's own earlier rate once it is this old (the longest acute scale)
    own_gap_ms: int = DAY_MS

    def is_chronic_host(self, host: str) -> bool:
        """Is the host chronic on any channel?"""
        for ch in self.channels.values():
            st = ch.hosts.get(host)
            if st is not None and st.chronic:
                return True
        return False

    def is_chronic(self, channel: str, host: str) -> bool:
        ch = self.channels.get(channel)
        st = ch.hosts.get(host) if ch is not None else None
        return st is not None and st.chronic

    # ------------------------------------------------------------------ folding
    def observe(self, host: str, channel: str, w: float, ts_ms: int, keys: tuple[str, ...],
                clock: DecayClock) -> None:
        """Count ``w`` units of ``host`` on ``channel`` at ``ts_ms``; ``keys`` are its pair keys then."""
        if self.start_ms is None:
            self.start_ms = ts_ms
        ch = self.channels.get(channel)
        if ch is None:
            ch = self.channels[channel] = Channel()
        n = len(clock.scales_s)
        st = ch.hosts.get(host)
        if st is None:
            st = ch.hosts[host] = HostCounts([0.0] * n, [0.0] * n)
        g = clock.g(ts_ms)
        wg = [w * gi for gi in g]
        st.c[:] = map(add, st.c, wg)  # the hot path: map(add) is a third cheaper than a comprehension
        st.d[:] = [a + x * x for a, x in zip(st.d, wg)]
        if not st.chronic:
            groups = ch.groups
            for k in ("", *keys):
                acc = groups.get(k)
                if acc is None:
                    groups[k] = list(wg)
                else:
                    acc[:] = map(add, acc, wg)
        st.young.append((ts_ms, wg[self.longrun]))
        if st.young[0][0] <= ts_ms - self.own_gap_ms:
            _age(st, ts_ms - self.own_gap_ms)
        st.total += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        ch.touched.add(host)

    # ------------------------------------------------------------------ decisions
    def decide(self, now_ms: int, inventory: Inventory, clock: DecayClock) -> list[PeerVerdict]:
        """Acute decisions for hosts touched or firing; chronic ones once a day."""
        out: list[PeerVerdict] = []
        g = clock.g(now_ms)
        look = Look(now_ms, g, inventory, clock)
        for name in sorted(self.channels):
            ch = self.channels[name]
            hosts = ch.touched | ch.firing if ch.firing else ch.touched
            ch.touched = set()
            if not hosts:
                continue
            fleet = self._fleet_rates(ch, now_ms, g, inventory)
            for host in sorted(hosts):
                st = ch.hosts.get(host)
                if st is not None:
                    v = self._acute(name, ch, host, st, look, fleet)
                    if v is not None:
                        out.append(v)
        if now_ms >= self.next_chronic_ms:
            self.next_chronic_ms = now_ms - now_ms % DAY_MS + DAY_MS
            out.extend(self._chronic_sweep(now_ms, g, inventory, clock))
        return out

    def _fleet_rates(self, ch: Channel, now_ms: int, g: tuple[float, ...], inventory: Inventory) -> list[float]:
        """The channel's units per host-hour over the fleet, per scale (the cheapest expectation)."""
        acc = ch.groups.get("")
        expo = inventory.exposure(("", ""), now_ms)
        if acc is None:
            return [0.0] * len(g)
        return [acc[i] / g[i] / expo[i] if expo[i] > 0 else 0.0 for i in range(len(g))]

    def _news(self, st: HostCounts, i: int, g: tuple[float, ...]) -> tuple[float, float]:
        """(decayed units, squared units) since the last report, at scale ``i``."""
        if st.reported:
            return (max(st.c[i] - st.reported[i], 0.0) / g[i], max(st.d[i] - st.reported_d[i], 0.0) / (g[i] * g[i]))
        return st.c[i] / g[i], st.d[i] / (g[i] * g[i])

    def _rates(self, ch: Channel, host: str, st: HostCounts, i: int, look: Look,
               use_own: bool = True) -> tuple[float, str, float, float]:
        """(units per host-hour expected, its basis, the host's own exposure in hours, NB size) at scale ``i``.

        Hosts differ (some run crashier jobs): a host's rate is its peers' rate times a propensity
        of its own, gamma-distributed over hosts with shape ``nb_size`` and mean 1. With no past
        that is all one knows, and the count is negative binomial of that size around the peers'
        rate. A host with a past has shown its propensity: its older units against what its peers'
        rate over the same hours expected update the gamma (shape ``nb_size + older units``), so a
        host with a week of ordinary history is tested nearly as a Poisson count around its own
        level, and one that always crashed more expects more.
        """
        now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
        tau = clock.scales_s[i]
        L, A = self.longrun, self.acute[-1]
        mine = st.c[i] / g[i] if not st.chronic else 0.0
        since = inventory.since.get(host, now_ms)
        h_own = exposure_hours(since, now_ms, tau)
        older, h_old = self._older(st, since, now_ms, g, clock)
        # what the peer groups' sums hold of this host's older units (their kernel: the long run minus the day)
        leaky = max(st.c[L] / g[L] - st.c[A] / g[A], 0.0)
        h_leaky = exposure_hours(since, now_ms, clock.scales_s[L]) - exposure_hours(since, now_ms, clock.scales_s[A])
        learn = use_own and not st.chronic and h_old >= 1.0
        a = self.nb_size
        size = min(a + older, self.nb_max_size) if learn else a
        best, basis = 0.0, "no peers yet"
        chosen: tuple[str, float] | None = None  # the basis's key and propensity, worded once after the loop
        for key in ("", *inventory.latest_keys(host)):
            if key and inventory.sizes.get(key, 0) < self.min_peers:
                continue
            acc = ch.groups.get(key)
            ex = inventory.exposure_of(key, now_ms)
            units = (acc[i] / g[i] if acc is not None else 0.0) - mine
            expo = ex[i] - (h_own if not st.chronic else 0.0)
            if expo <= 0:
                continue
            r = max(units, 0.0) / expo
            prop = 1.0
            if learn and acc is not None:
                old_units = acc[L] / g[L] - acc[A] / g[A] - leaky
                old_expo = ex[L] - ex[A] - h_leaky
                if old_expo > 0:
                    prop = (a + older) / (a + max(old_units, 0.0) / old_expo * h_old)
            r *= prop
            if r > best or chosen is None:
                chosen = (key, prop)
                best = max(best, r)
        if chosen is not None:
            by, by_prop = chosen
            if by:
                ak, v = split_key(by)
                basis = f"peers with {ak}={v} ({inventory.sizes.get(by, 0)} hosts)"
            else:
                basis = f"the fleet ({inventory.active_hosts} hosts)"
            if learn:
                basis += f" x {by_prop:.2g}, the host's propensity ({h_old:.0f} h)"
        if use_own and h_old >= 1.0 and older > 0:
            own = older / h_old
            if own > best:
                best, basis = own, f"the host's own earlier rate ({h_old:.0f} h)"
        return best, basis, h_own, size

    def _older(self, st: HostCounts, since_ms: int, now_ms: int, g: tuple[float, ...],
               clock: DecayClock) -> tuple[float, float]:
        """(the host's units older than a day, their host-hours), both on the long-run kernel.

        Why not the long-run kernel minus the day's, as the peer groups are
        taken: ``exp(-t / month) - exp(-t / day)`` keeps a fifth of a 6-hour-old
        unit and half of a 16-hour-old one, so a failing host's own crashes
        became its "earlier rate" as the outbreak went on, and its expected
        count rose with its evidence (a failing-memory host of the tuning
        seeds: 0.9 expected a day at its onset, 2.4 twenty hours in, found at
        21 h). A unit counts once it is a day old, at its long-run weight.
        """
        # a host seen for under two days (the stream's first, a host just announced) has its first half as
        # its past: nothing would be "earlier" for a day, and a host failing steadily since before the
        # stream began would page on the peers alone before its chronic ticket
        first = max(since_ms, self.start_ms or since_ms)
        gap = min(self.own_gap_ms, (now_ms - first) // 2)
        if st.young and st.young[0][0] <= now_ms - gap:
            _age(st, now_ms - gap)
        tau_l = clock.scales_s[self.longrun]
        h_old = exposure_hours(since_ms, now_ms, tau_l) - exposure_hours(max(since_ms, now_ms - gap), now_ms, tau_l)
        return st.old / g[self.longrun], h_old

    def _min_units(self, channel: str, resolving: bool = False) -> float:
        """The support a test needs; a channel with a support of its own holds its episode down to half of it.

        A rare count has no healthy level (odd shapes) or a near-zero one to come back to: a firing
        episode would otherwise end as soon as its evidence decayed under the support, between two of
        a failing host's crashes, and the next few would page again after the cooldown.
        """
        own = self.channel_min_units.get(channel)
        if own:
            return own / 2 if resolving else own
        return self.min_units

    def _test(self, st: HostCounts, i: int, rate: float, h_own: float, g: tuple[float, ...],
              alpha: float, size: float, min_units: float) -> tuple[bool, float, float, float]:
        """(passes, p, observed, expected) of the host's count since its last report at scale ``i``."""
        obs, sq = self._news(st, i, g)
        mu = rate * h_own
        n_eff = kish_n(obs, sq)
        # support in units within about the scale: the Kish count is blind to decay (six units a week old
        # are still six), which against a zero expectation (odd shapes) would never let an episode end
        if min(n_eff, obs) < min_units or obs < self.min_ratio * mu:
            return False, 1.0, obs, mu
        mu_eff = mu * n_eff / obs if obs > 0 else mu
        p = nb_sf_real(n_eff, mu_eff, size)
        return p < alpha, p, obs, mu

    def _acute(self, name: str, ch: Channel, host: str, st: HostCounts, look: Look,
               fleet: list[float]) -> PeerVerdict | None:
        now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
        if st.firing:
            if now_ms - st.fired_ms < clock.scales_s[self.acute[0]] * 1000:
                return None
            min_units = self._min_units(name, resolving=True)
            for i in self.acute:
                if i > st.fired_scale:
                    break  # a longer scale keeps the excess long after it ended
                rate, _, h_own, size = self._rates(ch, host, st, i, look, name not in self.peers_only)
                if self._test(st, i, rate, h_own, g, self.resolve_alpha, size, min_units)[0]:
                    return None
            st.firing = False
            ch.firing.discard(host)
            st.quiet_until_ms = now_ms + self.cooldown_ms
            st.reported, st.reported_d = list(st.c), list(st.d)
            i = self.acute[0]
            return PeerVerdict(host, name, "resolved", now_ms, st.c[i] / g[i], 0.0, clock.scales_s[i], "",
                               notes=(f"resolved: no scale significant at p < {self.resolve_alpha:g} against peers",))
        if self.start_ms is None or now_ms < self.start_ms + self.warmup_ms or now_ms < st.quiet_until_ms:
            return None
        min_units = self._min_units(name)
        alpha = self.channel_alpha.get(name, self.alpha)
        best: tuple[float, int, float, float, str, float] | None = None
        since = inventory.since.get(host, now_ms)
        for i in self.acute:
            obs, sq = self._news(st, i, g)
            h_own = exposure_hours(since, now_ms, clock.scales_s[i])
            if kish_n(obs, sq) < min_units or obs < self.min_ratio * fleet[i] * h_own:
                continue  # cannot pass: the fleet's rate alone expects too much
            rate, basis, h_own, size = self._rates(ch, host, st, i, look, name not in self.peers_only)
            ok, p, obs, mu = self._test(st, i, rate, h_own, g, alpha, size, min_units)
            if ok and (best is None or p < best[0]):
                best = (p, i, obs, mu, basis, size)
        if best is None:
            return None
        p, i, obs, mu, basis, size = best
        st.firing, st.fired_ms, st.fired_scale = True, now_ms, i
        ch.firing.add(host)
        n_eff = kish_n(*self._news(st, i, g))
        tau_h = clock.scales_s[i] / 3600
        return PeerVerdict(host, name, "firing", now_ms, obs, mu, clock.scales_s[i], basis, p, notes=(
            f"peer test: {obs:.3g} units (~{n_eff:.3g} independent reports) at the {tau_h:g} h scale vs "
            f"{mu:.3g} expected from {basis}, negative binomial size {size:.3g}, p={p:.3g} < {alpha:g}",))

    def _chronic_sweep(self, now_ms: int, g: tuple[float, ...], inventory: Inventory,
                       clock: DecayClock) -> list[PeerVerdict]:
        """Hosts whose own long-run rate stands far above their peers' for days: one ticket each."""
        if self.start_ms is None or now_ms < self.start_ms + self.warmup_ms:
            return []
        L = self.chronic
        tau = clock.scales_s[L]
        out = []
        for name in sorted(self.channels):
            ch = self.channels[name]
            for host in sorted(ch.hosts):
                st = ch.hosts[host]
                if st.firing or now_ms < st.ticket_until_ms:
                    continue
                obs, sq = self._news(st, L, g)  # an excess already paged is not a standing condition
                if obs < self.chronic_min_units:
                    continue
                since = inventory.since.get(host, now_ms)
                if now_ms - max(since, self.start_ms) < self.chronic_min_ms:
                    continue
                h_own = exposure_hours(since, now_ms, tau)
                # peers: the fleet and the host's groups, the host itself left out
                best, basis = 0.0, ""
                for key in ("", *inventory.latest_keys(host)):
                    if key and inventory.sizes.get(key, 0) < self.min_peers:
                        continue
                    acc = ch.groups.get(key)
                    units = (acc[L] / g[L] if acc is not None else 0.0) - (0.0 if st.chronic else obs)
                    expo = inventory.exposure_of(key, now_ms)[L] - h_own
                    if expo > 0 and units / expo >= best:
                        best = max(units, 0.0) / expo
                        basis = "the fleet" if not key else "peers with {}={}".format(*split_key(key))
                mu = best * h_own
                n_eff = kish_n(obs, sq)
                if n_eff < self.chronic_min_units or obs < self.chronic_min_ratio * mu:
                    if st.chronic and obs < 2.0 * mu:
                        self._include(ch, host, st, inventory, g)  # no longer chronic: a peer again
                    continue
                p = poisson_sf_real(n_eff, mu * n_eff / obs if obs > 0 else mu)
                if p >= self.chronic_alpha:
                    continue
                st.ticket_until_ms = now_ms + self.ticket_cooldown_ms
                if not st.chronic:
                    self._exclude(ch, host, st, inventory)
                out.append(PeerVerdict(host, name, "chronic", now_ms, obs, mu, tau, basis, p, notes=(
                    f"chronic: {obs:.3g} units at the {tau / 86400:g}-day scale vs {mu:.3g} expected from {basis} "
                    f"(p={p:.3g} < {self.chronic_alpha:g}); its own rate is now its baseline and it left the "
                    f"peer sums",)))
        return out

    def close_episode(self, host: str) -> None:
        """The host's episode was paged and is over: what every channel holds of it is reported, not news.

        One alert stands for a host's episode, whichever channel fired it. A
        failing GPU link paged on its hardware errors; six hours after it
        resolved, the crash channel (never fired, so nothing reported) still
        held the same errors at the six-hour scale and paged the host again.
        """
        for ch in self.channels.values():
            st = ch.hosts.get(host)
            if st is not None and not st.firing:
                st.reported, st.reported_d = list(st.c), list(st.d)

    def _exclude(self, ch: Channel, host: str, st: HostCounts, inventory: Inventory) -> None:
        st.chronic = True
        for k in ("", *inventory.latest_keys(host)):
            acc = ch.groups.get(k)
            if acc is not None:
                for i in range(len(acc)):
                    acc[i] = max(acc[i] - st.c[i], 0.0)

    def _include(self, ch: Channel, host: str, st: HostCounts, inventory: Inventory, g: tuple[float, ...]) -> None:
        st.chronic = False
        n = len(st.c)
        for k in ("", *inventory.latest_keys(host)):
            acc = ch.groups.setdefault(k, [0.0] * n)
            for i in range(n):
                acc[i] += st.c[i]

    # ------------------------------------------------------------------ time and memory
    def rebase(self, factors: tuple[float, ...]) -> None:
        sq = tuple(f * f for f in factors)
        for ch in self.channels.values():
            fl = factors[self.longrun]
            for st in ch.hosts.values():
                scale_in_place(st.c, factors)
                scale_in_place(st.d, sq)
                st.old *= fl
                if st.young:
                    st.young = [(t, w * fl) for t, w in st.young]
                scale_in_place(st.reported, factors)
                scale_in_place(st.reported_d, sq)
            for acc in ch.groups.values():
                scale_in_place(acc, factors)

    def sweep(self, now_ms: int) -> None:
        cutoff = now_ms - self.ttl_ms
        for name in list(self.channels):
            ch = self.channels[name]
            for h in [h for h, s in ch.hosts.items() if not s.firing and s.last_ms < cutoff]:
                del ch.hosts[h]
                ch.touched.discard(h)
            if not ch.hosts:
                del self.channels[name]

    def counts(self) -> dict[str, float]:
        return {f"{h}|{c}": s.total for c, ch in self.channels.items() for h, s in ch.hosts.items()}


def _age(st: HostCounts, cut_ms: int) -> None:
    """Move the host's units dated at or before ``cut_ms`` from ``young`` into ``old``."""
    keep = []
    for t, w in st.young:
        if t <= cut_ms:
            st.old += w
        else:
            keep.append((t, w))
    st.young = keep


def host_peers_from_config(cfg: object, clock: DecayClock, *, alpha: float, min_units: float,
                           min_ratio: float) -> HostPeers:
    """A ``HostPeers`` on the engine's clock, with the shared host settings of ``DetectorConfig``."""
    from fleetepi.detectors.config import DetectorConfig

    c: DetectorConfig = cfg  # type: ignore[assignment]
    scales = list(clock.scales_s)
    return HostPeers(acute=[scales.index(s) for s in c.host_scales_s], longrun=scales.index(c.host_longrun_s),
                     chronic=scales.index(c.host_chronic_s),
                     alpha=alpha, resolve_alpha=c.host_resolve_alpha, min_units=min_units, min_ratio=min_ratio,
                     nb_size=c.host_nb_size, nb_max_size=c.host_nb_max_size, min_peers=c.host_min_peers,
                     chronic_alpha=c.chronic_alpha, chronic_min_ratio=c.chronic_min_ratio, chronic_min_units=c.chronic_min_units,
                     chronic_min_ms=int(c.chronic_min_days * DAY_MS), warmup_ms=int(c.warmup_s * 1000),
                     cooldown_ms=int(c.host_cooldown_s * 1000), ticket_cooldown_ms=int(c.ticket_cooldown_s * 1000),
                     ttl_ms=int(c.key_ttl_s * 1000), own_gap_ms=int(max(c.host_scales_s) * 1000))


__all__ = ["Channel", "HostCounts", "HostPeers", "PeerVerdict", "host_peers_from_config"]
