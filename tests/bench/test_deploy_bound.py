"""bench/deploy_bound.py: the best test with hindsight for a deploy regression against gamma-swinging days."""

from __future__ import annotations

import numpy as np
import pytest

from tests.bench.conftest import load_bench


@pytest.mark.parametrize(("ratio", "days", "baseline_days", "shape"), [
    (2.0, 3, 5, 3.0), (3.0, 1, 7, 4.0), (1.5, 7, 10, 3.0),
])
def test_the_bound_is_the_tail_of_gamma_days_over_gamma_days(ratio: float, days: int, baseline_days: int,
                                                            shape: float) -> None:
    """The F(2DK, 2BK) tail is what ``days`` gamma(K) days over ``baseline_days`` of them reach by chance.

    Checked against 400,000 draws of the simulator's own day multipliers
    (gamma of shape K, mean one): the degrees of freedom are right, so the
    bound is neither too strict nor too lax.
    """
    db = load_bench("deploy_bound")
    rng = np.random.default_rng(7)
    n = 400_000
    after = rng.gamma(shape, 1.0 / shape, size=(n, days)).mean(axis=1)
    before = rng.gamma(shape, 1.0 / shape, size=(n, baseline_days)).mean(axis=1)
    empirical = float(np.mean(after / before >= ratio))
    assert db.bound(ratio, days, baseline_days, shape) == pytest.approx(empirical, rel=0.05, abs=2e-4)


def test_a_longer_wait_and_a_longer_baseline_make_a_rise_plainer() -> None:
    db = load_bench("deploy_bound")
    assert db.bound(3.0, 7, 5, 3.0) < db.bound(3.0, 3, 5, 3.0) < db.bound(3.0, 1, 5, 3.0)
    assert db.bound(3.0, 3, 10, 3.0) < db.bound(3.0, 3, 5, 3.0)
    assert db.bound(4.0, 3, 5, 3.0) < db.bound(3.0, 3, 5, 3.0)
