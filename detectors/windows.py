"""Event-time windows: a bucketed sliding count and a daily-cycle baseline.

Both are small mutable objects with ``dump``/``load`` to plain lists, so a
detector's whole state snapshots as JSON. Time is always the key's own event
time (bucket index = ``ts_ms // bucket_ms``), never the wall clock or another
key's events: that keeps a partitioned run identical to a single process.
"""

from __future__ import annotations

import math
from typing import Any

HOUR_MS = 3_600_000
DAY_H = 24
#: Longest silent gap folded hour by hour (30 days).
MAX_SILENT_H = 30 * DAY_H


class Ring:
    """Sliding sum over the last ``n`` buckets, O(1) amortized per add.

    A late event whose bucket is still inside the window is added to it (so
    the total does not depend on arrival order within the window); one that
    fell out of it is refused (``add`` returns False) and the caller counts it.
    """

    __slots__ = ("cells", "head", "total")

    def __init__(self, n: int) -> None:
        self.cells: list[float] = [0.0] * n
        #: Bucket index of the newest cell (-1 = empty).
        self.head = -1
        self.total = 0.0

    def roll(self, b: int) -> None:
        """Move the newest bucket to ``b`` (no-op if not newer), dropping what leaves the window."""
        head = self.head
        if b <= head:
            return
        cells = self.cells
        n = len(cells)
        if head < 0 or b - head >= n:
            for i in range(n):
                cells[i] = 0.0
            self.total = 0.0
        else:
            total = self.total
            for j in range(head + 1, b + 1):
                i = j % n
                total -= cells[i]
                cells[i] = 0.0
            # Float sums drift by ulps; clamp so an empty window reads exactly 0.
            self.total = total if total > 1e-9 else 0.0
        self.head = b

    def add(self, b: int, w: float = 1.0) -> bool:
        if b > self.head:
            self.roll(b)
        elif b <= self.head - len(self.cells):
            return False
        self.cells[b % len(self.cells)] += w
        self.total += w
        return True

    def total_at(self, b: int) -> float:
        """The window's sum as it will read once the newest bucket is ``b`` (no mutation)."""
        head = self.head
        n = len(self.cells)
        if b <= head:
            return self.total
        if head < 0 or b - head >= n:
            return 0.0
        gone = 0.0
        for j in range(head + 1, b + 1):
            gone += self.cells[j % n]
        return max(self.total - gone, 0.0)

    def dump(self) -> list[Any]:
        return [self.head, self.total, list(self.cells)]

    @classmethod
    def load(cls, data: list[Any]) -> Ring:
        r = cls(len(data[2]))
        r.head, r.total, r.cells = int(data[0]), float(data[1]), [float(x) for x in data[2]]
        return r


