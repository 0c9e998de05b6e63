"""Explanation: is a cohort's excess another accepted cohort's?

A datacenter whose excess lives in one rack, a driver rolled out to one GPU
model only, a CUDA version over a static node pool: each is named in the
notes of the cohort that explains it, not paged as a finding of its own.
Nesting explains (``explain_excess``); crossing cohorts only when one holds
the whole excess both ways; static associations by the risk they give their
hosts (``explain_static_excess``).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from fleetepi.detectors.cohorts.state import DEAD, HOST_UNITS, CohortKey, CohortTest, rate_ratio_ci
from fleetepi.detectors.cohorts.statics import static_rho
from fleetepi.detectors.decay import exposure_hours
from fleetepi.detectors.inventory import Inventory, split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import binom_sf_real

if TYPE_CHECKING:
    from fleetepi.detectors.cohorts.correlation import CohortCorrelation


class HostScan:
    """A key's hosts with their current pair keys, read once per report.

    A report explains up to a dozen cohorts of one key, and each host count
    and explanation scans the key's hosts: a busy signature's thousands,
    each host's keys read anew every time, at every step where a standing
    association's alias passed the screen (a tenth of the noisy replay).
    """

    __slots__ = ("rows", "_by_attr", "_units", "_affected")

    def __init__(self, st: CohortKey, inventory: Inventory) -> None:
        self.rows = [(h, hc, inventory.latest_keys(h)) for h, hc in st.hosts.items()]
        self._by_attr = inventory.members()[1]
        self._units: dict[tuple[str, int], list[tuple[str, float, tuple[str, ...]]]] = {}
        self._affected: dict[tuple[str, int], frozenset[str]] = {}

    def affected(self, pk: str, i: int, gi: float) -> frozenset[str]:
        """The hosts of cohort ``pk`` with a unit within about the scale ``i`` (a report asks twice)."""
        got = self._affected.get((pk, i))
        if got is None:
            got = self._affected[(pk, i)] = frozenset(h for h, hc, hk in self.rows
                                                      if hc[i] / gi >= HOST_UNITS and pk in hk)
        return got

    def hosts_in(self, pk: str, i: int, gi: float) -> int:
        """How many hosts ``affected`` holds."""
        return len(self.affected(pk, i, gi))

    def units(self, a: str, i: int, gi: float) -> list[tuple[str, float, tuple[str, ...]]]:
        """(host, units at scale ``i``, its pair keys) of the hosts that announce the attribute ``a`` now."""
        got = self._units.get((a, i))
        if got is None:
            announcing = self._by_attr.get(a, ())
            got = self._units[(a, i)] = [(h, hc[i] / gi, hk) for h, hc, hk in self.rows if h in announcing]
        return got


def narrowest(cc: CohortCorrelation, st: CohortKey, chosen: list[CohortTest], members: Mapping[tuple[str, str], AbstractSet[str]],
               notes_of: dict[str, list[str]], look: Look, scan: HostScan) -> list[CohortTest]:
    """Drop a wider cohort found in the same step as narrower ones inside it that explain it.

    The wider one (a cluster) often has the smallest p-value and is
    accepted first; when two of its three racks hold the whole excess, the
    racks are the finding and the cluster their consequence. Only when the
    narrower cohorts leave part of the wider one out: when every rack of a
    cluster is found, the cluster is the one alert (a cluster-wide cooling
    failure; its racks are usually explained by it before they get here).
    """
    if len(chosen) < 2:
        return chosen
    sets = {t.pair: members.get(split_key(t.pair), frozenset()) for t in chosen}
    keep = []
    for t in chosen:
        mine = sets[t.pair]
        inner = [(u.pair, sets[u.pair]) for u in chosen if sets[u.pair] < mine]
        if inner and frozenset().union(*(m for _, m in inner)) < mine:
            a, v = split_key(t.pair)
            explained = explain_excess(cc, st, t, a, v, mine, inner, look, scan)
            if explained is not None:
                by, text = explained
                notes_of[by].append(text)
                continue
        keep.append(t)
    return keep


def explain_rate_excess(cc: CohortCorrelation, t: CohortTest, a: str, v: str, mine: AbstractSet[str],
                    accepted: list[tuple[str, AbstractSet[str]]], scan: HostScan,
                    g: tuple[float, ...]) -> tuple[str, str] | None:
    """``explain.explain_excess`` for a rate test's cohort: by its affected hosts, which is all its few units can say.

    A residual's share needs units a rate test does not have (three
    hosts of a rack, on a rare channel). So a cohort whose affected
    hosts all lie in an accepted one is that one's consequence (a rack's
    node pool, its datacenter), unless it is the narrower of the two and
    holds them beyond its share of the wider (``explain.concentrated``): then
    it is a finding of its own, and ``explain.narrowest`` drops the wider.
    Accepted strongest first, the narrowest cohort that holds every
    affected host is the one named: with three hosts on one of a rack's
    two power strips, the strip is eight times likelier than the rack,
    though not significantly (the same three on one of a leaf switch's
    two racks name the rack).
    """
    hit = scan.affected(t.pair, t.scale, g[t.scale])
    for apk, amem in accepted:
        if not hit <= amem or mine < amem and concentrated(cc, hit, mine, amem):
            continue
        aa, av = split_key(apk)
        return apk, (f"nested: the {len(hit)} affected hosts of {a}={v} are all on {aa}={av}: that "
                     f"cohort's excess")
    return None


def concentrated(cc: CohortCorrelation, hit: AbstractSet[str], part: AbstractSet[str], whole: AbstractSet[str]) -> bool:
    """Do the affected hosts ``hit`` fall on ``part`` beyond its share of ``whole``'s hosts (binomial)?"""
    k, n = float(len(hit & part)), float(len(hit & whole))
    return n > 0 and binom_sf_real(k, n, len(part) / len(whole)) <= cc.explain_alpha


