"""hardware_correlation: distinct hosts, every attribute, nested and confounded cohorts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from fleetepi.contract import Host, ts_from_ms
from fleetepi.detectors import DetectorConfig


def big_fleet(t_ms: int) -> list[Host]:
    """400 hosts, 20 racks of 20, 4 datacenters of 5 racks; a B200 GPU with its own driver on
    every tenth host (confounded: same host set), spread over all racks."""
    out = []
    for i in range(400):
        rack = i // 20
        special = i % 10 == 0
        out.append(Host(ts=ts_from_ms(t_ms), host=f"h{i:04d}", attributes={
            "rack": f"r{rack:02d}", "datacenter": f"dc{rack // 5}",
            "gpu_model": "B200" if special else ("H100" if rack % 2 == 0 else "A100"),
            "driver": "570.1" if special else "550.54", "bios": "2.4" if i % 3 == 0 else "2.3"}))
    return out


#: ``big_fleet``'s H100 hosts (even racks, not every tenth host: 45 % of the fleet) and the rest, by index
H100_IDX = [i for i in range(400) if i % 10 and (i // 20) % 2 == 0]
OTHER_IDX = [i for i in range(400) if i % 10 == 0 or (i // 20) % 2 == 1]


def _cases(fl: SimpleNamespace, what: str, at: int) -> list:
    c = fl.crash
    sig = "libcuda!cuMemcpyHtoDAsync | libcudart!cudaMemcpyAsync"
    if what == "none":
        return []
    if what == "rack":            # 12 hosts of rack r03 (inside dc0): rack, not also its datacenter
        return [c(at + i * 20 * fl.MIN, f"h{60 + i:04d}", sig, job=f"j{i}") for i in range(12)]
    if what == "confounded":      # 10 B200 hosts: gpu_model=B200 and driver=570.1 are the same hosts
        return [c(at + i * 20 * fl.MIN, f"h{i * 30:04d}", sig, job=f"j{i}") for i in range(10)]
    if what == "one_sick_host":   # one host, 30 crashes: one distinct host, never a cohort
        return [c(at + i * 5 * fl.MIN, "h0061", sig) for i in range(30)]
    if what == "job_burst":       # one job over racks r03-r04 at once: one case
        return [c(at + i * 1000, f"h{60 + i:04d}", sig, job="train-9") for i in range(40)]
    if what == "fleet_wide":      # the signature everywhere: no cohort stands out
        return [c(at + i * 5 * fl.MIN, f"h{(i * 37) % 400:04d}", sig, job=f"j{i}") for i in range(40)]
    raise AssertionError(what)


@pytest.mark.parametrize(("what", "expected"), [
    ("none", set()),
    ("rack", {("rack", "r03")}),
    ("confounded", {("driver", "570.1")}),   # reported once; ties break by attribute name
    ("one_sick_host", set()),
    ("job_burst", set()),
    ("fleet_wide", set()),
])
def test_hardware_correlation_table(fl: SimpleNamespace, what: str, expected: set[tuple[str, str]]) -> None:
    at = fl.T0 + 2 * fl.DAY
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + fl.DAY), _cases(fl, what, at))
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    assert {(a.attribute, a.value) for a in alerts} == expected, [a.summary for a in alerts]
    for a in alerts:
        assert a.kind == "hardware_correlation" and a.signature
        assert a.relative_risk and a.lower_ci and a.upper_ci
        assert a.lower_ci < a.relative_risk < a.upper_ci and a.lower_ci > 2
        assert a.p_value is not None and a.p_value < 1e-5
        assert a.observed and a.expected is not None and a.observed > a.expected
    notes = " ".join(n for a in alerts for n in a.notes or [])
    if what == "confounded":
        assert "alias: gpu_model=B200" in notes     # the confounded twin is named in the notes


def test_nested_parent_is_explained_by_the_rack(fl: SimpleNamespace) -> None:
    # With a higher support bar the datacenter is significant too when the rack fires:
    # the rack is reported, its datacenter named as explained by it.
    at = fl.T0 + 2 * fl.DAY
    cfg = DetectorConfig(corr_min_hosts=10)
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + fl.DAY), _cases(fl, "rack", at))
    alerts = fl.firing(fl.run(events, config=cfg, detectors=["hardware_correlation"]))
    assert [(a.attribute, a.value) for a in alerts] == [("rack", "r03")]
    assert any("datacenter=dc0" in n and "nested" in n for n in alerts[0].notes or [])


def test_value_in_force_at_the_event_time_counts(fl: SimpleNamespace) -> None:
    at = fl.T0 + 2 * fl.DAY
    fleet = big_fleet(fl.T0)
    # Rack r03 gets BIOS 2.9 an hour *after* its crashes: the crashes belong to the old BIOS.
    upgrade = [Host(ts=ts_from_ms(at + 5 * fl.HOUR), host=h.host, attributes={**h.attributes, "bios": "2.9"})
               for h in fleet[60:80]]
    events = fl.merged(fleet, fl.background(400, fl.T0, at + fl.DAY), _cases(fl, "rack", at), upgrade,
                       [fl.crash(at + 6 * fl.HOUR, "h0070", "sig-late")])
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    assert {(a.attribute, a.value) for a in alerts} == {("rack", "r03")}


def test_an_association_there_from_the_first_day_is_a_ticket_not_a_page(fl: SimpleNamespace) -> None:
    """A signature four times likelier on H100 hosts from the first hour (where jobs run): static.

    Early in the stream a week's or a month's scale holds nearly everything
    watched, so "its share before this window" was empty and the association
    paged as new. Its share before the last day (or six hours) is the
    comparison then: the same as now, so a ticket, once; no page.
    """
    import random

    rng = random.Random(7)
    h100, others = H100_IDX, OTHER_IDX
    sig = "libnccl!ncclAllReduce | trainer!step"
    cases = []
    for k in range(3 * 24 * 4):                             # four an hour for three days
        pool = h100 if rng.random() < 0.8 else others
        cases.append(fl.crash(fl.T0 + k * 15 * fl.MIN + rng.randrange(600_000), f"h{rng.choice(pool):04d}", sig,
                              job=f"s{k}"))
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, fl.T0 + 3 * fl.DAY), cases)
    alerts = [a for a in fl.firing(fl.run(events, detectors=["hardware_correlation"])) if a.signature == sig]
    assert alerts and {a.severity for a in alerts} == {"ticket"}, [(a.severity, a.summary, a.notes) for a in alerts]
    assert {a.finding for a in alerts} == {"static_association"}


def test_a_static_association_that_rises_pages(fl: SimpleNamespace) -> None:
    """The same H100 association, ticketed as static, then five times stronger on day four: a page.

    A static association's later windows are tested against its own long-run
    relative risk, so that it pages only if it rises. Its own test was
    dropped as an "alias" of itself (it is among the key's reported cohorts,
    with the same hosts), so a reported association could never page again.
    """
    import random

    rng = random.Random(7)
    h100, others = H100_IDX, OTHER_IDX
    sig = "libnccl!ncclAllReduce | trainer!step"
    cases = []
    for k in range(4 * 24 * 4):                             # four an hour for four days, 80 % on H100 hosts
        pool = h100 if rng.random() < 0.8 else others
        cases.append(fl.crash(fl.T0 + k * 15 * fl.MIN + rng.randrange(600_000), f"h{rng.choice(pool):04d}", sig,
                              job=f"s{k}"))
    rise = fl.T0 + 3 * fl.DAY + 6 * fl.HOUR
    cases += [fl.crash(rise + k * 4 * fl.MIN + rng.randrange(120_000), f"h{rng.choice(h100):04d}", sig, job=f"r{k}")
              for k in range(180)]                          # then fifteen more an hour, all on H100 hosts
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, fl.T0 + 4 * fl.DAY), cases)
    alerts = [a for a in fl.firing(fl.run(events, detectors=["hardware_correlation"])) if a.signature == sig]
    tickets = [a for a in alerts if a.severity == "ticket"]
    pages = [a for a in alerts if a.severity == "page"]
    assert tickets and all(int(a.ts.timestamp() * 1000) < rise for a in tickets), [(a.ts, a.summary) for a in alerts]
    assert pages and pages[0].finding == "association_rising", [(a.ts, a.severity, a.summary) for a in alerts]
    assert int(pages[0].ts.timestamp() * 1000) < rise + 6 * fl.HOUR
    assert (pages[0].attribute, pages[0].value) == ("gpu_model", "H100")


A100_SIG = "libcuda!cuStreamSynchronize | trainer!sync"


def _new_signature_on_a100(fl: SimpleNamespace) -> tuple[str, list]:
    """A new signature on 16 A100 hosts (45 % of the fleet) in four hours, on the 400-host fleet."""
    at = fl.T0 + 2 * fl.DAY
    a100 = [i for i in range(400) if i % 10 and (i // 20) % 2 == 1]
    cases = [fl.crash(at + k * 13 * fl.MIN, f"h{a100[k * 9]:04d}", A100_SIG, job=f"n{k}") for k in range(16)]
    return A100_SIG, fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + fl.DAY), cases)


def assert_a100_pages(alerts: list, why: str) -> None:
    assert [(a.attribute, a.value, a.severity) for a in alerts][:1] == [("gpu_model", "A100", "page")], \
        [a.summary for a in alerts]
    assert any("weighted" in n and why in n for n in alerts[0].notes or [])


@pytest.mark.parametrize(("detectors", "paged"), [
    (["hardware_correlation"], False),
    (["signature_spike", "hardware_correlation"], True),
])
def test_where_a_spiking_signature_lives_is_asked_with_more_of_the_budget(
        fl: SimpleNamespace, detectors: list[str], paged: bool) -> None:
    """A new signature on 16 A100 hosts (45 % of the fleet) in four hours.

    16 of 16 units on a cohort of 45 % is p ~ 3e-6: against every key's
    every cohort and scale, not significant (the ceiling is 1e-6, and BH's
    bar over a few thousand tests lower still). With signature_spike running,
    the signature is spiking fleet-wide, and its own cohorts carry a share of
    the false-discovery budget (weighted Benjamini-Hochberg): the A100
    cohort pages, and says why in its notes.
    """
    sig, events = _new_signature_on_a100(fl)
    alerts = [a for a in fl.firing(fl.run(events, detectors=detectors))
              if a.kind == "hardware_correlation" and a.signature == sig]
    if not paged:
        assert alerts == [], [a.summary for a in alerts]
        return
    assert_a100_pages(alerts, "spiking fleet-wide")


@pytest.mark.parametrize(("watch_share", "paged"), [(0.0, False), (0.45, True)])
def test_a_signature_rising_short_of_a_spike_is_asked_where_with_more_of_the_budget(
        fl: SimpleNamespace, watch_share: float, paged: bool) -> None:
    """The A100 signature above, with a signature_spike that cannot fire (``sig_alpha`` 1e-30).

    Its four-hour window is far above the new-signature prior (p < 1e-3):
    the signature is on watch, and its cohorts share ``corr_watch_share``
    of the budget (here 0.45: the one signature's ~70 tests weigh ~7 each
    in a family of ~1,000, enough to lift the 1e-6 ceiling over its
    p ~ 3e-6). The A100 cohort pages and says why; without the watch share
    it does not.
    """
    sig, events = _new_signature_on_a100(fl)
    config = DetectorConfig(sig_alpha=1e-30, corr_spike_share=0.5, corr_watch_share=watch_share, corr_static_share=0.0)
    run = fl.run(events, detectors=["signature_spike", "hardware_correlation"], config=config)
    assert not [a for a in run if a.kind == "signature_spike" and a.signature == sig]
    alerts = [a for a in fl.firing(run) if a.kind == "hardware_correlation" and a.signature == sig]
    if not paged:
        assert alerts == [], [a.summary for a in alerts]
        return
    assert_a100_pages(alerts, "on watch")


def test_a_resolved_cohorts_excess_is_not_news_for_its_nested_twin(fl: SimpleNamespace) -> None:
    """Twenty more crashes of a busy signature on the B200 hosts in two hours, then nothing.

    ``driver=570.1`` and ``gpu_model=B200`` are the same hosts: one pages, the
    other is named as its alias. When the page resolves, the excess is told;
    the twin's day and week scales still hold it, and after the cooldown it
    used to page it again as a new cohort, a day after the crashes stopped.
    """
    at = fl.T0 + 8 * fl.DAY
    sig = "sig00"                                           # the background's busiest signature
    cases = [fl.crash(at + i * 6 * fl.MIN, f"h{(i % 20) * 20:04d}", sig, job=f"j{i}") for i in range(20)]
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + 4 * fl.DAY), cases)
    alerts = [a for a in fl.run(events, detectors=["hardware_correlation"]) if a.signature == sig]
    told = [(a.state, a.attribute, a.value, round((a.ts_ms - at) / fl.HOUR, 1)) for a in alerts]
    assert [x[0] for x in told] == ["firing", "resolved"], told        # not the twin again at the day scale


def test_a_pool_that_holds_a_new_driver_is_not_a_second_finding(fl: SimpleNamespace) -> None:
    """A new driver went mostly to the training pool, and a new signature crashes only on it.

    The driver pages. The pool crosses it (hosts of each outside the other)
    and holds most of its cases: on its own a cohort at risk x10. But outside
    the driver nothing is left, and within it the pool crashes at its share:
    the driver's excess. (Before: a second page for the pool, hours after
    the driver's.)
    """
    hosts = []
    for h in big_fleet(fl.T0):
        i = int(h.host[1:])
        new = (i < 200 and i % 3 == 0) or i in (205, 245, 285, 325, 365)
        hosts.append(Host(ts=h.ts, host=h.host, attributes={
            **h.attributes, "node_pool": "train" if i < 200 else "infer", "driver": "560.1" if new else "550.54"}))
    on_driver = [h.host for h in hosts if h.attributes["driver"] == "560.1"]
    at = fl.T0 + 2 * fl.DAY
    sig = "libcuda!cuCtxSynchronize | torch!device_synchronize"
    cases = [fl.crash(at + i * 10 * fl.MIN, on_driver[(i * 7) % len(on_driver)], sig, job=f"j{i}") for i in range(36)]
    events = fl.merged(hosts, fl.background(400, fl.T0, at + fl.DAY), cases)
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    assert [(a.attribute, a.value) for a in alerts] == [("driver", "560.1")], [a.summary for a in alerts]


def test_a_pool_that_moved_before_a_new_signature_is_not_a_second_finding(fl: SimpleNamespace) -> None:
    """As above, but the training pool was formed a day in (hosts moved to it) and the signature is newer.

    Hosts that moved are why a crossing cohort is not explained by today's
    members (Titan, below): their earlier units sit under an old value. A
    signature first seen after every move has no earlier units: the pool
    holds the driver's excess as before. (Before: the pool paged as its own
    finding -- a BIOS rolled out before a new driver's signature paged
    eleven hours after the driver on the quiet and noisy tuning seeds.)
    """
    hosts, moves = [], []
    for h in big_fleet(fl.T0):
        i = int(h.host[1:])
        new = (i < 200 and i % 3 == 0) or i in (205, 245, 285, 325, 365)
        attrs = {**h.attributes, "node_pool": "infer", "driver": "560.1" if new else "550.54"}
        hosts.append(Host(ts=h.ts, host=h.host, attributes=attrs))
        if i < 200:
            moves.append(Host(ts=ts_from_ms(fl.T0 + fl.DAY + i * fl.MIN), host=h.host,
                              attributes={**attrs, "node_pool": "train"}))
    on_driver = [h.host for h in hosts if h.attributes["driver"] == "560.1"]
    at = fl.T0 + 2 * fl.DAY
    sig = "libcuda!cuCtxSynchronize | torch!device_synchronize"
    cases = [fl.crash(at + i * 10 * fl.MIN, on_driver[(i * 7) % len(on_driver)], sig, job=f"j{i}") for i in range(36)]
    events = fl.merged(hosts, moves, fl.background(400, fl.T0, at + fl.DAY), cases)
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    assert [(a.attribute, a.value) for a in alerts] == [("driver", "560.1")], [a.summary for a in alerts]


def test_a_cohort_whose_failing_hosts_leave_it_is_not_explained_away(fl: SimpleNamespace) -> None:
    """Titan's case: old-batch GPUs fail everywhere, and each failed one is replaced by a new-batch GPU.

    Rack r03 pages first (its old GPUs fail first). The old batch's later
    failures sit on hosts that are new-batch by the time it is tested, so by
    today's members it has nothing outside the rack: explained by a cohort
    it crosses. Its hosts moved within the window: it is its own finding.
    """
    at = fl.T0 + 2 * fl.DAY
    base = {h.host: h.attributes for h in big_fleet(fl.T0)}
    hosts = [Host(ts=ts_from_ms(fl.T0), host=h, attributes={**a, "batch": "old" if int(h[1:]) % 2 == 0 else "new"})
             for h, a in base.items()]
    sig = "gpu!dbe | libcuda!cuMemcpy"
    rack = [fl.crash(at + i * 10 * fl.MIN, f"h{60 + 2 * i:04d}", sig, job=f"r{i}") for i in range(10)]
    spread, swaps = [], []
    for i in range(40):
        h = f"h{(100 + 14 * i) % 400:04d}"
        t = at + 2 * fl.HOUR + i * 12 * fl.MIN
        spread.append(fl.crash(t, h, sig, job=f"s{i}"))
        swaps.append(Host(ts=ts_from_ms(t + 5 * fl.MIN), host=h, attributes={**base[h], "batch": "new"}))
    events = fl.merged(hosts, fl.background(400, fl.T0, at + fl.DAY), rack, spread, swaps)
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    found = {(a.attribute, a.value) for a in alerts}
    assert ("batch", "old") in found, [a.summary for a in alerts]


def test_a_nested_cohort_at_its_share_within_the_accepted_one_is_not_a_second_finding(fl: SimpleNamespace) -> None:
    """A crash on every H100 host; one H100 rack holds a little more than its share of it, by chance.

    Inside H100 the rack holds 63 of the 220 cases for a fifth of the hosts:
    a relative risk of 1.6 there, insignificant, nothing its units can tell
    from 1. It was a second page all the same (the nested test asked for a
    relative risk under 1.5 as well, which a few units rarely show; on noisy
    tuning seeds node pools inside a wearing GPU model paged). It is the
    GPU model's excess now, named in its notes.
    """
    at = fl.T0 + 2 * fl.DAY
    sig = "libcuda!cuMemcpyHtoDAsync | libcudart!cudaMemcpyAsync"
    rack = [f"h{i:04d}" for i in range(40, 60)]                               # r02, an H100 rack
    others = [f"h{i:04d}" for r in (0, 4, 6, 8) for i in range(r * 20, r * 20 + 20)]
    on_rack = [j for j in range(220) if j % 7 in (0, 3)]                        # 63, evenly through the run
    cases = [fl.crash(at + j * 10 * fl.MIN, rack[j % 20] if j in on_rack else others[(j * 7) % 80], sig,
                      job=f"j{j}") for j in range(220)]
    events = fl.merged(fl.hosts(200), fl.background(200, fl.T0, at + 2 * fl.DAY), cases)
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    found = {(a.attribute, a.value) for a in alerts}
    assert ("rack", "r02") not in found, [a.summary for a in alerts]
    assert found & {("gpu_model", "H100"), ("driver", "550.54")}, [a.summary for a in alerts]


def test_hosts_that_leave_an_attribute_out_do_not_make_a_second_finding(fl: SimpleNamespace) -> None:
    """A crash on every host of node pool "train"; a third of them do not announce their SKU.

    All of train's hosts that say their SKU are SKU X, so X holds train's
    excess and nothing more. Before, the hosts without a SKU still counted
    in train's share of hosts while their crashes, having no SKU, counted
    nowhere: X looked like it held all of train's crashes on two thirds of
    its hosts, was not explained by it, and paged as well. On the hot
    preset's tuning seed 1, 3 % of hosts without a SKU did this to a
    wear-out on an A100 node pool (two late pages, the SKU and then CUDA).
    """
    at = fl.T0 + 2 * fl.DAY
    sig = "libstdc++.so.6!__cxa_throw | libjemalloc.so.2!je_arena_dalloc_no_tcache"
    hosts = []
    for h in fl.hosts(200):
        i = int(h.host[1:])
        attrs = {**h.attributes, "node_pool": "train" if i % 10 < 3 else "serve"}
        if i % 10 != 0:                                        # train's hosts h..0 leave the SKU out
            attrs["sku"] = "X" if i % 10 < 6 else "Y"
        hosts.append(Host(ts=h.ts, host=h.host, attributes=attrs))
    train = [f"h{i:04d}" for i in range(200) if i % 10 < 3]
    cases = [fl.crash(at + j * 15 * fl.MIN, train[(j * 7) % 60], sig, job=f"j{j}") for j in range(150)]
    events = fl.merged(hosts, fl.background(200, fl.T0, at + 2 * fl.DAY), cases)
    alerts = fl.firing(fl.run(events, detectors=["hardware_correlation"]))
    found = {(a.attribute, a.value) for a in alerts}
    assert found == {("node_pool", "train")}, [a.summary for a in alerts]



def _two_statics_and_a_rollout(fl: SimpleNamespace, outbreak: int, on_train: bool = False) -> list:
    """Node pool "train" and SKU "X" (40 of 400 hosts each) crash 5x as often from day one; on day two CUDA
    12.6 goes to 90 % of both and to ten other hosts; on day three ``outbreak`` extra crashes on 12.6's hosts
    (``on_train``: on the pool's)."""
    import random

    rng = random.Random(7)
    hosts, train, sku_x, other = [], [], [], []
    for h in big_fleet(fl.T0):
        i = int(h.host[1:])
        (train if i % 10 == 3 else sku_x if i % 10 == 4 else other).append(h.host)
        hosts.append(Host(ts=h.ts, host=h.host, attributes={
            **h.attributes, "node_pool": "train" if i % 10 == 3 else "serve", "sku": "X" if i % 10 == 4 else "Y",
            "cuda": "12.4"}))
    few = {h for h in other if int(h[1:]) % 40 == 5}
    new = {h for h in train + sku_x if int(h[1:]) % 100 > 9} | few
    rollout = fl.T0 + 30 * fl.HOUR
    moved = [Host(ts=ts_from_ms(rollout + k * fl.MIN), host=h.host, attributes={**h.attributes, "cuda": "12.6"})
             for k, h in enumerate(x for x in hosts if x.host in new)]
    cases = []
    for k in range(4 * 24 * 10):                             # ten an hour for four days: 5x on train and on X
        u = rng.random()
        pool = train if u < 0.278 else sku_x if u < 0.556 else other
        cases.append(fl.crash(fl.T0 + k * 6 * fl.MIN + rng.randrange(300_000), rng.choice(pool), STATIC_SIG,
                              job=f"s{k}"))
    at, on_new = fl.T0 + 3 * fl.DAY, sorted(train if on_train else new)
    cases += [fl.crash(at + k * 6 * fl.MIN, rng.choice(on_new), STATIC_SIG, job=f"o{k}") for k in range(outbreak)]
    return fl.merged(hosts, moved, fl.background(400, fl.T0, fl.T0 + 4 * fl.DAY), cases)


STATIC_SIG = "libtorch_cpu.so!at::TensorIteratorBase::build | libstdc++.so.6!execute_native_thread_routine"


@pytest.mark.parametrize(("outbreak", "reported"), [(0, set()), (120, {("cuda", "12.6")})])
def test_a_rolled_out_version_is_explained_by_the_static_associations_it_covers(
        fl: SimpleNamespace, outbreak: int, reported: set[tuple[str, str]]) -> None:
    """A CUDA version rolled out to two static cohorts of a signature holds their excess: no finding of its own.

    Node pool "train" and SKU "X" each crash 5x as often from day one and
    are ticketed on day one. CUDA 12.6, installed on 90 % of both on day
    two, holds three times its share of the signature's crashes from then
    on, and paged as new: outside "train" the residual holds X's excess and
    outside X it holds train's, so neither static cohort alone explained it
    (noisy tuning seeds 5 and 7, a CUDA version over a node pool and a
    SKU). Weighing each host by its static cohorts' risk, 12.6 holds its
    share. Ten more an hour for twelve hours on 12.6's hosts (three times
    what the statics give it) are more than that share, and are reported.
    """
    alerts = [a for a in fl.firing(fl.run(_two_statics_and_a_rollout(fl, outbreak),
                                          detectors=["hardware_correlation"])) if a.signature == STATIC_SIG]
    tickets = {(a.attribute, a.value) for a in alerts if a.severity == "ticket"}
    assert {("node_pool", "train"), ("sku", "X")} <= tickets, [(a.severity, a.summary) for a in alerts]
    found = {(a.attribute, a.value) for a in alerts} - {("node_pool", "train"), ("sku", "X")}
    assert found == reported, [(a.severity, a.summary, a.notes) for a in alerts]


def test_a_static_pool_rising_under_a_rolled_out_version_pages_as_rising(fl: SimpleNamespace) -> None:
    """The same two static cohorts and roll-out; on day three the pool alone crashes 4.6x its own rate: a page.

    The pool's test is against its own long-run risk, and it is one of two
    static associations of the fleet: whether a known association rises is
    a question about those two, not about every key's cohorts, and they
    carry their own share of the false-discovery budget. With none, the
    pool needed p = 1e-8 and paged 8 h into the rise (p = 6e-5 half an hour
    in, 1e-6 five hours in). CUDA 12.6, on 90 % of the pool, holds the rise
    too, and is not a second page.
    """
    alerts = [a for a in fl.firing(fl.run(_two_statics_and_a_rollout(fl, 120, on_train=True),
                                          detectors=["hardware_correlation"])) if a.signature == STATIC_SIG]
    pages = [a for a in alerts if a.severity == "page"]
    rise = fl.T0 + 3 * fl.DAY
    assert [(a.attribute, a.value, a.finding) for a in pages] == [("node_pool", "train", "association_rising")], \
        [(a.ts, a.severity, a.summary) for a in alerts]
    assert int(pages[0].ts.timestamp() * 1000) < rise + 6 * fl.HOUR, pages[0].ts
    assert "expected from its share of the fleet at its long-run risk x3.2" in pages[0].summary, pages[0].summary


def _a_static_datacenter_and_a_rack_outbreak(fl: SimpleNamespace, extra: int) -> tuple[list, int]:
    """Datacenter dc0 (100 of 400 hosts) crashes 4x as often from day one, four crashes an hour for four days;
    from day 3 + 6 h, ``extra`` more over twelve hours on rack r01, one of dc0's five racks."""
    import random

    rng = random.Random(11)
    dc0, others = list(range(100)), list(range(100, 400))
    cases = []
    for k in range(4 * 24 * 4):
        pool = dc0 if rng.random() < 4 / 7 else others
        cases.append(fl.crash(fl.T0 + k * 15 * fl.MIN + rng.randrange(600_000), f"h{rng.choice(pool):04d}",
                              STATIC_SIG, job=f"s{k}"))
    at = fl.T0 + 3 * fl.DAY + 6 * fl.HOUR
    step = 12 * fl.HOUR // extra
    cases += [fl.crash(at + k * step + rng.randrange(step // 2), f"h{rng.randrange(20, 40):04d}", STATIC_SIG,
                       job=f"r{k}") for k in range(extra)]
    return fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, fl.T0 + 4 * fl.DAY), cases), at


