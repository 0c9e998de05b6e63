"""Invariants under random input: dedup never loses or invents errors; the spool is a FIFO across restarts."""

from __future__ import annotations

import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetepi.agents.publish.spool import Spool
from fleetepi.agents.telemetry.dedup import Deduplicator
from fleetepi.contract import Telemetry, ts_from_ms

event = st.builds(
    lambda code, dev, msg, count: Telemetry(ts=ts_from_ms(0), host="h", kind="xid", code=code, device=dev,
                                            message=msg, count=count),
    st.sampled_from([13, 31, 79]), st.sampled_from(["0000:01:00", "0000:cb:00"]),
    st.sampled_from(["GPC 1, TPC 0", "GPC 7, TPC 7", "MMU Fault", "fallen off"]), st.none() | st.integers(1, 50),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(event, st.integers(0, 3000)), max_size=300), st.integers(1, 8))
def test_dedup_conserves_error_counts(stream, max_keys):
    d = Deduplicator(interval_s=1.0, max_keys=max_keys)
    now, out = 0, []
    for ev, gap in stream:
        now += gap
        out += d.flush(now)
        first = d.offer(ev, now)
        if first is not None:
            out.append(first)
    out += d.flush(now, force=True)
    assert sum(e.n for e in out) == sum(e.n for e, _ in stream)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.binary(min_size=0, max_size=40).map(lambda b: ("append", b)),
                          st.integers(1, 5).map(lambda n: ("ack", n)),
                          st.just(("restart", None))), max_size=80))
def test_spool_is_a_fifo_across_restarts(ops):
    with tempfile.TemporaryDirectory() as tmp:
        spool = Spool(tmp, segment_bytes=64, fsync=False)
        model: list[bytes] = []
        for op, arg in ops:
            if op == "append":
                spool.append(arg)
                model.append(arg)
            elif op == "ack":
                recs = spool.read_batch(arg)
                assert [d for d, _ in recs] == model[: len(recs)]
                if recs:
                    spool.commit(recs[-1][1], len(recs))
                    del model[: len(recs)]
            else:
                spool.close()
                spool = Spool(tmp, segment_bytes=64, fsync=False)
            assert spool.pending == len(model)
            assert spool.pending_bytes == sum(len(m) + 8 for m in model)
        assert [d for d, _ in spool.read_batch(1000)] == model
        spool.close()
