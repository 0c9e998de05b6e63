"""Exponentially decayed counts at several time scales, one ``exp`` per scale per fold.

Why decayed counts and not sliding windows: the detectors need the same
count at scales from an hour to half a year (a bad deploy pages within the
hour, a wear-out shows over weeks, a GPU batch over months), for every
(signature, attribute value) and every host. A ring of buckets per scale per
key costs memory in proportion to the longest window; a decayed count is one
float per scale, and its exposure (host-time, from the inventory) decays with
the same kernel, so roll-outs that change a cohort's size are weighed right.

The *inflation* trick keeps the hot path free of ``exp``: a stored value is
``sum(w_i * exp((t_i - ref) / tau))``; adding an event multiplies its weight
by ``g = exp((t - ref) / tau)``, computed once per fold for all counters, and
the value at time t is ``stored / g(t)``. When ``g`` grows large the
reference moves (:meth:`DecayClock.rebase`), and every counter is multiplied
by the same factor — rare (every few days of event time) and deterministic,
so a replay and a stream worker keep bit-identical floats.

Effective counts: a decayed count is a weighted sum, and a handful of cases
from one host or one minute is weaker evidence than the same number spread
over hosts and time. ``kish_n`` gives the effective number of independent
units ``(sum w)^2 / sum w^2`` used by the tests in ``stats``.
"""

from __future__ import annotations

import math
from operator import mul

from fleetepi.detectors.windows import HOUR_MS

#: Rebase once the fastest scale's factor passes exp(REBASE_AT): squares stay far from overflow.
REBASE_AT = 60.0
#: Resolution of decay weights.
GRAIN_MS = 60_000


class DecayClock:
    """Time constants and the shared reference time of every decayed counter of one engine.

    :param scales_s: time constants in seconds (the "windows"), shortest first.
    """

    __slots__ = ("inv_tau", "ref_ms", "scales_s", "taus_ms", "_g_ms", "_g")

    def __init__(self, scales_s: tuple[float, ...], ref_ms: int = 0) -> None:
        self.scales_s = tuple(scales_s)
        self.taus_ms = tuple(s * 1000.0 for s in scales_s)
        self.inv_tau = tuple(1.0 / t for t in self.taus_ms)
        self.ref_ms = ref_ms
        self._g_ms = -1
        self._g: tuple[float, ...] = ()

    def g(self, ts_ms: int) -> tuple[float, ...]:
        """Inflation factors ``exp((ts - ref) / tau)`` per scale (cached for the last minute asked).

        Time is taken to the minute: a weight off by at most a minute in an
        hour's decay (under 2 %) changes no decision, and the events of one
        minute share one set of factors.
        """
        ts_ms -= ts_ms % GRAIN_MS
        if ts_ms != self._g_ms:
            d = ts_ms - self.ref_ms
            self._g = tuple(math.exp(d * k) for k in self.inv_tau)
            self._g_ms = ts_ms
        return self._g

    def at(self, ts_ms: int) -> tuple[float, ...]:
        """The factors of ``g`` at another time, computed alike but not cached.

        Exposure integrates from each group's last change: asking ``g`` for
        those times threw away the cached factors of the step being decided,
        six ``exp`` each way per group.
        """
        d = ts_ms - ts_ms % GRAIN_MS - self.ref_ms
        return tuple(math.exp(d * k) for k in self.inv_tau)

    def due(self, ts_ms: int) -> bool:
        """Has the fastest factor grown enough to move the reference?"""
        return (ts_ms - self.ref_ms) * self.inv_tau[0] > REBASE_AT

    def rebase(self, ts_ms: int) -> tuple[float, ...]:
        """Move the reference to ``ts_ms``; returns the factor per scale to multiply stored values by."""
        d = ts_ms - self.ref_ms
        f = tuple(math.exp(-d * k) for k in self.inv_tau)
        self.ref_ms = ts_ms
        self._g_ms = -1
        return f


def scale_in_place(values: list[float], factors: tuple[float, ...]) -> None:
    """Multiply each stored scale by its rebase factor (values may hold fewer scales than factors).

    A rebase visits every counter of every detector (millions of floats on a
    big fleet): ``map(mul)`` does it at C speed, with the same products.
    """
    values[:] = map(mul, values, factors)


def kish_n(total: float, sum_sq: float) -> float:
    """Effective number of independent units of a weighted sum: ``total^2 / sum of squared weights``."""
    return total * total / sum_sq if sum_sq > 0 else 0.0


def exposure_hours(present_since_ms: int, at_ms: int, tau_s: float) -> float:
    """Decayed host-time (hours) of one host present since ``present_since_ms``, at scale ``tau_s``.

    ``integral_0^age exp(-u / tau) du``: a host announced an hour ago has one
    hour of exposure at every scale; one announced long ago has ``tau``.
    """
    age_ms = max(at_ms - present_since_ms, 0)
    tau_ms = tau_s * 1000.0
    return tau_ms * (1.0 - math.exp(-age_ms / tau_ms)) / HOUR_MS


__all__ = ["DecayClock", "REBASE_AT", "exposure_hours", "kish_n", "scale_in_place"]
