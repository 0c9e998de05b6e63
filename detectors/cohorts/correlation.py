"""The cohort engine: per key, decayed units by attribute value, tested at every step.

Folding (``observe``), the share and rate tests (``_tests``) and the step's
decision (``decide``) are here; the false-discovery budget, static
associations, explanation, classification and wording are the package's
other modules.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet
from operator import add

from msgspec import Struct, field

from fleetepi.detectors.cohorts.budget import WHY_WEIGHTED, count_tests, is_big, recount, step_budget, units_needed
from fleetepi.detectors.cohorts.report import report_key
from fleetepi.detectors.cohorts.state import (
    DEAD,
    HOST_UNITS,
    RATE_PRIOR_UNITS,
    RATE_SHARE_ALPHA,
    SHRUNK,
    CohortKey,
    CohortTest,
    CohortVerdict,
    PairCounts,
    Share,
    at_risk,
    attribute_keys,
    rate_ratio_ci,
)
from fleetepi.detectors.cohorts.statics import InsideStatic, inside_static, relearn
from fleetepi.detectors.decay import DecayClock, kish_n, scale_in_place
from fleetepi.detectors.inventory import Inventory, split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import (
    alpha_per_look,
    benjamini_hochberg,
    binom_sf_real,
    nb_sf_real,
    z_above,
)


class CohortCorrelation(Struct):
    """Per key, decayed units by attribute value, tested against host-time shares at every step."""

    acute: list[int]
    longrun: int
    fdr: float
    alpha: float
    resolve_alpha: float
    rise_alpha: float
    explain_alpha: float
    min_rr_lower: float
    min_hosts: int
    min_units: float
    min_cohort_hosts: int
    prior_units: float
    warmup_ms: int
    cooldown_ms: int
    ticket_cooldown_ms: int
    ttl_ms: int
    keys: dict[str, CohortKey] = field(default_factory=dict)
    #: keys with a touched or firing pair (decide visits only these)
    active: set[str] = field(default_factory=set)
    #: pairs held over all keys
    n_pairs: int = 0
    #: the Benjamini-Hochberg family: every (key, value, scale) test that could reach significance
    family: int = 0
    start_ms: int | None = None
    #: the keys' first day was recorded (at the end of warm-up)
    early_taken: bool = False
    #: share of the family's weight for the tests of keys spiking fleet-wide, and the cap on one's weight
    spike_share: float = 0.0
    spike_weight_max: float = 1.0
    #: the same for the cohorts of keys on watch (rising fleet-wide, not firing: ``RateSpike.watched``) that
    #: hold at least ``watch_min_share`` of the hosts announcing their attribute
    watch_share: float = 0.0
    watch_min_share: float = 0.1
    #: the same for the tests of static associations (against their own long-run risk), and the keys
    #: holding one: key -> how many of its pairs are static (pairs stay static while their key lives)
    static_share: float = 0.0
    static_keys: dict[str, int] = field(default_factory=dict)
    static_weight_max: float = 100.0
    #: key -> its cohorts whose share its static associations raise (``statics.inside_static``): derived from
    #: the state and the inventory, emptied on restore (an inventory's version starts again there)
    inside: dict[str, InsideStatic] = field(default_factory=dict)
    #: key -> its pairs outside the static tier, counted by attribute (``slot_of``): derived, dropped when the
    #: key gains or loses a pair or a pair turns static (``budget.spike_split`` reads it at every step)
    slots: dict[str, dict[str, int]] = field(default_factory=dict)
    #: key -> (the inventory's version, its pairs in the watch tier: big and not static): derived as ``slots``
    #: is, and dropped with it (``budget.step_budget`` counts a watched key's at every step)
    bigs: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the look the ceiling ``alpha`` is per (``corr_alpha_look_s``; 0: per test)
    look_s: float = 0.0
    #: the scales the rate test runs at (none: off; ``rate_expected``), and the scale whose units are
    #: too recent for a key's earlier rate or share (the long-run kernel minus this one's; ``classify.classify_pair``)
    rate_scales: list[int] = field(default_factory=list)
    rate_recent: int = 0
    #: when every key's share of the family is next recounted (``budget.recount``)
    recount_ms: int = 0
    #: when the static associations' long-run risks are next learned again (``statics.relearn``)
    relearn_ms: int = 0

    def ceiling(self, scale_s: float, age_ms: int) -> float:
        """The absolute p-value ceiling of a test at a scale of ``scale_s`` of a key first seen ``age_ms`` ago.

        ``alpha`` per look (``stats.alpha_per_look``): at one ceiling for all,
        a month-scale test was held 720 times tighter per unit time than the
        hourly one, and a real wear-out (Titan's cage 2: 20 of 26
        uncorrectable-ECC units on a third of the nodes, p = 1e-5) waited
        weeks for p = 1e-6. Benjamini-Hochberg over the whole family still
        applies at every scale. Not beyond the key's age: a signature four
        hours old holds the same units at every scale, and its month-scale
        test is its hourly one again.
        """
        return alpha_per_look(self.alpha, min(scale_s, age_ms / 1000.0), self.look_s)

    # ------------------------------------------------------------------ folding
    def observe(self, key: str, host: str, w: float, ts_ms: int, keys: tuple[str, ...], clock: DecayClock) -> None:
        """Count ``w`` units of ``key`` on ``host`` (whose pair keys at ``ts_ms`` are ``keys``)."""
        if self.start_ms is None:
            self.start_ms = ts_ms
        n = len(clock.scales_s)
        st = self.keys.get(key)
        if st is None:
            st = self.keys[key] = CohortKey(q=[0.0] * n, first_ms=ts_ms)
        wg = [w * gi for gi in clock.g(ts_ms)]
        hc = st.hosts.get(host)
        if hc is None:
            hc = st.hosts[host] = [0.0] * n
            if wg[self.longrun] < st.floor:
                st.floor = wg[self.longrun]
        st.q = [q + 2.0 * h * x + x * x for q, h, x in zip(st.q, hc, wg)]
        hc[:] = map(add, hc, wg)  # the hot path: map(add) is a third cheaper than a comprehension
        tot = st.tot
        for k in attribute_keys(keys):
            acc = tot.get(k)
            if acc is None:
                tot[k] = list(wg)
            else:
                acc[:] = map(add, acc, wg)
        pairs = st.pairs
        self.active.add(key)
        for k in keys:
            pc = pairs.get(k)
            if pc is None:
                pairs[k] = PairCounts(list(wg), last_ms=ts_ms)
                self.n_pairs += 1
                self.pairs_changed(key)
                if wg[self.longrun] < st.floor:
                    st.floor = wg[self.longrun]
            else:
                c = pc.c
                c[:] = map(add, c, wg)
                if ts_ms > pc.last_ms:
                    pc.last_ms = ts_ms
        st.touched.update(keys)
        st.total += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms

    def forget_host(self, key: str, host: str, keys: tuple[str, ...]) -> None:
        """Take ``host``'s units out of ``key``'s counts (its pair keys are ``keys``, as announced now)."""
        st = self.keys.get(key)
        hc = st.hosts.pop(host, None) if st is not None else None
        if st is None or hc is None:
            return
        st.q = [max(q - h * h, 0.0) for q, h in zip(st.q, hc)]
        tot = st.tot
        if "" in tot:
            tot[""] = [max(a - h, 0.0) for a, h in zip(tot[""], hc)]
        for k in keys:
            # an attribute's total loses what its value's pair gives back: a host that moved since (a roll-out)
            # left its units under its old value, and a pair never holds more than its attribute
            pc = st.pairs.get(k)
            acc = tot.get(k[: k.index("\x1f") + 1])
            if pc is None or acc is None:
                continue
            d = [min(a, h) for a, h in zip(pc.c, hc)]
            pc.c[:] = [a - x for a, x in zip(pc.c, d)]
            acc[:] = [max(a - x, 0.0) for a, x in zip(acc, d)]
        self.active.add(key)

    # ------------------------------------------------------------------ decisions
    def decide(self, now_ms: int, inventory: Inventory, clock: DecayClock,
               spiking: AbstractSet[str] = frozenset(), watched: AbstractSet[str] = frozenset()) -> list[CohortVerdict]:
        """Test every touched cohort; page, ticket or resolve.

        ``spiking``: keys whose fleet-wide rate is above its baseline now;
        ``watched``: keys rising fleet-wide, short of that. Their tests carry
        more of the false-discovery budget (``budget.step_budget``).
        """
        g = clock.g(now_ms)
        look = Look(now_ms, g, inventory, clock)
        n_star = max(units_needed(self), self.min_units)
        if now_ms >= self.recount_ms:
            recount(self, now_ms, g, n_star)
        if now_ms >= self.relearn_ms:
            self.relearn_ms = now_ms + 86_400_000
            relearn(self, look)
        warm = self.start_ms is not None and now_ms >= self.start_ms + self.warmup_ms
        if warm and not self.early_taken:
            self._take_early(now_ms, g, inventory)
        out: list[CohortVerdict] = []
        if not self.active:
            return out  # nothing touched or firing: a step of a quiet stream (years of them in a sparse one)
        tests: list[CohortTest] = []
        spiking = spiking & self.keys.keys() if spiking and self.spike_share > 0 else frozenset()
        watched = (watched & self.keys.keys()) - spiking if watched and self.watch_share > 0 else frozenset()
        budget = step_budget(self, spiking, watched, 0, inventory)
        active, self.active = self.active, set()
        for key in sorted(active):
            st = self.keys.get(key)
            if st is None:
                continue
            todo = st.touched | st.firing if st.firing else st.touched
            st.touched = set()
            if st.firing:
                self.active.add(key)
            all_ = st.tot.get("")
            if all_ is None:
                continue
            # scales where the key has too few effective units for any cohort test: skipped whole
            n_eff = {i: kish_n(all_[i] / g[i], st.q[i] / (g[i] * g[i])) for i in self.acute}
            testable = [i for i in self.acute if n_eff[i] >= self.min_units or self.rate_live(all_, i, g)]
            count_tests(self, st, n_eff, all_, g, n_star)
            if not testable and not st.firing:
                continue
            short = [i for i in testable if clock.scales_s[i] < 86400.0]
            key_tested = False
            for pk in sorted(todo):
                pc = st.pairs.get(pk)
                if pc is None:
                    continue
                if pc.firing:
                    v = self._maybe_resolve(key, st, pk, pc, look)
                    if v is not None:
                        out.append(v)
                    continue
                if not warm or now_ms < pc.quiet_until_ms or not testable:
                    continue
                # a day's, a week's or a month's count moves little in five minutes: tested at the pair's
                # first step in each clock hour (an hour after its last test, a sparse pair's next touch
                # could come two hours on, at a phase any earlier touch had set)
                scales = testable
                if now_ms // 3_600_000 == pc.long_tested_ms // 3_600_000:
                    scales = short
                else:
                    pc.long_tested_ms = now_ms
                if scales:
                    found = self._tests(key, st, pk, pc, look, self.fdr, scales=scales, n_eff=n_eff)
                    if not found:
                        continue  # most pairs: no candidate, nothing to weigh
                    up = max(budget.of(key, spiking, watched, static=pc.static, pair=pk), 1.0)
                    age = now_ms - st.first_ms
                    if not key_tested and any(t.p <= self.ceiling(clock.scales_s[t.scale], age) * up for t in found):
                        # a candidate: every cohort of the key is tested now at every scale, so that
                        # the ones it explains (its datacenter, a confounded twin) are judged with it
                        key_tested = True
                        tests = [t for t in tests if t.key != key]
                        for other in sorted(st.pairs):
                            opc = st.pairs[other]
                            if not opc.firing and now_ms >= opc.quiet_until_ms:
                                tests.extend(self._tests(key, st, other, opc, look, self.fdr, scales=testable,
                                                         n_eff=n_eff))
                    elif not key_tested:
                        tests.extend(found)
        if not tests:
            return out
        budget = step_budget(self, spiking, watched, len(tests), inventory)
        tiers = [budget.tier(t.key, spiking, watched, t.key in watched and is_big(self, t.pair, inventory),
                             self.keys[t.key].pairs[t.pair].static) for t in tests]
        weights = [budget.weight(tier, t.key, t.pair) for t, tier in zip(tests, tiers)]
        family = budget.family
        rejected = benjamini_hochberg([t.p / w for t, w in zip(tests, weights)], self.fdr, family,
                                      [t.key for t in tests])
        accepted: dict[str, list[CohortTest]] = {}
        weight_of: dict[str, tuple[float, str]] = {}
        for t, w, tier, rej in zip(tests, weights, tiers, rejected):
            age = now_ms - self.keys[t.key].first_ms
            if rej and t.p <= self.ceiling(clock.scales_s[t.scale], age) * w and t.lo > self.min_rr_lower:
                accepted.setdefault(t.key, []).append(t)
                if w > weight_of.get(t.key, (0.0, ""))[0]:
                    weight_of[t.key] = (w, WHY_WEIGHTED[tier])
        for key in sorted(accepted):
            weight, why = weight_of[key]
            out.extend(report_key(self, key, self.keys[key], accepted[key], family, weight, look, why))
        return out

    def rate_live(self, all_: list[float], i: int, g: tuple[float, ...]) -> bool:
        """Could a rate test of the key run at scale ``i``: the units of ``min_hosts`` affected hosts."""
        return i in self.rate_scales and all_[i] / g[i] >= self.min_hosts * HOST_UNITS

    def _take_early(self, now_ms: int, g: tuple[float, ...], inventory: Inventory) -> None:
        """Record every key's first day: units per attribute and per pair, and each pair's host-time share.

        What a static association is judged against while the long scales
        still hold everything watched (``classify.classify_pair``).
        """
        self.early_taken = True
        L = self.longrun
        for st in self.keys.values():
            st.early = {k: x[L] / g[L] for k, x in st.tot.items() if k}
            for pk, pc in st.pairs.items():
                a, v = split_key(pk)
                e_v = inventory.exposure((a, v), now_ms)[L]
                e_a = inventory.exposure((a, ""), now_ms)[L]
                if e_a > 0 and e_v > 0:
                    pc.early, pc.early_p = pc.c[L] / g[L], e_v / e_a

    def firing_share(self, key: str, now_ms: int, g: tuple[float, ...], inventory: Inventory) -> float:
        """The share of ``key``'s recent units (the shortest scale) on hosts of its firing cohorts (0: none firing).

        A fleet-wide rise that is this share of one rack's surge is the
        rack's finding, not a second one.
        """
        st = self.keys.get(key)
        if st is None or not st.firing or not self.acute:
            return 0.0
        members, _ = inventory.members()
        inside: set[str] = set()
        for pk in st.firing:
            inside |= members.get(split_key(pk), frozenset())
        i = self.acute[0]
        total = sum(hc[i] for hc in st.hosts.values())
        if total <= 0:
            return 0.0
        return sum(hc[i] for h, hc in st.hosts.items() if h in inside) / total

    def cohort_share(self, st: CohortKey, pk: str, pc: PairCounts, i: int, look: Look) -> Share | None:
        """The cohort's share of the key's units at scale ``i``, against its share of the host-time.

        The cohort's units are those since its last report: an excess already
        paged and resolved is not news again while a long scale still holds it.
        """
        g, inventory = look.g, look.inventory
        a, v = split_key(pk)
        akey = a + "\x1f"
        n1 = inventory.sizes.get(pk, 0)
        if n1 < self.min_cohort_hosts or n1 >= inventory.attribute_hosts.get(a, 0):
            return None
        tot = st.tot.get(akey)
        all_ = st.tot.get("")
        if tot is None or all_ is None:
            return None
        c_a = tot[i] / g[i]
        c_k = pc.unreported(i) / g[i]
        if c_a <= 0 or c_k <= 0:
            return None
        e_v = inventory.exposure((a, v), look.now_ms)[i]
        e_a = inventory.exposure((a, ""), look.now_ms)[i]
        if e_a <= e_v or e_v <= 0:
            return None
        c_all = all_[i] / g[i]
        n_eff = kish_n(c_all, st.q[i] / (g[i] * g[i])) * c_a / c_all if c_all > 0 else 0.0
        return Share(n_eff * c_k / c_a, n_eff, e_v / e_a, c_k, e_v, e_a - e_v)

    def _tests(self, key: str, st: CohortKey, pk: str, pc: PairCounts, look: Look, ceiling: float,
               max_scale: int | None = None, scales: list[int] | None = None,
               n_eff: dict[int, float] | None = None) -> list[CohortTest]:
        out: list[CohortTest] = []
        g, inventory = look.g, look.inventory
        a = pk[: pk.index("\x1f")]
        n1, n_all = inventory.sizes.get(pk, 0), inventory.attribute_hosts.get(a, 0)
        if n1 < self.min_cohort_hosts or n1 >= n_all:
            return out
        tot = st.tot.get(a + "\x1f")
        if tot is None:
            return out
        all_ = st.tot[""] if n_eff is not None else tot
        c, rep = pc.c, pc.reported
        # the relative risk the cohort's share is expected at: a static association's own, or the one a
        # cohort inside it inherits (a rack of a datacenter where the key has always been 3x as frequent)
        rho = pc.rho if pc.static else inside_static(self, key, pk, inventory)[0] if key in self.static_keys else 1.0
        p_proxy = n1 / n_all
        if rho != 1.0:
            p_proxy = at_risk(p_proxy, rho)
        z9 = 9.0 * p_proxy * (1.0 - p_proxy)
        for i in self.acute if scales is None else scales:
            if max_scale is not None and i > max_scale:
                break
            # the cheap screen, on today's cohort sizes and the key's effective units, before any
            # exposure is integrated: most cohorts hold about their share. It asks z < 3 of the
            # cohort's units ``u`` of its attribute's ``t`` on ``n_eff * t / all`` effective units at
            # ``p_proxy``, squared and with the clock's factors cancelled (the hot loop of the replay)
            gi = g[i]
            u = c[i] - rep[i] if rep else c[i]
            t = tot[i]
            if u < gi or t <= 0:
                continue
            if n_eff is not None:
                d = u - p_proxy * t
                if d <= 0 or n_eff[i] / all_[i] * d * d < z9 * t:
                    continue  # the exact test asks for p < 1e-6 (z ~ 4.8); sizes stand in for host-time
            sh = self.cohort_share(st, pk, pc, i, look)
            if sh is None:
                continue
            k, n, p0, c_k, e_v, e_out = sh.k, sh.n, sh.p0, sh.c_in, sh.e_in, sh.e_out
            if n1 < SHRUNK * p0 * n_all:
                # the cohort shrank within this scale (a roll-out moved most of its hosts away): its units came
                # while it was bigger, as many as the key's rate was then, and its share of the whole scale's
                # host-time says nothing of when the key was busy. Its shorter scales test it
                continue
            rate_ok = i in self.rate_scales and not pc.static
            if n < self.min_units and not rate_ok or k < 1.0:
                continue
            p_host = p0
            if rho != 1.0:
                p0 = at_risk(p0, rho)
            if z_above(k, n * p0, n * p0 * (1.0 - p0)) < 3.5:
                continue  # the cheap screen: most cohorts hold their share
            p = binom_sf_real(k, n, p0)
            mu = -1.0
            if p > ceiling or n < self.min_units:
                if not rate_ok or p > RATE_SHARE_ALPHA / len(st.pairs):
                    continue
                mu, size = self.rate_expected(st, a, i, look, e_v)
                if rho != 1.0:
                    mu *= p0 / p_host  # inside a static association: at its risk, not the attribute's average
                # effective units, as the share test counts them: a host re-reporting every hour (chronic,
                # before its ticket) is one host's say, not six hosts'
                p = nb_sf_real(min(k, c_k), mu, size)
                if p > ceiling:
                    continue
            k_out = max(n - k, 0.0)
            rr, lo, hi = rate_ratio_ci(k, k_out, e_v, e_out)
            if rho != 1.0:
                lo, rr, hi = lo / rho, rr / rho, hi / rho
            out.append(CohortTest(key, pk, i, p, k, n, p0, rr, lo, hi, mu))
        return out

    def rate_expected(self, st: CohortKey, a: str, i: int, look: Look, e_v: float) -> tuple[float, float]:
        """(expected units on ``e_v`` host-hours of attribute ``a`` at scale ``i``, negative binomial size).

        Why a second test: the share test asks whether the cohort holds more
        than its share of the key's units *now*, so it cannot tell much when
        the outbreak is most of them. Xid 79 on three hosts of one rack in an
        hour, on a fleet that reports a couple a day, is three units of
        three: a share test can reach p ~ 1e-4 (p0 ** 3) and never pages,
        while three against 0.002 expected is p ~ 1e-9. The rate is the
        key's on the hosts announcing the attribute, over the history
        before the last day or so (the long-run kernel minus the day's,
        ``rate_recent``: minus the hour's, an outbreak 40 minutes old would
        be half in it and raise its own bar), as a gamma posterior (its
        units plus half a unit, over its host-time); the predictive count
        on the cohort's host-time is negative binomial.
        The share test still gates it (``RATE_SHARE_ALPHA``), so a key rising
        fleet-wide is not every rack's finding.
        """
        L, r, g = self.longrun, max(self.rate_recent, i), look.g
        tot = st.tot[a + "\x1f"]
        c_old = self.older(tot, r, g)
        e_a = look.inventory.exposure((a, ""), look.now_ms)
        e_old = e_a[L] - e_a[r]
        size = c_old + RATE_PRIOR_UNITS
        if e_old <= 0:
            return math.inf, size
        return e_v * size / e_old, size

    def older(self, counts: list[float], r: int, g: tuple[float, ...]) -> float:
        """Units of ``counts`` older than scale ``r``'s reach: the long-run kernel minus scale ``r``'s (at least 0).

        Every "before" of the cohort tests is this difference (the rate
        test's earlier rate, ``classify.classify_pair``'s earlier share, the daily
        relearning of a static association's risk): the decayed kernels are
        not hard windows, so it is the long run with the recent part taken out.
        """
        L = self.longrun
        return max(counts[L] / g[L] - counts[r] / g[r], 0.0)

    def _maybe_resolve(self, key: str, st: CohortKey, pk: str, pc: PairCounts, look: Look) -> CohortVerdict | None:
        """Resolve once no scale up to the one that fired is significant (longer ones hold the excess for weeks)."""
        now_ms, g, inventory = look.now_ms, look.g, look.inventory
        if now_ms - pc.fired_ms < 3_600_000:
            return None
        if self._tests(key, st, pk, pc, look, self.resolve_alpha, max_scale=pc.fired_scale):
            return None
        pc.firing = False
        st.firing.discard(pk)
        pc.quiet_until_ms = now_ms + self.cooldown_ms
        pc.reported = list(pc.c)
        a, v = split_key(pk)
        # the cohorts nested in it or around it (a driver rolled out on its GPU model, its rack's
        # datacenter) held the same excess, explained by it while it fired. Resolved, that excess is
        # told: a day's or a week's scale still holding it must not page them as news once its
        # cooldown is over (a driver cohort paged 17 h after a GPU-model outbreak had ended)
        members, _ = inventory.members()
        mine: AbstractSet[str] = members.get((a, v), frozenset())
        for opk, opc in st.pairs.items():
            if opk != pk and not opc.firing and not opc.static:
                other: AbstractSet[str] = members.get(split_key(opk), frozenset())
                if other and mine and (other <= mine or mine <= other):
                    opc.reported = list(opc.c)
        i = pc.fired_scale
        return CohortVerdict(key, a, v, "resolved", now_ms, "page", "resolved", pc.c[i] / g[i], 0.0, 0.0,
                             notes=(f"resolved: no scale up to the one that fired significant at "
                                    f"p < {self.resolve_alpha:g}",))

    # ------------------------------------------------------------------ time and memory
    def rebase(self, factors: tuple[float, ...]) -> None:
        sq = tuple(f * f for f in factors)
        for st in self.keys.values():
            st.floor *= factors[self.longrun]
            scale_in_place(st.q, sq)
            for vec in (*st.tot.values(), *st.hosts.values(), *(pc.c for pc in st.pairs.values()),
                        *(pc.reported for pc in st.pairs.values())):
                scale_in_place(vec, factors)

    def sweep(self, now_ms: int, g: tuple[float, ...]) -> None:
        """Forget keys idle past the TTL, and hosts and pairs decayed to nothing at the longest scale."""
        L = self.longrun
        gL = g[L]
        for key in list(self.keys):
            st = self.keys[key]
            if st.last_ms < now_ms - self.ttl_ms and not st.firing:
                del self.keys[key]
                self.active.discard(key)
                self.static_keys.pop(key, None)
                self.inside.pop(key, None)
                self.pairs_changed(key)
                continue
            if st.floor / gL > DEAD:
                continue  # nothing of the key's can have decayed to nothing (at half a year, the common case)
            st.hosts = {h: hc for h, hc in st.hosts.items() if hc[L] / gL > DEAD}
            n = len(st.pairs)
            st.pairs = {k: pc for k, pc in st.pairs.items()
                        if pc.firing or pc.static or pc.c[L] / gL > DEAD or now_ms < pc.quiet_until_ms}
            if len(st.pairs) != n:
                self.pairs_changed(key)
            st.touched &= set(st.pairs)
            st.floor = min((*(hc[L] for hc in st.hosts.values()), *(pc.c[L] for pc in st.pairs.values())),
                           default=0.0)
        self.n_pairs = sum(len(st.pairs) for st in self.keys.values())
        self.family = sum(st.family for st in self.keys.values())

    def counts(self) -> dict[str, float]:
        return {k: s.total for k, s in self.keys.items()}

    # ------------------------------------------------------------------ derived caches
    def pairs_changed(self, key: str) -> None:
        """``key`` gained or lost a pair, or one turned static: its counts by tier (``slots``, ``bigs``) go."""
        self.slots.pop(key, None)
        self.bigs.pop(key, None)

    def restored(self) -> None:
        """Drop every derived cache after a restore: they key on the pairs and on an inventory version
        that a restore starts again."""
        self.inside.clear()
        self.slots.clear()
        self.bigs.clear()


def cohort_correlation_from_config(cfg: object, clock: DecayClock, rate_max_s: float = 0.0) -> CohortCorrelation:
    """The engine for ``cfg``; ``rate_max_s``: the rate test at the acute scales up to it (0: share test only)."""
    from fleetepi.detectors.config import DetectorConfig

    c: DetectorConfig = cfg  # type: ignore[assignment]
    scales = list(clock.scales_s)
    return CohortCorrelation(acute=[scales.index(s) for s in c.cohort_scales_s],
                             longrun=scales.index(c.cohort_longrun_s), fdr=c.corr_fdr, alpha=c.corr_alpha,
                             resolve_alpha=c.corr_resolve_alpha, rise_alpha=c.corr_rise_alpha,
                             explain_alpha=c.corr_explain_alpha, min_rr_lower=c.corr_min_rr_lower,
                             min_hosts=c.corr_min_hosts, min_units=c.corr_min_units,
                             min_cohort_hosts=c.corr_min_cohort_hosts, prior_units=c.corr_prior_units,
                             warmup_ms=int(c.warmup_s * 1000), cooldown_ms=int(c.cooldown_s * 1000),
                             ticket_cooldown_ms=int(c.ticket_cooldown_s * 1000), ttl_ms=int(c.key_ttl_s * 1000),
                             spike_share=c.corr_spike_share, spike_weight_max=c.corr_spike_weight_max,
                             watch_share=c.corr_watch_share if c.corr_watch_alpha else 0.0,
                             watch_min_share=c.corr_watch_min_share, static_share=c.corr_static_share,
                             static_weight_max=c.corr_static_weight_max,
                             look_s=c.corr_alpha_look_s,
                             rate_scales=[scales.index(s) for s in c.cohort_scales_s if s <= rate_max_s],
                             rate_recent=scales.index(min((s for s in c.cohort_scales_s if s >= 86400.0),
                                                          default=c.cohort_scales_s[-1])))
