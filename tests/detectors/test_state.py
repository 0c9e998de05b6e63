"""Properties of the whole detector set: restore equivalence, determinism, partitioning, bounds."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetepi.contract import Event
from fleetepi.contract.codec import encode
from fleetepi.detectors import DetectorConfig, Engine

#: A short warm-up so that a day and a half of stream holds real alerts.
CFG = DetectorConfig(warmup_s=3600.0)


def stream(fl: SimpleNamespace, seed: int) -> list[Event]:
    """A day and a half: background, telemetry, and one outbreak of each kind at seeded times."""
    rng = random.Random(seed)
    end = fl.T0 + 36 * fl.HOUR
    at = [fl.T0 + rng.randrange(14 * fl.HOUR, 30 * fl.HOUR) for _ in range(4)]  # after 12 h of baselines
    outbreaks = (
        [fl.crash(at[0] + i * 4 * fl.MIN, f"h{rng.randrange(100):04d}", "new!sig", job=f"n{i}") for i in range(10)]
        + [fl.crash(at[1] + i * 10 * fl.MIN, "h0007", f"x{i}!f", fault_class="non_canonical") for i in range(10)]
        + [fl.crash(at[2] + i * 10 * fl.MIN, f"h{40 + i:04d}", "rack!bug", job=f"r{i}") for i in range(14)]
        + [fl.tel(at[3] + i * 5 * fl.MIN, f"h{60 + i:04d}", "xid", 79) for i in range(7)]
        + [fl.tel(at[3] + i * 5 * fl.MIN, "h0090", "ecc_uncorrected", count=3) for i in range(12)]
    )
    tel = [fl.tel(t + i * 7000, f"h{i:04d}", "thermal", value=60.0 + rng.random() * 35, device="GPU1")
           for t in range(fl.T0, end, 2 * fl.HOUR) for i in range(100)]
    return fl.merged(fl.hosts(100), fl.background(100, fl.T0, end, seed=seed), tel, outbreaks)


def run_counts(events: list[Event]) -> dict:
    eng = Engine(CFG)
    for ev in events:
        eng.process(ev)
    eng.advance(events[-1].ts_ms + 2 * 86_400_000)
    return eng.counts()


def run(events: list[Event], detectors: list[str] | None = None) -> list[bytes]:
    eng = Engine(CFG, detectors=detectors)
    out = []
    for ev in events:
        out.extend(eng.process(ev))
    out.extend(eng.advance(events[-1].ts_ms + 2 * 86_400_000))
    return [encode(a) for a in out]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), cut=st.floats(0.05, 0.95))
def test_restored_engine_gives_the_same_future_alerts(fl: SimpleNamespace, seed: int, cut: float) -> None:
    events = stream(fl, seed)
    whole = run(events)
    k = int(len(events) * cut)
    first = Engine(CFG)
    before = [encode(a) for ev in events[:k] for a in first.process(ev)]
    # Through JSON: the snapshot must be plain data (str keys, lists, numbers).
    saved = json.loads(json.dumps(first.snapshot()))
    second = Engine(CFG)
    assert second.restore(saved)
    after = [encode(a) for ev in events[k:] for a in second.process(ev)]
    after += [encode(a) for a in second.advance(events[-1].ts_ms + 2 * 86_400_000)]
    assert before + after == whole
    assert second.counts() == run_counts(events)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000))
def test_deterministic_and_alerting(fl: SimpleNamespace, seed: int) -> None:
    events = stream(fl, seed)
    a, b = run(events), run(events)
    assert a == b
    kinds = {json.loads(x)["kind"] for x in a}
    assert {"signature_spike", "host_spike", "hardware_correlation", "telemetry_spike"} <= kinds


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), jitter_s=st.integers(1, 110))
def test_arrival_order_within_the_settle_time_changes_nothing(fl: SimpleNamespace, seed: int, jitter_s: int) -> None:
    """Events reordered in transit (two partitions merged, a resent spool) by less than ``settle_s``:
    the same alerts, bit for bit, and the same counts. This is what makes a stream worker's fleet
    partition give the alerts of a replay however its input was interleaved."""
    events = stream(fl, seed)
    rng = random.Random(seed)
    shuffled = sorted(events, key=lambda e: e.ts_ms + rng.randrange(jitter_s * 1000) * (type(e).__name__ != "Host"))
    assert run(shuffled) == run(events)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), every=st.integers(1, 400))
def test_extra_advances_between_events_change_nothing(fl: SimpleNamespace, seed: int, every: int) -> None:
    """A stream worker's partition moves its clock when its sources' watermarks pass, at instants
    that depend on batching (``fleetepi.stream.state``): those advances must not change counts or alerts."""
    events = stream(fl, seed)
    cfg = DetectorConfig(warmup_s=3600.0, key_ttl_s=4 * 3600.0)  # TTL sweeps within the day and a half
    plain = Engine(cfg)
    want = [encode(a) for ev in events for a in plain.process(ev)]
    rng = random.Random(seed)
    nudged = Engine(cfg)
    got: list[bytes] = []
    for i, ev in enumerate(events):
        if i and i % every == 0 and ev.ts_ms > events[i - 1].ts_ms:
            # event time passes to somewhere before this event, as a horizon would
            got.extend(encode(a) for a in nudged.advance(rng.randrange(events[i - 1].ts_ms, ev.ts_ms)))
        got.extend(encode(a) for a in nudged.process(ev))
    # at the end of input both decide the rest (the engine's time trails the newest event by the
    # events of its leading host, so without it the two would differ in what is decided yet)
    want.extend(encode(a) for a in plain.flush())
    got.extend(encode(a) for a in nudged.flush())
    assert got == want
    assert nudged.counts() == plain.counts()


def test_memory_is_bounded_by_max_keys(fl: SimpleNamespace) -> None:
    cfg = DetectorConfig(max_keys=50, warmup_s=0.0)
    eng = Engine(cfg, detectors=["signature_spike", "hardware_correlation"])
    for h in fl.hosts(20):
        eng.process(h)
    for i in range(2000):  # 2,000 distinct signatures, one crash each
        eng.process(fl.crash(fl.T0 + i * 1000, f"h{i % 20:04d}", f"one-off-{i}"))
    eng.flush()
    sig, corr = eng.detectors
    assert len(sig.core.keys) <= 50  # type: ignore[attr-defined]
    assert len(eng.cases.crash_units.keys) <= 2000


def test_every_alert_follows_the_alert_schema(fl: SimpleNamespace) -> None:
    """Firing and resolved alerts of every kind validate against the contract's JSON Schema."""
    from importlib import resources

    import jsonschema

    schema = json.loads(resources.files("fleetepi.contract").joinpath("schemas/alert.schema.json").read_text())
    alerts = [json.loads(a) for a in run(stream(fl, 7))]
    assert {a.get("state", "firing") for a in alerts} == {"firing", "resolved"}
    for a in alerts:
        jsonschema.validate(a, schema)
        assert a["summary"] and a["notes"] and a["score"] >= 0
