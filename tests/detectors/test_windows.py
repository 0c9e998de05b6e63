"""Event-time windows: the ring buffer and the daily baseline."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetepi.detectors.windows import DAY_H, DailyBaseline, Ring, window_expectation


def test_ring_slides_and_refuses_what_left_the_window() -> None:
    r = Ring(3)
    assert r.add(10, 1.0)          # first bucket
    assert r.add(11, 2.0)          # next one
    assert r.add(10, 1.0)          # late but inside the window: still counted
    assert r.total == 4.0
    r.roll(13)                     # bucket 10 leaves (window 11..13)
    assert r.total == 2.0
    assert not r.add(10, 5.0)      # late beyond the window: refused, caller counts it
    assert r.total_at(20) == 0.0   # a look ahead does not mutate
    assert r.total == 2.0
    r.roll(100)                    # a long silence empties it
    assert r.total == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.floats(0.5, 3.0)), min_size=1, max_size=40), st.randoms())
def test_order_within_a_window_does_not_change_the_count(items: list[tuple[int, float]], rnd: object) -> None:
    a, b = Ring(12), Ring(12)
    for bucket, w in items:
        a.add(bucket, w)
    shuffled = list(items)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    for bucket, w in shuffled:
        b.add(bucket, w)
    a.roll(11)
    b.roll(11)
    assert abs(a.total - b.total) < 1e-9
    assert a.cells == b.cells or all(abs(x - y) < 1e-9 for x, y in zip(a.cells, b.cells))


def test_baseline_learns_the_daily_cycle_and_keeps_a_guard_band() -> None:
    base = DailyBaseline(start_hour=0)
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


def test_an_hour_that_fired_is_folded_at_most_at_the_expected_rate() -> None:
    base = DailyBaseline(start_hour=0, warm_hours=24.0 * 7)
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
