"""Cohort concentration: which attribute values hold more of a key's hosts than their share.

The engine of ``hardware_correlation`` (key = crash signature) and of the
cohort part of ``telemetry_cohort`` (key = telemetry kind and code).

What is counted: distinct affected *hosts* in a sliding window, each with the
attributes in force at the time of its first case (``Inventory.attributes_at``),
and a job counts once (its first host), so neither one sick host nor one job
burst over a rack can make a cohort. Every ``attribute=value`` the hosts
carry is a hypothesis; the keys are whatever the announcements hold.

How it is decided, when a new host arrives and a cheap normal screen says
one of its cohorts might be significant:

1. one-sided binomial test per pair: k of the D affected hosts (that announce
   the attribute) have the value, which n1 of the N fleet hosts have;
2. Benjamini-Hochberg over every pair the key's hosts carry (the family),
   plus an absolute ``corr_alpha`` and a lower risk-ratio bound;
3. explanation, strongest first: a cohort is reported only if its cases
   *outside* the cohorts already accepted are still significant against its
   hosts outside them. A parent whose excess lives in one child (datacenter
   vs the rack) is dropped with a note; a cohort with the same hosts as an
   accepted one (a driver rolled out to one GPU model only) is an alias and
   goes into that alert's notes: the data cannot tell them apart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from fleetepi.detectors.inventory import Inventory
from fleetepi.detectors.lifecycle import Lifecycle
from fleetepi.detectors.stats import benjamini_hochberg, binom_prefilter, binom_sf, relative_risk

Pair = tuple[str, str]
#: (key, pair, state, ts_ms, p, k, D, n1, N, rr, lo, hi, notes) -> Alert
MakeCohortAlert = Callable[..., Any]


class _Key:
    __slots__ = ("units", "jobs", "queue", "counts", "attr_units", "firing", "quiet", "last_ms", "total")

    def __init__(self) -> None:
        #: host -> [last case ms, attributes at the first case]
        self.units: dict[str, list[Any]] = {}
        #: job -> [host that represents it, last case ms]
        self.jobs: dict[str, list[Any]] = {}
        #: (ts_ms, host) in arrival order: lazy expiry.
        self.queue: deque[tuple[int, str]] = deque()
        self.counts: dict[Pair, int] = {}
        self.attr_units: dict[str, int] = {}
        #: pair -> ms it fired
        self.firing: dict[Pair, int] = {}
        #: pair -> ms before which it may not fire again
        self.quiet: dict[Pair, int] = {}
        self.last_ms = 0
        self.total = 0

    def dump(self) -> dict[str, Any]:
        return {"units": {h: [u[0], dict(u[1])] for h, u in self.units.items()},
                "jobs": {j: list(v) for j, v in self.jobs.items()},
                "queue": [list(q) for q in self.queue],
                "counts": [[a, v, n] for (a, v), n in self.counts.items()],
                "attr_units": dict(self.attr_units),
                "firing": [[a, v, t] for (a, v), t in self.firing.items()],
                "quiet": [[a, v, t] for (a, v), t in self.quiet.items()],
                "last_ms": self.last_ms, "total": self.total}

    @classmethod
    def load(cls, d: dict[str, Any]) -> _Key:
        k = cls()
        k.units = {str(h): [int(u[0]), {str(a): str(v) for a, v in u[1].items()}] for h, u in d["units"].items()}
        k.jobs = {str(j): [str(v[0]), int(v[1])] for j, v in d["jobs"].items()}
        k.queue = deque((int(t), str(h)) for t, h in d["queue"])
        k.counts = {(str(a), str(v)): int(n) for a, v, n in d["counts"]}
        k.attr_units = {str(a): int(n) for a, n in d["attr_units"].items()}
        k.firing = {(str(a), str(v)): int(t) for a, v, t in d["firing"]}
        k.quiet = {(str(a), str(v)): int(t) for a, v, t in d["quiet"]}
        k.last_ms, k.total = int(d["last_ms"]), int(d["total"])
        return k


class CohortCorrelation(Lifecycle):
    """Per key: distinct affected hosts by attribute value, tested against the fleet's shares."""

    def __init__(self, *, bucket_s: float, window_s: float, min_hosts: int, fdr: float, alpha: float,
                 min_rr_lower: float, min_cohort_hosts: int, explain_alpha: float, max_units: int,
                 warmup_s: float, cooldown_s: float, key_ttl_s: float, max_keys: int,
                 make_alert: MakeCohortAlert) -> None:
        super().__init__(warmup_s=warmup_s, cooldown_s=cooldown_s, key_ttl_s=key_ttl_s, max_keys=max_keys)
        self.bucket_ms = int(bucket_s * 1000)
        self.window_ms = int(window_s * 1000)
        self.window_s = window_s
        self.min_hosts, self.fdr, self.alpha = min_hosts, fdr, alpha
        self.min_rr_lower, self.min_cohort_hosts = min_rr_lower, min_cohort_hosts
        self.explain_alpha, self.max_units = explain_alpha, max_units
        self.make_alert = make_alert
        self.keys: dict[str, _Key] = {}
        #: keys with a firing pair (advance visits only these).
        self.firing: set[str] = set()

    # ------------------------------------------------------------------ hot path
    def observe(self, key: str, host: str, job: str | None, ts_ms: int, inventory: Inventory) -> list[Any]:
        if self.start_ms is None:
            self.start(ts_ms)
        st = self.keys.get(key)
        if st is None:
            if len(self.keys) >= self.max_keys:
                self._evict()
            st = self.keys[key] = _Key()
        out: list[Any] = []
        if st.queue and st.queue[0][0] <= ts_ms - self.window_ms:
            self._expire(key, st, ts_ms, inventory, out)
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        if job:
            j = st.jobs.get(job)
            if j is not None and j[0] != host and ts_ms - j[1] < self.window_ms:
                if ts_ms > j[1]:
                    j[1] = ts_ms
                return out  # the job already has its host here: a burst is one case
            if j is None or j[0] != host:
                st.jobs[job] = [host, ts_ms]
            elif ts_ms > j[1]:
                j[1] = ts_ms
        u = st.units.get(host)
        if u is not None:
            if ts_ms - u[0] >= self.bucket_ms:
                u[0] = ts_ms
                st.queue.append((ts_ms, host))
            return out
        attrs = inventory.attributes_at(host, ts_ms)
        st.units[host] = [ts_ms, attrs]
        st.queue.append((ts_ms, host))
        st.total += 1
        counts, attr_units = st.counts, st.attr_units
        for kv in attrs.items():
            counts[kv] = counts.get(kv, 0) + 1
            a = kv[0]
            attr_units[a] = attr_units.get(a, 0) + 1
        if len(st.units) > self.max_units:
            self._expire(key, st, ts_ms, inventory, out, force=len(st.units) - self.max_units)
        # Screen only this host's cohorts: nothing else changed.
        sizes, announcing = inventory.cohort_sizes, inventory.attribute_hosts
        min_hosts = self.min_hosts
        for kv in attrs.items():
            k = counts[kv]
            if k < min_hosts or kv in st.firing:
                continue
            n_all = announcing[kv[0]]
            n1 = sizes[kv]
            if n_all <= 0 or n1 < self.min_cohort_hosts:
                continue
            if binom_prefilter(k, attr_units[kv[0]], n1 / n_all, 3.0):
                self._evaluate(key, st, ts_ms, inventory, out)
                break
        return out

    # ------------------------------------------------------------------ decisions
    def _test(self, st: _Key, inventory: Inventory) -> list[tuple[float, Pair, int, int, int, int]]:
        """(p, pair, k, D, n1, N) for every pair worth testing; the family size is len(st.counts)."""
        sizes, announcing = inventory.cohort_sizes, inventory.attribute_hosts
        rows = []
        for kv, k in st.counts.items():
            if k < self.min_hosts:
                continue
            n_all, n1 = announcing[kv[0]], sizes[kv]
            if n_all <= 0 or n1 < self.min_cohort_hosts or n1 >= n_all:
                continue
            d = st.attr_units[kv[0]]
            p0 = n1 / n_all
            if not binom_prefilter(k, d, p0, 2.0):
                continue
            rows.append((binom_sf(k, d, p0), kv, k, d, n1, n_all))
        rows.sort(key=lambda r: (r[0], -r[2], r[1]))
        return rows

    def _evaluate(self, key: str, st: _Key, ts_ms: int, inventory: Inventory, out: list[Any]) -> None:
        if not self.warm(ts_ms):
            return
        rows = self._test(st, inventory)
        if not rows:
            return
        family = max(len(st.counts), len(rows))
        rejected = benjamini_hochberg([r[0] for r in rows], self.fdr, family)
        candidates = []
        for r, rej in zip(rows, rejected):
            p, kv, k, d, n1, n_all = r
            if not rej or p > self.alpha:
                continue
            rr, lo, hi = relative_risk(k, n1, d - k, n_all - n1)
            if lo <= self.min_rr_lower:
                continue
            candidates.append((r, rr, lo, hi))
        if not candidates:
            return
        members, by_attr = inventory.members()
        accepted: list[tuple[Pair, frozenset[str]]] = []
        notes_of: dict[Pair, list[str]] = {}
        units = st.units
        for (p, kv, k, d, n1, n_all), rr, lo, hi in candidates:
            mine = members.get(kv, frozenset())
            verdict: tuple[Any, ...] | None = None  # ("alias", kv) or ("explained", parents, k, d, p)
            for akv, amem in accepted:
                if mine == amem:
                    verdict = ("alias", akv)
                    break
            if verdict is None and accepted:
                union = frozenset().union(*(m for _, m in accepted))
                a = kv[0]
                # Cases of this cohort outside the accepted cohorts, against its hosts outside them.
                k_res = d_res = 0
                for host, u in units.items():
                    if host in union or a not in u[1]:
                        continue
                    d_res += 1
                    if u[1].get(a) == kv[1]:
                        k_res += 1
                fleet_res = len(by_attr.get(a, frozenset()) - union)
                n1_res = len(mine - union)
                p_res = binom_sf(k_res, d_res, n1_res / fleet_res) if fleet_res > 0 and n1_res > 0 else 1.0
                if p_res > self.explain_alpha:
                    verdict = ("explained", tuple(a2 for a2, _ in accepted), k_res, d_res, p_res)
            if verdict is None:
                accepted.append((kv, mine))
                notes_of[kv] = [f"binomial test: {k} of {d} distinct affected hosts have {kv[0]}={kv[1]}, "
                                f"which {n1} of {n_all} hosts have; p={p:.3g}; Benjamini-Hochberg at "
                                f"q={self.fdr:g} over {family} attribute values",
                                f"relative risk {rr:.3g} (95% CI {lo:.3g}-{hi:.3g})"]
                continue
            if verdict[0] == "alias":
                notes_of[verdict[1]].append(f"alias: {kv[0]}={kv[1]} has exactly the same hosts "
                                            f"(confounded; the data cannot tell them apart)")
            else:
                parents = ", ".join(f"{a}={v}" for a, v in verdict[1])
                for akv, amem in accepted:
                    if mine > amem:
                        notes_of[akv].append(f"nested: also explains the excess of the wider cohort "
                                             f"{kv[0]}={kv[1]} ({verdict[2]} of {verdict[3]} hosts outside, "
                                             f"p={verdict[4]:.3g})")
                        break
                else:
                    notes_of[accepted[0][0]].append(f"explains {kv[0]}={kv[1]} too (its residual outside "
                                                    f"{parents}: p={verdict[4]:.3g})")
        by_pair = {c[0][1]: c for c in candidates}
        for kv, _ in accepted:
            if kv in st.firing or ts_ms < st.quiet.get(kv, 0):
                continue
            (p, _, k, d, n1, n_all), rr, lo, hi = by_pair[kv]
            st.firing[kv] = ts_ms
            self.firing.add(key)
            out.append(self.make_alert(key, kv, "firing", ts_ms, p, k, d, n1, n_all, rr, lo, hi, notes_of[kv]))

    # ------------------------------------------------------------------ time and memory
    def _expire(self, key: str, st: _Key, now_ms: int, inventory: Inventory, out: list[Any],
                force: int = 0) -> None:
        cutoff = now_ms - self.window_ms
        q, units, counts, attr_units = st.queue, st.units, st.counts, st.attr_units
        while q and (q[0][0] <= cutoff or force > 0):
            ts, host = q.popleft()
            u = units.get(host)
            if u is None or u[0] != ts:
                continue  # refreshed later
            del units[host]
            force -= 1
            gone_ms = max(ts + self.window_ms, ts)
            for kv in u[1].items():
                n = counts[kv] - 1
                if n:
                    counts[kv] = n
                else:
                    del counts[kv]
                a = kv[0]
                n = attr_units[a] - 1
                if n:
                    attr_units[a] = n
                else:
                    del attr_units[a]
                if kv in st.firing and counts.get(kv, 0) < self.min_hosts:
                    del st.firing[kv]
                    if not st.firing:
                        self.firing.discard(key)
                    st.quiet[kv] = gone_ms + self.cooldown_ms
                    out.append(self.make_alert(key, kv, "resolved", gone_ms, None, counts.get(kv, 0),
                                               attr_units.get(a, 0), inventory.cohort_sizes[kv],
                                               inventory.attribute_hosts[a], None, None, None,
                                               [f"resolved: fewer than {self.min_hosts} affected hosts with "
                                                f"{kv[0]}={kv[1]} left in the {self.window_s:g} s window"]))
        if len(st.jobs) > len(units) + 32:
            st.jobs = {j: v for j, v in st.jobs.items() if v[1] > cutoff}
        if st.quiet:
            st.quiet = {kv: t for kv, t in st.quiet.items() if t > now_ms}

    def advance(self, watermark_ms: int, inventory: Inventory) -> list[Any]:
        out: list[Any] = []
        for key in sorted(self.firing):
            st = self.keys[key]
            if st.queue and st.queue[0][0] <= watermark_ms - self.window_ms:
                self._expire(key, st, watermark_ms, inventory, out)
        if self.sweep_due(watermark_ms):
            for k in [k for k, s in self.keys.items() if not s.firing and s.last_ms < watermark_ms - self.ttl_ms]:
                del self.keys[k]
        return out

    def _evict(self) -> None:
        victims = sorted((k for k, s in self.keys.items() if not s.firing),
                         key=lambda k: (len(self.keys[k].units), self.keys[k].last_ms, k))
        for k in victims[: max(1, len(self.keys) // 10)]:
            del self.keys[k]

    # ------------------------------------------------------------------ state
    def dump(self) -> dict[str, Any]:
        return {**self.dump_lifecycle(), "keys": {k: s.dump() for k, s in self.keys.items()}}

    def load(self, d: dict[str, Any]) -> None:
        self.load_lifecycle(d)
        self.keys = {str(k): _Key.load(v) for k, v in d["keys"].items()}
        self.firing = {k for k, s in self.keys.items() if s.firing}

    def counts(self) -> dict[str, float]:
        return {k: float(s.total) for k, s in self.keys.items()}


def cohort_correlation_from_config(cfg: Any, make_alert: MakeCohortAlert,
                                   window_s: float | None = None) -> CohortCorrelation:
    return CohortCorrelation(bucket_s=cfg.bucket_s, window_s=cfg.corr_window_s if window_s is None else window_s, min_hosts=cfg.corr_min_hosts,
                             fdr=cfg.corr_fdr, alpha=cfg.corr_alpha, min_rr_lower=cfg.corr_min_rr_lower,
                             min_cohort_hosts=cfg.corr_min_cohort_hosts, explain_alpha=cfg.corr_explain_alpha,
                             max_units=cfg.corr_max_units, warmup_s=cfg.warmup_s, cooldown_s=cfg.cooldown_s,
                             key_ttl_s=cfg.key_ttl_s, max_keys=cfg.max_keys, make_alert=make_alert)


__all__ = ["CohortCorrelation", "Pair", "cohort_correlation_from_config"]
