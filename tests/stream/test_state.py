"""The per-partition fold: deterministic whatever the arrival order, and snapshots round-trip."""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest

from fleetepi.contract import Crash, Host, decode_event, encode
from fleetepi.detectors import DetectorConfig
from fleetepi.stream.checkpoint import CheckpointStore
from fleetepi.stream.deadletter import KEEP_BYTES, decode_letter, encode_letter, make_letter, original_value
from fleetepi.stream.partitioning import bundle, read_bundle, split_bundles, stages, unbundle
from fleetepi.stream.state import IDLE_MARK, PartitionState

FLEET = next(s for s in stages() if s.name == "fleet")


@pytest.fixture(scope="module")
def small_stream() -> list[Any]:
    from fleetepi.simulate import SimConfig, simulate

    return list(simulate(SimConfig(hosts=60, days=1.0, seed=2)).events())


def host_log(events: list[Any]) -> list[tuple[int, str, dict[str, str]]]:
    return sorted(((e.ts_ms, e.host, e.attributes) for e in events if isinstance(e, Host)), key=lambda h: h[0])


def source_bundles(events: list[Any], n_sources: int, per_bundle: int) -> list[list[bytes]]:
    """Crashes split into ``n_sources`` source partitions, one bundle per input batch."""
    return batched_bundles(events, n_sources, per_bundle, per_bundle)


def fold_interleaved(per_source: list[list[bytes]], hosts: Any, seed: int, dup: bool = False) -> PartitionState:
    st = PartitionState(FLEET, 0, DetectorConfig(), hosts)
    st.source_ids = list(range(len(per_source)))
    queues = [list(b) for b in per_source]
    rng = random.Random(seed)
    offset = 0
    while any(queues):
        q = rng.choice([q for q in queues if q])
        value = q[0] if dup and rng.random() < 0.3 else q.pop(0)  # re-sent bundle: a duplicate
        st.apply_bundle(offset, value)
        offset += 1
    return st


def test_merge_is_independent_of_arrival_order(small_stream: list[Any]) -> None:
    hosts = host_log(small_stream)
    per_source = source_bundles(small_stream, n_sources=3, per_bundle=7)
    states = [fold_interleaved(per_source, hosts, seed) for seed in range(4)]
    states.append(fold_interleaved(per_source, hosts, 99, dup=True))
    first = states[0].engine.counts()
    assert any(first.values()), "the stream must reach the detectors"
    for st in states[1:]:
        assert st.engine.counts() == first
        assert st.engine.watermark_ms == states[0].engine.watermark_ms


def batched_bundles(events: list[Any], n_sources: int, per_batch: int, per_bundle: int) -> list[list[bytes]]:
    """Crashes cut as an input stage cuts them: batches of ``per_batch``, each split in bundles (``split_bundles``)."""
    split: list[list[Any]] = [[] for _ in range(n_sources)]
    for e in events:
        if isinstance(e, Crash):
            split[hash(e.host) % n_sources].append(e)
    out = []
    for src, evs in enumerate(split):
        bundles: list[bytes] = []
        for i in range(0, len(evs), per_batch):
            chunk = evs[i:i + per_batch]
            recs = [(i + j, e.ts_ms, encode(e)) for j, e in enumerate(chunk)]
            bundles.extend(split_bundles(src, max(e.ts_ms for e in chunk), evs[0].ts_ms, recs,
                                         max_records=per_bundle))
        out.append(bundles)
    return out


def test_merge_is_independent_of_how_the_input_was_batched(small_stream: list[Any]) -> None:
    # Regression: every bundle of a batch used to carry the batch's watermark, so the merge ran
    # ahead of the batch's later bundles and folded their events late (kill -9 test counts).
    hosts = host_log(small_stream)
    ref = fold_interleaved(batched_bundles(small_stream, 2, 1, 500), hosts, 0).engine.counts()
    assert any(ref.values())
    for per_batch, per_bundle, seed in ((40, 7, 1), (300, 11, 2), (10_000, 3, 3)):
        st = fold_interleaved(batched_bundles(small_stream, 2, per_batch, per_bundle), hosts, seed)
        assert st.engine.counts() == ref, (per_batch, per_bundle)


def test_split_bundles_never_promise_past_a_later_bundle() -> None:
    recs = [(o, 1000 + 10 * o, b"e") for o in range(12)]
    parts = [read_bundle(v) for v in split_bundles(4, 1110, 1000, recs, caught_up=True, max_records=5)]
    assert [len(b.records) for b in parts] == [5, 5, 2]
    assert [r for b in parts for r in b.records] == recs
    for i, b in enumerate(parts[:-1]):
        later = [ts for p in parts[i + 1:] for _, ts, _ in p.records]
        assert b.watermark_ms < min(later) and not b.caught_up
    assert parts[-1].watermark_ms == 1110 and parts[-1].caught_up
    (empty,) = [read_bundle(v) for v in split_bundles(4, 1110, 1000, [])]
    assert empty.records == [] and empty.watermark_ms == 1110


