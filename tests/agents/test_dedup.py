"""Floods become counted events; counter totals become deltas."""

from __future__ import annotations

from fleetepi.agents.telemetry.dedup import OVERFLOW_TEMPLATE, CounterDeltas, Deduplicator, template
from fleetepi.agents.telemetry.kmsg import FakeLogSource, KernelLogSource
from fleetepi.contract import Telemetry, ts_from_ms

XID = "[{t:>12.6f}] NVRM: Xid (PCI:0000:cb:00): 13, pid=1797828, name=pt_main_thread, Graphics SM Warp Exception on (GPC {g}, TPC 7, SM 0): Illegal Instruction Parameter"


def test_100k_identical_lines_become_a_handful_of_counted_events():
    reader = FakeLogSource(XID.format(t=100 + i * 1e-4, g=7) for i in range(100_000))
    src = KernelLogSource("h", reader, dedup_interval_s=10, max_lines_per_poll=20_000)
    events = []
    for step in range(8):  # one poll a second; 20k lines each while the flood lasts
        events += src.poll(1_000_000 + step * 1000)
    events += src.drain(1_000_000 + 9000)
    assert 2 <= len(events) <= 3
    assert events[0].count is None  # the first one goes out at once, uncounted
    assert sum(e.n for e in events) == 100_000  # nothing lost, nothing double-counted
    assert {(e.kind, e.code, e.device) for e in events} == {("xid", 13, "0000:cb:00")}


def test_flood_with_29_distinct_messages_keeps_29_keys():
    lines = []
    for _ in range(300):
        for k in range(29):
            lines.append(f"NVRM: Xid (PCI:0000:cb:00): {k + 1}, pid=1, name=x, message kind {chr(65 + k % 26)}{k // 26}")
    src = KernelLogSource("h", FakeLogSource(lines), dedup_interval_s=60, max_lines_per_poll=100_000)
    first = list(src.poll(0))
    rest = src.drain(5000)
    assert len(first) == 29 and len(rest) == 29
    assert sum(e.n for e in first + rest) == 300 * 29


def test_numbers_in_messages_do_not_split_keys():
    assert template("Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0)") == template("Graphics SM Warp Exception on (GPC 1, TPC 0, SM 1)")
    assert template("Ch 00000013, engmask 00000101") == template("Ch 00000019, engmask 00000101")
    assert template("NETIR_LINK_EVT Fatal") != template("NETIR_BER_EVENT Nonfatal")


def _ev(code: int, device: str = "0000:01:00", msg: str = "m") -> Telemetry:
    return Telemetry(ts=ts_from_ms(0), host="h", kind="xid", code=code, device=device, message=msg)


def test_new_interval_emits_first_event_again():
    d = Deduplicator(interval_s=10)
    assert d.offer(_ev(13), 0) is not None
    assert d.offer(_ev(13), 1000) is None
    assert d.flush(5000) == []  # interval not over
    (counted,) = d.flush(10_000)
    assert counted.count == 1
    assert d.offer(_ev(13), 11_000) is not None  # a new interval starts fresh


def test_key_cap_folds_new_keys_without_losing_counts():
    d = Deduplicator(interval_s=10, max_keys=4)
    out = [d.offer(_ev(13, msg=f"variant {chr(65 + i)}"), 0) for i in range(10)]
    assert sum(e is not None for e in out) == 4
    rest = d.flush(0, force=True)
    assert sum(e.n for e in rest) == 6 and {e.message for e in rest} == {"variant E"}
    assert len(d._slots) == 0 and OVERFLOW_TEMPLATE == "*"


def test_counter_deltas_baseline_increase_and_reset():
    c = CounterDeltas()
    assert c.update(("mc0", "ce"), 12) is None  # first reading: baseline, not an event
    assert c.update(("mc0", "ce"), 12) == 0
    assert c.update(("mc0", "ce"), 15) == 3
    assert c.update(("mc0", "ce"), 2) == 2  # counter reset (driver reload): count from zero
    assert c.resets == 1
    assert c.update(("mc1", "ce"), 7) is None  # keys are independent