def explain_excess(cc: CohortCorrelation, st: CohortKey, t: CohortTest, a: str, v: str, mine: AbstractSet[str],
               accepted: list[tuple[str, AbstractSet[str]]], look: Look, scan: HostScan,
               rising: AbstractSet[str] = frozenset()) -> tuple[str, str] | None:
    """Is this cohort's excess another, already accepted, cohort's? (accepted pair, note) or None.

    Only nesting explains: a wider cohort (a datacenter) whose excess is
    gone outside the accepted cohorts inside it (its rack), or a narrower
    one (a driver rolled out on one GPU model) whose share within an
    accepted wider cohort is what that cohort's hosts give anyway.
    Crossing cohorts (a GPU batch and a cage) are separate findings,
    unless the accepted one holds the whole excess both ways: nothing
    left outside it, and within it this cohort's hosts crash at their
    share (a new driver rolled out mostly to one node pool: the pool
    holds the driver's cases, and paged hours after the driver did).
    Gone means an insignificant residual whose relative risk is below
    ``min_rr_lower``, not merely a residual too thin to test.

    Both sides are seen through the hosts that announce both attributes.
    A host that does not say its ``a`` has no units here, so it cannot
    count in the accepted cohort's share of hosts. A host that does not
    say the accepted cohort's attribute may be in that cohort or not, so
    it counts neither inside it nor outside it. Otherwise the few percent
    of hosts that leave an attribute out make a node pool look like it
    holds only part of its SKU's excess, and the SKU pages as well.
    """
    now_ms, g, inventory = look.now_ms, look.g, look.inventory
    i, tau_s = t.scale, look.clock.scales_s[t.scale]
    if t.by_rate:
        return explain_rate_excess(cc, t, a, v, mine, accepted, scan, g)
    by_attr = inventory.members()[1]
    attr_hosts: AbstractSet[str] = by_attr.get(a, frozenset())
    seen = [(apk, amem & attr_hosts, split_key(apk)[0]) for apk, amem in accepted]
    inner = [(apk, amem, b) for apk, amem, b in seen if amem < mine]
    outer = [(apk, amem, b) for apk, amem, b in seen if mine < amem]
    crossing = [(apk, amem, b) for apk, amem, b in seen
                if not amem < mine and not mine < amem and amem != mine and amem & mine]
    if not inner and not outer and not crossing:
        return None
    usable = [x for x in seen if x[0] not in rising]
    statics_only = all(static_rho(st, apk) > 0.0 for apk, _, _ in (*inner, *outer, *crossing))
    if statics_only:
        # only static associations touch it: their weighed share first (set sizes only), before the
        # host scans below, which a cohort explained at every step would pay at every step (Titan)
        by_static = explain_static_excess(cc, st, t, a, v, mine, usable, inventory, now_ms)
        if by_static is not None:
            return by_static
    akey = a + "\x1f"
    units = scan.units(a, i, g[i])

    def unknown(within: AbstractSet[str], attrs: set[str]) -> AbstractSet[str]:
        """Hosts of ``a`` outside ``within`` that leave out one of ``attrs``: in or out, nobody knows."""
        missing = [attr_hosts - by_attr.get(b, frozenset()) for b in attrs]
        return frozenset().union(*missing) - within if missing else frozenset()

    if inner:
        union = frozenset().union(*(m for _, m, _ in inner))
        skip = unknown(union, {b for _, _, b in inner})
        gone, k_res, n_res, p_res, rr_res = residual_excess(cc, units, t.pair, mine, union, attr_hosts - skip)
        if gone:
            return inner[0][0], (f"nested: also explains the excess of the wider cohort {a}={v} (outside it: "
                                 f"{k_res:.3g} of {n_res:.3g} units, relative risk {rr_res:.2g}, p={p_res:.3g})")
    for apk, amem, _ in outer:
        # a wider cohort that paged before this step: within it, a narrower one whose few units cannot tell
        # its risk from 1 is its excess (node pools inside a wearing GPU model paged hours after it). In the
        # same step they compete as equals (a deadlocked job's racks, not the cluster they are in)
        apc = st.pairs.get(apk)
        earlier = apc is not None and (apc.firing or apc.static)
        got = within_share(cc, units, mine, amem, any_rr=earlier)
        if got is not None:
            k_in, n_in, share, p_in, rr_in = got
            aa, av = split_key(apk)
            return apk, (f"within {aa}={av}: {a}={v} holds {k_in:.3g} of its {n_in:.3g} units for {share:.0%} "
                         f"of its hosts (relative risk {rr_in:.2g}, p={p_in:.3g}): the wider cohort's excess")
    if crossing and moved(units, akey, now_ms, tau_s, inventory, st.first_ms):
        crossing = []
    # one accepted cohort at a time, then all of them at once: a job's two racks, each mostly on one BIOS,
    # hold the BIOS's whole excess together and neither does alone
    groups = [[x] for x in crossing] + ([crossing] if len(crossing) > 1 else [])
    for group in groups:
        amem = frozenset().union(*(m for _, m, _ in group))
        gone, k_res, n_res, _, _ = residual_excess(cc, units, t.pair, mine, amem,
                                                  attr_hosts - unknown(amem, {b for _, _, b in group}))
        if not gone:
            continue
        # within it, by host-time on it: a roll-out's early hosts (one pool first) held it longest
        held: dict[str, float] = {}
        for apk, m, _ in group:
            for h in m:
                since = inventory.held_since(h, apk)
                held[h] = max(held.get(h, 0.0), exposure_hours(since, now_ms, tau_s) if since is not None else 0.0)
        got = within_share(cc, units, mine & amem, amem, held, any_rr=True)
        if got is not None:
            k_in, n_in, share, p_in, rr_in = got
            names = " and ".join("=".join(split_key(apk)) for apk, _, _ in group)
            it, its, whose = ("them", "their", "their excess") if len(group) > 1 else ("it", "its", "that cohort's excess")
            return group[0][0], (f"crossing {names}: {a}={v} holds no excess outside {it} ({k_res:.3g} of "
                                 f"{n_res:.3g} units), and within {it} {k_in:.3g} of {n_in:.3g} for {share:.0%} of "
                                 f"{its} hosts (relative risk {rr_in:.2g}, p={p_in:.3g}): {whose}")
    return None if statics_only else explain_static_excess(cc, st, t, a, v, mine, usable, inventory, now_ms)


