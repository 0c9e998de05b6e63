"""Cohort correlation: is a key's incidence concentrated in hosts with one attribute value?

The engine of ``hardware_correlation`` (key = crash signature) and of the
cohort part of ``telemetry_cohort`` (key = telemetry kind and code).

What is counted: the key's *units* (``detectors.units``: a job once, a host
once an hour, bursts capped) as decayed counts at several scales (an hour to
a month, ``detectors.decay``), per attribute value of the host at the case's
time, and the host-time each value held in the fleet over the same kernel
(``Inventory.exposure``). Every ``attribute=value`` the hosts carry is a
hypothesis; the keys are whatever the announcements hold.

The test, at every step boundary, for each (key, value, scale) that got a
case: of the key's units on hosts announcing the attribute, is the share on
the value larger than the value's share of the host-time? A binomial tail on
*effective* counts (``kish_n`` over hosts: twenty cases from one crash-looping
host are nearer one unit than twenty), with the relative risk's lower 95 %
bound above ``min_rr_lower`` and at least ``min_hosts`` affected hosts in the
cohort. Benjamini-Hochberg runs over every test of the step, across all keys
and attributes at once, with an absolute ceiling ``alpha``.

New or static? A cohort that passes is compared with its own long-run share
(the month-to-half-year kernel minus the day's, or the window's when it is
longer): if its share now is not
significantly above its share before, the association has always been there
— a signature that lives on one GPU model because of where jobs run — and
is reported once as a ticket (``static_association``); its long-run relative
risk then becomes the baseline that later windows are tested against, so it
pages only if it rises. A key with no history before the window is new (a
page) unless it has been there since the stream began: then its first day
(recorded at the end of warm-up) is the comparison, and an association that
was there from the start is static. A key first seen after the warm-up has
no static association for ``NEW_KEY_MS``: its history is the outbreak's.

Explanation, strongest first among a key's accepted cohorts (and those
already firing): a cohort is reported only if its cases *outside* the
cohorts already accepted are still significant against its hosts outside
them. A datacenter whose excess lives in one rack is named in the rack's
notes; a cohort with the same hosts as an accepted one (a driver rolled out
to one GPU model only) is an alias: the data cannot tell them apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from operator import add
from typing import Literal

from msgspec import Struct, field

from fleetepi.detectors.decay import DecayClock, exposure_hours, kish_n, scale_in_place
from fleetepi.detectors.inventory import SEP, Inventory, pair_key, split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import (
    alpha_per_look,
    benjamini_hochberg,
    binom_sf_real,
    nb_sf_real,
    weighted_share_tail,
    z_above,
)

#: Decayed units below which a pair or a host is forgotten at a sweep.
DEAD = 1e-3
#: The rate test runs only where the share test already says the cohort holds more than its share at this
#: level over the key's cohorts (divided by their number): the rate test says the key rose, the share test
#: where. Three units of three on a rack of 2.4 % is p = 1.4e-5; on a CUDA version of 18 %, 0.006
RATE_SHARE_ALPHA = 1e-2
#: Decayed units at a scale for a host to count as affected there (``_HostScan.affected``, ``_rate_live``).
HOST_UNITS = 0.3
#: Pseudo-units of the rate test's gamma posterior (Jeffreys' half a unit): a key never seen on the
#: attribute's hosts before still has a rate, about half a unit over the host-time watched.
RATE_PRIOR_UNITS = 0.5
#: A key first seen after the warm-up is new for this long: none of its associations is static before.
NEW_KEY_MS = 3 * 86_400_000
#: A cohort holding under this share of the hosts its scale's host-time share says has shrunk within
#: that scale, and is not tested at it (``_tests``).
SHRUNK = 0.5


_ATTR_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


def attribute_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``""`` (all units) and ``"a\x1f"`` for each attribute of a host's pair keys (memoized: hosts share them)."""
    got = _ATTR_KEYS.get(keys)
    if got is None:
        if len(_ATTR_KEYS) > 65536:
            _ATTR_KEYS.clear()
        got = _ATTR_KEYS[keys] = ("", *[k[: k.index("\x1f") + 1] for k in keys])
    return got


class PairCounts(Struct):
    c: list[float]
    #: when the long scales (a day and more) were last tested: once per clock hour, they move slowly
    long_tested_ms: int = 0
    #: the counts already reported (at the last resolution): news is what came after
    reported: list[float] = field(default_factory=list)
    last_ms: int = 0
    firing: bool = False
    fired_ms: int = 0
    fired_scale: int = 0
    quiet_until_ms: int = 0
    #: a static association, reported as a ticket: its long-run relative risk is the baseline
    static: bool = False
    rho: float = 1.0
    ticket_until_ms: int = 0
    #: units on the pair, and its share of its attribute's host-time, at the end of warm-up (-1: not held then)
    early: float = 0.0
    early_p: float = -1.0

    def unreported(self, i: int) -> float:
        """Grown units at scale ``i`` since the last report (divide by the clock's ``g[i]``)."""
        return self.c[i] - self.reported[i] if self.reported else self.c[i]


class CohortKey(Struct):
    #: attribute key ("a\\x1f") or "" for all units -> inflated decayed units per scale
    tot: dict[str, list[float]] = field(default_factory=dict)
    #: inflated sum over hosts of their squared decayed units (Kish over hosts), per scale
    q: list[float] = field(default_factory=list)
    #: host -> inflated decayed units per scale
    hosts: dict[str, list[float]] = field(default_factory=dict)
    pairs: dict[str, PairCounts] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    firing: set[str] = field(default_factory=set)
    #: tests of this key that could reach significance (its share of the Benjamini-Hochberg family) ...
    family: int = 0
    #: ... of which rate tests (their units decay: ``CohortCorrelation._recount``)
    rate_family: int = 0
    first_ms: int = 0
    last_ms: int = 0
    total: float = 0.0
    #: attribute key -> the key's units on hosts announcing it, at the end of warm-up
    early: dict[str, float] = field(default_factory=dict)
    #: a lower bound of every host's and pair's inflated units at the longest scale (the sweep
    #: skips a key none of whose hosts or pairs can have decayed to nothing yet)
    floor: float = 0.0


class CohortVerdict(Struct, frozen=True):
    """A decision about one (key, attribute, value), for the owning detector to word."""

    key: str
    attribute: str
    value: str
    state: Literal["firing", "resolved"]
    ts_ms: int
    severity: Literal["page", "ticket"]
    finding: str
    observed: float
    expected: float
    window_s: float
    p_value: float | None = None
    relative_risk: float | None = None
    lower_ci: float | None = None
    upper_ci: float | None = None
    hosts: int = 0
    notes: tuple[str, ...] = ()
    #: what ``expected`` is from, in words
    basis: str = "its share of the fleet"


