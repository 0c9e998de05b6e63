"""Pure statistics shared by every detector: count tests, risk ratios, FDR.

Why these tests:

* Crash counts are overdispersed (one bad deploy, one crash-looping job), so
  a plain Poisson test pages on ordinary bad hours. The negative binomial
  with mean ``mu`` and size ``r`` (variance ``mu + mu**2 / r``) widens the
  tail where the mean is large and stays Poisson-like where it is small.
* Cohort concentration is a one-sided binomial test: of ``n`` distinct
  affected hosts, how surprising is it that ``k`` or more have
  ``attribute == value`` when such hosts are a share ``p`` of the fleet.
* Relative risk is what an on-call person reads ("12x more likely on BIOS
  2.4"), with a Katz log interval so it is honest when counts are small.
* Benjamini-Hochberg controls the share of false cohorts among the ones
  reported, which is the right error for "which attribute values stand out".

The hot path never calls scipy: ``nb_threshold`` is memoized on a
logarithmic grid of means, so a per-key threshold costs one dict lookup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy import special as _sp
from scipy import stats as _st

#: Log-spacing of the memoized means (1 %): thresholds are integers, so this
#: changes a threshold only where the exact mean sits on a step.
_GRID = 100.0


def nb_sf(k: float, mu: float, size: float) -> float:
    """P(X >= k) for a negative binomial with mean ``mu`` and size ``size``.

    ``size`` = inf (or <= 0 meaning "no overdispersion") falls back to Poisson.
    """
    if k <= 0:
        return 1.0
    mu = max(mu, 1e-9)
    kk = math.ceil(k) - 1
    if size <= 0 or math.isinf(size):
        return float(_st.poisson.sf(kk, mu))
    return float(_st.nbinom.sf(kk, size, size / (size + mu)))


def _nb_quantile_exact(mu: float, size: float, alpha: float) -> int:
    """Smallest integer k with P(X >= k) <= alpha."""
    mu = max(mu, 1e-9)
    if size <= 0 or math.isinf(size):
        k = int(_st.poisson.isf(alpha, mu)) + 1
    else:
        k = int(_st.nbinom.isf(alpha, size, size / (size + mu))) + 1
    # isf on a discrete law can be off by one at the step; settle it exactly.
    while k > 1 and nb_sf(k - 1, mu, size) <= alpha:
        k -= 1
    while nb_sf(k, mu, size) > alpha:
        k += 1
    return max(k, 1)


#: Grid of means the threshold tables are computed on: 1 % steps from 1e-4 to 1e6.
_MU_LO = 1e-4
_STEP = math.log(1.0 + 1.0 / _GRID)
_N_GRID = int(math.log(1e6 / _MU_LO) / _STEP) + 2


@lru_cache(maxsize=512)
def _threshold_table(size: float, alpha: float) -> list[int]:
    """Thresholds for every grid mean, in one vectorized scipy call per (size, alpha)."""
    mu = _MU_LO * np.exp(_STEP * np.arange(_N_GRID))
    if size <= 0 or math.isinf(size):
        k = _st.poisson.isf(alpha, mu) + 1
        sf = lambda kk: _st.poisson.sf(kk - 1, mu)  # noqa: E731
    else:
        p = size / (size + mu)
        k = _st.nbinom.isf(alpha, size, p) + 1
        sf = lambda kk: _st.nbinom.sf(kk - 1, size, p)  # noqa: E731
    k = np.maximum(k, 1)
    # isf on a discrete law can be off by one at a step: settle it exactly.
    for _ in range(3):
        k = np.where((k > 1) & (sf(k - 1) <= alpha), k - 1, k)
        k = np.where(sf(k) > alpha, k + 1, k)
    return [int(x) for x in k]


def nb_threshold(mu: float, size: float, alpha: float) -> int:
    """Smallest count that is significant at ``alpha`` (one-sided) for mean ``mu``.

    The mean is rounded *up* to a 1 % grid (conservative) and looked up in a
    table computed once per (size, alpha): O(1), no scipy on the hot path.
    Means beyond the grid fall back to the exact quantile.
    """
    if mu <= _MU_LO:
        mu = _MU_LO
    i = math.ceil(math.log(mu / _MU_LO) / _STEP - 1e-9)
    if i >= _N_GRID:
        return _nb_quantile_exact(mu, size, alpha)
    return _threshold_table(float(size), float(alpha))[i]


def nb_surely_not_significant(k: float, mu: float, size: float, alpha: float) -> bool:
    """True when ``nb_sf(k, mu, size) > alpha`` for certain, read from the table (no scipy).

    The table rounds a mean up to its grid; a mean one grid step lower is
    rounded to at most ``mu``, so its threshold is never above the exact
    one at ``mu``: a count under it is not significant. A cheap screen
    before an exact tail that most counts never need.
    """
    lower = mu / (1.0 + 1.0 / _GRID)
    return lower > _MU_LO and k < nb_threshold(lower, size, alpha)


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if n <= 0 or k > n:
        return 0.0 if k > n else 1.0
    p = min(max(p, 0.0), 1.0)
    return float(_st.binom.sf(k - 1, n, p))


def binom_prefilter(k: int, n: int, p: float, z: float = 2.0) -> bool:
    """Cheap normal-approximation screen: is ``k`` of ``n`` possibly significant?

    Only pairs that pass are tested exactly, so the hot path stays scipy-free.
    """
    mean = n * p
    return k > mean + z * math.sqrt(max(mean * (1.0 - p), 1e-12))


def relative_risk(a: int, n1: int, c: int, n0: int, z: float = 1.96) -> tuple[float, float, float]:
    """Risk ratio of cases in the exposed (``a`` of ``n1``) vs unexposed (``c`` of ``n0``) hosts.

    Katz log interval; a Haldane 0.5 correction when a cell is empty, so a
    cohort that holds *every* case still gets a finite, wide interval.
    """
    if n1 <= 0 or n0 <= 0:
        return (math.inf, 0.0, math.inf)
    if a == 0 or c == 0 or a == n1 or c == n0:
        a, c, n1, n0 = a + 0.5, c + 0.5, n1 + 1.0, n0 + 1.0  # type: ignore[assignment]
    rr = (a / n1) / (c / n0)
    se = math.sqrt(max(1.0 / a - 1.0 / n1 + 1.0 / c - 1.0 / n0, 0.0))
    log_rr = math.log(rr)
    return (rr, math.exp(log_rr - z * se), math.exp(log_rr + z * se))


def benjamini_hochberg(p_values: Sequence[float], q: float, m: int | None = None,
                       groups: Sequence[str] | None = None) -> list[bool]:
    """Which hypotheses BH rejects at false discovery rate ``q``.

    :param m: size of the family when some tested pairs are not listed
        (their p-values are 1; they only raise the bar).
    :param groups: tests of one group (one key's cohorts and scales) earn the
        step-up one rank between them. What is paged is a key (one alert
        each, its nested and confounded cohorts explained away), so the false
        discoveries that matter are keys: twenty correlated tests of one
        outbreak are one discovery, and must not lower the bar for every
        other key's tests in the same step (a half-rack of another signature
        paged beside a driver outbreak at p=1e-7 over 390,000 tests). The
        critical values are BH's or lower: it rejects a subset of what BH
        rejects.
    """
    n = len(p_values)
    m = max(m or n, n)
    order = sorted(range(n), key=lambda i: p_values[i])
    cutoff = -1
    seen: set[str] = set()
    for pos, i in enumerate(order, start=1):
        rank = pos
        if groups is not None:
            seen.add(groups[i])
            rank = len(seen)
        if p_values[i] <= q * rank / m:
            cutoff = pos
    rejected = [False] * n
    for pos, i in enumerate(order, start=1):
        if pos <= cutoff:
            rejected[i] = True
    return rejected


def poisson_sf_real(k: float, mu: float) -> float:
    """P(X >= k) for a Poisson mean ``mu``, continued to real ``k`` (effective counts).

    The regularized lower incomplete gamma ``P(k, mu)`` equals the integer tail
    at integer ``k`` and interpolates between them.
    """
    if k <= 0:
        return 1.0
    return float(_sp.gammainc(k, max(mu, 1e-12)))


def nb_sf_real(k: float, mu: float, size: float) -> float:
    """P(X >= k) for a negative binomial (mean ``mu``, size ``size``), continued to real ``k``."""
    if k <= 0:
        return 1.0
    if size <= 0 or math.isinf(size):
        return poisson_sf_real(k, mu)
    mu = max(mu, 1e-12)
    return float(_sp.betainc(k, size, mu / (size + mu)))


def binom_sf_real(k: float, n: float, p: float) -> float:
    """P(X >= k) for a binomial of ``n`` trials, continued to real ``k`` and ``n`` (effective counts)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0 if p < 1.0 else 1.0
    if p >= 1.0:
        return 1.0
    return float(_sp.betainc(k, n - k + 1.0, p))