def test_a_rack_inside_a_static_datacenter_is_expected_at_the_datacenters_risk(fl: SimpleNamespace) -> None:
    """A rack of a datacenter where the signature has always been 4x as frequent holds twice its share of the
    host-time's units on an ordinary day: that is its expectation, not an excess.

    Tested against its host-time share, such a rack was a candidate at
    every step, and one whose day swung up paged (noisy tuning seed 7: a
    rack of a static datacenter, 12 crashes in a day where the datacenter's
    risk gave it 3.4, paged at p=1e-9 against its host-time share). Its
    test is now against the datacenter's long-run risk: an outbreak on it
    (forty more crashes in twelve hours) pages, with its expectation at that
    risk in the summary, and a restored engine tests it the same way.
    """
    events, at = _a_static_datacenter_and_a_rack_outbreak(fl, 40)
    alerts = [a for a in fl.firing(fl.run(events, detectors=["hardware_correlation"])) if a.signature == STATIC_SIG]
    assert [(a.attribute, a.value, a.severity) for a in alerts] == [("datacenter", "dc0", "ticket"),
                                                                     ("rack", "r01", "page")], \
        [(a.ts, a.severity, a.summary) for a in alerts]
    page = alerts[1]
    assert at < int(page.ts.timestamp() * 1000) < at + 12 * fl.HOUR, page.ts
    assert "at the risk x2.2 the static association datacenter=dc0 gives it" in page.summary, page.summary
    # its expectation is its share at the datacenter's risk (10 % of the units), not its 5 % of the host-time
    assert "holds 5.0% of their host-time" in page.notes[0], page.notes[0]
    assert "10.2% of the units at the relative risk 2.16" in page.notes[0], page.notes[0]

    from fleetepi.contract.codec import encode
    from fleetepi.detectors import Engine

    cut = next(i for i, e in enumerate(events) if e.ts_ms >= at)
    first = Engine(detectors=["hardware_correlation"])
    before = [encode(a) for ev in events[:cut] for a in first.process(ev)]
    second = Engine(detectors=["hardware_correlation"])
    assert second.restore(json.loads(json.dumps(first.snapshot())))
    after = [encode(a) for ev in events[cut:] for a in second.process(ev)]
    whole = Engine(detectors=["hardware_correlation"])
    assert before + after == [encode(a) for ev in events for a in whole.process(ev)]