class _Test(Struct):
    key: str
    pair: str
    scale: int
    p: float
    k: float
    n: float
    p0: float
    rr: float
    lo: float
    hi: float
    #: the rate test's expected units in the cohort (-1: found by the share test)
    mu: float = -1.0

    @property
    def by_rate(self) -> bool:
        """Found by the rate test: explained, classified and worded by its own rules."""
        return self.mu >= 0


def rate_ratio_ci(a: float, c: float, e1: float, e0: float, z: float = 1.96) -> tuple[float, float, float]:
    """Rate ratio of ``a`` cases over ``e1`` host-time against ``c`` over ``e0``, log-normal 95 % CI."""
    if e1 <= 0 or e0 <= 0:
        return (math.inf, 0.0, math.inf)
    # Haldane: half a case added to each side when either has less than one (effective counts)
    a2, c2 = (a + 0.5, c + 0.5) if a < 1.0 or c < 1.0 else (a, c)
    rr = (a2 / e1) / (c2 / e0)
    se = min(math.sqrt(1.0 / a2 + 1.0 / c2), 50.0)
    return rr, rr * math.exp(-z * se), rr * math.exp(z * se)


class Share(Struct, frozen=True):
    """A cohort's share of its key's units at one scale (``CohortCorrelation._share``)."""

    #: effective units in the cohort and on the attribute's hosts (the key's Kish count, split by share)
    k: float
    n: float
    #: the cohort's share of the attribute's host-time: the share expected with no association
    p0: float
    #: decayed units in the cohort, and host-hours in it and outside it
    c_in: float
    e_in: float
    e_out: float


class _HostScan:
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


def _static_rho(st: CohortKey, pk: str) -> float:
    """The long-run relative risk of ``st``'s pair ``pk`` if it is a ticketed static association, else 0."""
    pc = st.pairs.get(pk)
    return pc.rho if pc is not None and pc.static else 0.0


class InsideStatic(Struct):
    """A key's cohorts whose share its static associations raise, for one set of statics and inventory version.

    ``of``: pair -> (the relative risk its share is expected at, the static pairs that raise it, in words).
    """

    statics: int = 0
    version: int = -1
    of: dict[str, tuple[float, str]] = field(default_factory=dict)


#: a cohort inside no static association: expected at its share of the host-time
_OUTSIDE = (1.0, "")


def _given_by(statics: str) -> str:
    """Words for the static associations that raise a cohort's expected share (``_inside_static``)."""
    return f"the static association{'s' if ' and ' in statics else ''} {statics} give{'' if ' and ' in statics else 's'} it"


def at_risk(p0: float, rho: float) -> float:
    """A share ``p0`` of host-time as a share of units at relative risk ``rho`` (on the odds)."""
    return p0 * rho / (p0 * rho + 1.0 - p0)


def odds_ratio(share: float, p0: float) -> float:
    """The relative risk (on the odds) that puts a share ``share`` of the units on ``p0`` of the host-time."""
    return (share / (1 - share)) / (p0 / (1 - p0))


class _Budget(Struct, frozen=True):
    """One step's weighted Benjamini-Hochberg: the weight of a spiking key's test, a watched key's, a static
    association's, any other's (``static`` 0: static associations have no tier of their own).

    ``spike`` is the spike tier's average; ``spike_by`` its weight per key and attribute (``_slot``)."""

    spike: float = 1.0
    watch: float = 1.0
    rest: float = 1.0
    family: int = 0
    static: float = 0.0
    spike_by: dict[str, float] = field(default_factory=dict)

    def tier(self, key: str, spiking: AbstractSet[str], watched: AbstractSet[str], big: bool = True,
             static: bool = False) -> Literal["static", "spike", "watch", "rest"]:
        """A test's tier: a static association's; a spiking key's; a watched key's on a big cohort
        (``watch_min_share``); the rest."""
        if static and self.static > 0.0:
            return "static"
        return "spike" if key in spiking else "watch" if big and key in watched else "rest"

    def weight(self, tier: str, key: str, pair: str) -> float:
        """The weight of ``key``'s test of ``pair`` in ``tier``."""
        if tier == "spike" and self.spike_by:
            return self.spike_by.get(_slot(key, pair), self.spike)
        return float(getattr(self, tier))

    def of(self, key: str, spiking: AbstractSet[str], watched: AbstractSet[str], big: bool = True,
           static: bool = False, pair: str = "") -> float:
        """A test's weight: its tier's (``tier``)."""
        return self.weight(self.tier(key, spiking, watched, big, static), key, pair)


def _slot(key: str, pair: str) -> str:
    """A key's attribute, as ``_Budget.spike_by`` names it."""
    return key + "\x1e" + pair[: pair.find(SEP) + 1]