def explain_static_excess(cc: CohortCorrelation, st: CohortKey, t: CohortTest, a: str, v: str, mine: AbstractSet[str],
                      seen: list[tuple[str, AbstractSet[str], str]], inventory: Inventory,
                      now_ms: int) -> tuple[str, str] | None:
    """Is this cohort's excess what the key's static associations give the hosts it shares with them?

    A static association (a signature 3x as frequent on one node pool,
    ticketed) puts its excess on every cohort rich in its hosts. A CUDA
    version rolled out to 88 % of the pool and a third of the rest holds
    twice its share of the key's units from then on, and its short
    scales page it as new. The residual and within tests ask one
    accepted cohort at a time to hold the whole excess with nothing left
    over; a second static cohort overlapping the first, or a residual
    thin enough to show x1.5-x2 by chance, defeats them. Here the test's
    own share is re-weighed: each static host counts ``rho`` times on
    the cohort and on the attribute (the largest long-run relative risk
    of the static cohorts it is in, learned when each was ticketed), and
    the test's effective units are asked again against that share.
    Their excess (a note on the one sharing most hosts) unless what is
    left could page on its own: significant at ``explain_alpha`` with
    a relative risk over that share whose lower bound is above
    ``min_rr_lower``, the bar every page clears (a CUDA version over a
    static node pool held 53 % of the units for 39 %, p = 1e-3, a risk
    of 1.8 with a lower bound of 1.3: chance at the edge, paging one
    step and explained the next). A static cohort with a test of its
    own in this step (``rising``: above its long-run risk) explains
    nothing, and a static cohort is not explained here: their risk is
    what is in question (a node pool whose static association rose from
    2.3x to 13x was explained by the static CUDA version holding it,
    whose risk had been learned from the pool's, and the rise was missed).
    Each static host weighs the mean host-time of the hosts it is
    counted with (the cohort's, the attribute's): a roll-out's cohort
    keeps its own, shorter, host-time, and no host is visited (each
    host's own host-time, visiting Titan's 18,688 nodes per explanation,
    cost 45 % more CPU there).
    """
    if static_rho(st, t.pair) > 0.0:
        return None  # its test is already against its own long-run risk: a rise the others cannot explain
    statics = [(apk, amem, static_rho(st, apk)) for apk, amem, _ in seen
               if amem & mine and static_rho(st, apk) > 1.0]
    if not statics:
        return None
    e_in = inventory.exposure((a, v), now_ms)[t.scale]
    e_all = inventory.exposure((a, ""), now_ms)[t.scale]
    n_in, n_all = inventory.sizes.get(t.pair, 0), inventory.attribute_hosts.get(a, 0)
    if e_in <= 0 or e_all <= e_in or n_in <= 0 or n_all <= n_in:
        return None
    # each static host adds (rho - 1) times a host's mean host-time (the largest rho of its static
    # cohorts: the riskiest first, each host counted once); set operations, no loop over hosts
    extra_in = extra_all = 0.0
    covered: AbstractSet[str] = frozenset()
    for _, amem, rho in sorted(statics, key=lambda s: -s[2]):
        new = amem - covered
        extra_all += (rho - 1.0) * len(new)
        extra_in += (rho - 1.0) * len(new & mine)
        covered = covered | new
    share = (e_in * (1.0 + extra_in / n_in)) / (e_all * (1.0 + extra_all / n_all))
    if share >= 1.0:
        return None
    p = binom_sf_real(t.k, t.n, share)
    lo = rate_ratio_ci(t.k, t.n - t.k, share, 1.0 - share)[1]
    if p <= cc.explain_alpha and lo > cc.min_rr_lower:
        return None
    apk, amem, rho = max(statics, key=lambda s: (len(s[1] & mine), s[0]))
    aa, av = split_key(apk)
    return apk, (f"static: {a}={v} shares {len(amem & mine)} hosts with {aa}={av} (a static association, "
                 f"x{rho:.2g}); weighing each host by its static cohorts' risk, {a}={v} holds {t.k:.3g} of "
                 f"{t.n:.3g} units for {share:.0%} (p={p:.3g}, relative risk lower bound {lo:.2g}): that "
                 f"association's excess")