def test_a_static_associations_risk_is_learned_again_as_its_history_grows(fl: SimpleNamespace) -> None:
    """Datacenter dc0 (a quarter of the hosts) holds 4/7 of a signature's crashes for ten days: odds ratio 4.

    Its risk is first learned at the ticket, on day one, from a day's units
    shrunk toward one. Learned again each day from the units older than a
    week's scale, it moves toward 4 as they grow; a ticket's first guess
    was what its rises and the cohorts inside it were measured against for
    good.
    """
    import random

    from fleetepi.detectors import Engine

    rng = random.Random(11)
    dc0, others = list(range(100)), list(range(100, 400))
    cases = [fl.crash(fl.T0 + k * 15 * fl.MIN + rng.randrange(600_000),
                      f"h{rng.choice(dc0 if rng.random() < 4 / 7 else others):04d}", STATIC_SIG, job=f"s{k}")
             for k in range(4 * 24 * 10)]
    engine = Engine(detectors=["hardware_correlation"])
    core = engine.detectors[0].core  # type: ignore[attr-defined]
    risks: list[float] = []
    for ev in fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, fl.T0 + 10 * fl.DAY), cases):
        engine.process(ev)
        st = core.keys.get(STATIC_SIG)
        pc = st.pairs.get("datacenter\x1fdc0") if st is not None else None
        if pc is not None and pc.static and (not risks or pc.rho != risks[-1]):
            risks.append(pc.rho)
    assert len(risks) >= 3, risks
    assert abs(risks[-1] - 4.0) < abs(risks[0] - 4.0) and abs(risks[-1] - 4.0) < 0.8, risks


