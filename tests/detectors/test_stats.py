"""The pure statistics: thresholds, tests, risk ratios, FDR (tables with a comment per case)."""

from __future__ import annotations

import math

import pytest
from scipy import stats as st

from fleetepi.detectors.stats import (
    benjamini_hochberg,
    binom_prefilter,
    binom_sf,
    nb_sf,
    nb_surely_not_significant,
    nb_threshold,
    relative_risk,
    score_of,
    weighted_share_tail,
)


@pytest.mark.parametrize(("mu", "size", "alpha"), [
    (1e-4, 8.0, 1e-7),   # the floor of the grid: a never-seen key
    (0.3, 8.0, 1e-7),    # a sparse signature over an hour
    (4.0, 8.0, 1e-3),    # a busy one, lenient alpha
    (50.0, 8.0, 1e-7),   # a very busy key: overdispersion dominates
    (50.0, math.inf, 1e-7),  # Poisson fallback
    (2e6, 8.0, 1e-7),    # beyond the grid: exact fallback
])
def test_threshold_is_the_smallest_significant_count(mu: float, size: float, alpha: float) -> None:
    k = nb_threshold(mu, size, alpha)
    assert nb_sf(k, mu, size) <= alpha
    # Rounded up on a 1 % grid: at most one step conservative against the exact mean.
    assert k - 1 <= 0 or nb_sf(k - 1, mu * 1.011, size) > alpha


def test_negative_binomial_is_wider_than_poisson() -> None:
    # Overdispersed counts: the same count is less surprising under the NB.
    assert nb_sf(20, 5.0, 8.0) > nb_sf(20, 5.0, math.inf)
    assert nb_sf(20, 5.0, math.inf) == pytest.approx(st.poisson.sf(19, 5.0))


def test_the_screen_never_clears_a_significant_count_and_clears_most_others() -> None:
    # the local test screens a window's count before its exact tail: a count it clears must not be significant,
    # and it should clear nearly every count under the exact threshold (else it saves nothing)
    cleared = below = 0
    for mu in (2e-4, 0.013, 0.3, 1.9, 4.0, 27.0, 300.0):
        for size in (0.5, 1.1, 3.1, 8.0, math.inf):
            for alpha in (1e-5, 1e-3):
                exact = next(k for k in range(1, 10_000) if nb_sf(k, mu, size) <= alpha)
                for k in range(0, exact + 5):
                    if nb_surely_not_significant(k, mu, size, alpha):
                        assert nb_sf(k, mu, size) > alpha, (k, mu, size, alpha)
                        cleared += 1
                    below += k < exact
    assert cleared >= 0.9 * below


@pytest.mark.parametrize(("k", "n", "p", "expected"), [
    (0, 10, 0.1, 1.0),          # nothing observed: certain
    (3, 3, 0.5, 0.125),         # all of three in a half of the fleet
    (11, 10, 0.5, 0.0),         # impossible count
    (5, 20, 0.02, float(st.binom.sf(4, 20, 0.02))),  # a rack of 2 % holding 5 of 20 cases
])
def test_binomial_upper_tail(k: int, n: int, p: float, expected: float) -> None:
    assert binom_sf(k, n, p) == pytest.approx(expected)


def test_prefilter_never_drops_a_significant_pair() -> None:
    for n in (5, 20, 100):
        for p in (0.02, 0.1, 0.5):
            for k in range(n + 1):
                if binom_sf(k, n, p) < 1e-5:
                    assert binom_prefilter(k, n, p, 2.0)


@pytest.mark.parametrize(("a", "n1", "c", "n0", "rr"), [
    (10, 100, 10, 1000, 10.0),   # ten times the risk
    (5, 50, 5, 50, 1.0),         # no association
    (6, 20, 0, 180, None),       # every case in the cohort: Haldane-corrected, finite
])
def test_relative_risk_and_interval(a: int, n1: int, c: int, n0: int, rr: float | None) -> None:
    est, lo, hi = relative_risk(a, n1, c, n0)
    assert lo < est < hi
    assert math.isfinite(hi)
    if rr is not None:
        assert est == pytest.approx(rr)