def z_above(k: float, mean: float, var: float) -> float:
    """Normal z of ``k`` above ``mean``: the cheap screen before an exact tail."""
    return (k - mean) / math.sqrt(var) if var > 0 else (math.inf if k > mean else 0.0)


def alpha_per_look(alpha: float, length_s: float, look_s: float) -> float:
    """A test's alpha when ``alpha`` is per look of ``look_s`` and the test's count spans ``length_s``.

    Why: an alpha bounds the false alarms per look, and a count sliding
    step by step looks afresh about once per its own length (at z ~ 5 a
    sliding sum's false episodes come at ~z^2 / length per hour, about a
    day's worth of looks per alpha for a day-long count). A count longer
    than the look gets ``alpha`` times length / look, so that a week's or a
    month's count is held to the same false alarms per unit time as a
    day's; ``look_s`` <= 0: ``alpha`` for every length.
    """
    return alpha * max(1.0, length_s / look_s) if look_s > 0 else alpha


def score_of(p_value: float) -> float:
    """-log10(p), capped: the alert score (larger = stronger evidence)."""
    if p_value <= 1e-300:
        return 300.0
    return round(-math.log10(p_value), 3)


def weighted_share_tail(weights: Sequence[float], held: float, p0: float) -> float:
    """P(sum of ``weights`` that land in a cohort >= ``held``), each in it with probability ``p0`` (saddlepoint).

    The cohort tests count decayed units, and a test on the key's effective
    number of units (Kish) assumes the cohort's units are weighted like the
    key's. When they are not (a sparse key whose few fresh units fall on one
    rack while its older ones are spread and faded), that test overstates the
    evidence by orders of magnitude: four units on a rack of 1.6 % of the
    fleet, the newest minutes old and the rest a day old, read p = 1e-9 where
    the key's other hundred units had faded; this tail says 4e-4, about what
    four of 104 units on that rack would be.
    Lugannani-Rice on the sum's cumulant generating function, corrected by
    half the largest weight; with equal weights it follows the binomial tail
    (within a few per cent), and every unit in the cohort is exactly ``p0``
    to the number of units.
    """
    w = np.asarray(weights, dtype=float)
    w = w[w > 0]
    if held <= 0 or len(w) == 0 or not 0 < p0 < 1:
        return 1.0
    total = float(w.sum())
    if held >= total * (1.0 - 1e-9):
        return p0 ** len(w)
    held -= 0.5 * float(w.max())  # half the largest step: the binomial's continuity correction when weights are equal
    if held <= p0 * total:
        return 1.0
    l0, l1 = math.log1p(-p0), math.log(p0)

    def share(lam: float) -> np.ndarray:
        x = l1 + lam * w
        return np.exp(x - np.logaddexp(l0, x))

    # the saddlepoint: the tilt under which the expected held weight is ``held`` (increasing in lam).
    # Newton inside a bracket, halving when a step leaves it: a few steps instead of sixty halvings
    lo, hi, lam = 0.0, math.inf, 1.0
    for _ in range(100):  # pi is the tilt's at lam when it breaks; after the last step it is computed below
        pi = share(lam)
        gap = float((w * pi).sum()) - held
        if abs(gap) <= 1e-9 * held:
            break
        if gap < 0:
            lo = lam
        else:
            hi = lam
        slope = float((w * w * pi * (1.0 - pi)).sum())
        step = lam - gap / slope if slope > 0 else math.nan
        if not lo < step < hi:
            step = 0.5 * (lo + hi) if math.isfinite(hi) else 2.0 * lam
        if hi - lo <= 1e-12 * max(lam, 1.0):
            break
        lam = step
    else:
        pi = share(lam)
    rate = lam * held - float(np.logaddexp(l0, l1 + lam * w).sum())
    var = float((w * w * pi * (1.0 - pi)).sum())
    if rate <= 0 or var <= 0:
        return 1.0
    r, u = math.sqrt(2.0 * rate), lam * math.sqrt(var)
    tail = 0.5 * math.erfc(r / math.sqrt(2.0)) + math.exp(-0.5 * r * r) / math.sqrt(2.0 * math.pi) * (1.0 / u - 1.0 / r)
    return min(1.0, tail) if tail > 0 else min(1.0, math.exp(-rate))


__all__ = [
    "alpha_per_look",
    "benjamini_hochberg",
    "binom_prefilter",
    "binom_sf",
    "binom_sf_real",
    "nb_sf",
    "nb_sf_real",
    "nb_threshold",
    "poisson_sf_real",
    "relative_risk",
    "score_of",
    "weighted_share_tail",
    "z_above",
]