#: What a weighted test's tier says in its alert's notes.
_WHY_WEIGHTED = {"static": "a static association, asked whether it rises",
                 "spike": "the signature is spiking fleet-wide",
                 "watch": "the signature is rising fleet-wide, short of a spike (on watch)", "rest": ""}


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
    #: key -> its cohorts whose share its static associations raise (``_inside_static``): derived from
    #: the state and the inventory, emptied on restore (an inventory's version starts again there)
    inside: dict[str, InsideStatic] = field(default_factory=dict)
    #: key -> its pairs outside the static tier, counted by attribute (``_slot``): derived, dropped when the
    #: key gains or loses a pair or a pair turns static (``_spike_split`` reads it at every step)
    slots: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the look the ceiling ``alpha`` is per (``corr_alpha_look_s``; 0: per test)
    look_s: float = 0.0
    #: the scales the rate test runs at (none: off; ``_rate_expected``), and the scale whose units are
    #: too recent for a key's earlier rate or share (the long-run kernel minus this one's; ``_classify``)
    rate_scales: list[int] = field(default_factory=list)
    rate_recent: int = 0
    #: when every key's share of the family is next recounted (``_recount``)
    recount_ms: int = 0
    #: when the static associations' long-run risks are next learned again (``_relearn``)
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
                self.slots.pop(key, None)
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
        more of the false-discovery budget (``_weights``).
        """
        g = clock.g(now_ms)
        look = Look(now_ms, g, inventory, clock)
        n_star = max(self._n_star, self.min_units)
        if now_ms >= self.recount_ms:
            self._recount(now_ms, g, n_star)
        if now_ms >= self.relearn_ms:
            self.relearn_ms = now_ms + 86_400_000
            self._relearn(look)
        warm = self.start_ms is not None and now_ms >= self.start_ms + self.warmup_ms
        if warm and not self.early_taken:
            self._take_early(now_ms, g, inventory)
        out: list[CohortVerdict] = []
        tests: list[_Test] = []
        spiking = spiking & self.keys.keys() if spiking and self.spike_share > 0 else frozenset()
        watched = (watched & self.keys.keys()) - spiking if watched and self.watch_share > 0 else frozenset()
        budget = self._weights(spiking, watched, 0, inventory)
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
            testable = [i for i in self.acute if n_eff[i] >= self.min_units or self._rate_live(all_, i, g)]
            self._count(st, n_eff, all_, g, n_star)
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
        budget = self._weights(spiking, watched, len(tests), inventory)
        tiers = [budget.tier(t.key, spiking, watched, t.key in watched and self._big(t.pair, inventory),
                             self.keys[t.key].pairs[t.pair].static) for t in tests]
        weights = [budget.weight(tier, t.key, t.pair) for t, tier in zip(tests, tiers)]
        family = budget.family
        rejected = benjamini_hochberg([t.p / w for t, w in zip(tests, weights)], self.fdr, family,
                                      [t.key for t in tests])
        accepted: dict[str, list[_Test]] = {}
        weight_of: dict[str, tuple[float, str]] = {}
        for t, w, tier, rej in zip(tests, weights, tiers, rejected):
            age = now_ms - self.keys[t.key].first_ms
            if rej and t.p <= self.ceiling(clock.scales_s[t.scale], age) * w and t.lo > self.min_rr_lower:
                accepted.setdefault(t.key, []).append(t)
                if w > weight_of.get(t.key, (0.0, ""))[0]:
                    weight_of[t.key] = (w, _WHY_WEIGHTED[tier])
        for key in sorted(accepted):
            weight, why = weight_of[key]
            out.extend(self._report(key, self.keys[key], accepted[key], family, weight, look, why))
        return out

    def _relearn(self, look: Look) -> None:
        """Learn each static association's long-run risk again, daily, from its units older than a week.

        Why: the risk is learned when the association is ticketed, often on
        its first day, from few units shrunk toward one by ``prior_units``:
        a datacenter at a true 3.5x was learned at 2.2, and a high first day
        gives too much. Its rises are tested against that risk, and so are
        the cohorts sharing its hosts (``_inside_static``). Units older than
        the week's scale (the long-run kernel minus the week's) leave out a
        rise of the last days, as the rise tests ask about those; a pair
        firing or cooling down keeps its risk, and one with fewer than twice
        ``prior_units`` effective older units keeps the risk it was ticketed
        with. On the tuning seeds (20 runs) the same outbreaks and false
        pages, six rising static associations 0.3-4.2 h sooner and a
        wear-out 29 h sooner.
        """
        now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
        L = self.longrun
        j = max((i for i in self.acute if clock.scales_s[i] <= 7 * 86400.0), default=None)
        if j is None:
            return
        for key in sorted(self.static_keys):
            st = self.keys.get(key)
            if st is None:
                continue
            all_ = st.tot.get("")
            if all_ is None or all_[L] <= 0:
                continue
            factor = kish_n(all_[L] / g[L], st.q[L] / (g[L] * g[L])) / (all_[L] / g[L])
            changed = False
            for pk, pc in sorted(st.pairs.items()):
                if not pc.static or pc.firing or now_ms < pc.quiet_until_ms:
                    continue
                a, v = split_key(pk)
                tot = st.tot.get(a + "\x1f")
                if tot is None:
                    continue
                n_old = self._older(tot, j, g) * factor
                k_old = self._older(pc.c, j, g) * factor
                if n_old < 2 * self.prior_units:
                    continue
                e_v = inventory.exposure((a, v), now_ms)
                e_a = inventory.exposure((a, ""), now_ms)
                eo_v, eo_a = e_v[L] - e_v[j], e_a[L] - e_a[j]
                if eo_a <= 0 or eo_v <= 0 or eo_v >= eo_a:
                    continue
                rho = max(self._shrunk_rr(k_old, n_old, eo_v / eo_a), 1.0)
                if rho != pc.rho:
                    pc.rho, changed = rho, True
            if changed:
                self.inside.pop(key, None)

    def _rate_live(self, all_: list[float], i: int, g: tuple[float, ...]) -> bool:
        """Could a rate test of the key run at scale ``i``: the units of ``min_hosts`` affected hosts."""
        return i in self.rate_scales and all_[i] / g[i] >= self.min_hosts * HOST_UNITS

    def _count(self, st: CohortKey, n_eff: Mapping[int, float], all_: list[float], g: tuple[float, ...],
               n_star: float) -> None:
        """Set the key's share of the Benjamini-Hochberg family: its pairs at every scale whose test could fire.

        Tarone, approximately: a key with too few effective units for a
        half-the-fleet cohort to reach p <= q (``n_star``) brings no share
        tests to the family. A smaller cohort can reach it with fewer units
        (p0 ** n), so this can undercount; what bounds those tests is the
        absolute corr_alpha (1e-6 by default), stricter than BH's q / family
        unless the family exceeds q / corr_alpha (10,000 tests). A rate test
        counts while the key holds the units it needs at that scale; those
        decay, so ``_recount`` drops an idle key's.
        """
        n = len(st.pairs)
        share = sum(1 for i in self.acute if n_eff[i] >= n_star)
        rate = n * sum(1 for i in self.rate_scales if n_eff[i] < n_star and self._rate_live(all_, i, g))
        fam = n * share + rate
        self.family += fam - st.family
        st.family, st.rate_family = fam, rate

    def _recount(self, now_ms: int, g: tuple[float, ...], n_star: float) -> None:
        """The rate tests' share of the family afresh, hourly.

        Why: a key's share was set when it was last touched. Its rate tests'
        units decay: on a noisy fleet, keys idle for hours held nine in ten
        of the rate tests' slots (400,000 of 450,000), which raised every
        test's bar for nothing. Share tests need no recount: a key's
        effective units (Kish) do not change as its units decay alike.
        """
        self.recount_ms = now_ms + 3_600_000
        for st in self.keys.values():
            if st.rate_family:
                all_ = st.tot[""]
                self._count(st, {i: kish_n(all_[i] / g[i], st.q[i] / (g[i] * g[i])) for i in self.acute},
                            all_, g, n_star)

    def _big(self, pk: str, inventory: Inventory) -> bool:
        """Does the cohort hold ``watch_min_share`` of the hosts announcing its attribute?"""
        a = pk[: pk.index("\x1f")]
        return inventory.sizes.get(pk, 0) >= self.watch_min_share * inventory.attribute_hosts.get(a, 0)

    def _weights(self, spiking: AbstractSet[str], watched: AbstractSet[str], n_tests: int,
                 inventory: Inventory) -> _Budget:
        """The weights of a weighted BH: of a spiking key's tests, a watched key's, a static association's,
        any other's; and the family.

        Why weigh: the family is every (key, cohort, scale) of the fleet,
        hundreds of thousands, so a cohort of 40 % of the hosts needs ~18 of
        a key's units all inside it before it is significant. Once a key's
        fleet-wide rate is above its baseline, where it lives is a question
        about its few hundred cohorts. Weighted Benjamini-Hochberg (Genovese,
        Roeder and Wasserman 2006) keeps the false discovery rate when the
        weights average one over the family and do not depend on the tested
        p-values under the null: a share test is conditional on the key's
        units, and whether the key's total rose says nothing about which
        hosts its units fell on when no cohort is special. So the spiking
        keys' tests (every pair at every scale, counted in full) get
        ``spike_share`` of the family's weight; the watched keys' tests of
        big cohorts (``watch_min_share`` of the hosts: a rise seen fleet-wide
        that a small cohort holds is sharp in its own share test, and the
        racks of a key whose day swung up are where chance lands)
        ``watch_share``; at most ``spike_weight_max`` each. Every static
        association's test (against its own long-run risk: does it rise?)
        gets ``static_share``, at most ``static_weight_max`` each, and is in
        no other tier: it is tested at every step while it lives, so its
        ceiling is paid at every look. The rest share what is left. A tier
        whose weight would not exceed one is left with the rest.
        """
        family = max(self.family, n_tests)
        statics = self.static_keys if self.static_share > 0 else {}
        #: (tier, its keys, its share of the family's weight)
        tiers = [(name, keys, share)
                 for name, keys, share in (("spike", spiking, self.spike_share), ("watch", watched, self.watch_share),
                                           ("static", statics.keys(), self.static_share))
                 if keys and share > 0]
        if not tiers:
            return _Budget(family=family)
        sizes, held = [], 0.0
        for name, keys, _ in tiers:
            n = 0
            for k in keys:
                st = self.keys[k]
                # a spiking key's pairs all move to its tier, a watched key's big ones, every key's static ones
                # (a static pair is in no other tier); each with its part of what the key held in the family
                if name == "spike":
                    m = len(st.pairs) - statics.get(k, 0)
                elif name == "watch":
                    m = sum(1 for pk, pc in st.pairs.items()
                            if self._big(pk, inventory) and not (statics and pc.static))
                else:
                    m = statics[k]
                n += m
                held += st.family * m / len(st.pairs) if st.pairs else 0.0
            sizes.append(n * len(self.acute))
        family = max(round(family - held) + sum(sizes), n_tests)
        w = [min(self.static_weight_max if name == "static" else self.spike_weight_max, share * family / n)
             if 0 < n < family else 1.0 for (name, _, share), n in zip(tiers, sizes)]
        up = {name: (x, n) for (name, _, _), x, n in zip(tiers, w, sizes) if x > 1.0}
        if not up:
            return _Budget(family=family)
        by: dict[str, float] = {}
        if "spike" in up:
            by, mass = self._spike_split(spiking, self.spike_share * family)
            up["spike"] = (mass / up["spike"][1], up["spike"][1])
        rest = (family - sum(x * n for x, n in up.values())) / (family - sum(n for _, n in up.values()))
        return _Budget(up.get("spike", (rest, 0))[0], up.get("watch", (rest, 0))[0], rest, family,
                       up.get("static", (rest, 0))[0] if statics else 0.0, by)

    def _spike_split(self, spiking: AbstractSet[str], mass: float) -> tuple[dict[str, float], float]:
        """The spike tier's weight per key and attribute, and the weight it hands out in all.

        Evenly over the spiking keys, then over each key's attributes, then
        over the attribute's values and the scales. Per test evenly, a key's
        sixty racks and hundred PDUs held most of its weight; a rack is
        significant at three or four units wherever its weight is, while a
        GPU model holding two thirds of the fleet needs tens of units at a
        relative risk of 3-8 and every factor of weight spares it several
        (a half-the-fleet cohort at RR 8 waited 16 h at weight 33). The
        weights still sum to the tier's share of the family: the weighted
        BH stays valid (they depend on which cohorts a key has units on, not
        on where in them).
        """
        by: dict[str, float] = {}
        spent = 0.0
        n_scales = len(self.acute)
        for k in sorted(spiking):  # a fixed order: the sum is the same in every run and worker
            values = self.slots.get(k)
            if values is None:
                values = self.slots[k] = {}
                for pk, pc in self.keys[k].pairs.items():
                    if not (self.static_share > 0 and pc.static):
                        slot = _slot(k, pk)
                        values[slot] = values.get(slot, 0) + 1
            for slot, m in sorted(values.items()):
                x = min(self.spike_weight_max, mass / len(spiking) / len(values) / (m * n_scales))
                by[slot] = x
                spent += x * m * n_scales
        return by, spent

    def _take_early(self, now_ms: int, g: tuple[float, ...], inventory: Inventory) -> None:
        """Record every key's first day: units per attribute and per pair, and each pair's host-time share.

        What a static association is judged against while the long scales
        still hold everything watched (``_classify``).
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

    def _share(self, st: CohortKey, pk: str, pc: PairCounts, i: int, look: Look) -> Share | None:
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
               n_eff: dict[int, float] | None = None) -> list[_Test]:
        out: list[_Test] = []
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
        rho = pc.rho if pc.static else self._inside_static(key, pk, inventory)[0]
        p_proxy = n1 / n_all
        if rho != 1.0:
            p_proxy = at_risk(p_proxy, rho)
        for i in self.acute if scales is None else scales:
            if max_scale is not None and i > max_scale:
                break
            # the cheap screen, on today's cohort sizes and the key's effective units, before any
            # exposure is integrated: most cohorts hold about their share
            gi = g[i]
            c_a = tot[i] / gi
            c_k = (c[i] - rep[i] if rep else c[i]) / gi
            if c_k < 1.0 or c_a <= 0:
                continue
            if n_eff is not None:
                nn = n_eff[i] * c_a / (all_[i] / gi)
                mean = nn * p_proxy
                if z_above(nn * c_k / c_a, mean, mean * (1.0 - p_proxy)) < 3.0:
                    continue  # the exact test asks for p < 1e-6 (z ~ 4.8); sizes stand in for host-time
            sh = self._share(st, pk, pc, i, look)
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
                mu, size = self._rate_expected(st, a, i, look, e_v)
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
            out.append(_Test(key, pk, i, p, k, n, p0, rr, lo, hi, mu))
        return out

    def _inside_static(self, key: str, pk: str, inventory: Inventory) -> tuple[float, str]:
        """(the relative risk ``pk``'s share is expected at, the static associations that raise it) or (1, "").

        Why: a static association (a signature 3x as frequent on one node
        pool since day one) raises every cohort that holds its hosts: the
        pool's GPU model, its driver, its racks. Tested against their share
        of the host-time, they held more than it at every step: candidates
        each time (most steps' reports were spent explaining them away), and
        a rack whose day swung up inside a static datacenter paged as an
        outbreak at p=1e-9, where against the datacenter's risk it was
        p=1e-6. A cohort of ``p0`` of the hosts that holds ``x`` of them
        inside a static cohort of ``q`` (another attribute of the same key,
        long-run risk ``rho``) is expected at ``(p0 + x (rho - 1)) / (1 + q
        (rho - 1))`` of the units; only where that is above ``p0`` (a cohort
        mostly outside is not tested more sharply for it). Several combine
        (``_raised_by_statics``). Recomputed when the key's statics or the
        inventory change.
        """
        n_static = self.static_keys.get(key, 0)
        if not n_static:
            return _OUTSIDE
        got = self.inside.get(key)
        if got is None or got.statics != n_static or got.version != inventory.version:
            got = self.inside[key] = InsideStatic(n_static, inventory.version,
                                                  self._raised_by_statics(self.keys[key], inventory))
        return got.of.get(pk, _OUTSIDE)

    @staticmethod
    def _raised_by_statics(st: CohortKey, inventory: Inventory) -> dict[str, tuple[float, str]]:
        """``_inside_static`` for every cohort of ``st`` at once, from what each static cohort shares with it.

        With several static cohorts, each host's excess is that of the
        riskiest one it is in: a later static cohort adds its excess only for
        the part of its hosts outside the riskier ones (a node pool inside a
        static GPU model), taken as spread evenly over its hosts. Disjoint
        ones (a node pool and a SKU) add up exactly.
        """
        sizes, attribute_hosts = inventory.sizes, inventory.attribute_hosts
        statics = sorted((-pc.rho, pk) for pk, pc in st.pairs.items() if pc.static and pc.rho > 1.0)
        #: cohort -> the extra weight of its hosts, and the static cohorts that give it; per attribute,
        #: the extra weight of all the hosts announcing it
        extra: dict[str, float] = {}
        given_by: dict[str, list[str]] = {}
        extra_attr: dict[str, float] = {}
        seen: list[tuple[str, int]] = []
        for neg_rho, spk in statics:
            n_s = sizes.get(spk, 0)
            if not n_s:
                continue
            table = inventory.overlaps(split_key(spk))
            # the part of this cohort's hosts outside the riskier static cohorts (even spread assumed)
            outside = 1.0
            for rpk, _ in seen:
                outside *= max(1.0 - table.get(rpk, 0) / n_s, 0.0)
            seen.append((spk, n_s))
            w = (-neg_rho - 1.0) * outside
            if w <= 0.0:
                continue
            announcing: dict[str, int] = {}  # the static cohort's hosts that announce each attribute
            for pk, x_hosts in table.items():
                if x_hosts <= 0:
                    continue
                a = pk[: pk.index("\x1f")]
                announcing[a] = announcing.get(a, 0) + x_hosts
                if pk != spk:
                    extra[pk] = extra.get(pk, 0.0) + w * x_hosts
                    given_by.setdefault(pk, []).append("=".join(split_key(spk)))
            for a, n in announcing.items():
                extra_attr[a] = extra_attr.get(a, 0.0) + w * n
        out: dict[str, tuple[float, str]] = {}
        for pk, x_w in extra.items():
            pc = st.pairs.get(pk)
            a = pk[: pk.index("\x1f")]
            n_a, n1 = attribute_hosts.get(a, 0), sizes.get(pk, 0)
            if pc is None or pc.static or not 0 < n1 < n_a:
                continue
            p0 = n1 / n_a
            share = (n1 + x_w) / (n_a + extra_attr.get(a, 0.0))
            if p0 < share < 1.0:
                out[pk] = (odds_ratio(share, p0), " and ".join(given_by[pk]))
        return out

    def _rate_expected(self, st: CohortKey, a: str, i: int, look: Look, e_v: float) -> tuple[float, float]:
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
        c_old = self._older(tot, r, g)
        e_a = look.inventory.exposure((a, ""), look.now_ms)
        e_old = e_a[L] - e_a[r]
        size = c_old + RATE_PRIOR_UNITS
        if e_old <= 0:
            return math.inf, size
        return e_v * size / e_old, size

    def _tail(self, st: CohortKey, t: _Test, look: Look, weights_of: dict[tuple[str, int], list[float]]) -> float:
        """The cohort's decayed units against each host's own weight (``stats.weighted_share_tail``).

        The test that found it counts the key's effective units, as if the
        cohort's were weighted like the rest. A few fresh units on a rack of a
        key whose other units have faded are not that much evidence. O(hosts
        of the key): only for tests that would otherwise be reported, and once
        per attribute and scale in a step (``weights_of``: every rack of a key
        weighs the same hosts).
        """
        i, gi = t.scale, look.g[t.scale]
        attr = split_key(t.pair)[0]
        weights = weights_of.get((attr, i))
        if weights is None:
            announcing: AbstractSet[str] = look.inventory.members()[1].get(attr, frozenset())
            weights = weights_of[(attr, i)] = [hc[i] / gi for h, hc in st.hosts.items() if h in announcing]
        return weighted_share_tail(weights, st.pairs[t.pair].unreported(i) / gi, t.p0)

    def _report(self, key: str, st: CohortKey, tests: list[_Test], family: int, weight: float, look: Look,
                why_weight: str = _WHY_WEIGHTED["spike"]) -> list[CohortVerdict]:
        """Explain nested and confounded cohorts, decide page or ticket, and word the verdicts."""
        now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
        by_pair: dict[str, list[_Test]] = {}
        for t in sorted(tests, key=lambda t: (t.p, t.scale)):
            by_pair.setdefault(t.pair, []).append(t)
        # each pair's strongest test that its own hosts' weights bear out (a few fresh units of a key whose
        # many others have faded are not what the key's effective count makes of them)
        best: dict[str, _Test] = {}
        weights_of: dict[tuple[str, int], list[float]] = {}
        for pair, found in by_pair.items():
            for t in found:
                # (the rate test counts the cohort's own units against their expectation: no share to weigh)
                if t.by_rate or self._tail(st, t, look, weights_of) <= \
                        self.ceiling(clock.scales_s[t.scale], now_ms - st.first_ms) * weight:
                    best[pair] = t
                    break
        members, by_attr = inventory.members()
        scan = _HostScan(st, inventory)
        # static associations above their own long-run risk in this step: candidates, not explanations
        rising = frozenset(pk for pk in best if _static_rho(st, pk) > 0.0)
        # cohorts of this key already reported (firing, static, or resolved recently) explain too
        accepted: list[tuple[str, AbstractSet[str]]] = [(pk, members.get(split_key(pk), frozenset()))
                                                     for pk, pc in sorted(st.pairs.items())
                                                     if pc.firing or pc.static or now_ms < pc.quiet_until_ms]
        notes_of: dict[str, list[str]] = {pk: [] for pk, _ in accepted}
        fresh: set[str] = set()
        chosen: list[_Test] = []
        for t in sorted(best.values(), key=lambda t: (t.p, -t.k, t.pair)):
            a, v = split_key(t.pair)
            mine: AbstractSet[str] = members.get((a, v), frozenset())
            # (a static association's own test is not its alias: that is how it pages when it rises)
            alias = next((apk for apk, amem in accepted if amem == mine and apk != t.pair), None)
            if alias is not None:
                # its note is worded only where it is read: on a cohort found in this step (the earlier
                # ones are not reported again); a standing alias of a static association is skipped at
                # every step, and counting its hosts there was most of what those steps cost
                if alias in fresh and scan.hosts_in(t.pair, t.scale, g[t.scale]) >= self.min_hosts:
                    notes_of[alias].append(f"alias: {a}={v} has exactly the same hosts (confounded; the data "
                                           f"cannot tell them apart)")
                continue
            if scan.hosts_in(t.pair, t.scale, g[t.scale]) < self.min_hosts:
                continue
            explained = self._explained(st, t, a, v, mine, accepted, look, scan, rising)
            if explained is not None:
                by, text = explained
                if by in notes_of:
                    notes_of[by].append(text)
                continue
            accepted.append((t.pair, mine))
            notes_of[t.pair] = []
            fresh.add(t.pair)
            chosen.append(t)
        chosen = self._narrowest(st, chosen, members, notes_of, look, scan)
        out = []
        for t in chosen:
            pc = st.pairs[t.pair]
            a, v = split_key(t.pair)
            severity, finding, why = self._classify(key, st, pc, t, look)
            if severity == "ticket" and now_ms < pc.ticket_until_ms:
                continue
            hosts = scan.hosts_in(t.pair, t.scale, g[t.scale])
            scale_s = clock.scales_s[t.scale]
            bh = (f"Benjamini-Hochberg at q={self.fdr:g} over {family} tests across all keys" +
                  (f", this one weighted x{weight:.3g}: {why_weight}" if weight > 1 else ""))
            rho, within = (pc.rho, "") if pc.static else self._inside_static(key, t.pair, inventory)
            # (an expected share at a relative risk other than one: undo that for the words)
            held = t.p0 / (rho - t.p0 * (rho - 1.0))
            if t.by_rate:
                test = (f"rate test: {pc.unreported(t.scale) / g[t.scale]:.3g} units on {a}={v} at the "
                        f"{scale_s / 3600:g} h scale where the key's earlier rate on hosts announcing {a} expects "
                        f"{t.mu:.3g} (negative binomial), p={t.p:.3g}; {bh}. They are {t.k:.3g} of the "
                        f"{t.n:.3g} effective units fleet-wide, on {held:.1%} of the host-time: too few for the "
                        f"share test alone")
            elif pc.static:
                test = (f"binomial test on effective units: {t.k:.3g} of {t.n:.3g} of the key's units (hosts "
                        f"announcing {a}) on {a}={v}, which holds {held:.1%} of their host-time at the "
                        f"{scale_s / 3600:g} h scale, {t.p0:.1%} of the units at its long-run relative risk "
                        f"{pc.rho:.3g}; p={t.p:.3g}; {bh}")
            else:
                inside = (f", {t.p0:.1%} of the units at the relative risk {rho:.3g} {_given_by(within)}"
                          if within else "")
                test = (f"binomial test on effective units: {t.k:.3g} of {t.n:.3g} of the key's units (hosts "
                        f"announcing {a}) on {a}={v}, which holds {held:.1%} of their host-time at the "
                        f"{scale_s / 3600:g} h scale{inside}; p={t.p:.3g}; {bh}")
            # (a static association paging as rising: its expectation and risk are at and over its long-run risk)
            rising_static = pc.static and severity == "page"
            rel = ("relative risk over its long-run one" if rising_static else
                   "relative risk over what its static associations give it" if within else "relative risk")
            notes = [test,
                     f"{rel} {t.rr:.3g} (95% CI {t.lo:.3g}-{t.hi:.3g}); {hosts} affected hosts in the cohort",
                     why, *notes_of.get(t.pair, [])]
            if severity == "page":
                pc.firing, pc.fired_ms, pc.fired_scale = True, now_ms, t.scale
                st.firing.add(t.pair)
                self.active.add(key)
            else:
                if not pc.static:
                    self.static_keys[key] = self.static_keys.get(key, 0) + 1
                    self.slots.pop(key, None)
                pc.static = True
                pc.rho = max(self._longrun_rr(st, t.pair, pc, look), 1.0)
                pc.ticket_until_ms = now_ms + self.ticket_cooldown_ms
                notes.append(f"static: later windows are tested against its long-run relative risk {pc.rho:.3g}")
            basis = ("the key's earlier rate" if t.by_rate else
                     f"its share of the fleet at its long-run risk x{pc.rho:.2g}" if rising_static else
                     f"its share of the fleet at the risk x{rho:.2g} {_given_by(within)}" if within else None)
            out.append(CohortVerdict(key, a, v, "firing", now_ms, severity, finding, t.k,
                                     t.mu if t.by_rate else t.n * t.p0, scale_s, t.p, t.rr, t.lo, t.hi, hosts,
                                     tuple(notes), **({"basis": basis} if basis else {})))
        return out

    def _narrowest(self, st: CohortKey, chosen: list[_Test], members: Mapping[tuple[str, str], AbstractSet[str]],
                   notes_of: dict[str, list[str]], look: Look, scan: _HostScan) -> list[_Test]:
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
                explained = self._explained(st, t, a, v, mine, inner, look, scan)
                if explained is not None:
                    by, text = explained
                    notes_of[by].append(text)
                    continue
            keep.append(t)
        return keep

    def _explained_rate(self, t: _Test, a: str, v: str, mine: AbstractSet[str],
                        accepted: list[tuple[str, AbstractSet[str]]], scan: _HostScan,
                        g: tuple[float, ...]) -> tuple[str, str] | None:
        """``_explained`` for a rate test's cohort: by its affected hosts, which is all its few units can say.

        A residual's share needs units a rate test does not have (three
        hosts of a rack, on a rare channel). So a cohort whose affected
        hosts all lie in an accepted one is that one's consequence (a rack's
        node pool, its datacenter), unless it is the narrower of the two and
        holds them beyond its share of the wider (``_concentrated``): then
        it is a finding of its own, and ``_narrowest`` drops the wider.
        Accepted strongest first, the narrowest cohort that holds every
        affected host is the one named: with three hosts on one of a rack's
        two power strips, the strip is eight times likelier than the rack,
        though not significantly (the same three on one of a leaf switch's
        two racks name the rack).
        """
        hit = scan.affected(t.pair, t.scale, g[t.scale])
        for apk, amem in accepted:
            if not hit <= amem or mine < amem and self._concentrated(hit, mine, amem):
                continue
            aa, av = split_key(apk)
            return apk, (f"nested: the {len(hit)} affected hosts of {a}={v} are all on {aa}={av}: that "
                         f"cohort's excess")
        return None

    def _concentrated(self, hit: AbstractSet[str], part: AbstractSet[str], whole: AbstractSet[str]) -> bool:
        """Do the affected hosts ``hit`` fall on ``part`` beyond its share of ``whole``'s hosts (binomial)?"""
        k, n = float(len(hit & part)), float(len(hit & whole))
        return n > 0 and binom_sf_real(k, n, len(part) / len(whole)) <= self.explain_alpha

    @property
    def _n_star(self) -> float:
        """Effective units before a half-fleet cohort can reach p <= fdr (smaller cohorts need fewer)."""
        return math.log(self.fdr) / math.log(0.5)

    def _explained(self, st: CohortKey, t: _Test, a: str, v: str, mine: AbstractSet[str],
                   accepted: list[tuple[str, AbstractSet[str]]], look: Look, scan: _HostScan,
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
            return self._explained_rate(t, a, v, mine, accepted, scan, g)
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
        statics_only = all(_static_rho(st, apk) > 0.0 for apk, _, _ in (*inner, *outer, *crossing))
        if statics_only:
            # only static associations touch it: their weighed share first (set sizes only), before the
            # host scans below, which a cohort explained at every step would pay at every step (Titan)
            by_static = self._explained_static(st, t, a, v, mine, usable, inventory, now_ms)
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
            gone, k_res, n_res, p_res, rr_res = self._residual(units, t.pair, mine, union, attr_hosts - skip)
            if gone:
                return inner[0][0], (f"nested: also explains the excess of the wider cohort {a}={v} (outside it: "
                                     f"{k_res:.3g} of {n_res:.3g} units, relative risk {rr_res:.2g}, p={p_res:.3g})")
        for apk, amem, _ in outer:
            # a wider cohort that paged before this step: within it, a narrower one whose few units cannot tell
            # its risk from 1 is its excess (node pools inside a wearing GPU model paged hours after it). In the
            # same step they compete as equals (a deadlocked job's racks, not the cluster they are in)
            apc = st.pairs.get(apk)
            earlier = apc is not None and (apc.firing or apc.static)
            got = self._within(units, mine, amem, any_rr=earlier)
            if got is not None:
                k_in, n_in, share, p_in, rr_in = got
                aa, av = split_key(apk)
                return apk, (f"within {aa}={av}: {a}={v} holds {k_in:.3g} of its {n_in:.3g} units for {share:.0%} "
                             f"of its hosts (relative risk {rr_in:.2g}, p={p_in:.3g}): the wider cohort's excess")
        if crossing and self._moved(units, akey, now_ms, tau_s, inventory, st.first_ms):
            crossing = []
        # one accepted cohort at a time, then all of them at once: a job's two racks, each mostly on one BIOS,
        # hold the BIOS's whole excess together and neither does alone
        groups = [[x] for x in crossing] + ([crossing] if len(crossing) > 1 else [])
        for group in groups:
            amem = frozenset().union(*(m for _, m, _ in group))
            gone, k_res, n_res, _, _ = self._residual(units, t.pair, mine, amem,
                                                      attr_hosts - unknown(amem, {b for _, _, b in group}))
            if not gone:
                continue
            # within it, by host-time on it: a roll-out's early hosts (one pool first) held it longest
            held: dict[str, float] = {}
            for apk, m, _ in group:
                for h in m:
                    since = inventory.held_since(h, apk)
                    held[h] = max(held.get(h, 0.0), exposure_hours(since, now_ms, tau_s) if since is not None else 0.0)
            got = self._within(units, mine & amem, amem, held, any_rr=True)
            if got is not None:
                k_in, n_in, share, p_in, rr_in = got
                names = " and ".join("=".join(split_key(apk)) for apk, _, _ in group)
                it, its, whose = ("them", "their", "their excess") if len(group) > 1 else ("it", "its", "that cohort's excess")
                return group[0][0], (f"crossing {names}: {a}={v} holds no excess outside {it} ({k_res:.3g} of "
                                     f"{n_res:.3g} units), and within {it} {k_in:.3g} of {n_in:.3g} for {share:.0%} of "
                                     f"{its} hosts (relative risk {rr_in:.2g}, p={p_in:.3g}): {whose}")
        return None if statics_only else self._explained_static(st, t, a, v, mine, usable, inventory, now_ms)

    def _explained_static(self, st: CohortKey, t: _Test, a: str, v: str, mine: AbstractSet[str],
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
        if _static_rho(st, t.pair) > 0.0:
            return None  # its test is already against its own long-run risk: a rise the others cannot explain
        statics = [(apk, amem, _static_rho(st, apk)) for apk, amem, _ in seen
                   if amem & mine and _static_rho(st, apk) > 1.0]
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
        if p <= self.explain_alpha and lo > self.min_rr_lower:
            return None
        apk, amem, rho = max(statics, key=lambda s: (len(s[1] & mine), s[0]))
        aa, av = split_key(apk)
        return apk, (f"static: {a}={v} shares {len(amem & mine)} hosts with {aa}={av} (a static association, "
                     f"x{rho:.2g}); weighing each host by its static cohorts' risk, {a}={v} holds {t.k:.3g} of "
                     f"{t.n:.3g} units for {share:.0%} (p={p:.3g}, relative risk lower bound {lo:.2g}): that "
                     f"association's excess")

    def _residual(self, units: list[tuple[str, float, tuple[str, ...]]], pair: str, mine: AbstractSet[str],
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
        return p_res > self.explain_alpha and rr_res < self.min_rr_lower, k_res, n_res, p_res, rr_res

    @staticmethod
    def _moved(units: list[tuple[str, float, tuple[str, ...]]], akey: str, now_ms: int, tau_s: float,
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

    def _within(self, units: list[tuple[str, float, tuple[str, ...]]], part: AbstractSet[str],
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
        if p_in > self.explain_alpha and (any_rr or rr_in < self.min_rr_lower):
            return k_in, n_in, share, p_in, rr_in
        return None

    def _older(self, counts: list[float], r: int, g: tuple[float, ...]) -> float:
        """Units of ``counts`` older than scale ``r``'s reach: the long-run kernel minus scale ``r``'s (at least 0).

        Every "before" of the cohort tests is this difference (the rate
        test's earlier rate, ``_classify``'s earlier share, the daily
        relearning of a static association's risk): the decayed kernels are
        not hard windows, so it is the long run with the recent part taken out.
        """
        L = self.longrun
        return max(counts[L] / g[L] - counts[r] / g[r], 0.0)

    def _longrun_rr(self, st: CohortKey, pk: str, pc: PairCounts, look: Look) -> float:
        sh = self._share(st, pk, pc, self.longrun, look)
        return 1.0 if sh is None else self._shrunk_rr(sh.k, sh.n, sh.p0)

    def _shrunk_rr(self, k: float, n: float, p0: float) -> float:
        """The relative risk of ``k`` of ``n`` units on ``p0`` of the host-time, shrunk toward one by
        ``prior_units`` pseudo-units at ``p0`` (few units say little: ``_classify``)."""
        share = (k + self.prior_units * p0) / (n + self.prior_units)
        return odds_ratio(share, p0) if 0 < share < 1 and 0 < p0 < 1 else 1.0

    def _classify(self, key: str, st: CohortKey, pc: PairCounts, t: _Test,
                  look: Look) -> tuple[Literal["page", "ticket"], str, str]:
        """Page (new or rising) or ticket (static), with the reason in words.

        The cohort's share now is compared with its share in the key's older
        history (the long-run kernel minus the day's, ``rate_recent``, or this
        scale's when it is longer), shrunk toward the
        cohort's exposure share by ``prior_units`` pseudo-units: thin history
        says "no association before", so an association is static only when
        the older data itself shows it. Where that older history is thin early
        in a stream, the month's scale takes what is older than the week's,
        and the first day stands in only when it holds more.
        """
        if pc.static:
            return "page", "association_rising", (f"rising: above its own long-run relative risk {pc.rho:.3g}, "
                                                 f"which was reported as static")
        now_ms, g, inventory = look.now_ms, look.g, look.inventory
        i, L = t.scale, self.longrun
        a, v = split_key(t.pair)
        age_ms = now_ms - st.first_ms
        if self.start_ms is not None and st.first_ms >= self.start_ms + self.warmup_ms and age_ms < NEW_KEY_MS:
            # a key (a signature, a channel) first seen after the warm-up, days ago: its whole history is the
            # cohort's, and "its share now is no higher than before" is the outbreak compared with itself. A new
            # crash confined to one driver's hosts was ticketed as static 15 h in, when its units first sufficed
            return "page", "cohort_outbreak", (f"new: first seen {age_ms / 3_600_000:.3g} h ago, after the warm-up: "
                                               f"all its history is this cohort's")
        if t.by_rate:
            return self._classify_rate(st, pc, i, a, v, look)
        # "before" is the long-run kernel minus the day's (``rate_recent``), not minus this scale's: minus the
        # six hours', a cohort's outbreak 13 h old was half its own "earlier share" and ticketed as static
        r = max(self.rate_recent, i)
        tot = st.tot.get(a + "\x1f")
        c_old_a = self._older(tot, r, g) if tot is not None else 0.0
        if c_old_a < self.prior_units and tot is not None:
            # a month's scale in a stream weeks old holds nearly all the long run, and "before" minus it is
            # empty: what is older than the week's scale is the comparison then (a static association paged
            # as new on day 9 of the quiet tuning fleet, against the 7 units of its first day)
            week = [j for j in self.acute if self.rate_recent < j < i]
            if week:
                c_week = self._older(tot, week[-1], g)
                if c_week >= self.prior_units:
                    r, c_old_a = week[-1], c_week
        early_a = st.early.get(a + "\x1f", 0.0)
        if c_old_a < self.prior_units and pc.early_p > 0 and early_a > c_old_a:
            # early in a stream a week's or a month's scale holds nearly all that was watched, and "before"
            # is thin: the key's first day (taken at the end of warm-up) is the comparison then, if it holds
            # more. An association there from the first hour is static; one that began after it is not. A
            # first day of 4 units, shrunk to "no association", paged a static one on day 9 as new, where
            # the older part of the long run held 15
            c_old_k, c_old_a, eo_v, eo_a = pc.early, early_a, pc.early_p, 1.0
        else:
            c_old_k = self._older(pc.c, r, g)
            e_v = inventory.exposure((a, v), now_ms)
            e_a = inventory.exposure((a, ""), now_ms)
            eo_v, eo_a = e_v[L] - e_v[r], e_a[L] - e_a[r]
        if eo_a <= 0 or eo_v <= 0 or eo_v / eo_a < 0.5 * t.p0:
            return "page", "cohort_outbreak", f"new: the cohort {a}={v} held little of the fleet before this window"
        p_old = min(eo_v / eo_a, 1 - 1e-9)
        share_old = (c_old_k + self.prior_units * p_old) / (c_old_a + self.prior_units)
        share_old = min(max(share_old, 1e-9), 1 - 1e-9)
        rho = odds_ratio(share_old, p_old)
        pi = t.p0 * rho / (t.p0 * rho + 1.0 - t.p0)
        p_rise = binom_sf_real(t.k, t.n, pi)
        if p_rise < self.rise_alpha:
            what = "association_rising" if rho > 1.5 else "cohort_outbreak"
            return "page", what, (f"new: its share now is above its own earlier share ({share_old:.1%} of "
                                  f"{c_old_a:.3g} earlier units, relative risk {rho:.3g}), p={p_rise:.3g}")
        return "ticket", "static_association", (f"static: its share now is no higher than its own earlier share "
                                                f"({share_old:.1%} of {c_old_a:.3g} earlier units, relative risk "
                                                f"{rho:.3g}; p={p_rise:.3g})")

    def _classify_rate(self, st: CohortKey, pc: PairCounts, i: int, a: str, v: str,
                       look: Look) -> tuple[Literal["page", "ticket"], str, str]:
        """A rate test's cohort against its own earlier rate: new if above it, static (a ticket) if not.

        A rack whose hosts have always reported the key at this rate is a
        standing condition of the rack; one that never did is an outbreak.
        Its earlier rate is shrunk toward the attribute's by ``prior_units``
        pseudo-units, as ``_classify`` shrinks shares: a rack's few quiet
        days say little alone, and "never seen there" must not read as
        "always this high there".
        """
        L, r, g = self.longrun, max(self.rate_recent, i), look.g
        mu_a, _ = self._rate_expected(st, a, i, look, 1.0)  # per host-hour
        c_k = pc.unreported(i) / g[i]
        c_old = self._older(pc.c, r, g)
        e_v = look.inventory.exposure((a, v), look.now_ms)
        e_old = max(e_v[L] - e_v[r], 0.0)
        size = c_old + self.prior_units
        mu = e_v[i] * size / (self.prior_units / mu_a + e_old) if 0 < mu_a < math.inf else math.inf
        p_own = nb_sf_real(c_k, mu, size)
        if p_own < self.rise_alpha:
            return "page", "cohort_outbreak", (f"new: {c_k:.3g} units where the cohort's own earlier rate expects "
                                               f"{mu:.3g} ({c_old:.3g} earlier units), p={p_own:.3g}")
        return "ticket", "static_association", (f"static: the cohort's own earlier rate expects {mu:.3g} "
                                                f"({c_old:.3g} earlier units); p={p_own:.3g}")

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
                self.slots.pop(key, None)
                continue
            if st.floor / gL > DEAD:
                continue  # nothing of the key's can have decayed to nothing (at half a year, the common case)
            st.hosts = {h: hc for h, hc in st.hosts.items() if hc[L] / gL > DEAD}
            n = len(st.pairs)
            st.pairs = {k: pc for k, pc in st.pairs.items()
                        if pc.firing or pc.static or pc.c[L] / gL > DEAD or now_ms < pc.quiet_until_ms}
            if len(st.pairs) != n:
                self.slots.pop(key, None)
            st.touched &= set(st.pairs)
            st.floor = min((*(hc[L] for hc in st.hosts.values()), *(pc.c[L] for pc in st.pairs.values())),
                           default=0.0)
        self.n_pairs = sum(len(st.pairs) for st in self.keys.values())
        self.family = sum(st.family for st in self.keys.values())

    def counts(self) -> dict[str, float]:
        return {k: s.total for k, s in self.keys.items()}


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


__all__ = ["CohortCorrelation", "CohortKey", "CohortVerdict", "PairCounts", "cohort_correlation_from_config",
           "pair_key", "rate_ratio_ci"]