def test_snapshot_round_trips_through_msgpack(small_stream: list[Any], tmp_path: Any) -> None:
    hosts = host_log(small_stream)
    st = fold_interleaved(source_bundles(small_stream, 2, 5), hosts, 1)
    store = CheckpointStore(tmp_path)
    store.write("signature", 0, store.encode(st.snapshot()))
    fresh = PartitionState(FLEET, 0, DetectorConfig(), hosts)
    assert fresh.restore(store.load("signature", 0) or {})
    assert fresh.next_offset == st.next_offset
    assert fresh.engine.counts() == st.engine.counts()
    assert fresh.heap == st.heap and fresh.seen == st.seen


def test_snapshot_of_other_config_is_refused(small_stream: list[Any]) -> None:
    hosts = host_log(small_stream)
    st = fold_interleaved(source_bundles(small_stream, 2, 5), hosts, 1)
    other = PartitionState(FLEET, 0, DetectorConfig(step_s=60.0), hosts)
    assert not other.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(st.snapshot())))
    assert other.next_offset == 0


def test_unreadable_checkpoint_means_rebuild(tmp_path: Any) -> None:
    store = CheckpointStore(tmp_path)
    store.path("crashes", 3).write_bytes(b"\xc1 not msgpack")
    assert store.load("crashes", 3) is None
    assert store.load("crashes", 4) is None


def test_bundle_round_trip() -> None:
    recs = [(5, 1000, b'{"a":1}'), (6, 1001, b"")]
    assert unbundle(bundle(3, 1001, 1000, recs)) == (3, 1001, 1000, recs)


@pytest.mark.parametrize("raw,reason", [
    (b"{", "malformed_json"),                                        # broken JSON
    (b"[1,2]", "not_an_object"),                                     # JSON, but not an object
    (b'{"schema":"fleetepi.host/v1","ts":"2026-11-01T00:00:00Z","host":"h","attributes":{}}', "unknown_schema"),
])  # the last: a valid host record on the crashes topic
def test_input_rejections_carry_the_reason(raw: bytes, reason: str) -> None:
    st = PartitionState(stages()[0], 0, DetectorConfig(), [])
    alerts, event, _, bad = st.apply(7, raw)
    assert event is None and alerts == [] and bad is not None and bad.reason == reason
    assert st.next_offset == 8  # a dead letter is not retried


def test_dead_letter_keeps_bytes_and_truncates_big_ones() -> None:
    small = make_letter("malformed_json", "x", "t", 1, 2, b"k", b"\x00\x01")
    assert original_value(decode_letter(encode_letter(small))) == b"\x00\x01" and not small.truncated
    big = make_letter("too_large", "x", "t", 1, 2, None, b"y" * (KEEP_BYTES + 1))
    assert big.truncated and big.size == KEEP_BYTES + 1 and len(original_value(big)) == KEEP_BYTES


def test_decoded_events_are_what_was_sent(small_stream: list[Any]) -> None:
    crash = next(e for e in small_stream if isinstance(e, Crash))
    assert decode_event(encode(crash)) == crash


def test_a_quiet_source_holds_events_until_an_idle_mark(small_stream: list[Any]) -> None:
    hosts = host_log(small_stream)
    (only,) = source_bundles(small_stream, n_sources=1, per_bundle=50)
    st = PartitionState(FLEET, 0, DetectorConfig(), hosts)
    st.source_ids = [0, 1]  # source 1 never sends anything
    for off, value in enumerate(only):
        st.apply_bundle(off, value)
    assert st.heap and not any(st.engine.counts().values())
    newest = max(st.src_wm.values())
    st.apply_bundle(len(only), bundle(IDLE_MARK, newest, None, []))
    assert not st.heap and any(st.engine.counts().values())


def test_a_caught_up_source_holds_nothing_back_until_it_forwards_again(small_stream: list[Any]) -> None:
    hosts = host_log(small_stream)
    (only,) = source_bundles(small_stream, n_sources=1, per_bundle=50)
    st = PartitionState(FLEET, 0, DetectorConfig(), hosts)
    st.source_ids = [0, 1]
    half = len(only) // 2
    for off, value in enumerate(only[:half]):
        st.apply_bundle(off, value)
    assert st.heap  # source 1 has said nothing: everything waits
    st.apply_bundle(half, bundle(1, None, None, [], caught_up=True))  # source 1 is at the end of its log
    assert not st.heap and any(st.engine.counts().values())
    first_ts = unbundle(only[0])[2]
    st.apply_bundle(half + 1, bundle(1, first_ts, first_ts, []))  # source 1 behind again: it holds
    for off, value in enumerate(only[half:], start=half + 2):
        st.apply_bundle(off, value)
    assert st.heap
    again = PartitionState(FLEET, 0, DetectorConfig(), hosts)
    assert again.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(st.snapshot())))
    assert again.src_idle == st.src_idle == set() and len(again.heap) == len(st.heap)
