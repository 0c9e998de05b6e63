"""Keyed rate spike: a key's units in sliding windows against its own daily baseline.

The engine of ``signature_spike`` and of the fleet-wide part of
``telemetry_cohort``. Per key: side-by-side windows at step resolution
(``Windows``: an hour, four hours, a day by default), a daily-cycle baseline
with its own learned dispersion (``DailyBaseline``), and at every step
boundary a negative binomial test of each window against its expectation.

What is learned rather than assumed:

* the key's hour-of-day rate, and how much its counts swing around it
  (hourly and day to day): a Poisson-like key is tested sharply — a x2
  regression of a busy signature fires within hours — and a swinging one
  widely;
* a new key's prior rate: half the median rate of the keys already known,
  never below ``prior_rate_floor_per_h`` (one case a day: below that no rate
  can be told apart within a day). A fleet whose long tail spawns new
  signatures every hour gives a new one a higher prior than a quiet fleet.

Support is required in time as well as in count: the window's units must
come from at least ``min_spread`` distinct steps, so a burst that lands in
one or two steps (a job abort without a job id that the unit cap did not
flatten) cannot fire on its own.
"""

from __future__ import annotations

import math
from typing import Literal

from msgspec import Struct, field

from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.stats import alpha_per_look, binom_sf_real, nb_sf, nb_surely_not_significant, nb_threshold
from fleetepi.detectors.windows import DAY_H, DAY_MS, HOUR_MS, DailyBaseline, Windows, decay_per_day

#: Hours of baseline (folded, or credited silence for a key new to a running stream) before a key is tested.
MIN_HISTORY_H = 12.0
#: Windows up to this long test a key from its first case (a new signature's burst); longer ones wait
#: until the key is as old as they are.
NEW_KEY_WINDOW_S = 4 * 3600.0
#: Observations a key's own dispersion must hold against the prior (its weight): a week of days, a
#: day of hours.
DISP_PRIOR_DAYS = 7.0
DISP_PRIOR_HOURS = 24.0
#: The day window or a multi-day window above this tail probability holds the baseline (hours fold as if
#: the key fired).
HOLD_ALPHA = 1e-2
#: ... for a key expected this many units in it at least: fewer say more about chance and one crash-looping
#: host than about a rise, and a held sparse key's frozen rate would page on its next ordinary burst.
HOLD_MIN_EXPECTED = 20.0
#: Hours a key seen since the stream began waits for the fleet's learned dispersion before its first test without it.
SETTLE_H = 48.0
#: The learned dispersion prior stays within these.
DISP_MIN, DISP_MAX = 0.01, 2.0

#: a watch count no window reaches (the window cannot be tested yet)
_NEVER = 1 << 30

#: phi values the thresholds are tabulated on (a learned phi is rounded up: conservative).
_PHI_GRID = (0.0,) + tuple(0.005 * 2 ** (k / 2) for k in range(22))


def _phi_up(phi: float) -> float:
    for g in _PHI_GRID:
        if g >= phi:
            return g
    return _PHI_GRID[-1]


def nb_size(phi: float) -> float:
    return math.inf if phi <= 0 else 1.0 / phi


class RateKey(Struct):
    win: Windows
    base: DailyBaseline
    first_ms: int
    last_ms: int
    #: a screen: counts below these (computed once an hour, at 0.8 x the expectation) cannot fire
    screen_hour: int = -1
    screen: list[int] = field(default_factory=list)
    #: the short windows' counts at which the key is on watch (``RateSpike.watched``), set with the screen
    watch: list[int] = field(default_factory=list)
    firing: bool = False
    fired_ms: int = 0
    quiet_until_ms: int = 0
    total: float = 0.0
    #: the episode fired on a multi-day window: it resolves only once those are back to normal too
    fired_days: bool = False
    #: when the last episode resolved: a multi-day window is tested again only once it no longer holds it
    resolved_ms: int = 0


class RateVerdict(Struct, frozen=True):
    """A decision about one key, for the owning detector to word as an alert."""

    key: str
    state: Literal["firing", "resolved"]
    ts_ms: int
    observed: float
    expected: float
    window_s: float
    p_value: float | None = None
    #: the key was first seen within the last day (a new signature, a new code)
    new_key: bool = False
    notes: tuple[str, ...] = ()