def test_benjamini_hochberg_matches_the_textbook_example() -> None:
    # Step-up at q=0.05, m=10: p(2)=0.008 <= 0.010 is the last under q*i/m (p(3)=0.039 > 0.015).
    p = [0.039, 0.001, 0.041, 0.008, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert benjamini_hochberg(p, 0.05) == [False, True, False, True] + [False] * 6
    # Step-up, not step-down: a later p under its bar rescues the earlier ones.
    assert benjamini_hochberg([0.04, 0.045, 0.05], 0.05) == [True, True, True]
    assert benjamini_hochberg([0.01, 0.02], 0.05) == [True, True]
    # A larger family (untested pairs count) raises the bar.
    assert benjamini_hochberg([0.01, 0.02], 0.05, m=100) == [False, False]


def test_one_outbreaks_many_tests_do_not_lower_the_bar_for_another_key() -> None:
    """Twenty tiny p-values of one key (its cohorts at every scale) and one modest one of another key.

    Plain BH ranks the other key's test 21st and accepts it at q * 21 / m;
    counted by key it is the second discovery, judged at q * 2 / m. Within a
    key nothing changes: its own tests are accepted as before.
    """
    p = [1e-12] * 20 + [5e-5]
    keys = ["driver-outbreak"] * 20 + ["other"]
    assert benjamini_hochberg(p, 0.01, 1000) == [True] * 21                  # 5e-5 <= 0.01 * 21 / 1000
    assert benjamini_hochberg(p, 0.01, 1000, keys) == [True] * 20 + [False]  # 5e-5 >  0.01 * 2 / 1000
    assert benjamini_hochberg([1e-12, 1e-5], 0.01, 1000, ["a", "b"]) == [True, True]


def test_score_grows_with_evidence() -> None:
    assert score_of(1e-3) < score_of(1e-9) < score_of(0.0) == 300.0


@pytest.mark.parametrize("bad", [
    {"sig_alpha": 0.0},                 # an alpha must be a probability
    {"corr_fdr": 1.5},
    {"step_s": 0.0},                    # decisions happen on a grid of steps
    {"host_scales_s": (60.0,)},         # a scale shorter than a step
    {"cohort_scales_s": (86400.0, 3600.0)},  # scales shortest first
    {"max_keys": 0},
])
def test_bad_config_fails_at_start_up(bad: dict) -> None:
    from fleetepi.detectors import DetectorConfig
    from fleetepi.exceptions import ConfigError

    with pytest.raises(ConfigError):
        DetectorConfig(**bad)


def test_config_from_yaml_lists_and_fingerprint() -> None:
    from fleetepi.detectors import DetectorConfig

    cfg = DetectorConfig.from_mapping({"sig_windows_s": [3600.0, 7200.0]})
    assert cfg.sig_windows_s == (3600.0, 7200.0)
    assert cfg.fingerprint() != DetectorConfig().fingerprint()
    assert DetectorConfig().fingerprint() == DetectorConfig().fingerprint()


@pytest.mark.parametrize(("n", "k", "p0"), [(60, 39, 1 / 3), (50, 20, 0.016), (1000, 300, 0.2), (100, 4, 0.016)])
def test_the_weighted_tail_follows_the_binomial_when_weights_are_equal(n: int, k: int, p0: float) -> None:
    exact = st.binom.sf(k - 1, n, p0)
    assert exact / 2 < weighted_share_tail([1.0] * n, k, p0) < exact * 2


def test_every_unit_in_the_cohort_is_p0_to_their_number() -> None:
    assert weighted_share_tail([1.0, 0.5, 0.25], 1.75, 0.1) == pytest.approx(0.1 ** 3)
    assert weighted_share_tail([1.0] * 10, 0.5, 0.1) == 1.0   # below its mean: no evidence


def test_a_few_fresh_units_of_a_faded_key_are_little_evidence() -> None:
    """A rack (p0 = 1.6 %) holds the key's newest unit and three day-old ones; its 100 others have faded.

    Counted as the Kish test counts them (the key's 43 effective units, the
    rack's 22 % of their decayed sum: 9.5 of 43), they read p ~ 1e-9. By
    each host's own weight it is four of 104 units on 1.6 % of the fleet:
    about 1 in 2,000.
    """
    rack = [math.exp(-age / 24) for age in (32.0, 28.6, 25.7, 0.1)]
    key = rack + [0.067] * 100
    kish = sum(key) ** 2 / sum(x * x for x in key)
    assert st.binom.sf(math.ceil(kish * sum(rack) / sum(key)) - 1, round(kish), 0.016) < 1e-8
    assert 1e-4 < weighted_share_tail(key, sum(rack), 0.016) < 1e-2
