"""The false-discovery budget of one step: who is in the family, and with what weight.

Benjamini-Hochberg runs over every (key, cohort, scale) test that could
reach significance (``count_tests``, ``recount``); a key spiking or rising
fleet-wide, or a static association asked whether it rises, gets a larger
share of the weight (``step_budget``, ``spike_split``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Literal

from msgspec import Struct, field

from fleetepi.detectors.cohorts.state import CohortKey
from fleetepi.detectors.decay import kish_n
from fleetepi.detectors.inventory import SEP, Inventory

if TYPE_CHECKING:
    from fleetepi.detectors.cohorts.correlation import CohortCorrelation


class Budget(Struct, frozen=True):
    """One step's weighted Benjamini-Hochberg: the weight of a spiking key's test, a watched key's, a static
    association's, any other's (``static`` 0: static associations have no tier of their own).

    ``spike`` is the spike tier's average; ``spike_by`` its weight per key and attribute (``slot_of``)."""

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
            return self.spike_by.get(slot_of(key, pair), self.spike)
        return float(getattr(self, tier))

    def of(self, key: str, spiking: AbstractSet[str], watched: AbstractSet[str], big: bool = True,
           static: bool = False, pair: str = "") -> float:
        """A test's weight: its tier's (``tier``)."""
        return self.weight(self.tier(key, spiking, watched, big, static), key, pair)


def slot_of(key: str, pair: str) -> str:
    """A key's attribute, as ``Budget.spike_by`` names it."""
    return key + "\x1e" + pair[: pair.find(SEP) + 1]


#: What a weighted test's tier says in its alert's notes.
WHY_WEIGHTED = {"static": "a static association, asked whether it rises",
                 "spike": "the signature is spiking fleet-wide",
                 "watch": "the signature is rising fleet-wide, short of a spike (on watch)", "rest": ""}


def count_tests(cc: CohortCorrelation, st: CohortKey, n_eff: Mapping[int, float], all_: list[float], g: tuple[float, ...],
           n_star: float) -> None:
    """Set the key's share of the Benjamini-Hochberg family: its pairs at every scale whose test could fire.

    Tarone, approximately: a key with too few effective units for a
    half-the-fleet cohort to reach p <= q (``n_star``) brings no share
    tests to the family. A smaller cohort can reach it with fewer units
    (p0 ** n), so this can undercount; what bounds those tests is the
    absolute corr_alpha (1e-6 by default), stricter than BH's q / family
    unless the family exceeds q / corr_alpha (10,000 tests). A rate test
    counts while the key holds the units it needs at that scale; those
    decay, so ``budget.recount`` drops an idle key's.
    """
    n = len(st.pairs)
    share = sum(1 for i in cc.acute if n_eff[i] >= n_star)
    rate = n * sum(1 for i in cc.rate_scales if n_eff[i] < n_star and cc.rate_live(all_, i, g))
    fam = n * share + rate
    cc.family += fam - st.family
    st.family, st.rate_family = fam, rate


def recount(cc: CohortCorrelation, now_ms: int, g: tuple[float, ...], n_star: float) -> None:
    """The rate tests' share of the family afresh, hourly.

    Why: a key's share was set when it was last touched. Its rate tests'
    units decay: on a noisy fleet, keys idle for hours held nine in ten
    of the rate tests' slots (400,000 of 450,000), which raised every
    test's bar for nothing. Share tests need no recount: a key's
    effective units (Kish) do not change as its units decay alike.
    """
    cc.recount_ms = now_ms + 3_600_000
    for st in cc.keys.values():
        if st.rate_family:
            all_ = st.tot[""]
            count_tests(cc, st, {i: kish_n(all_[i] / g[i], st.q[i] / (g[i] * g[i])) for i in cc.acute},
                        all_, g, n_star)


def is_big(cc: CohortCorrelation, pk: str, inventory: Inventory) -> bool:
    """Does the cohort hold ``watch_min_share`` of the hosts announcing its attribute?"""
    a = pk[: pk.index("\x1f")]
    return inventory.sizes.get(pk, 0) >= cc.watch_min_share * inventory.attribute_hosts.get(a, 0)


def step_budget(cc: CohortCorrelation, spiking: AbstractSet[str], watched: AbstractSet[str], n_tests: int,
             inventory: Inventory) -> Budget:
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
    family = max(cc.family, n_tests)
    statics = cc.static_keys if cc.static_share > 0 else {}
    #: (tier, its keys, its share of the family's weight)
    tiers = [(name, keys, share)
             for name, keys, share in (("spike", spiking, cc.spike_share), ("watch", watched, cc.watch_share),
                                       ("static", statics.keys(), cc.static_share))
             if keys and share > 0]
    if not tiers:
        return Budget(family=family)
    sizes, held = [], 0.0
    for name, keys, _ in tiers:
        n = 0
        for k in keys:
            st = cc.keys[k]
            # a spiking key's pairs all move to its tier, a watched key's big ones, every key's static ones
            # (a static pair is in no other tier); each with its part of what the key held in the family
            if name == "spike":
                m = len(st.pairs) - statics.get(k, 0)
            elif name == "watch":
                got = cc.bigs.get(k)
                if got is None or got[0] != inventory.version:
                    got = cc.bigs[k] = (inventory.version, sum(1 for pk, pc in st.pairs.items()
                                                               if is_big(cc, pk, inventory) and not (statics and pc.static)))
                m = got[1]
            else:
                m = statics[k]
            n += m
            held += st.family * m / len(st.pairs) if st.pairs else 0.0
        sizes.append(n * len(cc.acute))
    family = max(round(family - held) + sum(sizes), n_tests)
    w = [min(cc.static_weight_max if name == "static" else cc.spike_weight_max, share * family / n)
         if 0 < n < family else 1.0 for (name, _, share), n in zip(tiers, sizes)]
    up = {name: (x, n) for (name, _, _), x, n in zip(tiers, w, sizes) if x > 1.0}
    if not up:
        return Budget(family=family)
    by: dict[str, float] = {}
    if "spike" in up:
        by, mass = spike_split(cc, spiking, cc.spike_share * family)
        up["spike"] = (mass / up["spike"][1], up["spike"][1])
    rest = (family - sum(x * n for x, n in up.values())) / (family - sum(n for _, n in up.values()))
    return Budget(up.get("spike", (rest, 0))[0], up.get("watch", (rest, 0))[0], rest, family,
                   up.get("static", (rest, 0))[0] if statics else 0.0, by)


def spike_split(cc: CohortCorrelation, spiking: AbstractSet[str], mass: float) -> tuple[dict[str, float], float]:
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
    n_scales = len(cc.acute)
    for k in sorted(spiking):  # a fixed order: the sum is the same in every run and worker
        values = cc.slots.get(k)
        if values is None:
            values = cc.slots[k] = {}
            for pk, pc in cc.keys[k].pairs.items():
                if not (cc.static_share > 0 and pc.static):
                    slot = slot_of(k, pk)
                    values[slot] = values.get(slot, 0) + 1
        for slot, m in sorted(values.items()):
            x = min(cc.spike_weight_max, mass / len(spiking) / len(values) / (m * n_scales))
            by[slot] = x
            spent += x * m * n_scales
    return by, spent


def units_needed(cc: CohortCorrelation) -> float:
    """Effective units before a half-fleet cohort can reach p <= fdr (smaller cohorts need fewer)."""
    return math.log(cc.fdr) / math.log(0.5)