def test_three_hosts_of_a_rack_with_a_rare_signature_page_on_the_rate_test(fl: SimpleNamespace) -> None:
    """A signature seen six times in two days crashes twice on each of three hosts of rack r07 in 95 minutes.

    400 hosts in racks of 20 (a rack is 5 % of the fleet). The burst is
    all the signature's recent units, so the share test can say no more
    than 0.05 ** 3 ~ 1e-4 and never pages. Against the signature's earlier
    rate the rack expected 0.008 units in the hour: it pages 100 minutes in
    (p = 2e-7), the notes say "rate test". The same crashes on hosts of
    three racks page no rack
    (where they fell is no finding), nor do they with the rate test off.
    """
    at = fl.T0 + 2 * fl.DAY
    sig = "libcuda!cuMemcpyHtoDAsync_v2 | libcudart!cudaMemcpyAsync"
    earlier = [fl.crash(fl.T0 + j * 8 * fl.HOUR + 600_000, f"h{(j * 97 + 11) % 400:04d}", sig, job=f"e{j}")
               for j in range(6)]

    def burst(hosts: list[str]) -> list:
        return [fl.crash(at + (r * 75 + i * 10) * fl.MIN, h, sig, job=f"b{r}{i}")
                for r in range(2) for i, h in enumerate(hosts)]

    def rack_pages(trouble: list, config: DetectorConfig | None = None) -> list:
        events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + fl.DAY), earlier, trouble)
        alerts = fl.firing(fl.run(events, config, detectors=["hardware_correlation"]))
        return [a for a in alerts if a.signature == sig and a.severity == "page"]

    got = rack_pages(burst(["h0140", "h0143", "h0146"]))
    assert [(a.attribute, a.value, a.finding) for a in got] == [("rack", "r07", "cohort_outbreak")], \
        [a.summary for a in got]
    assert got[0].notes[0].startswith("rate test: ") and got[0].p_value < 1e-6
    assert got[0].ts <= ts_from_ms(at + 2 * fl.HOUR)
    assert rack_pages(burst(["h0140", "h0203", "h0266"])) == []
    assert rack_pages(burst(["h0140", "h0143", "h0146"]), DetectorConfig(corr_rate_max_s=0.0)) == []