def residual_excess(cc: CohortCorrelation, units: list[tuple[str, float, tuple[str, ...]]], pair: str, mine: AbstractSet[str],
              outside: AbstractSet[str], hosts: AbstractSet[str]) -> tuple[bool, float, float, float, float]:
    """(gone, units on the cohort, units, p, relative risk) of the cohort's excess on ``hosts`` not in ``outside``.

    Gone: insignificant, with a relative risk under ``min_rr_lower``; a
    residual with no hosts or no units to test is gone too.
    """
    k_res = sum(u for h, u, hk in units if h not in outside and h in hosts and pair in hk)
    n_res = sum(u for h, u, _ in units if h not in outside and h in hosts)
    fleet_res, n1_res = len(hosts - outside), len((mine & hosts) - outside)
    if fleet_res > n1_res > 0 and n_res > 0:
        p_res = binom_sf_real(k_res, n_res, n1_res / fleet_res)
        rr_res = rate_ratio_ci(k_res, n_res - k_res, n1_res, fleet_res - n1_res)[0]
    else:
        p_res, rr_res = 1.0, 1.0
    return p_res > cc.explain_alpha and rr_res < cc.min_rr_lower, k_res, n_res, p_res, rr_res


def moved(units: list[tuple[str, float, tuple[str, ...]]], akey: str, now_ms: int, tau_s: float,
           inventory: Inventory, first_ms: int) -> bool:
    """Did a host with units take its value of the attribute within about the scale, after the key's first case?

    Then the cohort's units are not where its hosts are now: on Titan a
    failed GPU is replaced by one of the new batch, and the old batch's
    failures sit on hosts that are new-batch today. Weighed by today's
    members it would look explained by any cohort it crosses. A host
    that moved before the key was first seen anywhere holds all of its
    units under the value it has now: a signature new since a BIOS
    roll-out, confined to the new driver's hosts, is the driver's finding,
    and its BIOS paged eleven hours after the driver as a second one.
    """
    cutoff = max(now_ms - tau_s * 1000.0, float(first_ms))
    for h, u, hk in units:
        if u < DEAD:
            continue
        for x in hk:
            if x.startswith(akey):
                since = inventory.held_since(h, x)
                if since is not None and since > cutoff and since > inventory.since.get(h, since):
                    return True  # a change (not its first announcement) within the scale
                break
    return False


