"""What a cohort engine keeps per key and pair, and what it hands back.

The counts (``PairCounts``, ``CohortKey``) are the engine's recoverable
state: msgspec structs a worker snapshots as they are. A test's outcome
(``CohortTest``), a cohort's share (``Share``) and a verdict
(``CohortVerdict``) are typed values, not positional tuples. The small
risk formulas every part of the engine shares live here too.
"""

from __future__ import annotations

import math
from typing import Literal

from msgspec import Struct, field

#: Decayed units below which a pair or a host is forgotten at a sweep.
DEAD = 1e-3


#: The rate test runs only where the share test already says the cohort holds more than its share at this
#: level over the key's cohorts (divided by their number): the rate test says the key rose, the share test
#: where. Three units of three on a rack of 2.4 % is p = 1.4e-5; on a CUDA version of 18 %, 0.006
RATE_SHARE_ALPHA = 1e-2


#: Decayed units at a scale for a host to count as affected there (``HostScan.affected``, ``rate_live``).
HOST_UNITS = 0.3


#: Pseudo-units of the rate test's gamma posterior (Jeffreys' half a unit): a key never seen on the
#: attribute's hosts before still has a rate, about half a unit over the host-time watched.
RATE_PRIOR_UNITS = 0.5


#: A key first seen after the warm-up is new for this long: none of its associations is static before.
NEW_KEY_MS = 3 * 86_400_000


#: A cohort holding under this share of the hosts its scale's host-time share says has shrunk within
#: that scale, and is not tested at it (``_tests``).
SHRUNK = 0.5


_ATTR_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


def attribute_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """``""`` (all units) and ``"a\x1f"`` for each attribute of a host's pair keys (memoized: hosts share them)."""
    got = _ATTR_KEYS.get(keys)
    if got is None:
        if len(_ATTR_KEYS) > 65536:
            _ATTR_KEYS.clear()
        got = _ATTR_KEYS[keys] = ("", *[k[: k.index("\x1f") + 1] for k in keys])
    return got


class PairCounts(Struct):
    c: list[float]
    #: when the long scales (a day and more) were last tested: once per clock hour, they move slowly
    long_tested_ms: int = 0
    #: the counts already reported (at the last resolution): news is what came after
    reported: list[float] = field(default_factory=list)
    last_ms: int = 0
    firing: bool = False
    fired_ms: int = 0
    fired_scale: int = 0
    quiet_until_ms: int = 0
    #: a static association, reported as a ticket: its long-run relative risk is the baseline
    static: bool = False
    rho: float = 1.0
    ticket_until_ms: int = 0
    #: units on the pair, and its share of its attribute's host-time, at the end of warm-up (-1: not held then)
    early: float = 0.0
    early_p: float = -1.0

    def unreported(self, i: int) -> float:
        """Grown units at scale ``i`` since the last report (divide by the clock's ``g[i]``)."""
        return self.c[i] - self.reported[i] if self.reported else self.c[i]


class CohortKey(Struct):
    #: attribute key ("a\\x1f") or "" for all units -> inflated decayed units per scale
    tot: dict[str, list[float]] = field(default_factory=dict)
    #: inflated sum over hosts of their squared decayed units (Kish over hosts), per scale
    q: list[float] = field(default_factory=list)
    #: host -> inflated decayed units per scale
    hosts: dict[str, list[float]] = field(default_factory=dict)
    pairs: dict[str, PairCounts] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    firing: set[str] = field(default_factory=set)
    #: tests of this key that could reach significance (its share of the Benjamini-Hochberg family) ...
    family: int = 0
    #: ... of which rate tests (their units decay: ``budget.recount``)
    rate_family: int = 0
    first_ms: int = 0
    last_ms: int = 0
    total: float = 0.0
    #: attribute key -> the key's units on hosts announcing it, at the end of warm-up
    early: dict[str, float] = field(default_factory=dict)
    #: a lower bound of every host's and pair's inflated units at the longest scale (the sweep
    #: skips a key none of whose hosts or pairs can have decayed to nothing yet)
    floor: float = 0.0


class CohortVerdict(Struct, frozen=True):
    """A decision about one (key, attribute, value), for the owning detector to word."""

    key: str
    attribute: str
    value: str
    state: Literal["firing", "resolved"]
    ts_ms: int
    severity: Literal["page", "ticket"]
    finding: str
    observed: float
    expected: float
    window_s: float
    p_value: float | None = None
    relative_risk: float | None = None
    lower_ci: float | None = None
    upper_ci: float | None = None
    hosts: int = 0
    notes: tuple[str, ...] = ()
    #: what ``expected`` is from, in words
    basis: str = "its share of the fleet"


class CohortTest(Struct):
    key: str
    pair: str
    scale: int
    p: float
    k: float
    n: float
    p0: float
    rr: float
    lo: float
    hi: float
    #: the rate test's expected units in the cohort (-1: found by the share test)
    mu: float = -1.0

    @property
    def by_rate(self) -> bool:
        """Found by the rate test: explained, classified and worded by its own rules."""
        return self.mu >= 0


def rate_ratio_ci(a: float, c: float, e1: float, e0: float, z: float = 1.96) -> tuple[float, float, float]:
    """Rate ratio of ``a`` cases over ``e1`` host-time against ``c`` over ``e0``, log-normal 95 % CI."""
    if e1 <= 0 or e0 <= 0:
        return (math.inf, 0.0, math.inf)
    # Haldane: half a case added to each side when either has less than one (effective counts)
    a2, c2 = (a + 0.5, c + 0.5) if a < 1.0 or c < 1.0 else (a, c)
    rr = (a2 / e1) / (c2 / e0)
    se = min(math.sqrt(1.0 / a2 + 1.0 / c2), 50.0)
    return rr, rr * math.exp(-z * se), rr * math.exp(z * se)


class Share(Struct, frozen=True):
    """A cohort's share of its key's units at one scale (``CohortCorrelation.cohort_share``)."""

    #: effective units in the cohort and on the attribute's hosts (the key's Kish count, split by share)
    k: float
    n: float
    #: the cohort's share of the attribute's host-time: the share expected with no association
    p0: float
    #: decayed units in the cohort, and host-hours in it and outside it
    c_in: float
    e_in: float
    e_out: float


def at_risk(p0: float, rho: float) -> float:
    """A share ``p0`` of host-time as a share of units at relative risk ``rho`` (on the odds)."""
    return p0 * rho / (p0 * rho + 1.0 - p0)


def odds_ratio(share: float, p0: float) -> float:
    """The relative risk (on the odds) that puts a share ``share`` of the units on ``p0`` of the host-time."""
    return (share / (1 - share)) / (p0 / (1 - p0))