def test_an_idle_signature_stops_counting_in_the_family_of_rate_tests(fl: SimpleNamespace) -> None:
    """Forty rare signatures crash three times each, then go quiet for twelve hours.

    While their units are fresh, each counts its cohorts at the rate test's
    scales in the Benjamini-Hochberg family (the bar every test must pass).
    Twelve hours on those units have decayed below what a rate test needs;
    the family must forget them, not keep them until the signature is next
    seen (on a noisy fleet such idle keys were nine in ten of the rate
    tests' slots).
    """
    from fleetepi.detectors import Engine

    at = fl.T0 + 2 * fl.DAY
    rare = [fl.crash(at + k * 60_000 + j * 7 * fl.MIN, f"h{(k * 53 + j * 131) % 400:04d}", f"rare{k:02d}",
                     job=f"r{k}{j}") for k in range(40) for j in range(3)]
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at - fl.DAY), rare)

    def family(config: DetectorConfig, after_ms: int) -> int:
        eng = Engine(config, detectors=["hardware_correlation"])
        for ev in events:
            eng.process(ev)
        eng.advance(at + after_ms)
        (det,) = eng.detectors
        return det.core.family

    fresh, idle = family(DetectorConfig(), fl.HOUR), family(DetectorConfig(), 12 * fl.HOUR)
    share_only = family(DetectorConfig(corr_rate_max_s=0.0), 12 * fl.HOUR)
    assert fresh >= idle + 40 * 4, (fresh, idle)
    assert idle == share_only


