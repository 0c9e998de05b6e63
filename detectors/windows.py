"""Event-time windows of one key: sliding counts at step resolution, and a daily-cycle baseline.

Both are msgspec Structs, so a detector's whole state snapshots as plain data
(``msgspec.to_builtins``) and restores by type (``msgspec.convert``): no
positional lists read back by index. Time is the key's own event time
(bucket = ``ts_ms // step_ms``), never the wall clock.
"""

from __future__ import annotations

import math

from msgspec import Struct, field

HOUR_MS = 3_600_000
DAY_MS = 86_400_000
DAY_H = 24
#: Longest silent gap folded hour by hour (30 days); beyond it the slots are at their fixed point.
MAX_SILENT_H = 30 * DAY_H
#: Whole days of units a baseline keeps beside its hour-of-day rates, for the multi-day windows
#: (the longest is this plus the day window and the folded part of today: a week).
PAST_DAYS = 6


def _ring(cells: list[float], start: int, stop: int) -> list[float]:
    """``cells[j % len(cells)]`` for ``j`` in ``range(start, stop)``, in that order (``stop - start`` at most the ring)."""
    if stop <= start:
        return []
    n = len(cells)
    lo, hi = start % n, stop % n
    if lo < hi:
        return cells[lo:hi]
    return cells[lo:] + cells[:hi]


class Windows(Struct):
    """Sums of the last ``sizes[i]`` buckets, side by side, over one ring of cells.

    One ring (the longest window) and a running total per window: an add is
    one cell and one addition per window, a roll subtracts what leaves each
    window. Late adds inside the longest window land in their cell and in the
    totals of the windows that still hold it.
    """

    sizes: list[int]
    cells: list[float]
    totals: list[float]
    #: Bucket of the newest cell (-1: empty).
    head: int = -1

    @classmethod
    def new(cls, sizes: tuple[int, ...]) -> Windows:
        return cls(list(sizes), [0.0] * sizes[-1], [0.0] * len(sizes))

    def roll(self, b: int) -> None:
        head = self.head
        if b <= head:
            return
        cells, sizes, totals = self.cells, self.sizes, self.totals
        n = len(cells)
        if head < 0 or b - head >= n:
            cells[:] = [0.0] * n
            totals[:] = [0.0] * len(totals)
        else:
            for i, size in enumerate(sizes):
                t = totals[i]
                # the filled buckets (head - size, min(b - size, head)] leave window i, oldest first; a sparse
                # key's are mostly empty, and subtracting nothing changes nothing (filter skips them at C speed)
                for x in filter(None, _ring(cells, head - size + 1, min(b - size, head) + 1)):
                    t -= x
                totals[i] = t if t > 1e-9 else 0.0
            lo, hi = (head + 1) % n, (b + 1) % n
            if lo < hi:
                cells[lo:hi] = [0.0] * (hi - lo)
            else:  # the buckets wrap around the ring's end
                cells[lo:] = [0.0] * (n - lo)
                cells[:hi] = [0.0] * hi
        self.head = b

    def add(self, b: int, w: float) -> bool:
        """Count ``w`` in bucket ``b``; False if ``b`` has left the longest window (late)."""
        if b > self.head:
            self.roll(b)
        elif b <= self.head - len(self.cells):
            return False
        self.cells[b % len(self.cells)] += w
        head = self.head
        for i, size in enumerate(self.sizes):
            if b > head - size:
                self.totals[i] += w
        return True

    def spread(self, i: int) -> int:
        """Distinct non-empty buckets in window ``i`` (support spread over time)."""
        return sum(1 for x in _ring(self.cells, self.head - self.sizes[i] + 1, self.head + 1) if x > 0)


def slot_weight(overall: float, hour_w: float, hour_units: float) -> float:
    """Pseudo-hours of the all-day rate in one hour-of-day slot: ``hour_w``, or ``hour_units`` units' worth.

    A slot's own rate is as good as the units it saw: a key at 0.03 an hour
    has seen about one unit per slot after a week, and a slot it happened to
    be silent in would be tested at half the all-day rate (four units in one
    hour of it then look like a 1e-9 event). Weighing the all-day rate as
    ``hour_units`` units keeps a sparse key's profile flat until its slots
    hold as many; a busy key (5 an hour) still learns its daily cycle in a
    day, ``hour_w`` hours being the floor.
    """
    if hour_units <= 0.0 or overall <= 0.0:
        return hour_w
    return max(hour_w, hour_units / overall)


