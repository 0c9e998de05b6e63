"""Static associations: a key that has always been more frequent on a cohort.

Once ticketed, a static association's long-run relative risk is its
baseline (``relearn`` learns it again daily), and it raises the share
expected of every cohort that holds its hosts (``inside_static``), so that
those page only on a change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct, field

from fleetepi.detectors.cohorts.state import CohortKey, PairCounts, odds_ratio
from fleetepi.detectors.decay import kish_n
from fleetepi.detectors.inventory import Inventory, split_key
from fleetepi.detectors.look import Look

if TYPE_CHECKING:
    from fleetepi.detectors.cohorts.correlation import CohortCorrelation


def static_rho(st: CohortKey, pk: str) -> float:
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
OUTSIDE = (1.0, "")


def raised_words(statics: str) -> str:
    """Words for the static associations that raise a cohort's expected share (``statics.inside_static``)."""
    return f"the static association{'s' if ' and ' in statics else ''} {statics} give{'' if ' and ' in statics else 's'} it"


def relearn(cc: CohortCorrelation, look: Look) -> None:
    """Learn each static association's long-run risk again, daily, from its units older than a week.

    Why: the risk is learned when the association is ticketed, often on
    its first day, from few units shrunk toward one by ``prior_units``:
    a datacenter at a true 3.5x was learned at 2.2, and a high first day
    gives too much. Its rises are tested against that risk, and so are
    the cohorts sharing its hosts (``statics.inside_static``). Units older than
    the week's scale (the long-run kernel minus the week's) leave out a
    rise of the last days, as the rise tests ask about those; a pair
    firing or cooling down keeps its risk, and one with fewer than twice
    ``prior_units`` effective older units keeps the risk it was ticketed
    with. On the tuning seeds (20 runs) the same outbreaks and false
    pages, six rising static associations 0.3-4.2 h sooner and a
    wear-out 29 h sooner.
    """
    now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
    L = cc.longrun
    j = max((i for i in cc.acute if clock.scales_s[i] <= 7 * 86400.0), default=None)
    if j is None:
        return
    for key in sorted(cc.static_keys):
        st = cc.keys.get(key)
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
            n_old = cc.older(tot, j, g) * factor
            k_old = cc.older(pc.c, j, g) * factor
            if n_old < 2 * cc.prior_units:
                continue
            e_v = inventory.exposure((a, v), now_ms)
            e_a = inventory.exposure((a, ""), now_ms)
            eo_v, eo_a = e_v[L] - e_v[j], e_a[L] - e_a[j]
            if eo_a <= 0 or eo_v <= 0 or eo_v >= eo_a:
                continue
            rho = max(shrunk_rr(cc, k_old, n_old, eo_v / eo_a), 1.0)
            if rho != pc.rho:
                pc.rho, changed = rho, True
        if changed:
            cc.inside.pop(key, None)


def inside_static(cc: CohortCorrelation, key: str, pk: str, inventory: Inventory) -> tuple[float, str]:
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
    (``statics.raised_by_statics``). Recomputed when the key's statics or the
    inventory change.
    """
    n_static = cc.static_keys.get(key, 0)
    if not n_static:
        return OUTSIDE
    got = cc.inside.get(key)
    if got is None or got.statics != n_static or got.version != inventory.version:
        got = cc.inside[key] = InsideStatic(n_static, inventory.version,
                                              raised_by_statics(cc.keys[key], inventory))
    return got.of.get(pk, OUTSIDE)


def raised_by_statics(st: CohortKey, inventory: Inventory) -> dict[str, tuple[float, str]]:
    """``statics.inside_static`` for every cohort of ``st`` at once, from what each static cohort shares with it.

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


def longrun_rr(cc: CohortCorrelation, st: CohortKey, pk: str, pc: PairCounts, look: Look) -> float:
    sh = cc.cohort_share(st, pk, pc, cc.longrun, look)
    return 1.0 if sh is None else shrunk_rr(cc, sh.k, sh.n, sh.p0)


def shrunk_rr(cc: CohortCorrelation, k: float, n: float, p0: float) -> float:
    """The relative risk of ``k`` of ``n`` units on ``p0`` of the host-time, shrunk toward one by
    ``prior_units`` pseudo-units at ``p0`` (few units say little: ``classify.classify_pair``)."""
    share = (k + cc.prior_units * p0) / (n + cc.prior_units)
    return odds_ratio(share, p0) if 0 < share < 1 and 0 < p0 < 1 else 1.0