@pytest.mark.parametrize("statics", [{}, {"a": (0, 5, 7), "c": (1,)}])
@pytest.mark.parametrize(("spiking", "watched"), [
    (set(), set()), ({"a"}, set()), (set(), {"b"}), ({"a"}, {"b", "c"}), ({"a", "b"}, {"c"}),
])
def test_the_weights_average_one_over_the_family(spiking: set[str], watched: set[str],
                                                 statics: dict[str, tuple[int, ...]]) -> None:
    """Weighted BH keeps the false discovery rate only if the weights average one over the family.

    Three keys of 40, 10 and 5 cohorts (every fifth holds 20 % of the hosts,
    the rest 1 %), each counted in the family for 30 of its tests, and 5,000
    tests of other keys: whatever is spiking, on watch or static, the
    weights times the tests they cover add up to the family (a spiking key's
    every cohort, a watched key's big ones, every static association, each
    in one tier only: a static association of a spiking key is weighed as a
    static one), a weighted tier weighs more than one and the rest less.
    """
    from fleetepi.detectors.cohorts import CohortCorrelation, CohortKey, PairCounts
    from fleetepi.detectors.cohorts.budget import step_budget

    engine = CohortCorrelation(acute=[0, 1, 2, 3], longrun=4, fdr=0.01, alpha=1e-6, resolve_alpha=1e-3,
                               rise_alpha=1e-4, explain_alpha=1e-3, min_rr_lower=1.0, min_hosts=3, min_units=5.0,
                               min_cohort_hosts=2, prior_units=20.0, warmup_ms=0, cooldown_ms=0,
                               ticket_cooldown_ms=0, ttl_ms=1, spike_share=0.5, spike_weight_max=1000.0,
                               watch_share=0.25, watch_min_share=0.1, static_share=0.05)
    sizes = {f"a\x1fv{i}": 200 if i % 5 == 0 else 10 for i in range(40)}
    inventory = SimpleNamespace(sizes=sizes, attribute_hosts={"a": 1000}, version=0)
    for key, n in (("a", 40), ("b", 10), ("c", 5)):
        engine.keys[key] = CohortKey(pairs={f"a\x1fv{i}": PairCounts([0.0] * 5, static=i in statics.get(key, ()))
                                            for i in range(n)}, family=30)
    engine.static_keys = {k: len(v) for k, v in statics.items()}
    engine.family = 5000 + 90
    b = step_budget(engine, frozenset(spiking), frozenset(watched), 0, inventory)  # type: ignore[arg-type]
    static = {k: {pk for pk, pc in engine.keys[k].pairs.items() if pc.static} for k in engine.keys}
    big = {k: sum(1 for pk in engine.keys[k].pairs if sizes[pk] == 200 and pk not in static[k]) for k in engine.keys}
    n_spike = sum(len(engine.keys[k].pairs) - len(static[k]) for k in spiking) * 4
    n_watch = sum(big[k] for k in watched) * 4
    n_static = sum(len(x) for x in static.values()) * 4
    # each key held 30 tests of the family; each tier takes its cohorts' part of them
    held = sum(30 * (len(engine.keys[k].pairs) - len(static[k])) / len(engine.keys[k].pairs) for k in spiking) + \
        sum(30 * big[k] / len(engine.keys[k].pairs) for k in watched) + \
        sum(30 * len(static[k]) / len(engine.keys[k].pairs) for k in engine.keys)
    assert b.family == round(5000 + 90 - held) + n_spike + n_watch + n_static
    w_static = b.static if statics else b.rest
    total = b.spike * n_spike + b.watch * n_watch + w_static * n_static + \
        b.rest * (b.family - n_spike - n_watch - n_static)
    assert total == pytest.approx(b.family)
    for keys, w in ((spiking, b.spike), (watched, b.watch)):
        assert (w > 1.0) == bool(keys)
        assert all(b.of(k, spiking, watched) == w for k in keys)
    assert all(b.of(k, spiking, watched, big=False) == b.rest for k in watched)
    assert (w_static > 1.0) == bool(statics)
    assert all(b.of(k, spiking, watched, static=True) == w_static for k in statics)
    assert (b.rest < 1.0) == bool(spiking or watched or statics)