class RateSpike(Struct):
    """Per-key windowed counts against a learned baseline, decided at step boundaries.

    Fire when any window crosses (p < ``alpha``, >= ``min_units`` from >=
    ``min_spread`` steps, >= ``min_ratio`` x expected), resolve when every
    window is back under its ``resolve_alpha`` threshold after at least the
    shortest window, then stay quiet for ``cooldown_ms``.
    """

    step_ms: int
    sizes: list[int]
    windows_s: list[float]
    alpha: float
    resolve_alpha: float
    min_units: int
    min_spread: int
    min_ratio: float
    decay: float
    hour_w: float
    prior_w: float
    prior_floor: float
    disp_prior: float
    warmup_ms: int
    cooldown_ms: int
    ttl_ms: int
    max_keys: int
    #: multi-day windows (days): the day window plus the key's last whole days (``DailyBaseline.recent``)
    days: list[int] = field(default_factory=list)
    keys: dict[str, RateKey] = field(default_factory=dict)
    #: "key\x1fhost" -> the day (ts // a day) its last spread unit was counted
    day_hosts: dict[str, int] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    firing: set[str] = field(default_factory=set)
    start_ms: int | None = None
    prior_rate: float = 0.0
    prior_hour: int = -1
    #: the dispersion prior, learned across keys (hourly and daily)
    disp_prior_h: float = 0.0
    disp_prior_d: float = 0.0
    late: int = 0
    #: a slot's prior as units of the all-day rate (``windows.slot_weight``); 0: ``hour_w`` hours only
    hour_units: float = 0.0
    #: a window longer than this looks afresh less often than the hourly test: its alpha is ``alpha`` times
    #: its length over this (``sig_alpha_look_s``; 0: one alpha for every window)
    look_s: float = 0.0
    #: the fleet's hourly dispersion has been learned (``_update_prior``): until then the configured prior
    #: stands in, and a key seen since the stream began is not tested before it is ``SETTLE_H`` old
    disp_learned: bool = False
    #: a window shorter than the day that the baseline test finds this unusual is also tested against the
    #: hours before it (``_local``; ``sig_local_alpha``, 0: not)
    local_alpha: float = DetectorConfig.sig_local_alpha
    #: a key not firing whose short window is this unusual is on watch (``watched``; 0: none is)
    watch_alpha: float = 0.0
    #: keys on watch: rising fleet-wide, not (yet) enough to fire. Where such a key lives is asked of its
    #: cohorts with more of the false-discovery budget (``CohortCorrelation.decide``)
    watched: set[str] = field(default_factory=set)

    @classmethod
    def new(cls, *, step_s: float, windows_s: tuple[float, ...], alpha: float, resolve_alpha: float, min_units: int,
            min_spread: int, min_ratio: float, halflife_days: float, hour_prior_h: float, prior_weight_h: float,
            prior_floor_per_h: float, dispersion_prior: float, warmup_s: float,
            cooldown_s: float, key_ttl_s: float, max_keys: int, days: tuple[int, ...] = (),
            hour_prior_units: float = 0.0, look_s: float = 0.0,
            local_alpha: float = DetectorConfig.sig_local_alpha, watch_alpha: float = 0.0) -> RateSpike:
        sizes = sorted({max(1, round(w / step_s)) for w in windows_s})
        # the multi-day windows extend the day window: without one (a custom set of shorter windows) there are none
        days_ok = list(days) if sizes[-1] * step_s == DAY_H * 3600 else []
        return cls(int(step_s * 1000), sizes, [n * step_s for n in sizes], alpha, resolve_alpha, min_units,
                   min_spread, min_ratio, decay_per_day(halflife_days), hour_prior_h, prior_weight_h,
                   prior_floor_per_h, dispersion_prior, int(warmup_s * 1000),
                   int(cooldown_s * 1000), int(key_ttl_s * 1000), max_keys, days_ok, prior_rate=prior_floor_per_h,
                   hour_units=hour_prior_units, look_s=look_s, local_alpha=local_alpha, watch_alpha=watch_alpha)

    # ------------------------------------------------------------------ folding
    def observe(self, key: str, w: float, ts_ms: int, host: str | None = None) -> None:
        """Count ``w`` units of ``key`` at ``ts_ms`` (decided at the next ``decide``).

        With ``host``, the multi-day windows count the (key, host) once a day:
        a pod crash-looping for three days is one unit an hour for the short
        windows (as many as a real rise would bring) but three for a
        three-day window, where a deploy's rise is spread over many hosts.
        """
        if self.start_ms is None:
            self.start_ms = ts_ms
        st = self.keys.get(key)
        if st is not None and ts_ms - st.last_ms > self.ttl_ms and not st.firing:
            st = None  # idle past the TTL: a new key again, whether or not a sweep got to it
        if st is None:
            st = self._new_key(key, ts_ms)
        if not st.win.add(ts_ms // self.step_ms, w):
            self.late += 1
            return
        st.total += w
        if ts_ms > st.last_ms:
            st.last_ms = ts_ms
        spread = None
        if host is not None and self.days:
            day, hk = ts_ms // DAY_MS, f"{key}\x1f{host}"
            spread = 0.0 if self.day_hosts.get(hk) == day else w
            self.day_hosts[hk] = day
        st.base.add(ts_ms // HOUR_MS, w, st.firing, spread)
        self.touched.add(key)

    def _new_key(self, key: str, ts_ms: int) -> RateKey:
        """A key's baseline starts at its first case; the hours before it since the stream began were silent.

        Those hours were watched and nothing came: they are credited as
        exposure (a brand-new signature has a near-zero baseline, which is
        right); hours before the stream's start were not watched and are not.
        """
        if len(self.keys) >= self.max_keys:
            self._evict()
        start_h = (self.start_ms if self.start_ms is not None else ts_ms) // HOUR_MS
        first_h = ts_ms // HOUR_MS
        cap_h = DAY_H / (1.0 - self.decay) if self.decay < 1 else float(first_h - start_h)
        st = RateKey(Windows.new(tuple(self.sizes)),
                     DailyBaseline.new(first_h, min(float(max(first_h - start_h, 0)), cap_h)), ts_ms, ts_ms)
        self.keys[key] = st
        return st

    # ------------------------------------------------------------------ decisions
    def decide(self, horizon_ms: int, now_ms: int) -> list[RateVerdict]:
        """Decide every touched or firing key with the units dated before ``horizon_ms``.

        :param now_ms: the step boundary being evaluated (the verdicts' time).
        """
        self._update_prior(horizon_ms)
        out: list[RateVerdict] = []
        keys = self.touched | self.firing
        self.touched = set()
        b = (horizon_ms - 1) // self.step_ms
        for key in sorted(self.watched - keys):
            # a watched key with nothing new: its windows slide, and it may leave the watch (not decided:
            # the decisions, and the baseline's folds, run at the steps they always ran at)
            st = self.keys.get(key)
            if st is None:
                self.watched.discard(key)
                continue
            st.win.roll(b)
            self._watch(key, st, now_ms)
        for key in sorted(keys):
            st = self.keys.get(key)
            if st is None:
                self.watched.discard(key)
                continue
            st.win.roll(b)
            hour = (b - self.sizes[-1] + 1) * self.step_ms // HOUR_MS
            st.base.fold_until(hour, self.decay, self.prior_rate, self.prior_w, self.hour_w, self.hour_units)
            v = self._decide_key(key, st, b, horizon_ms, now_ms)
            if v is not None:
                out.append(v)
            if self.watch_alpha:
                self._watch(key, st, now_ms)
        return out

    def _watch(self, key: str, st: RateKey, now_ms: int) -> None:
        """Is the key on watch: not firing, tested, and a short window at its watch count (this hour's)."""
        on = not st.firing and bool(st.watch) and not self._untested(st, now_ms) and any(
            c >= w for c, w in zip(st.win.totals, st.watch))
        if on:
            self.watched.add(key)
        else:
            self.watched.discard(key)

    def _untested(self, st: RateKey, now_ms: int) -> bool:
        """The key is not tested now: warm-up, its cool-down, or a first day before the fleet's dispersion is known."""
        if self.start_ms is None or now_ms < self.start_ms + self.warmup_ms or now_ms < st.quiet_until_ms:
            return True
        # a key seen since the stream began, whose rate its first day has shown, while the fleet has not
        # shown how much its keys swing: the configured prior would decide, and every fleet simulated so
        # far swings 3-20 times more (its first learned values 0.3-2). A key first seen after hours of
        # watched silence is tested: against a baseline of silence, the dispersion hardly matters
        return not self.disp_learned and now_ms - st.first_ms < SETTLE_H * HOUR_MS and \
            st.first_ms < self.start_ms + MIN_HISTORY_H * HOUR_MS

    def _eligible(self, i: int, hist_h: float, age_ms: int) -> bool:
        """Can short window ``i`` be tested: a baseline for it, and (a long window) a key as old as it."""
        if hist_h < max(MIN_HISTORY_H, min(self.windows_s[i] / 3600.0, DAY_H)):
            # no baseline yet for this window: the key's first hours are inside it, or (a day window)
            # the hour-of-day profile has not seen every hour of the day it is compared over
            return False
        # a key younger than a long window: its first day says when it appeared, not that it rose (in a
        # long tail, hundreds of ordinary keys show up hours in); short windows only
        return not (self.windows_s[i] > NEW_KEY_WINDOW_S and age_ms < self.windows_s[i] * 1000)

    def _expectations(self, st: RateKey, b: int, horizon_ms: int) -> list[tuple[float, float, float]]:
        """(expected units, phi, hours of history) per window, the window being ``[its first step, horizon)``.

        Each window is compared with the baseline as it stood before the
        window began: hours not folded yet (the guard band of the longest
        window) count for the shorter windows when they are older than them.
        """
        out = []
        base = st.base
        # a key with a day of folded history is compared with it at every window (one computation); a
        # younger one also with its unfolded hours older than each window
        settled = base.sums()[1] >= DAY_H
        # the baseline is an average of the few days it has seen, each as swinging as the key's days: early on,
        # its own error is most of a window's uncertainty (a key that ran at a third of its level on its first
        # day is at 10x on its second, and that is a day, not an outbreak)
        base_err = base.dispersion(True, self.disp_prior_d, DISP_PRIOR_DAYS) / base.free_days()
        folded = base.rates(self.prior_rate, self.prior_w, self.hour_w, hour_units=self.hour_units) if settled else None
        folded_units = base.units() if settled else 0.0
        for i, n in enumerate(self.sizes):
            start = (b - n + 1) * self.step_ms
            before_h = start // HOUR_MS
            rates = folded if folded is not None else base.rates(self.prior_rate, self.prior_w, self.hour_w, before_h,
                                                                  self.hour_units)
            mu = 0.0
            t = start
            while t < horizon_ms:
                nxt = min((t // HOUR_MS + 1) * HOUR_MS, horizon_ms)
                mu += rates[(t // HOUR_MS) % DAY_H] * (nxt - t)
                t = nxt
            daily = self.windows_s[i] >= 12 * 3600
            prior, prior_n = (self.disp_prior_d, DISP_PRIOR_DAYS) if daily else (self.disp_prior_h, DISP_PRIOR_HOURS)
            # the expectation is an estimate from the key's own units (and the prior's pseudo-units): its
            # uncertainty widens the test as a gamma-Poisson predictive does. A key seen 3 times in a week
            # may well run at twice the rate its few cases suggest; a busy key's rate is known. Added to
            # the prior only: the key's own moments, taken against its estimated rate, hold it already
            learned = (folded_units if settled else base.units(before_h)) + self.prior_rate * self.prior_w
            phi = _phi_up(base.dispersion(daily, prior + 1.0 / learned + base_err, prior_n))
            out.append((mu / HOUR_MS, phi, base.history_h(None if settled else before_h)))
        return out

    def _days(self, st: RateKey, now_ms: int) -> list[tuple[int, float, float, float]]:
        """(days, spread units, expected before the hours not folded, hours) of each multi-day window the key can be tested on.

        A window is tested once the key has a baseline as old as it and its
        last episode has left it (an episode's units are not a new rise).
        """
        out: list[tuple[int, float, float, float]] = []
        if not self.days or st.base.sums()[1] < DAY_H:
            return out
        since = max(st.first_ms, st.resolved_ms)
        pending: float | None = None
        for d in self.days:
            if len(st.base.past) < d - 1 or (now_ms - since < (d + 1) * DAY_MS and not st.fired_days):
                continue
            if pending is None:
                pending = st.base.pending_spread()
            units, expected, hours = st.base.recent(d - 1)
            out.append((d, units + pending, expected, hours + self.windows_s[-1] / 3600.0))
        return out

    def _days_expectations(self, st: RateKey, days: list[tuple[int, float, float, float]],
                           exp: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
        """(expected units, phi, hours) of the multi-day windows: the day-to-day swing averages over their days.

        Days are taken as independent: the key's daily dispersion divided by
        the window's days, plus the uncertainty of its rate (which does not
        average away): as many swinging days as the baseline holds, and the
        units it learned from.
        """
        base = st.base
        learned = base.units() + self.prior_rate * self.prior_w
        phi_d = base.dispersion(True, self.disp_prior_d, DISP_PRIOR_DAYS)
        # the hours not folded begin at the hour the day window begins in: the part of it before the window
        # at the day's mean rate
        start_ms = (st.win.head - self.sizes[-1] + 1) * self.step_ms
        mu_day = exp[-1][0] * (1.0 + max(start_ms - base.hour * HOUR_MS, 0) / DAY_MS)
        # the baseline is itself an average of the days it has seen (decayed: at most ~10 at a week's half-life),
        # each as swinging: its own error does not average away over the window's days
        hist_days = base.free_days()
        return [(mu_day + e, _phi_up(phi_d * (DAY_H / h + 1.0 / hist_days) + 1.0 / learned), h)
                for _, _, e, h in days]

    def _alphas(self, days: list[tuple[int, float, float, float]]) -> list[float]:
        """Each window's alpha, ``alpha`` per look of ``look_s`` (``stats.alpha_per_look``).

        At one alpha for all, a week's window was held seven times tighter per
        unit time than the day's, and a deploy that doubled a signature waited
        days longer for it.
        """
        return [alpha_per_look(self.alpha, w, self.look_s) for w in self.windows_s] + \
            [alpha_per_look(self.alpha, d * DAY_MS / 1000.0, self.look_s) for d, _, _, _ in days]

    def _decide_key(self, key: str, st: RateKey, b: int, horizon_ms: int, now_ms: int) -> RateVerdict | None:
        totals = st.win.totals
        days = self._days(st, now_ms) if self.days else []
        counts = list(totals) + [x for _, x, _, _ in days]
        if not st.firing:
            if max(counts) < self.min_units:
                return None  # cannot fire: no need for its expectations (most keys of a long tail)
            hour = horizon_ms // HOUR_MS
            if hour == st.screen_hour and len(st.screen) == len(counts) and all(
                    t < k for t, k in zip(counts, st.screen)):
                return None  # below this hour's screen: the exact expectations cannot say "fire"
        exp = self._expectations(st, b, horizon_ms)
        if days:
            exp = exp + self._days_expectations(st, days, exp)
        alphas = self._alphas(days)
        if not st.firing and horizon_ms // HOUR_MS != st.screen_hour:
            st.screen_hour = horizon_ms // HOUR_MS
            n_local = len(self.sizes) - 1  # the windows shorter than the day may pass on the local test
            st.screen = [max(self.min_units, math.floor(self.min_ratio * 0.8 * mu),
                             nb_threshold(0.8 * mu, nb_size(phi), max(a, self.local_alpha) if j < n_local else a))
                         for j, ((mu, phi, _), a) in enumerate(zip(exp, alphas))]
            if self.watch_alpha:
                age_ms = now_ms - st.first_ms
                st.watch = [max(self.min_units, math.ceil(self.min_ratio * mu),
                                nb_threshold(mu, nb_size(phi), self.watch_alpha))
                            if self._eligible(i, hist_h, age_ms) else _NEVER
                            for i, (mu, phi, hist_h) in enumerate(exp[:len(self.sizes)])]
            n = len(self.sizes)
            if len(exp) > n and exp[n][0] >= HOLD_MIN_EXPECTED and any(
                    counts[i] >= max(self.min_ratio * mu, nb_threshold(mu, nb_size(phi), HOLD_ALPHA))
                    for i, (mu, phi, _) in enumerate(exp[n - 1:], n - 1)):
                # a sustained rise may be taking shape (the day or a multi-day window is unusual): the baseline
                # does not learn these hours as the new normal (it would absorb a deploy's excess day by day,
                # rate and swing both, before a multi-day window could tell)
                st.base.mark_firing(horizon_ms // HOUR_MS)
        if st.firing:
            st.base.hold(horizon_ms // HOUR_MS)
            held = now_ms - st.fired_ms >= self.windows_s[0] * 1000
            tested = len(exp) if st.fired_days else len(self.sizes)
            quiet = all(counts[i] < nb_threshold(mu, nb_size(phi), self.resolve_alpha)
                        for i, (mu, phi, _) in enumerate(exp[:tested]))
            if held and quiet:
                st.firing = st.fired_days = False
                st.resolved_ms = now_ms
                self.firing.discard(key)
                st.quiet_until_ms = now_ms + self.cooldown_ms
                return RateVerdict(key, "resolved", now_ms, totals[0], exp[0][0], self.windows_s[0], notes=(
                    f"resolved: every window back under its p >= {self.resolve_alpha:g} threshold; "
                    f"quiet until +{self.cooldown_ms // 1000} s",))
            return None
        if self._untested(st, now_ms):
            return None
        age_ms = now_ms - st.first_ms
        #: (p, window, the baseline test's p when the window passed on the local test)
        best: tuple[float, int, float | None] | None = None
        n_short = len(self.sizes)
        for i, (mu, phi, hist_h) in enumerate(exp):
            obs = counts[i]
            if i < n_short and not self._eligible(i, hist_h, age_ms):
                continue
            # (a multi-day window is eligible once ``_days`` lists it; its units' spread is the last day's)
            if obs < self.min_units or obs < self.min_ratio * mu:
                continue
            size = nb_size(phi)
            above = obs >= nb_threshold(mu, size, alphas[i])
            if not above and (i >= n_short - 1 or age_ms < DAY_MS or not self.local_alpha):
                continue
            # (the spread after the table's threshold: counting a day window's cells costs more)
            if st.win.spread(min(i, n_short - 1)) < self.min_spread:
                continue
            p_base: float | None = None
            if above:
                p = nb_sf(obs, mu, size)
            else:
                local = self._local(obs, mu, size, counts[n_short - 1], exp[n_short - 1], alphas[i])
                if local is None:
                    continue
                p, p_base = local
            if best is None or p < best[0]:
                best = (p, i, p_base)
        if best is None:
            return None
        p, i, p_base = best
        mu, phi, hours = exp[i]
        st.firing, st.fired_ms = True, now_ms
        st.fired_days = i >= n_short
        st.base.mark_firing(horizon_ms // HOUR_MS)
        self.firing.add(key)
        new = now_ms - st.first_ms < 86_400_000 and st.first_ms > self.start_ms + self.warmup_ms  # type: ignore[operator]
        w = self.windows_s[i] if i < n_short else hours * 3600.0
        disp = "Poisson" if phi <= 0 else f"negative binomial, learned dispersion phi={phi:.3g}"
        spread = st.win.spread(min(i, n_short - 1))
        windows = ", ".join([f"{x / 3600:g} h" for x in self.windows_s] + [f"{d} d" for d in self.days])
        if p_base is not None:
            day_n, day_mu = counts[n_short - 1], exp[n_short - 1][0]
            test = (f"local test: {counts[i]:g} of the day window's {day_n:g} units in its last {w / 3600:g} h, "
                    f"where its {day_mu:.3g} expected put {mu:.3g} (binomial), p={p:.3g} < alpha={alphas[i]:g}; "
                    f"against the baseline ({disp}) p={p_base:.3g} < "
                    f"{self.local_alpha:g}: a spike in a day that had been ordinary")
        else:
            test = (f"count test: {counts[i]:g} units in {w / 3600:g} h vs {mu:.3g} expected ({disp}), "
                    f"p={p:.3g} < alpha={alphas[i]:g}" + (f" ({self.alpha:g} per look of {self.look_s / 3600:g} h)"
                                                          if alphas[i] != self.alpha else ""))
        notes = [test,
                 f"units from {spread} distinct steps{' of the last day' if i >= n_short else ''}; windows {windows}",
                 f"baseline: the key's own hour-of-day rate (prior for new keys {self.prior_rate:.3g}/h)"]
        if i >= n_short:
            notes.append(f"a sustained rise: {self.days[i - n_short]}-day window (the hours not folded into the "
                         f"baseline and the key's whole days before them, each against the baseline as it stood "
                         f"then; a host counts once a day; the day-to-day swing averaged over the days, the "
                         f"baseline's own error not)")
        return RateVerdict(key, "firing", now_ms, counts[i], mu, w, p, new, notes=tuple(notes))

    def _local(self, obs: float, mu: float, size: float, day_obs: float, day_exp: tuple[float, float, float],
               alpha: float) -> tuple[float, float] | None:
        """(p against the hours before it in the day window, p against the baseline) of a short window, or None.

        The baseline test must allow that the key's whole day is up (its
        days swing): eight units in an hour where 0.7 are usual is p ~ 1e-5
        for a key whose days swing by a gamma of shape 3, not enough to page.
        But if the day's earlier hours ran at the usual level, the day is not
        up: given the day window's units, the window's share of them is
        binomial at its share of the day's expectation, whatever the level.
        Both must hold: the window unusual for the key (``local_alpha``) and
        for its day (``alpha``). A day that swings up at one hour, the hours
        before it at the old level, passes the second: the first bounds how
        far up (on the tuning seeds, at 1e-4 such days paged five times in
        thirteen fortnights; at 1e-5 once, as often as before this test).
        """
        if day_exp[2] < DAY_H or day_exp[0] <= mu or nb_surely_not_significant(obs, mu, size, self.local_alpha):
            return None
        p_base = nb_sf(obs, mu, size)
        if p_base >= self.local_alpha:
            return None
        p = binom_sf_real(obs, day_obs, mu / day_exp[0])
        return (p, p_base) if p < alpha else None

    def _update_prior(self, horizon_ms: int) -> None:
        """Priors learned across keys, hourly: a new key's rate and every key's dispersion.

        A new key's prior rate is half the median all-day rate of keys known
        for a day. The dispersion prior is pooled over keys with two days
        (daily) or a day (hourly) of their own, once 20 keys have: how much
        this fleet's signatures swing, before a key has shown its own. Until
        the daily one is learned, the hourly one stands in for it.
        """
        hour = horizon_ms // HOUR_MS
        if hour == self.prior_hour:
            return
        self.prior_hour = hour
        if not self.disp_prior_h:
            self.disp_prior_h = self.disp_prior_d = self.disp_prior
        rates = []
        num_h = den_h = num_d = den_d = num_1 = den_1 = 0.0
        n_h = n_d = n_1 = 0
        day_old = horizon_ms - 86_400_000
        for st in self.keys.values():  # every key, hourly: the moments are read as fields (DailyBaseline.moments)
            base = st.base
            c, e = base.sums()
            if st.first_ms <= day_old and e > 0:
                rates.append(c / e)
            den = base.disp_den_h
            if base.disp_n_h >= DISP_PRIOR_HOURS / 2 and den > 0 and c > 0:
                num_h, den_h, n_h = num_h + base.disp_num_h, den_h + den, n_h + 1
            den = base.disp_den_d
            if base.disp_n_d >= 1.0 and den > 0:
                num_1, den_1, n_1 = num_1 + base.disp_num_d, den_1 + den, n_1 + 1
                if base.disp_n_d >= 2.0:
                    num_d, den_d, n_d = num_d + base.disp_num_d, den_d + den, n_d + 1
        rates.sort()
        median = rates[len(rates) // 2] if rates else 0.0
        self.prior_rate = max(self.prior_floor, 0.5 * median)
        # pooled (a common dispersion, as edgeR's): each key's moments summed, so that the many sparse keys,
        # whose own estimates are mostly zero (clamped), do not drag the prior under the busy keys' evidence
        if n_h >= 20:
            self.disp_prior_h = min(max(num_h / den_h, DISP_MIN), DISP_MAX)
            self.disp_learned = True
        if n_d >= 20:
            self.disp_prior_d = min(max(num_d / den_d, DISP_MIN), DISP_MAX)
        elif n_1 >= 20 and n_h >= 20:
            # a day of moments per key, until keys have two: the day's swing measured, if on one day each
            # (the hourly swing, which stood in until then, holds the within-hour bursts of a few keys, job-wide
            # aborts of collective signatures: 0.8 on the quiet tuning fleet's fourth day, where days swing at
            # 0.25 and the keys' first days measured 0.43)
            self.disp_prior_d = min(max(num_1 / den_1, DISP_MIN), DISP_MAX)
        elif n_h >= 20:
            # no fleet has shown its day-to-day swing yet (two days per key): the hourly swing stands in.
            # An hour's count carries the day's multiplier as well as its own noise, so it is an upper
            # bound of sorts; the configured prior would test the first day windows as if days were
            # alike, and a fleet whose days differ pages on day two for every busy signature
            self.disp_prior_d = self.disp_prior_h

    # ------------------------------------------------------------------ time and memory
    def _evict(self) -> None:
        victims = sorted((s.win.totals[-1], s.last_ms, k) for k, s in self.keys.items() if not s.firing)
        for _, _, k in victims[: max(1, len(self.keys) // 10)]:
            del self.keys[k]
            self.touched.discard(k)
            self.watched.discard(k)

    def sweep(self, now_ms: int) -> None:
        for k in [k for k, s in self.keys.items() if not s.firing and s.last_ms < now_ms - self.ttl_ms]:
            del self.keys[k]
            self.touched.discard(k)
            self.watched.discard(k)
        if self.day_hosts:
            yesterday = now_ms // DAY_MS - 1
            self.day_hosts = {k: d for k, d in self.day_hosts.items() if d >= yesterday}

    def counts(self) -> dict[str, float]:
        return {k: s.total for k, s in self.keys.items()}


def rate_spike_from_config(cfg: DetectorConfig, *, alpha: float | None = None, min_units: int | None = None,
                           min_ratio: float | None = None, watch_alpha: float = 0.0) -> RateSpike:
    """A ``RateSpike`` with the shared settings of ``DetectorConfig`` (the ``sig_*`` ones unless overridden)."""
    c = cfg
    return RateSpike.new(step_s=c.step_s, windows_s=c.sig_windows_s, alpha=c.sig_alpha if alpha is None else alpha,
                         resolve_alpha=c.sig_resolve_alpha, min_units=c.sig_min_units if min_units is None else min_units,
                         min_spread=c.sig_min_spread, min_ratio=c.sig_min_ratio if min_ratio is None else min_ratio,
                         halflife_days=c.baseline_halflife_days, hour_prior_h=c.hour_prior_h,
                         hour_prior_units=c.hour_prior_units,
                         prior_weight_h=c.prior_weight_h, prior_floor_per_h=c.prior_rate_floor_per_h,
                         dispersion_prior=c.dispersion_prior, days=c.sig_days, look_s=c.sig_alpha_look_s,
                         local_alpha=c.sig_local_alpha, watch_alpha=watch_alpha,
                         warmup_s=c.warmup_s, cooldown_s=c.cooldown_s, key_ttl_s=c.key_ttl_s, max_keys=c.max_keys)


__all__ = ["RateKey", "RateSpike", "RateVerdict", "nb_size", "rate_spike_from_config"]
