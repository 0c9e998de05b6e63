"""A key's accepted tests as verdicts: explained, classified, and worded.

One report per key and step: each cohort's strongest test that its own
hosts' weights bear out, the cohorts that explain others dropped (their
notes kept), then page or ticket, and the words an on-call engineer reads.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from fleetepi.detectors.cohorts.budget import WHY_WEIGHTED
from fleetepi.detectors.cohorts.classify import classify_pair
from fleetepi.detectors.cohorts.explain import HostScan, explain_excess, narrowest
from fleetepi.detectors.cohorts.state import CohortKey, CohortTest, CohortVerdict
from fleetepi.detectors.cohorts.statics import inside_static, longrun_rr, raised_words, static_rho
from fleetepi.detectors.inventory import split_key
from fleetepi.detectors.look import Look
from fleetepi.detectors.stats import weighted_share_tail

if TYPE_CHECKING:
    from fleetepi.detectors.cohorts.correlation import CohortCorrelation


def weighted_tail(cc: CohortCorrelation, st: CohortKey, t: CohortTest, look: Look, weights_of: dict[tuple[str, int], list[float]]) -> float:
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


def report_key(cc: CohortCorrelation, key: str, st: CohortKey, tests: list[CohortTest], family: int, weight: float, look: Look,
            why_weight: str = WHY_WEIGHTED["spike"]) -> list[CohortVerdict]:
    """Explain nested and confounded cohorts, decide page or ticket, and word the verdicts."""
    now_ms, g, inventory, clock = look.now_ms, look.g, look.inventory, look.clock
    by_pair: dict[str, list[CohortTest]] = {}
    for t in sorted(tests, key=lambda t: (t.p, t.scale)):
        by_pair.setdefault(t.pair, []).append(t)
    # each pair's strongest test that its own hosts' weights bear out (a few fresh units of a key whose
    # many others have faded are not what the key's effective count makes of them)
    best: dict[str, CohortTest] = {}
    weights_of: dict[tuple[str, int], list[float]] = {}
    for pair, found in by_pair.items():
        for t in found:
            # (the rate test counts the cohort's own units against their expectation: no share to weigh)
            if t.by_rate or weighted_tail(cc, st, t, look, weights_of) <= \
                    cc.ceiling(clock.scales_s[t.scale], now_ms - st.first_ms) * weight:
                best[pair] = t
                break
    members, by_attr = inventory.members()
    scan = HostScan(st, inventory)
    # static associations above their own long-run risk in this step: candidates, not explanations
    rising = frozenset(pk for pk in best if static_rho(st, pk) > 0.0)
    # cohorts of this key already reported (firing, static, or resolved recently) explain too
    accepted: list[tuple[str, AbstractSet[str]]] = [(pk, members.get(split_key(pk), frozenset()))
                                                 for pk, pc in sorted(st.pairs.items())
                                                 if pc.firing or pc.static or now_ms < pc.quiet_until_ms]
    notes_of: dict[str, list[str]] = {pk: [] for pk, _ in accepted}
    fresh: set[str] = set()
    chosen: list[CohortTest] = []
    for t in sorted(best.values(), key=lambda t: (t.p, -t.k, t.pair)):
        a, v = split_key(t.pair)
        mine: AbstractSet[str] = members.get((a, v), frozenset())
        # (a static association's own test is not its alias: that is how it pages when it rises)
        alias = next((apk for apk, amem in accepted if amem == mine and apk != t.pair), None)
        if alias is not None:
            # its note is worded only where it is read: on a cohort found in this step (the earlier
            # ones are not reported again); a standing alias of a static association is skipped at
            # every step, and counting its hosts there was most of what those steps cost
            if alias in fresh and scan.hosts_in(t.pair, t.scale, g[t.scale]) >= cc.min_hosts:
                notes_of[alias].append(f"alias: {a}={v} has exactly the same hosts (confounded; the data "
                                       f"cannot tell them apart)")
            continue
        if scan.hosts_in(t.pair, t.scale, g[t.scale]) < cc.min_hosts:
            continue
        explained = explain_excess(cc, st, t, a, v, mine, accepted, look, scan, rising)
        if explained is not None:
            by, text = explained
            if by in notes_of:
                notes_of[by].append(text)
            continue
        accepted.append((t.pair, mine))
        notes_of[t.pair] = []
        fresh.add(t.pair)
        chosen.append(t)
    chosen = narrowest(cc, st, chosen, members, notes_of, look, scan)
    out = []
    for t in chosen:
        pc = st.pairs[t.pair]
        a, v = split_key(t.pair)
        severity, finding, why = classify_pair(cc, key, st, pc, t, look)
        if severity == "ticket" and now_ms < pc.ticket_until_ms:
            continue
        hosts = scan.hosts_in(t.pair, t.scale, g[t.scale])
        scale_s = clock.scales_s[t.scale]
        bh = (f"Benjamini-Hochberg at q={cc.fdr:g} over {family} tests across all keys" +
              (f", this one weighted x{weight:.3g}: {why_weight}" if weight > 1 else ""))
        rho, within = (pc.rho, "") if pc.static else inside_static(cc, key, t.pair, inventory)
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
            inside = (f", {t.p0:.1%} of the units at the relative risk {rho:.3g} {raised_words(within)}"
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
            cc.active.add(key)
        else:
            if not pc.static:
                cc.static_keys[key] = cc.static_keys.get(key, 0) + 1
                cc.pairs_changed(key)
            pc.static = True
            pc.rho = max(longrun_rr(cc, st, t.pair, pc, look), 1.0)
            pc.ticket_until_ms = now_ms + cc.ticket_cooldown_ms
            notes.append(f"static: later windows are tested against its long-run relative risk {pc.rho:.3g}")
        basis = ("the key's earlier rate" if t.by_rate else
                 f"its share of the fleet at its long-run risk x{pc.rho:.2g}" if rising_static else
                 f"its share of the fleet at the risk x{rho:.2g} {raised_words(within)}" if within else None)
        out.append(CohortVerdict(key, a, v, "firing", now_ms, severity, finding, t.k,
                                 t.mu if t.by_rate else t.n * t.p0, scale_s, t.p, t.rr, t.lo, t.hi, hosts,
                                 tuple(notes), **({"basis": basis} if basis else {})))
    return out
