"""Event-time windows and decayed counts: the building blocks every detector folds into."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetepi.detectors.decay import DecayClock, exposure_hours, kish_n, scale_in_place
from fleetepi.detectors.windows import DAY_H, DailyBaseline, Windows, window_expectation


def test_windows_slide_side_by_side_and_refuse_what_left() -> None:
    w = Windows.new((1, 3))
    assert w.add(10, 1.0)           # first bucket
    assert w.add(11, 2.0)           # next one
    assert w.add(10, 1.0)           # late but inside the longest window: still counted
    assert w.totals == [2.0, 4.0]   # the one-bucket window holds bucket 11 only
    w.roll(13)                      # bucket 10 leaves the 3-bucket window (11..13)
    assert w.totals == [0.0, 2.0]
    assert not w.add(10, 5.0)       # beyond the longest window: refused, the caller counts it
    assert w.spread(1) == 1         # one non-empty bucket left
    w.roll(100)                     # a long silence empties it
    assert w.totals == [0.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.floats(0.5, 3.0)), min_size=1, max_size=60))
def test_window_totals_equal_a_recount(items: list[tuple[int, float]]) -> None:
    w = Windows.new((3, 12))
    kept: list[tuple[int, float]] = []
    for b, x in items:
        if w.add(b, x):
            kept.append((b, x))
        for i, size in enumerate(w.sizes):
            expect = sum(v for bb, v in kept if w.head - size < bb <= w.head)
            assert math.isclose(w.totals[i], expect, abs_tol=1e-6)


def test_baseline_learns_the_daily_cycle_keeps_a_guard_band_and_its_dispersion() -> None:
    base = DailyBaseline.new(start_hour=0)
    for day in range(14):
        for h in range(24):
            base.add(day * 24 + h, 10.0 if h == 12 else 1.0)
    # Everything up to the last 6 hours is folded; those wait (the guard band).
    base.fold_until(14 * 24 - 6, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    assert len(base.pending) == 6
    rates = base.rates(prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    assert rates[12] > 5 * rates[3]        # noon is busy
    assert 0.8 < rates[3] < 1.6             # a quiet hour near its own rate
    mu = window_expectation(rates, end_bucket=(12 * 3600 // 300) + 11, n_buckets=12, bucket_ms=300_000)
    assert abs(mu - rates[12]) < 1e-9       # one whole hour of noon
    # counts that equal their expectation are underdispersed against Poisson: no extra dispersion learned
    assert base.dispersion(False, prior=0.05, prior_n=48.0) < 0.05


def test_a_swinging_key_learns_its_dispersion() -> None:
    calm, swinging = DailyBaseline.new(0), DailyBaseline.new(0)
    for day in range(20):
        for h in range(24):
            calm.add(day * 24 + h, 5.0)
            swinging.add(day * 24 + h, 10.0 if day % 2 else 0.0)   # the same mean, day-to-day swings
    for b in (calm, swinging):
        b.fold_until(20 * 24, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    assert swinging.dispersion(True, 0.05, 7.0) > 10 * calm.dispersion(True, 0.05, 7.0)


def test_a_sparse_key_keeps_the_fleet_s_dispersion_a_busy_one_learns_its_own() -> None:
    """Three hundred hours of a key crashing twice a day say little about its hourly swing; of one at 5/h, much.

    The old weighting counted hours alike (300 hours against a prior of 24):
    the sparse key's estimate of 0.06, noise, ruled, and a signature whose
    days swung 4x paged on one.
    """
    def key(mu: float, own: float) -> DailyBaseline:
        b = DailyBaseline.new(0)
        b.disp_n_h, b.disp_den_h = 300.0, 300.0 * mu * mu
        b.disp_num_h = own * b.disp_den_h
        return b

    sparse, busy = key(0.1, 0.06), key(5.0, 0.3)
    assert sparse.dispersion(False, prior=0.6, prior_n=24.0) > 0.5
    assert abs(busy.dispersion(False, prior=0.6, prior_n=24.0) - 0.3) < 0.05


def test_a_sparse_key_silent_in_an_hour_of_day_is_not_tested_at_half_its_rate() -> None:
    """A key at one unit a day, a week long: most hour slots saw nothing, and that is noise, not a daily cycle.

    With four pseudo-hours per slot, a silent slot was half the all-day rate,
    and four units in one hour of it a 1e-9 event. Weighed as ten units of the
    all-day rate, the sparse key stays flat; a busy key keeps its own cycle.
    """
    sparse, busy = DailyBaseline.new(0), DailyBaseline.new(0)
    for day in range(7):
        for h in range(24):
            busy.add(day * 24 + h, 20.0 if h == 12 else 5.0)
        sparse.add(day * 24 + (7 * day + 3) % 24, 1.0)   # a unit a day, at any hour

    for b in (sparse, busy):
        b.fold_until(7 * 24, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    old = sparse.rates(prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    new = sparse.rates(prior_rate=0.05, prior_w=12.0, hour_w=4.0, hour_units=10.0)
    assert min(old) < 0.6 * max(old)            # the old profile: silent slots at about half
    assert min(new) > 0.85 * max(new)           # flat
    rates = busy.rates(prior_rate=0.05, prior_w=12.0, hour_w=4.0, hour_units=10.0)
    assert rates[12] > 2 * rates[3]             # a busy key's noon is still busy


def test_a_held_key_s_rate_does_not_drift_down() -> None:
    """A key at a unit every other hour, held for a week (its days looked high against a low start).

    Its hours with a unit folded at their expectation, its silent hours as
    zeros: the rate could only fall (to about half here), the hold never
    ended, and the seven-day window paged on the key's ordinary level.
    Silent hours of a hold are held too; the days it learned from shrink.
    """
    base = DailyBaseline.new(0)
    for h in range(0, 7 * 24, 2):
        base.add(h, 1.0)
    base.fold_until(7 * 24, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    before, free_before = sum(base.rates(0.05, 12.0, 4.0)), base.free_days()
    for h in range(7 * 24, 14 * 24):
        if h % 2 == 0:
            base.add(h, 1.0)
        base.mark_firing(h)
        base.fold_until(h - 6, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    assert sum(base.rates(0.05, 12.0, 4.0)) > 0.95 * before
    assert base.free_days() < 0.7 * free_before


def test_an_hour_that_fired_is_folded_at_most_at_the_expected_rate() -> None:
    base = DailyBaseline.new(start_hour=0, warm_hours=24.0 * 7)
    for h in range(5):
        base.add(h, 2.0)
    base.fold_until(5, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    base.add(5, 100.0)
    base.mark_firing()
    base.add(6, 100.0, firing=True)
    base.fold_until(7, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
    assert base.c[5] < 2.0 and base.c[6] < 2.0  # the outbreak did not become the new normal
    assert base.c[4] == 2.0
    assert sum(base.e) > DAY_H  # silent history credited


def test_decayed_counts_survive_a_rebase_exactly() -> None:
    clock = DecayClock((3600.0, 86400.0), ref_ms=0)
    stored = [0.0, 0.0]
    for t in (0, 600_000, 3_600_000):
        g = clock.g(t)
        stored = [s + gi for s, gi in zip(stored, g)]
    at = 7_200_000
    before = [s / gi for s, gi in zip(stored, clock.g(at))]
    f = clock.rebase(5 * 3_600_000)
    stored = [s * fi for s, fi in zip(stored, f)]
    after = [s / gi for s, gi in zip(stored, clock.g(at))]
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(before, after))
    # at the hour scale, cases at 0, 10 and 60 minutes weigh e^-2, e^-11/6 and e^-1 two hours in
    assert math.isclose(before[0], math.exp(-2) + math.exp(-11 / 6) + math.exp(-1), rel_tol=1e-9)


def test_a_rebase_scales_every_stored_value_and_no_more() -> None:
    """``scale_in_place`` is what every detector's rebase calls: a counter may hold fewer scales than the clock."""
    values = [2.0, 4.0]
    scale_in_place(values, (0.5, 0.25, 0.125))
    assert values == [1.0, 1.0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.floats(0.0, 5.0)), min_size=1, max_size=40))
