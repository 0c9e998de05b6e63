"""Inventory: what a cohort shares with another, kept current as hosts move."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetepi.detectors.inventory import Inventory, pair_key

#: (host, rack, GPU model, in maintenance): one announcement
announcement = st.tuples(st.integers(0, 11), st.sampled_from(["r0", "r1", "r2"]), st.sampled_from(["A", "B"]),
                         st.booleans())


def announce(inv: Inventory, i: int, ts_ms: int, host: int, rack: str, gpu: str, maintenance: bool) -> None:
    attrs = {"rack": rack, "gpu_model": gpu}
    if maintenance:
        attrs["maintenance"] = "planned"
    inv.announce(f"h{host:02d}", ts_ms + i, attrs)


def counted_afresh(inv: Inventory, group: tuple[str, str]) -> Counter[str]:
    members, _ = inv.members()
    out: Counter[str] = Counter()
    for host in members.get(group, ()):
        out.update(inv.latest_keys(host))
    return out


@settings(max_examples=60, deadline=None)
@given(before=st.lists(announcement, max_size=30), after=st.lists(announcement, max_size=30))
def test_overlaps_stay_what_a_fresh_count_gives(before: list, after: list) -> None:
    """Asked for once (rack r1, model A), then hosts move, join and go into maintenance: the tables kept
    current as they move equal a count over the members from scratch."""
    inv = Inventory()
    for i, a in enumerate(before):
        announce(inv, i, 1_000_000, *a)
    groups = [("rack", "r1"), ("gpu_model", "A")]
    for g in groups:
        inv.overlaps(g)
    for i, a in enumerate(after):
        announce(inv, i, 2_000_000, *a)
    for g in groups:
        kept = {k: n for k, n in inv.overlaps(g).items() if n}
        assert kept == dict(counted_afresh(inv, g))
        if kept:
            assert kept[pair_key(*g)] == len(inv.members()[0][g])


@settings(max_examples=40, deadline=None)
@given(first=st.lists(announcement, min_size=1, max_size=20), then=st.lists(announcement, max_size=8))
def test_exposure_by_pair_key_is_the_exposure_of_its_pair_whenever_asked(first: list, then: list) -> None:
    """``exposure_of`` caches by the pair key's string within a step: hosts announced or moved in the
    same step (the cache still warm) must show in it as they show in ``exposure``."""
    from fleetepi.detectors.decay import DecayClock
    from fleetepi.detectors.inventory import split_key

    inv = Inventory(clock=DecayClock((3600.0, 86400.0), ref_ms=0))
    for i, a in enumerate(first):
        announce(inv, i, 1_000_000, *a)
    keys = ["", *(pair_key(a, v) for a in ("rack", "gpu_model") for v in ("r0", "r1", "r2", "A", "B")),
            "rack\x1f", "gpu_model\x1f"]
    now = 9_000_000
    for _ in range(2):
        for k in keys:
            assert inv.exposure_of(k, now) == inv.exposure(split_key(k), now)
        for i, a in enumerate(then):
            announce(inv, i, now - 100, *a)  # announced within the step being decided: the caches are warm
    for k in keys:
        assert inv.exposure_of(k, now) == inv.exposure(split_key(k), now)
