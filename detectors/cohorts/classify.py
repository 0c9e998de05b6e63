"""New, rising or static: a significant cohort against its own history.

A page when the cohort's share (or rate) now is above its own earlier one,
or the key is new; a ticket (``static_association``) when it has always
been this high.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from fleetepi.detectors.cohorts.state import NEW_KEY_MS, CohortKey, CohortTest, PairCounts, odds_ratio
from fleetepi.detectors.inventory import split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import binom_sf_real, nb_sf_real

if TYPE_CHECKING:
    from fleetepi.detectors.cohorts.correlation import CohortCorrelation


def classify_pair(cc: CohortCorrelation, key: str, st: CohortKey, pc: PairCounts, t: CohortTest,
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
    i, L = t.scale, cc.longrun
    a, v = split_key(t.pair)
    age_ms = now_ms - st.first_ms
    if cc.start_ms is not None and st.first_ms >= cc.start_ms + cc.warmup_ms and age_ms < NEW_KEY_MS:
        # a key (a signature, a channel) first seen after the warm-up, days ago: its whole history is the
        # cohort's, and "its share now is no higher than before" is the outbreak compared with itself. A new
        # crash confined to one driver's hosts was ticketed as static 15 h in, when its units first sufficed
        return "page", "cohort_outbreak", (f"new: first seen {age_ms / 3_600_000:.3g} h ago, after the warm-up: "
                                           f"all its history is this cohort's")
    if t.by_rate:
        return classify_rate(cc, st, pc, i, a, v, look)
    # "before" is the long-run kernel minus the day's (``rate_recent``), not minus this scale's: minus the
    # six hours', a cohort's outbreak 13 h old was half its own "earlier share" and ticketed as static
    r = max(cc.rate_recent, i)
    tot = st.tot.get(a + "\x1f")
    c_old_a = cc.older(tot, r, g) if tot is not None else 0.0
    if c_old_a < cc.prior_units and tot is not None:
        # a month's scale in a stream weeks old holds nearly all the long run, and "before" minus it is
        # empty: what is older than the week's scale is the comparison then (a static association paged
        # as new on day 9 of the quiet tuning fleet, against the 7 units of its first day)
        week = [j for j in cc.acute if cc.rate_recent < j < i]
        if week:
            c_week = cc.older(tot, week[-1], g)
            if c_week >= cc.prior_units:
                r, c_old_a = week[-1], c_week
    early_a = st.early.get(a + "\x1f", 0.0)
    if c_old_a < cc.prior_units and pc.early_p > 0 and early_a > c_old_a:
        # early in a stream a week's or a month's scale holds nearly all that was watched, and "before"
        # is thin: the key's first day (taken at the end of warm-up) is the comparison then, if it holds
        # more. An association there from the first hour is static; one that began after it is not. A
        # first day of 4 units, shrunk to "no association", paged a static one on day 9 as new, where
        # the older part of the long run held 15
        c_old_k, c_old_a, eo_v, eo_a = pc.early, early_a, pc.early_p, 1.0
    else:
        c_old_k = cc.older(pc.c, r, g)
        e_v = inventory.exposure((a, v), now_ms)
        e_a = inventory.exposure((a, ""), now_ms)
        eo_v, eo_a = e_v[L] - e_v[r], e_a[L] - e_a[r]
    if eo_a <= 0 or eo_v <= 0 or eo_v / eo_a < 0.5 * t.p0:
        return "page", "cohort_outbreak", f"new: the cohort {a}={v} held little of the fleet before this window"
    p_old = min(eo_v / eo_a, 1 - 1e-9)
    share_old = (c_old_k + cc.prior_units * p_old) / (c_old_a + cc.prior_units)
    share_old = min(max(share_old, 1e-9), 1 - 1e-9)
    rho = odds_ratio(share_old, p_old)
    pi = t.p0 * rho / (t.p0 * rho + 1.0 - t.p0)
    p_rise = binom_sf_real(t.k, t.n, pi)
    if p_rise < cc.rise_alpha:
        what = "association_rising" if rho > 1.5 else "cohort_outbreak"
        return "page", what, (f"new: its share now is above its own earlier share ({share_old:.1%} of "
                              f"{c_old_a:.3g} earlier units, relative risk {rho:.3g}), p={p_rise:.3g}")
    return "ticket", "static_association", (f"static: its share now is no higher than its own earlier share "
                                            f"({share_old:.1%} of {c_old_a:.3g} earlier units, relative risk "
                                            f"{rho:.3g}; p={p_rise:.3g})")


def classify_rate(cc: CohortCorrelation, st: CohortKey, pc: PairCounts, i: int, a: str, v: str,
                   look: Look) -> tuple[Literal["page", "ticket"], str, str]:
    """A rate test's cohort against its own earlier rate: new if above it, static (a ticket) if not.

    A rack whose hosts have always reported the key at this rate is a
    standing condition of the rack; one that never did is an outbreak.
    Its earlier rate is shrunk toward the attribute's by ``prior_units``
    pseudo-units, as ``classify.classify_pair`` shrinks shares: a rack's few quiet
    days say little alone, and "never seen there" must not read as
    "always this high there".
    """
    L, r, g = cc.longrun, max(cc.rate_recent, i), look.g
    mu_a, _ = cc.rate_expected(st, a, i, look, 1.0)  # per host-hour
    c_k = pc.unreported(i) / g[i]
    c_old = cc.older(pc.c, r, g)
    e_v = look.inventory.exposure((a, v), look.now_ms)
    e_old = max(e_v[L] - e_v[r], 0.0)
    size = c_old + cc.prior_units
    mu = e_v[i] * size / (cc.prior_units / mu_a + e_old) if 0 < mu_a < math.inf else math.inf
    p_own = nb_sf_real(c_k, mu, size)
    if p_own < cc.rise_alpha:
        return "page", "cohort_outbreak", (f"new: {c_k:.3g} units where the cohort's own earlier rate expects "
                                           f"{mu:.3g} ({c_old:.3g} earlier units), p={p_own:.3g}")
    return "ticket", "static_association", (f"static: the cohort's own earlier rate expects {mu:.3g} "
                                            f"({c_old:.3g} earlier units); p={p_own:.3g}")