class DailyBaseline(Struct):
    """Units per hour, by hour of day (UTC), learned from the key's own past, with its dispersion.

    Each hour slot keeps a decayed count ``c`` and exposure ``e`` (hours),
    decayed once per day with the configured half-life; the rate of hour
    ``h`` is shrunk toward the key's all-day rate (``hour_w`` pseudo-hours)
    and that toward a prior rate (``prior_w`` pseudo-hours): a new or sparse
    key gets a flat, cautious profile, a busy one its own daily cycle.

    Dispersion is learned, not assumed: every folded hour adds
    ``(x - mu)^2 - x`` and ``mu^2`` (method of moments of a negative binomial
    ``var = mu + phi mu^2``), hourly and per day, so a key whose counts are
    Poisson-like is tested sharply and one that swings day to day widely.

    A guard band keeps the baseline honest: an hour is folded only once it is
    older than the longest window (it waits in ``pending``), and hours during
    which the key fired or was held are folded at the expected rate, so an
    outbreak does not become the new normal.
    """

    c: list[float]
    e: list[float]
    #: First absolute hour (ts_ms // HOUR_MS) not folded yet.
    hour: int
    #: [absolute hour, units, fired during it, spread units] not folded yet, oldest first. Spread units
    #: count a (key, host) once a day (``RateSpike.observe``): what the multi-day windows add up.
    pending: list[tuple[int, float, bool, float]] = field(default_factory=list)
    #: Decayed moment sums for the dispersion, hourly and daily.
    disp_num_h: float = 0.0
    disp_den_h: float = 0.0
    disp_num_d: float = 0.0
    disp_den_d: float = 0.0
    #: (decayed) numbers of hours and days behind those moments
    disp_n_h: float = 0.0
    disp_n_d: float = 0.0
    #: The day being accumulated for the daily moments: [absolute day, units, expected].
    day: tuple[int, float, float] = (-1, 0.0, 0.0)
    #: The day being accumulated had an hour during which the key fired (its moments are not the key's own).
    day_fired: bool = False
    #: Spread units of the day being accumulated (not capped at the expectation while firing).
    day_units: float = 0.0
    #: The last ``PAST_DAYS`` folded days, oldest first: (spread units, expected as the baseline stood
    #: when each hour was folded). What a multi-day window adds to the hours not folded yet.
    past: list[tuple[float, float]] = field(default_factory=list)
    #: Decayed hours folded while the key was not firing nor held: what the rate was learned from. A held
    #: key's hours fold at its expectation, so its exposure grows while its level stays where the free
    #: hours left it (the error of that level is the free hours', not the exposure's).
    free_h: float = 0.0
    #: Silent hours up to this one (absolute) fold as held (``mark_firing``).
    hold_h: int = -1
    #: ``(sum(c), sum(e))`` as of the last fold, or None (``sums``): the priors learned across keys read every
    #: key's totals hourly, and most keys fold nothing in an hour (a cache, rebuilt bit-identical when None)
    totals: tuple[float, float] | None = None

    @classmethod
    def new(cls, start_hour: int, warm_hours: float = 0.0) -> DailyBaseline:
        #: A key first seen late in the stream was silent before: credit that exposure.
        return cls([0.0] * DAY_H, [warm_hours / DAY_H] * DAY_H, start_hour, free_h=warm_hours)

    def free_days(self) -> float:
        """Days the rate was learned from (decayed), at least one."""
        return max(self.free_h / DAY_H, 1.0)

    def add(self, hour: int, w: float, firing: bool = False, spread: float | None = None) -> None:
        if hour < self.hour:
            return  # folded already: a late event teaches the baseline nothing
        ws = w if spread is None else spread
        p = self.pending
        for i in range(len(p) - 1, -1, -1):
            h, acc, f, sp = p[i]
            if h == hour:
                p[i] = (h, acc + w, f or firing, sp + ws)
                return
            if h < hour:
                p.insert(i + 1, (hour, w, firing, ws))
                return
        p.insert(0, (hour, w, firing, ws))

    def mark_firing(self, until_hour: int = -1) -> None:
        """The key fired (or is held): the hours still pending, and the silent ones up to ``until_hour``, are not baseline.

        Silent hours too: a held key's hours with units fold at their
        expectation, and if its hours without any folded as zeros its rate
        could only fall (a key at 20 a day, held for a week, fell from 10 to
        5.6 a day, and then paged on its seven-day window).
        """
        self.pending = [(h, a, True, sp) for h, a, _, sp in self.pending]
        self.hold(until_hour)

    def hold(self, until_hour: int) -> None:
        """Silent hours up to ``until_hour`` fold as held (a firing key's pending hours are flagged as added)."""
        if until_hour > self.hold_h:
            self.hold_h = until_hour

    def sums(self) -> tuple[float, float]:
        """``(sum(c), sum(e))``: units and hours folded, summed once per fold however often they are read."""
        tot = self.totals
        if tot is None:
            tot = self.totals = (sum(self.c), sum(self.e))
        return tot

    def rate(self, slot: int, prior_rate: float, prior_w: float, hour_w: float, hour_units: float = 0.0) -> float:
        sum_c, sum_e = self.sums()
        overall = (sum_c + prior_rate * prior_w) / (sum_e + prior_w)
        w = slot_weight(overall, hour_w, hour_units)
        return (self.c[slot] + w * overall) / (self.e[slot] + w)

    def rates(self, prior_rate: float, prior_w: float, hour_w: float, before_hour: int | None = None,
              hour_units: float = 0.0) -> list[float]:
        """Units per hour for each hour of day.

        :param before_hour: also count the hours not folded yet (the guard band)
            that are older than this: a window shorter than the guard band
            need not wait for it (a one-hour window can be tested against the
            day before it while the day window still waits).
        """
        c, e = self.c, self.e
        if before_hour is not None and before_hour > self.hour:
            c, e = list(c), list(e)
            p = {h: acc for h, acc, _, _ in self.pending}
            for h in range(self.hour, before_hour):
                slot = h % DAY_H
                c[slot] += p.get(h, 0.0)
                e[slot] += 1.0
            sum_c, sum_e = sum(c), sum(e)
        else:
            sum_c, sum_e = self.sums()
        overall = (sum_c + prior_rate * prior_w) / (sum_e + prior_w)
        w = slot_weight(overall, hour_w, hour_units)
        return [(c[h] + w * overall) / (e[h] + w) for h in range(DAY_H)]

    def units(self, before_hour: int | None = None) -> float:
        """Units the rates were learned from (folded, and unfolded ones before ``before_hour``)."""
        extra = sum(acc for h, acc, _, _ in self.pending if h < before_hour) if before_hour is not None else 0.0
        return self.sums()[0] + extra

    def history_h(self, before_hour: int | None = None) -> float:
        """Hours of history the baseline holds (folded, credited, and unfolded ones before ``before_hour``)."""
        extra = max(before_hour - self.hour, 0) if before_hour is not None else 0
        return self.sums()[1] + extra

    def _fold_hour(self, h: int, acc: float, fired: bool, decay_h: float, decay: float, prior_rate: float,
                   prior_w: float, hour_w: float, spread: float = 0.0, hour_units: float = 0.0) -> None:
        slot = h % DAY_H
        mu = self.rate(slot, prior_rate, prior_w, hour_w, hour_units)
        self.free_h *= decay_h
        if fired:
            # the rate learns nothing from an hour that fired or was held (an outbreak is not the new normal),
            # and the dispersion nothing: a capped hour would add (mu - mu)^2 - mu < 0, and a key that fired
            # would look calmer the more it fired. Folded at its expectation, not at most at it: min(units, mu)
            # only ever lowers the rate, and a key held for a week (its first days were low) fell from 10 to
            # 5.6 a day while running at 20, and paged on the seven-day window
            acc = mu
        else:
            self.free_h += 1.0
            # dispersion moments (hourly), decayed per hour at the baseline's half-life
            self.disp_num_h = self.disp_num_h * decay_h + (acc - mu) ** 2 - acc
            self.disp_den_h = self.disp_den_h * decay_h + mu * mu
            self.disp_n_h = self.disp_n_h * decay_h + 1.0
        d, dx, dm = self.day
        if h // DAY_H != d:
            # not the key's first day (``past`` gets each day appended just below, after its moments): its
            # hours were expected at a rate still learning from the new-key prior, and read as a swing
            if d >= 0 and dm > 0 and not self.day_fired and self.past:
                self.disp_num_d = self.disp_num_d * decay + (dx - dm) ** 2 - dx
                self.disp_den_d = self.disp_den_d * decay + dm * dm
                self.disp_n_d = self.disp_n_d * decay + 1.0
            if d >= 0:
                self.past.append((self.day_units, dm))
                if len(self.past) > PAST_DAYS:
                    del self.past[0]
            d, dx, dm = h // DAY_H, 0.0, 0.0
            self.day_fired = False
            self.day_units = 0.0
        if fired:
            self.day_fired = True
        self.day = (d, dx + acc, dm + mu)
        self.day_units += spread
        self.c[slot] = self.c[slot] * decay + acc
        self.e[slot] = self.e[slot] * decay + 1.0
        self.totals = None

    def _silent(self, start: int, end: int, decay_h: float, decay: float, prior_rate: float, prior_w: float,
                hour_w: float, hour_units: float = 0.0) -> None:
        """Fold the silent hours ``start .. end - 1`` one by one (bit-identical however the gap is cut)."""
        for h in range(start, min(end, start + MAX_SILENT_H)):
            self._fold_hour(h, 0.0, h <= self.hold_h, decay_h, decay, prior_rate, prior_w, hour_w,
                            hour_units=hour_units)

    def fold_until(self, hour: int, decay: float, prior_rate: float, prior_w: float, hour_w: float,
                   hour_units: float = 0.0) -> None:
        """Fold every hour before ``hour`` (``decay`` is per day; slots are visited once a day)."""
        if hour <= self.hour:
            return
        decay_h = decay ** (1.0 / DAY_H)
        p = self.pending
        while p and p[0][0] < hour:
            h, acc, fired, spread = p.pop(0)
            self._silent(self.hour, h, decay_h, decay, prior_rate, prior_w, hour_w, hour_units)
            self._fold_hour(h, acc, fired, decay_h, decay, prior_rate, prior_w, hour_w, spread, hour_units)
            self.hour = h + 1
        self._silent(self.hour, hour, decay_h, decay, prior_rate, prior_w, hour_w, hour_units)
        self.hour = hour

    def recent(self, days: int) -> tuple[float, float, float]:
        """(spread units, expected, hours) folded over the last ``days`` whole days and the folded part of today.

        Added to the hours not folded yet (the sliding day window), this
        is a window of ``days + 1`` days and some hours: a sustained rise (a
        deploy that tripled a signature) adds up day after day, while a single
        day's swing is diluted. The expectations are the baseline's as each
        hour was folded, so the window is compared with what was normal then.
        """
        d, _, dm = self.day
        if d < 0:
            return 0.0, 0.0, 0.0
        past = self.past[-days:] if days > 0 else []
        return (self.day_units + sum(x for x, _ in past), dm + sum(m for _, m in past),
                float(self.hour - d * DAY_H + DAY_H * len(past)))

    def pending_spread(self) -> float:
        """Spread units of the hours not folded yet (the sliding day window, to the hour)."""
        return sum(sp for _, _, _, sp in self.pending)

    def moments(self, daily: bool) -> tuple[float, float, float]:
        """The decayed moment sums ``(sum (x - mu)^2 - x, sum mu^2, observations)``, daily or hourly.

        Sums, not a ratio, so that keys can be pooled (``RateSpike``'s prior adds them over keys).
        """
        if daily:
            return self.disp_num_d, self.disp_den_d, self.disp_n_d
        return self.disp_num_h, self.disp_den_h, self.disp_n_h

    def dispersion(self, daily: bool, prior: float, prior_n: float) -> float:
        """phi of ``var = mu + phi mu^2``: the key's own, shrunk toward ``prior`` by ``prior_n`` observations.

        A handful of days says little about how a key swings from day to
        day, and a sparse key's many hours say little more: of a count of
        mean ``m`` the swing is the share ``phi m / (1 + phi m)`` of its excess
        variance, and the moment estimate learns from each observation about
        the square of that share. With ``n`` observations of RMS mean ``m``
        behind it, the key's own estimate weighs ``n_info / (n_info + prior_n)``
        against the prior, ``n_info = n (prior m / (1 + prior m))^2``: a busy
        key's own swing soon rules, a key crashing twice a day keeps the
        fleet's (its own hourly estimate was noise: 0.06 for a signature
        whose days swung by a gamma of shape 3.5, and it paged on a 4x day).
        """
        num, den, n = self.moments(daily)
        if den <= 0 or n <= 0:
            return prior
        own = max(num / den, 0.0)
        pm = prior * math.sqrt(den / n)
        n_info = n * (pm / (1.0 + pm)) ** 2
        return (n_info * own + prior_n * prior) / (n_info + prior_n)

    def own_dispersion(self, daily: bool) -> tuple[float, float] | None:
        """(phi from the key's own counts, observations behind it), or None without any."""
        num, den, n = self.moments(daily)
        return (max(num / den, 0.0), n) if den > 0 and n > 0 else None


def window_expectation(rates: list[float], end_bucket: int, n_buckets: int, bucket_ms: int) -> float:
    """Expected units in the ``n_buckets`` ending at ``end_bucket`` given hour-of-day rates (hour by hour)."""
    start_ms = (end_bucket - n_buckets + 1) * bucket_ms
    end_ms = (end_bucket + 1) * bucket_ms
    mu = 0.0
    t = start_ms
    while t < end_ms:
        nxt = min((t // HOUR_MS + 1) * HOUR_MS, end_ms)
        mu += rates[(t // HOUR_MS) % DAY_H] * (nxt - t)
        t = nxt
    return mu / HOUR_MS


def decay_per_day(halflife_days: float) -> float:
    return 0.5 ** (1.0 / halflife_days) if halflife_days > 0 and not math.isinf(halflife_days) else 1.0


__all__ = ["DAY_H", "DAY_MS", "HOUR_MS", "PAST_DAYS", "DailyBaseline", "Windows", "decay_per_day", "window_expectation"]