def test_a_baseline_s_cached_totals_are_its_sums_after_every_fold(items: list[tuple[int, float]]) -> None:
    """Rates, priors and units read ``sums`` instead of summing the slots: a stale cache would mislead them all."""
    base = DailyBaseline.new(start_hour=0, warm_hours=3.0)
    for hour, x in sorted(items):
        base.add(hour, x)
        base.fold_until(hour - 2, 0.9, 0.1, 24.0, 4.0)
        assert base.sums() == (sum(base.c), sum(base.e))
        assert base.units() == sum(base.c) and base.history_h() == sum(base.e)


def test_effective_counts_and_exposure() -> None:
    assert kish_n(10.0, 10.0) == 10.0      # ten reports of one error each: ten units
    assert kish_n(500.0, 250_000.0) == 1.0  # one report of 500 errors: one unit
    assert math.isclose(exposure_hours(0, 3_600_000, 1e9), 1.0, rel_tol=1e-5)  # an hour old: an hour at long scales
    assert exposure_hours(0, 100 * 3_600_000, 3600.0) < 1.01  # long present: about tau


def test_hours_that_fired_teach_the_dispersion_nothing() -> None:
    """A capped hour would add (mu - mu)^2 - mu < 0: a key would look calmer the more it fired."""
    import numpy as np

    rng = np.random.default_rng(7)
    counts = rng.poisson(5.0 * rng.gamma(1 / 0.3, 0.3, size=14 * 24))  # phi = 0.3 around 5 an hour

    def learned(fire: range) -> tuple[float, float]:
        b = DailyBaseline.new(0)
        for h, x in enumerate(counts):
            b.add(h, 40.0 if h in fire else float(x), firing=h in fire)
        b.fold_until(14 * 24, decay=0.9, prior_rate=0.05, prior_w=12.0, hour_w=4.0)
        return b.own_dispersion(False)[0], b.own_dispersion(True)[0]  # type: ignore[index]

    calm_h, _ = learned(range(0))
    fired_h, _ = learned(range(5 * 24, 8 * 24))  # three days of an outbreak, capped at the expectation
    assert fired_h > 0.9 * calm_h > 0, (fired_h, calm_h)  # before: 0.81 x


def test_a_key_s_first_day_teaches_its_day_to_day_swing_nothing() -> None:
    """A key's first day is compared with the new-key prior, not with the key: that is no swing of its days.

    A busy key whose days are Poisson (phi 0) learned a daily phi of
    0.06-0.10 from its first day alone, the hours of which were expected at
    a rate still learning from the prior of one a day; in the engine the
    fleet's pooled daily prior came out 0.10 on a fleet with Poisson days,
    and a x2.4 deploy regression folded into its baseline instead of paging.
    """
    import numpy as np

    for seed in (1, 2, 3):
        counts = np.random.default_rng(seed).poisson(5.0, size=7 * 24)
        b = DailyBaseline.new(0)
        for h, x in enumerate(counts):
            b.add(h, float(x))
        b.fold_until(7 * 24, decay=0.906, prior_rate=1 / 24, prior_w=12.0, hour_w=4.0, hour_units=10.0)
        own, days = b.own_dispersion(True)  # type: ignore[misc]
        assert days > 3
        assert own < 0.03, (seed, own)  # before: 0.063-0.076