class DailyBaseline:
    """Units per hour, by hour of day (UTC), learned from the key's own past.

    Each hour slot keeps a decayed count ``c[h]`` and a decayed exposure
    ``e[h]`` (hours observed), decayed once per day with the configured
    half-life, so old behaviour fades and memory is 48 floats. The rate of
    hour ``h`` shrinks toward the key's all-day rate with ``hour_prior_h``
    pseudo-hours, and the all-day rate toward a prior rate with
    ``prior_weight_h`` pseudo-hours: a new or sparse key gets a flat, cautious
    profile; a busy key with weeks of history gets its own daily cycle.

    A guard band keeps the baseline honest: an hour is folded in only once
    it is older than the longest detection window (it waits in ``pending``),
    so a slow outbreak is never compared with a baseline that already learned
    its first hours. Hours during which the key fired are folded at most at
    the expected rate, so an outbreak does not become the new normal.
    """

    __slots__ = ("c", "e", "hour", "pending")

    def __init__(self, start_hour: int, warm_hours: float = 0.0) -> None:
        self.c: list[float] = [0.0] * DAY_H
        #: A key first seen late in the stream was silent before: credit that exposure.
        self.e: list[float] = [warm_hours / DAY_H] * DAY_H
        #: First absolute hour (ts_ms // HOUR_MS) not folded yet.
        self.hour = start_hour
        #: [absolute hour, units, fired during it] not folded yet, oldest first.
        self.pending: list[list[Any]] = []

    def add(self, hour: int, w: float, firing: bool = False) -> None:
        p = self.pending
        if p and p[-1][0] == hour:
            entry = p[-1]
        elif hour < self.hour:
            return  # that hour is folded already: a late event teaches the baseline nothing
        elif not p or p[-1][0] < hour:
            p.append([hour, 0.0, firing])
            entry = p[-1]
        else:
            for entry in p:
                if entry[0] == hour:
                    break
            else:
                p.append([hour, 0.0, firing])
                p.sort(key=lambda x: x[0])
                entry = next(x for x in p if x[0] == hour)
        entry[1] += w
        if firing:
            entry[2] = True

    def mark_firing(self) -> None:
        """The key fired: the hours still pending are outbreak, not baseline."""
        for entry in self.pending:
            entry[2] = True

    def _silent(self, start: int, end: int, decay: float) -> None:
        """Fold the silent hours ``start .. end - 1``, one by one.

        Hour by hour (not in closed form) so that folding a gap at once or in
        pieces gives bit-identical floats: partitioned and single runs agree.
        Keys idle longer than their TTL are forgotten, so gaps stay short;
        beyond ``MAX_SILENT_H`` the slots are at their fixed point anyway.
        """
        c, e = self.c, self.e
        for h in range(start, min(end, start + MAX_SILENT_H)):
            s = h % DAY_H
            c[s] *= decay
            e[s] = e[s] * decay + 1.0

    def fold_until(self, hour: int, decay: float, prior_rate: float, prior_w: float, hour_w: float) -> None:
        """Fold every hour before ``hour``.

        An hour during which the key fired adds at most the rate the baseline
        expected for it just before (computed from the folded past only, so
        the result does not depend on when folding happens).
        """
        if hour <= self.hour:
            return
        c, e = self.c, self.e
        p = self.pending
        while p and p[0][0] < hour:
            h, acc, fired = p.pop(0)
            self._silent(self.hour, h, decay)
            slot = h % DAY_H
            if fired:
                overall = (sum(c) + prior_rate * prior_w) / (sum(e) + prior_w)
                acc = min(acc, (c[slot] + hour_w * overall) / (e[slot] + hour_w))
            c[slot] = c[slot] * decay + acc
            e[slot] = e[slot] * decay + 1.0
            self.hour = h + 1
        self._silent(self.hour, hour, decay)
        self.hour = hour

    def rates(self, prior_rate: float, prior_w: float, hour_w: float) -> list[float]:
        """Units per hour for each hour of day."""
        c, e = self.c, self.e
        overall = (sum(c) + prior_rate * prior_w) / (sum(e) + prior_w)
        return [(c[h] + hour_w * overall) / (e[h] + hour_w) for h in range(DAY_H)]

    def dump(self) -> list[Any]:
        return [self.hour, [list(x) for x in self.pending], list(self.c), list(self.e)]

    @classmethod
    def load(cls, data: list[Any]) -> DailyBaseline:
        b = cls(int(data[0]))
        b.pending = [[int(h), float(a), bool(f)] for h, a, f in data[1]]
        b.c, b.e = [float(x) for x in data[2]], [float(x) for x in data[3]]
        return b


def window_expectation(rates: list[float], end_bucket: int, n_buckets: int, bucket_ms: int) -> float:
    """Expected units in the ``n_buckets`` ending at ``end_bucket`` given hour-of-day rates.

    Walks the window hour by hour (not bucket by bucket): a day-long window
    costs 25 steps, not 288.
    """
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


__all__ = ["DAY_H", "HOUR_MS", "DailyBaseline", "Ring", "decay_per_day", "window_expectation"]
