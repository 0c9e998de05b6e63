"""The arithmetic of a cohort table: rate ratios and risk ratios with their confidence intervals, pure functions.

The cohort tables compare *rates*: host-days on which a host had a case,
per host-day at risk, inside the cohort and outside it
(:func:`rate_ratio`, a log-normal 95 % interval). Host-days, because
attributes change over time (a node that held an old GPU and then a new
one was at risk in each cohort for its own days), and case host-days
rather than cases, so that one host crashing fifty times an hour does not
make its rack look guilty by itself. :func:`risk_ratio` (hosts hit out of
hosts, Katz's interval) is kept for comparisons of fixed host sets. A zero
count gets the usual 0.5 so that a cohort holding every case gets a
finite, wide interval instead of infinity. The incidence rate (cases per
1,000 host-days) is reported beside it, because "how often" is what an
operator plans with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class RiskRatio:
    rr: float
    lower: float
    upper: float


def risk_ratio(a: int, n1: int, c: int, n2: int, z: float = Z95) -> RiskRatio:
    """Risk ratio of ``a`` affected of ``n1`` against ``c`` affected of ``n2``, with Katz's interval.

    >>> r = risk_ratio(10, 40, 5, 1960); round(r.rr, 1)
    98.0
    """
    if n1 <= 0 or n2 <= 0:
        return RiskRatio(math.nan, math.nan, math.nan)
    b, d = n1 - a, n2 - c
    if min(a, b, c, d) == 0:
        a, b, c, d = a + 0.5, b + 0.5, c + 0.5, d + 0.5  # type: ignore[assignment]
    p1, p2 = a / (a + b), c / (c + d)
    rr = p1 / p2
    se = math.sqrt(max(1 / a - 1 / (a + b) + 1 / c - 1 / (c + d), 0.0))
    log_rr = math.log(rr)
    return RiskRatio(rr, math.exp(log_rr - z * se), math.exp(log_rr + z * se))


def rate_ratio(a: int, t1: float, c: int, t2: float, z: float = Z95) -> RiskRatio:
    """Incidence rate ratio of ``a`` events in ``t1`` exposure against ``c`` in ``t2`` (log-normal interval).

    For counts that may exceed the exposure units (crashes per host-day);
    a zero count gets 0.5, as in :func:`risk_ratio`.
    """
    if t1 <= 0 or t2 <= 0:
        return RiskRatio(math.nan, math.nan, math.nan)
    if a == 0 or c == 0:
        a, c = a + 0.5, c + 0.5  # type: ignore[assignment]
    rr = (a / t1) / (c / t2)
    se = math.sqrt(1 / a + 1 / c)
    return RiskRatio(rr, rr * math.exp(-z * se), rr * math.exp(z * se))


def rate_per_1000(cases: int, host_days: int) -> float:
    return 1000.0 * cases / host_days if host_days > 0 else math.nan


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[int] | list[float]) -> str:
    """Counts as block characters (zero is a space, so silence is visible)."""
    top = max(values, default=0)
    if top <= 0:
        return " " * len(values)
    return "".join(" " if v <= 0 else SPARK[min(len(SPARK) - 1, int((v / top) * (len(SPARK) - 1) + 0.5))]
                   for v in values)


__all__ = ["Z95", "RiskRatio", "rate_per_1000", "rate_ratio", "risk_ratio", "sparkline"]