def within_share(cc: CohortCorrelation, units: list[tuple[str, float, tuple[str, ...]]], part: AbstractSet[str],
            whole: AbstractSet[str], held: Mapping[str, float] | None = None, any_rr: bool = False,
            ) -> tuple[float, float, float, float, float] | None:
    """(units on ``part``, units on ``whole``, share, p, relative risk) if ``part`` holds only its share.

    The share is of hosts, or of the host-time ``held`` gives each. Only
    share means insignificant with a relative risk under ``min_rr_lower``;
    with ``any_rr``, insignificant will do (a crossing cohort with nothing
    outside the accepted one: its own few units within it cannot tell a
    risk of 1.5 from 1, and it is tested again as they come).
    """
    k_in = sum(u for h, u, _ in units if h in part)
    n_in = sum(u for h, u, _ in units if h in whole)
    if held is None:
        e_in, e_all = float(len(part)), float(len(whole))
    else:
        e_in, e_all = sum(held.get(h, 0.0) for h in part), sum(held.get(h, 0.0) for h in whole)
    share = e_in / e_all if e_all > 0 else 1.0
    if n_in <= 0 or share >= 1:
        return None
    p_in = binom_sf_real(k_in, n_in, share)
    rr_in = rate_ratio_ci(k_in, n_in - k_in, e_in, e_all - e_in)[0]
    if p_in > cc.explain_alpha and (any_rr or rr_in < cc.min_rr_lower):
        return k_in, n_in, share, p_in, rr_in
    return None
