"""Line readers: a followed file across rotation, partial lines, /dev/kmsg-style records, journalctl."""

from __future__ import annotations

import os
import sys

import pytest

from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.telemetry.kmsg import FileReader, JournalReader, KmsgReader, LogFileSource


def test_file_follow_partial_lines_and_rotation(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("one\ntw")
    r = FileReader(log)
    assert r.read_lines(100) == ["one"]  # "tw" waits for its newline
    with open(log, "a") as fh:
        fh.write("o\nthree\n")
    assert r.read_lines(100) == ["two", "three"]
    os.rename(log, tmp_path / "kern.log.1")  # logrotate
    log.write_text("four\n")
    assert r.read_lines(100) == ["four"]
    log.write_text("")  # truncated in place (copytruncate)
    assert r.read_lines(100) == []  # seen as smaller than our position: reopened from the start
    with open(log, "a") as fh:
        fh.write("five\n")
    assert r.read_lines(100) == ["five"]
    r.close()


def test_file_from_end_and_bounded_reads(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("".join(f"old {i}\n" for i in range(10)))
    r = FileReader(log, from_start=False)
    assert r.read_lines(100) == []
    with open(log, "a") as fh:
        fh.write("".join(f"new {i}\n" for i in range(5)))
    assert r.read_lines(3) == ["new 0", "new 1", "new 2"]
    assert r.read_lines(3) == ["new 3", "new 4"]


def test_missing_file_and_device_are_unavailable(tmp_path):
    with pytest.raises(SourceUnavailable, match="cannot read"):
        LogFileSource("h", path=str(tmp_path / "nope.log"))
    with pytest.raises(SourceUnavailable, match="cannot open"):
        KmsgReader(str(tmp_path / "kmsg"))


def test_kmsg_unreadable_names_the_fix(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file; the permission message cannot be provoked")
    dev = tmp_path / "kmsg"
    dev.write_text("")
    dev.chmod(0)
    with pytest.raises(SourceUnavailable, match="no permission.*CAP_SYSLOG"):
        KmsgReader(str(dev))


def test_kmsg_records_through_a_fifo(tmp_path):
    """/dev/kmsg returns one record per read(); a FIFO written record by record behaves the same."""
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    r = KmsgReader(str(fifo), from_start=True)
    w = os.open(fifo, os.O_WRONLY)
    try:
        os.write(w, b"4,1201,170053881,-;NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013\n SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n")
        assert r.read_lines(10) == ["4,1201,170053881,-;NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013"]
        assert r.read_lines(10) == []  # non-blocking: nothing more now
    finally:
        os.close(w)
        r.close()


def test_journal_reader_runs_a_child_and_reports_its_exit():
    r = JournalReader([sys.executable, "-c", "print('NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.')"])
    lines: list[str] = []
    r._proc.wait(timeout=10)
    lines += r.read_lines(10)  # what it printed comes out before the news of its exit
    with pytest.raises(SourceUnavailable, match="exited with status 0"):
        r.read_lines(10)
    assert lines == ["NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."]
    with pytest.raises(SourceUnavailable, match="not found"):
        JournalReader(["no-such-journalctl-binary"])
