"""signature_spike: one table of scenarios, a comment per case; then episode rules."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleetepi.detectors import DetectorConfig


def _outbreak(fl: SimpleNamespace, what: str, at: int) -> list:
    c = fl.crash
    if what == "none":
        return []
    if what == "new_signature":       # 10 crashes of a never-seen signature on 10 hosts in 30 min
        return [c(at + i * 3 * fl.MIN, f"h{i * 13:04d}", "libunwind!step | libgcc!unwind") for i in range(10)]
    if what == "job_burst":           # one job dies on 64 hosts within a minute: one incident
        return [c(at + i * 900, f"h{i:04d}", "libnccl!watchdog", job="train-7") for i in range(64)]
    if what == "existing_x10":        # the busiest background signature at ~10x for 2 hours
        return [c(at + i * 6 * fl.MIN, f"h{(i * 7) % 200:04d}", "sig00", job=f"o{i}") for i in range(20)]
    if what == "one_host_loop":       # one host crash-looping on one signature: host_spike's business
        return [c(at + i * fl.MIN, "h0042", "sig05") for i in range(30)]
    raise AssertionError(what)


@pytest.mark.parametrize(("what", "fires"), [
    ("none", False),            # a healthy fleet with a daily cycle: silent
    ("new_signature", True),    # the founding libunwind race: pages
    ("job_burst", False),       # 64 crashes, one job: one unit, no page
    ("existing_x10", True),     # a known signature rising tenfold: pages
    ("one_host_loop", False),   # one source counts once per window
])
def test_signature_spike_table(fl: SimpleNamespace, what: str, fires: bool) -> None:
    at = fl.T0 + 2 * fl.DAY + 10 * fl.HOUR
    events = fl.merged(fl.hosts(), fl.background(200, fl.T0, fl.T0 + 3 * fl.DAY), _outbreak(fl, what, at))
    alerts = fl.firing(fl.run(events, detectors=["signature_spike"]))
    assert bool(alerts) is fires, [a.summary for a in alerts]
    if fires:
        assert len(alerts) == 1                              # one alert per episode, no storm
        a = alerts[0]
        assert a.kind == "signature_spike" and a.signature
        assert a.p_value is not None and a.p_value < DetectorConfig().sig_alpha
        assert a.observed is not None and a.expected is not None and a.observed > 3 * a.expected
        assert a.score > 0 and a.window_s and a.summary and a.notes
        assert a.severity == "page" and a.incident and a.incident.startswith("signature:")
        assert a.finding == ("new_signature" if what == "new_signature" else "signature_spike")
        # ts is the step boundary at which the cases that made it fire were folded (settled, in time order)
        ts_ms = int(a.ts.timestamp() * 1000)
        assert ts_ms % 300_000 == 0 and ts_ms > min(e.ts_ms for e in _outbreak(fl, what, at))


def test_nothing_fires_during_warm_up(fl: SimpleNamespace) -> None:
    at = fl.T0 + 3 * fl.HOUR
    events = fl.merged(fl.hosts(), _outbreak(fl, "new_signature", at))
    assert fl.firing(fl.run(events, detectors=["signature_spike"])) == []


def test_episode_resolves_and_cooldown_prevents_refiring(fl: SimpleNamespace) -> None:
    at = fl.T0 + 2 * fl.DAY
    first = _outbreak(fl, "new_signature", at)
    again_soon = _outbreak(fl, "new_signature", at + 4 * fl.HOUR)      # within cooldown after resolving
    much_later = _outbreak(fl, "new_signature", at + 3 * fl.DAY)      # a new episode
    events = fl.merged(fl.hosts(), fl.heartbeat(fl.T0, at + 5 * fl.DAY), first, again_soon, much_later)
    alerts = fl.run(events, detectors=["signature_spike"], end_ms=at + 5 * fl.DAY)
    states = [(a.state, a.ts.timestamp() * 1000 >= at + 3 * fl.DAY) for a in alerts]
    assert [s for s, _ in states].count("firing") == 2, [(a.state, a.ts) for a in alerts]
    assert states[0] == ("firing", False) and ("resolved", False) in states
    assert alerts[-1].state == "resolved"
    resolved = [a for a in alerts if a.state == "resolved"]
    assert all(a.p_value is None and a.signature for a in resolved)


def test_a_day_window_waits_for_a_baseline_that_saw_the_whole_day() -> None:
    """First seen at midnight, three times busier from noon on: 12 hours of mornings are no baseline for a day.

    Only the day window here (the short ones fire on a jump, as they should). Compared
    over [noon, next noon) with a profile learned from one morning, the day would be 3x
    its expectation; the window is tested only once the baseline holds a whole day before it.
    """
    from fleetepi.detectors.rate import rate_spike_from_config
    from fleetepi.detectors.windows import HOUR_MS

    cfg = DetectorConfig(warmup_s=12 * 3600.0, sig_windows_s=(86400.0,), dispersion_prior=0.01)
    spike = rate_spike_from_config(cfg)
    step = cfg.step_ms
    fired = []
    for b in range(47 * HOUR_MS // step):
        t = b * step
        for k in range(1 if t < 12 * HOUR_MS else 3):  # 12 an hour, then 36
            spike.observe("sig", 1.0, t + k)
        fired += [v for v in spike.decide(t + step, t + step) if v.state == "firing"]
    assert not fired, [(v.ts_ms / HOUR_MS, v.window_s, v.observed, v.expected) for v in fired]


def _hourly(spike, counts_per_hour, hours: int, key: str = "sig") -> list:
    """Feed ``counts_per_hour(h)`` units an hour for ``hours`` hours; the firing verdicts."""
    from fleetepi.detectors.windows import HOUR_MS

    step = spike.step_ms
    fired = []
    for b in range(hours * HOUR_MS // step):
        t = b * step
        h = t // HOUR_MS
        if t % HOUR_MS == 0:
            for k in range(counts_per_hour(h)):
                spike.observe(key, 1.0, t + k)
        fired += [v for v in spike.decide(t + step, t + step) if v.state == "firing"]
    return fired


def test_a_sparse_key_is_not_tested_as_if_its_rate_were_known() -> None:
    """Three cases in four days say little about a key's rate: ten in a day is no proof of a rise.

    Before, a key seen 3 times in 4 days (0.75 a day) paged at 12 in a day
    (p ~ 1e-8 against an exact rate): on a noisy fleet's long tail, with
    thousands of such keys, some day always brings one. The expectation's own
    uncertainty now widens the test; a busy key at a third of the ratio still pages.
    """
    from fleetepi.detectors.rate import rate_spike_from_config

    cfg = DetectorConfig(warmup_s=12 * 3600.0, sig_windows_s=(86400.0,), dispersion_prior=0.05)
    quiet_days = {10, 40, 70}                                     # three cases in four days
    sparse = _hourly(rate_spike_from_config(cfg),
                     lambda h: 1 if h in quiet_days or (h >= 96 and h % 2 == 0 and h < 120) else 0, 130)
    assert not sparse, [(v.observed, v.expected, v.p_value) for v in sparse]
    # a busy key (10 an hour) at a far smaller ratio (x4) is known well enough to page
    busy = _hourly(rate_spike_from_config(cfg), lambda h: 10 if h < 96 else 40, 130)
    assert busy and busy[0].window_s == 86400.0


def test_the_first_day_windows_use_the_hourly_swing_until_days_are_learned() -> None:
    """Day two against day one: until keys have shown their day-to-day swing, the hourly one stands in.

    Forty keys swinging strongly hour to hour (phi ~ 1); none has two days of its
    own. The day prior used to stay at the configured 0.1 until then, so a key
    whose second day ran at four times its first paged at the first day window.
    """
    from fleetepi.detectors.rate import rate_spike_from_config
    from fleetepi.detectors.windows import HOUR_MS

    cfg = DetectorConfig(warmup_s=12 * 3600.0, sig_windows_s=(86400.0,))
    spike = rate_spike_from_config(cfg)
    step = spike.step_ms
    fired = []
    for b in range(50 * HOUR_MS // step):
        t = b * step
        h = t // HOUR_MS
        if t % HOUR_MS == 0:
            for j in range(40):                                   # hours of 0 or 20 at random-looking turns
                n = 20 if (h * 7 + j * 13) % 5 == 0 else 0
                if j == 0:
                    n = 6 if h < 24 else 24                       # the key at four times on day two
                for k in range(n):
                    spike.observe(f"k{j}", 1.0, t + k)
        fired += [v for v in spike.decide(t + step, t + step) if v.state == "firing" and v.key == "k0"]
    assert not fired, [(v.ts_ms / HOUR_MS, v.observed, v.expected) for v in fired]
    assert spike.disp_prior_d == spike.disp_prior_h > 0.5


def test_the_day_swing_is_learned_from_one_day_each_before_the_hourly_stands_in_for_it() -> None:
    """Day four of a quiet fleet: the day prior is the days' own swing, not the hours' (which holds more).

    Thirty keys at half a unit an hour on a daily cycle, their days drawn from
    a gamma of shape 4 (phi 0.25). The hourly moments are taken against hour
    slots learned from three days, and hold their error too (~0.6 here); the
    daily ones need a key's second whole day and waited for its third, so
    until day five the hourly stood in for the day windows and for every
    window's baseline error.
    """
    import math

    import numpy as np

    from fleetepi.detectors.rate import rate_spike_from_config
    from fleetepi.detectors.windows import HOUR_MS

    spike = rate_spike_from_config(DetectorConfig())
    rng = np.random.default_rng(5)
    days = rng.gamma(4.0, 1 / 4.0, size=(30, 5))
    step = spike.step_ms
    for b in range(90 * HOUR_MS // step):
        t = b * step
        if t % HOUR_MS == 0:
            h = t // HOUR_MS
            load = 1.0 + 0.4 * math.sin(2 * math.pi * (h % 24 - 9) / 24)
            for j in range(30):
                for k in range(int(rng.poisson(0.5 * load * days[j, h // 24]))):
                    spike.observe(f"k{j}", 1.0, t + 60_000 * k, f"h{int(rng.integers(2000))}")
        spike.decide(t + step, t + step)
    assert spike.disp_learned
    assert spike.disp_prior_d < 0.5 < spike.disp_prior_h, (spike.disp_prior_d, spike.disp_prior_h)


def _swinging_fleet(spike, factor_of, days: int, keys: int = 24, seed: int = 3, loops=lambda j, day: 0,
                    shape: float = 4.0, base: float = 3.0, extra_of=lambda j, hour: 0.0) -> list:
    """``keys`` signatures at ``base`` units an hour whose days swing as a gamma of ``shape`` (phi 1 / shape).

    Units come from 2,000 hosts at random. ``factor_of(key, day)`` multiplies a key's
    rate, ``extra_of(key, hour)`` adds units an hour (a spike), ``loops(key, day)`` hosts
    crash-loop on it (a unit an hour each, as the unit filter counts a loop); the firing
    verdicts are returned.
    """
    import numpy as np

    from fleetepi.detectors.windows import HOUR_MS

    rng = np.random.default_rng(seed)
    swing = rng.gamma(shape, 1.0 / shape, size=(keys, days))
    step = spike.step_ms
    fired = []
    for b in range(days * 24 * HOUR_MS // step):
        t = b * step
        if t % HOUR_MS == 0:
            h = t // HOUR_MS
            for j in range(keys):
                n = int(rng.poisson(base * swing[j, h // 24] * factor_of(j, h // 24)))
                extra = extra_of(j, h)
                if extra:
                    n += int(rng.poisson(extra))
                for k in range(n):
                    spike.observe(f"k{j}", 1.0, t + k, f"h{int(rng.integers(2000))}")
                for k in range(loops(j, h // 24)):
                    spike.observe(f"k{j}", 1.0, t + 100 + k, f"loop{k}")
        fired += [v for v in spike.decide(t + step, t + step) if v.state == "firing"]
    return fired


def test_a_deploy_that_triples_a_swinging_signature_pages_on_a_multi_day_window() -> None:
    """A signature x3 from day 8 on, in a fleet whose signatures swing by +-40 % from day to day.

    No single day of it is out of the ordinary for such a fleet at the page's alpha,
    so the hour-to-day windows never page; days of it are. The rise's days must not
    become the baseline meanwhile (it would absorb the excess, rate and swing, before
    a multi-day window could tell). The swinging neighbours do not page.
    """
    from fleetepi.detectors.rate import rate_spike_from_config

    def deploy(j: int, day: int) -> float:
        return 3.0 if j == 0 and day >= 8 else 1.0

    fired = _swinging_fleet(rate_spike_from_config(DetectorConfig()), deploy, 16, shape=6.0)
    assert [v.key for v in fired] == ["k0"], [(v.key, v.ts_ms / 3_600_000, v.window_s) for v in fired]
    v = fired[0]
    assert v.window_s > 2 * 86400.0 and v.observed > 2 * v.expected, (v.ts_ms / 3_600_000, v.window_s)
    assert any("sustained rise" in n for n in v.notes)
    # without the multi-day windows the same fleet never pages
    assert _swinging_fleet(rate_spike_from_config(DetectorConfig(sig_days=())), deploy, 16, shape=6.0) == []


def test_pods_crash_looping_for_days_are_no_sustained_rise() -> None:
    """Six pods crash-looping on one signature for four days: six units an hour, on six hosts.

    For the hour-to-day windows a loop is a unit an hour (the host detector tickets
    it); over days six of them triple the signature, as a deploy would. The multi-day
    windows count a (signature, host) once a day, so the loops add six a day, and
    nothing pages (counted hourly, the three-day window paged on day 11).
    """
    from fleetepi.detectors.rate import rate_spike_from_config

    fired = _swinging_fleet(rate_spike_from_config(DetectorConfig()), lambda j, day: 1.0, 16, shape=6.0,
                            loops=lambda j, day: 6 if j == 0 and 8 <= day < 12 else 0)
    assert fired == [], [(v.key, v.ts_ms / 3_600_000, v.window_s, v.observed, v.expected) for v in fired]


def test_a_key_low_on_its_first_day_is_not_an_outbreak_on_its_second() -> None:
    """A signature at a third of its level on day one and three times it on day two: a 9x day, in a swinging fleet.

    Its baseline was one day old: the short windows tested day two against
    that one day as if it were the key's level, and paged within hours. A
    young baseline's own day-to-day error now widens them.
    """
    from fleetepi.detectors.rate import rate_spike_from_config

    def first_days(j: int, day: int) -> float:
        return {0: 0.33, 1: 3.0}.get(day, 1.0) if j == 0 else 1.0

    fired = _swinging_fleet(rate_spike_from_config(DetectorConfig()), first_days, 3, shape=3.0)
    assert not [v for v in fired if v.key == "k0"], [(v.ts_ms / 3_600_000, v.observed, v.expected, v.window_s)
                                                    for v in fired]


def test_keys_seen_since_the_stream_began_wait_for_the_fleets_learned_swing() -> None:
    """Day two, before the fleet has shown how much its keys swing: thirty keys whose days swing as a gamma of 3.

    The fleet's dispersion is pooled from keys' folded hours, which begin a
    day after their first (the day window's guard band): from the end of the
    warm-up until then the configured 0.1 decided, and a key at 0.3 of its
    level on day one and 4x on day two paged within the first hours of day
    two, with an ordinary neighbour (on noisy tuning seeds 4 and 5 three
    busy signatures paged at 28-37 h on an ordinary second day). Keys seen
    since the stream began now wait for the learned value; a signature
    first seen after hours of watched silence, tested against a baseline of
    silence, still pages, during the warm-up's last hours as after it.
    """
    import numpy as np

    from fleetepi.detectors.rate import rate_spike_from_config
    from fleetepi.detectors.windows import HOUR_MS

    spike = rate_spike_from_config(DetectorConfig())
    rng = np.random.default_rng(2)
    swing = rng.gamma(3.0, 1 / 3.0, size=(30, 3))
    swing[0, 0], swing[0, 1] = 0.3, 4.0
    step = spike.step_ms
    fired = []
    for b in range(3 * 24 * HOUR_MS // step):
        t = b * step
        if t % HOUR_MS == 0:
            h = t // HOUR_MS
            for j in range(30):
                for k in range(int(rng.poisson(3.0 * swing[j, h // 24]))):
                    spike.observe(f"k{j}", 1.0, t + k, f"h{int(rng.integers(2000))}")
            if 30 <= h < 32:                                      # a new signature: 20 an hour on 20 hosts
                for k in range(20):
                    spike.observe("new", 1.0, t + 150_000 * k, f"n{k}")
            if h == 16 or 26 <= h < 28:                           # first seen after 16 silent hours: new too
                for k in range(1 if h == 16 else 20):
                    spike.observe("late", 1.0, t + 150_000 * k, f"l{k}")
        fired += [v for v in spike.decide(t + step, t + step) if v.state == "firing"]
    assert [(v.key, v.ts_ms // HOUR_MS) for v in fired] == [("late", 26), ("new", 30)], \
        [(v.key, v.ts_ms / HOUR_MS, v.observed, v.expected) for v in fired]
    assert spike.disp_learned and spike.disp_prior_h > 0.3


def test_a_multi_day_window_is_held_to_its_looks_not_to_the_hourly_alpha(fl: SimpleNamespace) -> None:
    """A signature at one an hour goes to 1.8 an hour from day 7 for good, among twenty ordinary ones.

    Only days of it tell, and by day 13 three of them hold 162 units against
    80. A seven-day or three-day window slides afresh about once per its
    length, so at the hourly window's alpha it was held seven or three times
    tighter per unit time, and the rise never paged in the fortnight (since
    a key's first day no longer inflates its daily dispersion, it pages at
    that alpha too, four and a half hours after it does per look).
    """
    import random

    rng = random.Random(3)
    sig, end = "libfoo.so!bar | trainer!step", fl.T0 + 14 * fl.DAY
    cases, t = [], fl.T0
    while True:
        t += int(rng.expovariate((1.8 if t >= fl.T0 + 7 * fl.DAY else 1.0) / fl.HOUR)) + 1
        if t >= end:
            break
        cases.append(fl.crash(t, f"h{rng.randrange(200):04d}", sig, job=f"j{rng.randrange(10 ** 6)}"))
    events = fl.merged(fl.hosts(200), fl.background(200, fl.T0, end, seed=3), cases)

    def pages(look_s: float) -> list:
        alerts = fl.run(events, DetectorConfig(sig_alpha_look_s=look_s), end_ms=end)
        return [a for a in fl.firing(alerts, "signature_spike") if a.signature == sig]

    fired = pages(86400.0)
    assert fired and "per look of 24 h" in " ".join(fired[0].notes or ()), [a.summary for a in fired]
    tight = pages(0.0)
    assert not tight or tight[0].ts > fired[0].ts, [(a.ts, a.summary) for a in (*fired, *tight)]


def _spiking_fleet(config: DetectorConfig, extra_of, days: int = 12) -> list:
    """24 signatures at 0.7 units an hour whose days swing as a gamma of 3, ``extra_of(key, hour)`` added."""
    from fleetepi.detectors.rate import rate_spike_from_config

    return _swinging_fleet(rate_spike_from_config(config), lambda j, day: 1.0, days, seed=5, shape=3.0, base=0.7,
                           extra_of=extra_of)


def test_a_spike_in_an_ordinary_day_pages_on_the_local_test() -> None:
    """A signature at 0.7 an hour gets 8 more an hour for four hours, in a fleet whose days swing (gamma of 3).

    Against its baseline alone that is p ~ 1e-5 at best: a whole day of a
    swinging signature can run that high. But its day's earlier hours ran at
    the usual level: against them (the day window's units, binomial at the
    window's share of the day's expectation) the four hours are far out, and
    the key pages within them. Without the local test nothing pages.
    """
    def spike(j: int, h: int) -> float:
        return 8.0 if j == 0 and 9 * 24 + 10 <= h < 9 * 24 + 14 else 0.0

    fired = _spiking_fleet(DetectorConfig(), spike)
    assert [v.key for v in fired] == ["k0"], [(v.key, v.ts_ms / 3_600_000, v.window_s) for v in fired]
    v = fired[0]
    assert 9 * 24 + 10 < v.ts_ms / 3_600_000 <= 9 * 24 + 14 and v.window_s < 86400.0, (v.ts_ms / 3_600_000, v.window_s)
    assert v.notes[0].startswith("local test:") and v.p_value is not None and v.p_value < 1e-7, v.notes
    assert [v.key for v in _spiking_fleet(DetectorConfig(sig_local_alpha=0.0), spike)] == []


def test_a_swinging_day_that_steps_up_at_midnight_does_not_page() -> None:
    """The same signature's whole ninth day at six times its level from midnight, the day before ordinary.

    The hours before midnight are at the old level, so the local test alone
    sees a spike an hour into the day; the baseline test says such a day is
    within the key's swing (p above ``sig_local_alpha``) and nothing pages.
    """
    def day_up(j: int, h: int) -> float:
        return 5 * 0.7 if j == 0 and 9 * 24 <= h < 10 * 24 else 0.0

    fired = _spiking_fleet(DetectorConfig(), day_up)
    assert fired == [], [(v.key, v.ts_ms / 3_600_000, v.window_s, v.observed, v.expected, v.notes[0]) for v in fired]
    # without the baseline's bound (any window at p < 0.5 against the key's swing) the step pages
    loose = _spiking_fleet(DetectorConfig(sig_local_alpha=0.5), day_up)
    assert [(v.key, v.notes[0][:11]) for v in loose] == [("k0", "local test:")], [v.notes for v in loose]
    with pytest.raises(Exception, match="sig_local_alpha"):
        DetectorConfig(sig_local_alpha=1.0)
