"""Keyed rate spike: a key's windowed units against its own daily baseline.

The engine of ``signature_spike`` and of the fleet-wide part of
``telemetry_cohort``. Per key it keeps a sliding window (``Ring``), a
daily-cycle baseline (``DailyBaseline``) and two integer thresholds computed
once per bucket from the expected count (fire at ``alpha``, resolve at
``resolve_alpha``: hysteresis). An event costs a dict lookup, a dedup check,
two additions and a comparison; scipy runs only when a threshold is crossed.

Units, not events: ``observe`` takes a *source* (a job, else a host). A
source counts once per window, so one job crashing on 64 hosts at once is
one unit, and one host crash-looping is one unit (that is host_spike's
business). Crash counts then are counts of independent-ish incidents, which
is what a count test assumes.

Alerts are made by a callback of the owning detector; this core only says
"fired"/"resolved" with the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fleetepi.contract import Alert
from fleetepi.detectors.lifecycle import Lifecycle
from fleetepi.detectors.stats import nb_sf, nb_threshold
from fleetepi.detectors.windows import HOUR_MS, DailyBaseline, Ring, decay_per_day, window_expectation

#: (key, state "firing"/"resolved", ts_ms, p_value, observed, expected, notes, window_s) -> Alert
MakeAlert = Callable[[str, str, int, float | None, float, float, list[str], float], Alert]


class _Key:
    __slots__ = ("rings", "base", "seen", "b", "mu", "k_fire", "k_res", "firing", "fired_ms",
                 "quiet_until_ms", "last_ms", "total")

    def __init__(self, sizes: tuple[int, ...], hour: int, warm_hours: float) -> None:
        #: one sliding window per configured width, shortest first
        self.rings = [Ring(n) for n in sizes]
        self.base = DailyBaseline(hour, warm_hours)
        #: source -> bucket it was last counted in (dedup within the longest window).
        self.seen: dict[str, int] = {}
        self.b = -1  # bucket the thresholds are for
        self.mu = [0.0] * len(sizes)
        self.k_fire = [1 << 30] * len(sizes)
        self.k_res = [0] * len(sizes)
        self.firing = False
        self.fired_ms = 0
        self.quiet_until_ms = 0
        self.last_ms = 0
        self.total = 0.0

    def dump(self) -> list[Any]:
        return [[r.dump() for r in self.rings], self.base.dump(), dict(self.seen), self.b, list(self.mu),
                list(self.k_fire), list(self.k_res), self.firing, self.fired_ms, self.quiet_until_ms, self.last_ms,
                self.total]

    @classmethod
    def load(cls, d: list[Any]) -> _Key:
        k = cls.__new__(cls)
        k.rings, k.base = [Ring.load(r) for r in d[0]], DailyBaseline.load(d[1])
        k.seen = {str(s): int(v) for s, v in d[2].items()}
        k.b, k.mu = int(d[3]), [float(x) for x in d[4]]
        k.k_fire, k.k_res = [int(x) for x in d[5]], [int(x) for x in d[6]]
        k.firing, k.fired_ms, k.quiet_until_ms = bool(d[7]), int(d[8]), int(d[9])
        k.last_ms, k.total = int(d[10]), float(d[11])
        return k


class RateSpike(Lifecycle):
    """Per-key windowed counts against a daily baseline, with hysteresis and cooldown.

    Several windows run side by side (``windows_s``, e.g. 1 h and 6 h): the
    short one catches a sharp outbreak within minutes, the long one a slow
    one (a new signature at 2 an hour) that no hour would show. A key fires
    when *any* window crosses its threshold, and resolves when *every* window
    is back under its resolve threshold.

    :param alpha: one-sided p-value to fire, per window; :param resolve_alpha: to stay firing.
    :param min_units: minimum support; :param min_ratio: minimum observed/expected.
    """

    def __init__(self, *, bucket_s: float, windows_s: tuple[float, ...], alpha: float, resolve_alpha: float,
                 min_units: int, min_ratio: float, nb_size: float, halflife_days: float, hour_prior_h: float,
                 prior_rate_per_h: float, prior_weight_h: float, warmup_s: float, cooldown_s: float,
                 key_ttl_s: float, max_keys: int, make_alert: MakeAlert) -> None:
        super().__init__(warmup_s=warmup_s, cooldown_s=cooldown_s, key_ttl_s=key_ttl_s, max_keys=max_keys)
        self.set_windows(bucket_s, windows_s)
        self.alpha, self.resolve_alpha = alpha, resolve_alpha
        self.min_units, self.min_ratio, self.nb_size = min_units, min_ratio, nb_size
        self.decay = decay_per_day(halflife_days)
        self.hour_w, self.prior_rate, self.prior_w = hour_prior_h, prior_rate_per_h, prior_weight_h
        self.make_alert = make_alert
        self.keys: dict[str, _Key] = {}
        #: keys now firing (advance visits only these).
        self.firing: set[str] = set()
        #: events refused because their bucket had left the window (late).
        self.late = 0

    # ------------------------------------------------------------------ hot path
    def observe(self, key: str, source: str | None, w: float, ts_ms: int) -> list[Alert]:
        """Count ``w`` units of ``key`` from ``source`` at ``ts_ms``; return alerts."""
        if self.start_ms is None:
            self.start(ts_ms)
        b = ts_ms // self.bucket_ms
        st = self.keys.get(key)
        out: list[Alert] = []
        if st is not None and ts_ms - st.last_ms > self.ttl_ms and not st.firing:
            st = None  # idle past the TTL: forgotten, whether or not a sweep got to it yet
        if st is None:
            st = self._new_key(key, ts_ms)
        if b > st.b:
            self._roll(key, st, b, out)
        if source is not None:
            seen = st.seen
            last = seen.get(source)
            if last is not None and last > b - self.sizes[0]:
                return out  # counted in the shortest window already
            seen[source] = b
        counted = False
        crossed = -1
        for i, ring in enumerate(st.rings):
            if ring.add(b, w):
                counted = True
                if crossed < 0 and ring.total >= st.k_fire[i]:
                    crossed = i
        if not counted:
            self.late += 1
            return out
        st.total += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        st.base.add(ts_ms // HOUR_MS, w, st.firing)
        if crossed >= 0 and not st.firing:
            self._maybe_fire(key, st, crossed, ts_ms, out)
        return out

    # ------------------------------------------------------------------ decisions
    def _maybe_fire(self, key: str, st: _Key, i: int, ts_ms: int, out: list[Alert]) -> None:
        if not self.warm(ts_ms) or ts_ms < st.quiet_until_ms:
            return
        obs, mu = st.rings[i].total, st.mu[i]
        p = nb_sf(obs, mu, self.nb_size)
        st.firing, st.fired_ms = True, ts_ms
        st.base.mark_firing()
        self.firing.add(key)
        w = self.windows_s[i]
        notes = [f"count test: {obs:g} units in {w:g} s vs {mu:.3g} expected "
                 f"(negative binomial size {self.nb_size:g}), p={p:.3g} < alpha={self.alpha:g}",
                 f"window {w:g} s of {', '.join(f'{x:g}' for x in self.windows_s)}; fire at >= {st.k_fire[i]}, "
                 f"resolve below {st.k_res[i]}"]
        out.append(self.make_alert(key, "firing", ts_ms, p, obs, mu, notes, w))

    def _thresholds(self, st: _Key, b: int) -> None:
        rates = st.base.rates(self.prior_rate, self.prior_w, self.hour_w)
        for i, n in enumerate(self.sizes):
            mu = window_expectation(rates, b, n, self.bucket_ms)
            st.mu[i] = mu
            st.k_fire[i] = max(self.min_units, math.ceil(self.min_ratio * mu),
                               nb_threshold(mu, self.nb_size, self.alpha))
            st.k_res[i] = nb_threshold(mu, self.nb_size, self.resolve_alpha)
        st.b = b

    def _roll(self, key: str, st: _Key, b: int, out: list[Alert]) -> None:
        """Move the key's clock to bucket ``b``.

        While firing, step bucket by bucket (at most the longest window's
        worth), recomputing the thresholds *at each bucket*, so the resolve
        time and numbers depend only on the key's events, never on when the
        engine happened to call ``advance``: a partitioned run resolves at the
        same instant as a single process.
        """
        if st.firing and st.rings[0].head >= 0:
            hold_ms = self.windows_s[0] * 1000
            j = st.rings[0].head + 1
            stop = min(b, st.rings[0].head + self.n)
            while j <= stop and st.firing:
                self._move(st, j)
                if j * self.bucket_ms - st.fired_ms >= hold_ms and all(
                        r.total < k for r, k in zip(st.rings, st.k_res)):
                    self._resolve(key, st, j * self.bucket_ms, st.rings[0].total, out)
                j += 1
            if st.firing and b > stop:
                # Every window is empty by now: resolved at the first allowed bucket past them.
                j = max(stop + 1, -(-(st.fired_ms + int(hold_ms)) // self.bucket_ms))
                if j <= b:
                    self._move(st, j)
                    self._resolve(key, st, j * self.bucket_ms, 0.0, out)
        self._move(st, b)

    def _move(self, st: _Key, b: int) -> None:
        """Fold the baseline up to ``b``'s guard band, slide the windows, recompute thresholds."""
        if b <= st.b:
            return
        # Guard band: fold only hours older than the longest window.
        hour = (b - self.n) * self.bucket_ms // HOUR_MS
        if hour > st.base.hour:
            st.base.fold_until(hour, self.decay, self.prior_rate, self.prior_w, self.hour_w)
        if b * self.bucket_ms // HOUR_MS > st.b * self.bucket_ms // HOUR_MS and len(st.seen) > 8:
            old = b - self.sizes[0]
            st.seen = {s: v for s, v in st.seen.items() if v > old}
        for ring in st.rings:
            ring.roll(b)
        self._thresholds(st, b)

    def _resolve(self, key: str, st: _Key, t_ms: int, obs: float, out: list[Alert]) -> None:
        st.firing = False
        self.firing.discard(key)
        st.quiet_until_ms = t_ms + self.cooldown_ms
        notes = [f"resolved: every window below its resolve threshold ({', '.join(map(str, st.k_res))}; "
                 f"p >= {self.resolve_alpha:g}); quiet until +{self.cooldown_ms // 1000} s"]
        out.append(self.make_alert(key, "resolved", t_ms, None, obs, st.mu[0], notes, self.window_s))

    # ------------------------------------------------------------------ time and memory
    def _new_key(self, key: str, ts_ms: int) -> _Key:
        if len(self.keys) >= self.max_keys:
            self._evict()
        start = self.start_ms if self.start_ms is not None else ts_ms
        warm_h = max(0.0, (ts_ms - start) / HOUR_MS)
        st = _Key(self.sizes, (ts_ms - self.n * self.bucket_ms) // HOUR_MS,
                  min(warm_h, 24.0 / (1.0 - self.decay) if self.decay < 1 else warm_h))
        st.last_ms = ts_ms
        self.keys[key] = st
        return st

    def _evict(self) -> None:
        """Drop the quietest tenth of the keys (never a firing one): bounded memory."""
        victims = sorted((k for k, s in self.keys.items() if not s.firing),
                         key=lambda k: (self.keys[k].rings[-1].total, self.keys[k].last_ms, k))
        for k in victims[: max(1, len(self.keys) // 10)]:
            del self.keys[k]

    def advance(self, watermark_ms: int, inventory: object = None) -> list[Alert]:
        """Resolve firing keys whose windows emptied; forget keys idle past the TTL."""
        out: list[Alert] = []
        b = watermark_ms // self.bucket_ms
        for key in sorted(self.firing):
            st = self.keys[key]
            if b > st.b:
                self._roll(key, st, b, out)
        if self.sweep_due(watermark_ms):
            dead = [k for k, s in self.keys.items() if not s.firing and s.last_ms < watermark_ms - self.ttl_ms]
            for k in dead:
                del self.keys[k]
        return out

    # ------------------------------------------------------------------ state
    def dump(self) -> dict[str, Any]:
        return {**self.dump_lifecycle(), "late": self.late, "keys": {k: s.dump() for k, s in self.keys.items()}}

    def load(self, d: dict[str, Any]) -> None:
        self.load_lifecycle(d)
        self.late = int(d["late"])
        self.keys = {str(k): _Key.load(v) for k, v in d["keys"].items()}
        self.firing = {k for k, s in self.keys.items() if s.firing}

    def counts(self) -> dict[str, float]:
        return {k: s.total for k, s in self.keys.items()}

    def window_total(self, key: str, i: int = 0) -> float:
        st = self.keys.get(key)
        return 0.0 if st is None else st.rings[i].total


def rate_spike_from_config(cfg: Any, *, windows_s: tuple[float, ...], alpha: float, resolve_alpha: float, min_units: int,
                           min_ratio: float, make_alert: MakeAlert) -> RateSpike:
    """A ``RateSpike`` with the shared settings of ``DetectorConfig``."""
    return RateSpike(bucket_s=cfg.bucket_s, windows_s=windows_s, alpha=alpha, resolve_alpha=resolve_alpha,
                     min_units=min_units, min_ratio=min_ratio, nb_size=cfg.nb_size,
                     halflife_days=cfg.baseline_halflife_days, hour_prior_h=cfg.hour_prior_h,
                     prior_rate_per_h=cfg.prior_rate_per_h, prior_weight_h=cfg.prior_weight_h,
                     warmup_s=cfg.warmup_s, cooldown_s=cfg.cooldown_s, key_ttl_s=cfg.key_ttl_s,
                     max_keys=cfg.max_keys, make_alert=make_alert)


__all__ = ["MakeAlert", "RateSpike", "rate_spike_from_config"]
