"""The spool: bounded, fsync'd, ordered, survives restarts and torn writes."""

from __future__ import annotations

import os

import pytest

from fleetepi.agents.exceptions import SpoolFull
from fleetepi.agents.publish.spool import Spool


def drain(spool: Spool, batch: int = 7) -> list[bytes]:
    out = []
    while True:
        recs = spool.read_batch(batch)
        if not recs:
            return out
        out += [d for d, _ in recs]
        spool.commit(recs[-1][1], len(recs))


def test_order_is_kept_across_segments(tmp_path, registry):
    s = Spool(tmp_path, segment_bytes=256, registry=registry)
    data = [f"event-{i:04d}".encode() for i in range(200)]
    for d in data:
        s.append(d)
    assert s.pending == 200
    assert registry.get_sample_value("fleetepi_agent_spool_messages") == 200
    assert registry.get_sample_value("fleetepi_agent_spool_bytes") == sum(len(d) + 8 for d in data)
    assert drain(s) == data
    assert s.pending == 0 and s.pending_bytes == 0
    assert registry.get_sample_value("fleetepi_agent_spool_bytes") == 0
    assert len(list(tmp_path.glob("*.seg"))) == 1  # acknowledged segments are deleted


def test_survives_restart_with_partial_ack(tmp_path):
    s = Spool(tmp_path, segment_bytes=100)
    for i in range(30):
        s.append(b"r%d" % i)
    recs = s.read_batch(10)
    s.commit(recs[-1][1], 10)
    s.close()  # agent stops (or dies: every append was fsync'd)
    again = Spool(tmp_path, segment_bytes=100)
    assert again.pending == 20
    assert drain(again) == [b"r%d" % i for i in range(10, 30)]


def test_cap_drops_newest_loudly(tmp_path, registry, caplog):
    s = Spool(tmp_path, max_bytes=100, registry=registry)
    for _ in range(8):
        s.append(b"x" * 4)  # 12 bytes a record: 8 fit in 100
    with pytest.raises(SpoolFull):
        s.append(b"y" * 4)
    assert registry.get_sample_value("fleetepi_agent_spool_dropped_total") == 1
    assert "DROPPING" in caplog.text
    assert drain(s) == [b"xxxx"] * 8  # what was stored is intact and in order
    s.append(b"z" * 4)  # room again once acknowledged
    assert s.pending == 1


def test_every_append_is_fsynced(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    s = Spool(tmp_path)
    calls.clear()
    for i in range(5):
        s.append(b"e%d" % i)
    assert len(calls) == 5


def test_torn_tail_is_cut_and_the_rest_kept(tmp_path, caplog):
    s = Spool(tmp_path)
    for i in range(5):
        s.append(b"good-%d" % i)
    s.close()
    seg = next(tmp_path.glob("*.seg"))
    with open(seg, "ab") as fh:
        fh.write(b"\x00\x00\x00\x10\xde\xad")  # a header cut by a power failure
    again = Spool(tmp_path)
    assert "torn or corrupt" in caplog.text
    assert again.pending == 5
    again.append(b"after")
    assert drain(again) == [b"good-%d" % i for i in range(5)] + [b"after"]


def test_corrupt_record_checksum(tmp_path):
    s = Spool(tmp_path)
    for i in range(3):
        s.append(b"rec-%d" % i)
    s.close()
    seg = next(tmp_path.glob("*.seg"))
    raw = bytearray(seg.read_bytes())
    raw[-1] ^= 0xFF  # flip a bit in the last record
    seg.write_bytes(bytes(raw))
    assert drain(Spool(tmp_path)) == [b"rec-0", b"rec-1"]