def test_a_watched_keys_new_big_cohort_joins_its_tier_at_the_next_step() -> None:
    """The watch tier's count of a key's big cohorts is kept per inventory version: a pair the key gains
    (its first crash on the other GPU model) or a cohort that grows past ``watch_min_share`` must be
    counted at the next step, as a count from scratch gives."""
    from fleetepi.detectors.cohorts import CohortCorrelation, CohortKey, PairCounts
    from fleetepi.detectors.cohorts.budget import step_budget
    from fleetepi.detectors.decay import DecayClock

    engine = CohortCorrelation(acute=[0, 1], longrun=1, fdr=0.01, alpha=1e-6, resolve_alpha=1e-3,
                               rise_alpha=1e-4, explain_alpha=1e-3, min_rr_lower=1.0, min_hosts=3, min_units=5.0,
                               min_cohort_hosts=2, prior_units=20.0, warmup_ms=0, cooldown_ms=0,
                               ticket_cooldown_ms=0, ttl_ms=1, spike_weight_max=1000.0,
                               watch_share=0.25, watch_min_share=0.1)
    sizes = {"gpu\x1fH100": 600, "gpu\x1fA100": 400, **{f"rack\x1fr{i}": 25 for i in range(40)}}
    inventory = SimpleNamespace(sizes=sizes, attribute_hosts={"gpu": 1000, "rack": 1000}, version=0)
    engine.keys["k"] = CohortKey(pairs={"gpu\x1fH100": PairCounts([1.0, 1.0]), "rack\x1fr1": PairCounts([1.0, 1.0])},
                                 family=4)
    engine.family = 5000

    def family_afresh() -> int:
        fresh = CohortCorrelation(**{f: getattr(engine, f) for f in engine.__struct_fields__ if f != "bigs"})
        return step_budget(fresh, frozenset(), frozenset({"k"}), 0, inventory).family  # type: ignore[arg-type]

    # the watch tier holds the key's big cohorts at each scale, and takes their part of the key's 4 tests
    first = step_budget(engine, frozenset(), frozenset({"k"}), 0, inventory)  # type: ignore[arg-type]
    assert first.family == family_afresh() == 5000 - 4 * 1 // 2 + 1 * 2
    # its first crash on an A100 host of rack r2: a new big pair (and a small one)
    engine.observe("k", "h7", 1.0, 1000, ("gpu\x1fA100", "rack\x1fr2"), DecayClock((3600.0, 86400.0)))
    second = step_budget(engine, frozenset(), frozenset({"k"}), 0, inventory)  # type: ignore[arg-type]
    assert second.family == family_afresh() == 5000 - 4 * 2 // 4 + 2 * 2
    # a roll-out: rack r1 grows to 150 hosts, big now (a new inventory version)
    sizes["rack\x1fr1"], inventory.version = 150, 1
    third = step_budget(engine, frozenset(), frozenset({"k"}), 0, inventory)  # type: ignore[arg-type]
    assert third.family == family_afresh() == 5000 - 4 * 3 // 4 + 3 * 2


def test_a_spiking_keys_weight_is_split_over_its_attributes_then_their_values() -> None:
    """A spiking key with 40 racks and 2 GPU models: each attribute gets half of the key's weight.

    Per test evenly, the racks held 95 % of it; a rack is significant at a
    few units whatever its weight, a GPU model of half the fleet needs tens
    at a modest relative risk, and every factor of weight spares it several.
    The weights still add up to the family.
    """
    from fleetepi.detectors.cohorts import CohortCorrelation, CohortKey, PairCounts
    from fleetepi.detectors.cohorts.budget import step_budget

    engine = CohortCorrelation(acute=[0, 1, 2, 3], longrun=4, fdr=0.01, alpha=1e-6, resolve_alpha=1e-3,
                               rise_alpha=1e-4, explain_alpha=1e-3, min_rr_lower=1.0, min_hosts=3, min_units=5.0,
                               min_cohort_hosts=2, prior_units=20.0, warmup_ms=0, cooldown_ms=0,
                               ticket_cooldown_ms=0, ttl_ms=1, spike_share=0.5, spike_weight_max=1000.0)
    pairs = {f"rack\x1fr{i:02d}": PairCounts([0.0] * 5) for i in range(40)}
    pairs |= {"gpu\x1fH100": PairCounts([0.0] * 5), "gpu\x1fA100": PairCounts([0.0] * 5)}
    engine.keys["k"] = CohortKey(pairs=pairs, family=30)
    engine.family = 5000 + 30
    inventory = SimpleNamespace(sizes={}, attribute_hosts={})
    b = step_budget(engine, frozenset({"k"}), frozenset(), 0, inventory)  # type: ignore[arg-type]
    w_rack = b.of("k", {"k"}, set(), pair="rack\x1fr07")
    w_gpu = b.of("k", {"k"}, set(), pair="gpu\x1fH100")
    n_rack, n_gpu = 40 * 4, 2 * 4
    assert w_gpu == pytest.approx(20 * w_rack) and w_rack > 1.0
    assert w_rack * n_rack == pytest.approx(w_gpu * n_gpu) == pytest.approx(0.25 * b.family)
    assert b.spike == pytest.approx((w_rack * n_rack + w_gpu * n_gpu) / (n_rack + n_gpu))
    total = w_rack * n_rack + w_gpu * n_gpu + b.rest * (b.family - n_rack - n_gpu)
    assert total == pytest.approx(b.family)


def test_a_new_signatures_association_is_never_static(fl: SimpleNamespace) -> None:
    """A signature first seen on day two, once an hour, only on A100 hosts (45 % of the fleet).

    Without a spike to weigh its cohorts it needs ~20 units before the A100
    share test is significant. By then its own earlier hours are all on
    A100 too: compared with them, "its share now is no higher than before",
    and the driver bug was ticketed as a static association 15 h in. A key
    first seen after the warm-up has no standing association for three
    days: it pages.
    """
    at = fl.T0 + 2 * fl.DAY
    a100 = [i for i in range(400) if i % 10 and (i // 20) % 2 == 1]
    sig = "libcuda!cuCtxSynchronize | libtorch!device_synchronize"
    cases = [fl.crash(at + k * fl.HOUR + 7 * k * fl.MIN % fl.HOUR, f"h{a100[k * 37 % len(a100)]:04d}", sig, job=f"n{k}")
             for k in range(30)]
    events = fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, at + 2 * fl.DAY), cases)
    alerts = [a for a in fl.firing(fl.run(events, detectors=["hardware_correlation"])) if a.signature == sig]
    assert alerts and alerts[0].severity == "page", [(a.severity, a.summary, a.notes) for a in alerts]
    assert (alerts[0].attribute, alerts[0].value, alerts[0].finding) == ("gpu_model", "A100", "cohort_outbreak")
    assert not [a for a in alerts if a.severity == "ticket"], [(a.severity, a.summary) for a in alerts]
    assert any("first seen" in n and "after the warm-up" in n for n in alerts[0].notes or [])


def _busy_then_quiet_while_a_version_rolls_away(fl: SimpleNamespace, outbreak: int) -> list:
    """A signature at 24 an hour for two days, then 2 an hour, on every host alike (H100 hosts a little more
    often: 1.3x). CUDA 12.4 on the H100 hosts (12.2 on the others); nine in ten of them move to 12.6 on day two.
    From day five, ``outbreak`` more over six hours on the hosts left on 12.4."""
    import random

    rng = random.Random(5)
    hosts = [Host(ts=h.ts, host=h.host, attributes={
        **h.attributes, "cuda": "12.4" if h.attributes["gpu_model"] == "H100" else "12.2"}) for h in big_fleet(fl.T0)]
    h100 = [h.host for h in hosts if h.attributes["gpu_model"] == "H100"]
    rest = [h.host for h in hosts if h.attributes["gpu_model"] != "H100"]
    move = fl.T0 + 36 * fl.HOUR
    moving = {h for i, h in enumerate(h100) if i % 10}
    moved = [Host(ts=ts_from_ms(move + k * 5 * fl.MIN), host=h.host, attributes={**h.attributes, "cuda": "12.6"})
             for k, h in enumerate(x for x in hosts if x.host in moving)]
    cases, t, k = [], fl.T0, 0
    end = fl.T0 + 7 * fl.DAY
    w = 1.3 * len(h100) / (1.3 * len(h100) + len(rest))
    while t < end:
        rate = 24.0 if t < fl.T0 + 2 * fl.DAY else 2.0
        t += int(rng.expovariate(rate / fl.HOUR)) + 1
        pool = h100 if rng.random() < w else rest
        cases.append(fl.crash(t, rng.choice(pool), STATIC_SIG, job=f"b{k}"))
        k += 1
    kept, at = sorted(set(h100) - moving), fl.T0 + 5 * fl.DAY
    cases += [fl.crash(at + j * 6 * fl.HOUR // max(outbreak, 1), rng.choice(kept), STATIC_SIG, job=f"o{j}")
              for j in range(outbreak)]
    return fl.merged(hosts, moved, fl.background(400, fl.T0, end), cases)


@pytest.mark.parametrize(("outbreak", "paged"), [(0, False), (30, True)])
def test_a_version_rolled_away_while_a_signature_was_busy_is_not_its_cohort(fl: SimpleNamespace, outbreak: int,
                                                                           paged: bool) -> None:
    """CUDA 12.4 held the H100 hosts (45 % of the fleet) while the signature was busy, and 4.5 % after.

    The signature ran at 24 an hour while 12.4 held every H100 host and at
    2 an hour after nine in ten of them moved to 12.6: of a week's units,
    12.4 holds far more than its share of the week's host-time, as it was
    big when the signature was busy (hot tuning seeds 2 and 4: CUDA 12.4
    paged as new on signatures that had swung down). The share test
    assumes the key's rate held over the scale; a cohort that lost most of
    its hosts within a scale is not tested at it (on the old code: a
    page). Its shorter scales still are: thirty more crashes in six hours
    on the hosts it kept page.
    """
    alerts = fl.firing(fl.run(_busy_then_quiet_while_a_version_rolls_away(fl, outbreak),
                              detectors=["hardware_correlation"]))
    found = [(a.attribute, a.value, a.severity, a.summary) for a in alerts if a.signature == STATIC_SIG]
    assert bool([f for f in found if f[:3] == ("cuda", "12.4", "page")]) == paged, found


SLOW_SIG = "libibverbs!ibv_reg_mr | libnccl!ncclIbIsend"


def _slow_association(fl: SimpleNamespace, from_day: int, per_day: float, seed: int) -> list:
    """``per_day`` crashes a day for ten days, 3.3 times likelier on the H100 hosts (45 % of the fleet) from
    ``from_day`` on, on every host alike before it."""
    import random

    rng = random.Random(seed)
    h100, others = H100_IDX, OTHER_IDX
    w = 3.3 * len(h100) / (3.3 * len(h100) + len(others))
    cases, t, k, end = [], fl.T0, 0, fl.T0 + 10 * fl.DAY
    while True:
        t += int(rng.expovariate(per_day / fl.DAY)) + 1
        if t >= end:
            break
        p = w if t >= fl.T0 + from_day * fl.DAY else len(h100) / 400
        cases.append(fl.crash(t, f"h{rng.choice(h100 if rng.random() < p else others):04d}", SLOW_SIG, job=f"s{k}"))
        k += 1
    return fl.merged(big_fleet(fl.T0), fl.background(400, fl.T0, end), cases)


@pytest.mark.parametrize(("from_day", "per_day", "seed"), [(0, 3.5, 36), (1, 5.0, 29)])
def test_a_slow_static_association_found_in_its_second_week_is_a_ticket(fl: SimpleNamespace, from_day: int,
                                                                         per_day: float, seed: int) -> None:
    """A few crashes a day, three times likelier on the H100 hosts from the first days: found on day 8-9, at the week's scale.

    Early in a stream a week's scale holds most of what was watched, and
    "its share before" was taken from the key's first day alone: four to six
    units, shrunk to "no association", and the association paged as new
    (on the old code: a page). What is older than the week's reach held 15
    units at the association's share; a ticket.
    """
    alerts = [a for a in fl.firing(fl.run(_slow_association(fl, from_day, per_day, seed),
                                          detectors=["hardware_correlation"])) if a.signature == SLOW_SIG]
    found = [(a.attribute, a.value, a.severity, a.finding, a.notes[-1]) for a in alerts]
    assert [f[:4] for f in found] == [("gpu_model", "H100", "ticket", "static_association")], found


def test_an_association_that_began_on_day_five_still_pages_against_the_older_units(fl: SimpleNamespace) -> None:
    """The same association from day five on, eight a day: found on day seven, it pages as new.

    Its "before" is the part of the long run older than the week's scale (12 units,
    at the fleet's share: the days before it began), which holds more than its first day.
    """
    alerts = [a for a in fl.firing(fl.run(_slow_association(fl, 5, 8.0, 22), detectors=["hardware_correlation"]))
              if a.signature == SLOW_SIG]
    assert alerts and (alerts[0].attribute, alerts[0].value, alerts[0].severity, alerts[0].finding) == \
        ("gpu_model", "H100", "page", "cohort_outbreak"), [(a.severity, a.summary, a.notes) for a in alerts]
    assert "12.2 earlier units" in alerts[0].notes[-1], alerts[0].notes
