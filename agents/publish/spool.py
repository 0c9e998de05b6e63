"""A bounded, fsync'd, ordered on-disk spool: the agent's write-ahead log.

Every event is appended here *before* it is sent, and only the delivery
acknowledgement moves the read cursor. So an event survives a broker
outage, an agent restart and a crash of the agent in mid-send, and events
leave in the order they were made. (The price: an event whose ack was lost
in a crash is sent again; consumers see at-least-once delivery.)

Layout of the directory::

    00000000000000000001.seg   records: [u32 length][u32 crc32][payload]
    00000000000000000002.seg   a new segment every ``segment_bytes``
    cursor                     "<segment> <offset>": first unacknowledged record

A torn record at the end (power cut mid-append) fails its checksum and is
cut off with a warning; everything before it is kept. Segments wholly
behind the cursor are deleted. When pending bytes would exceed
``max_bytes`` the new event is dropped, logged and counted
(``fleetepi_agent_spool_dropped_total``): the cap is the only way to lose an
event, and it is loud. A full disk is the same case: the write that failed
is cut back off the segment (so no torn record hides the ones after it), the
event is dropped and counted as ``SpoolFull``, and the spool goes on as soon
as there is room again. Segments are written unbuffered, so nothing of a
failed record lingers in a buffer to land later, out of order.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

from prometheus_client import CollectorRegistry

from fleetepi.agents.exceptions import PublishError, SpoolFull
from fleetepi.agents.metrics import AgentMetrics

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">II")
SEGMENT_SUFFIX = ".seg"
MAX_RECORD_BYTES = 16 << 20

Position = tuple[int, int]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """Append-only segments + an acknowledged cursor.

    :param directory: where segments live (created).
    :param max_bytes: cap on pending (unacknowledged) bytes; beyond it appends are dropped.
    :param segment_bytes: size at which a new segment starts (old ones are deleted once acked).
    :param fsync: fsync every append (default; turn off only for benchmarks).
    :param registry: Prometheus registry for the spool gauges and drop counter.
    """

    def __init__(self, directory: str | Path, max_bytes: int = 256 << 20, segment_bytes: int = 8 << 20,
                 fsync: bool = True, registry: CollectorRegistry | None = None) -> None:
        if max_bytes <= 0 or segment_bytes <= 0:
            raise ValueError("max_bytes and segment_bytes must be > 0")
        self.dir = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self.do_fsync = fsync
        self.metrics = AgentMetrics.of(registry)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PublishError(f"cannot create spool directory {self.dir}: {exc.strerror or exc}") from None
        self.dropped = 0
        self._cursor: Position = (0, 0)
        self._read_fh: BinaryIO | None = None
        self._read_seg = -1
        self._recover()
        self._write_fh = open(self._seg_path(self._write_seg), "ab", buffering=0)
        self._update_metrics()

    # ---- layout ----
    def _seg_path(self, seg: int) -> Path:
        return self.dir / f"{seg:020d}{SEGMENT_SUFFIX}"

    def _segments(self) -> list[int]:
        return sorted(int(p.name[: -len(SEGMENT_SUFFIX)]) for p in self.dir.glob(f"*{SEGMENT_SUFFIX}")
                      if p.name[: -len(SEGMENT_SUFFIX)].isdigit())

    def _read_cursor(self) -> Position | None:
        try:
            seg_s, off_s = (self.dir / "cursor").read_text().split()
            return int(seg_s), int(off_s)
        except (OSError, ValueError):
            return None

    def _write_cursor(self, pos: Position) -> None:
        """Persist the cursor; on a full disk keep going on the one in memory.

        Not persisting it loses nothing: a restart resumes from the last
        cursor on disk (or the first segment left) and sends those records
        again, which at-least-once delivery already allows.
        """
        tmp = self.dir / "cursor.tmp"
        try:
            with open(tmp, "w") as fh:
                fh.write(f"{pos[0]} {pos[1]}\n")
                fh.flush()
                if self.do_fsync:
                    os.fsync(fh.fileno())
            os.replace(tmp, self.dir / "cursor")
        except OSError as exc:
            log.warning("spool: cannot persist the cursor in %s (%s); a restart would resend from the last one",
                        self.dir, exc.strerror or exc)
            return
        if self.do_fsync:
            _fsync_dir(self.dir)

    def _scan(self, seg: int, start: int) -> tuple[int, int, bool]:
        """(records, end offset of the last good record, torn?) of one segment from ``start``."""
        n, off, torn = 0, start, False
        with open(self._seg_path(seg), "rb") as fh:
            fh.seek(start)
            while True:
                head = fh.read(_HEADER.size)
                if not head:
                    break
                if len(head) < _HEADER.size:
                    torn = True
                    break
                length, crc = _HEADER.unpack(head)
                data = fh.read(length) if length <= MAX_RECORD_BYTES else b""
                if len(data) != length or zlib.crc32(data) != crc:
                    torn = True
                    break
                n += 1
                off += _HEADER.size + length
        return n, off, torn

    def _recover(self) -> None:
        segs = self._segments()
        cursor = self._read_cursor()
        if cursor is None or (segs and cursor[0] < segs[0]):
            cursor = (segs[0], 0) if segs else (1, 0)
        for s in segs:
            if s < cursor[0]:
                self._seg_path(s).unlink(missing_ok=True)
        segs = [s for s in segs if s >= cursor[0]]
        self._pending = 0
        self._pending_bytes = 0
        for s in segs:
            start = cursor[1] if s == cursor[0] else 0
            n, end, torn = self._scan(s, start)
            if torn:
                size = self._seg_path(s).stat().st_size
                log.warning("spool: segment %s has a torn or corrupt record at offset %d; cutting %d bytes",
                            self._seg_path(s).name, end, size - end)
                with open(self._seg_path(s), "r+b") as fh:
                    fh.truncate(end)
                    os.fsync(fh.fileno())
            self._pending += n
            self._pending_bytes += end - start
        self._cursor = cursor
        self._write_seg = segs[-1] if segs else cursor[0]
        self._write_cursor(self._cursor)

    # ---- writing ----
    def append(self, data: bytes) -> None:
        """Store one record durably.

        :raises SpoolFull: the cap would be exceeded; the record is dropped and counted.
        """
        size = _HEADER.size + len(data)
        if len(data) > MAX_RECORD_BYTES or self._pending_bytes + size > self.max_bytes:
            self.dropped += 1
            self.metrics.spool_dropped.inc()
            log.error("spool: cap of %d bytes reached (%d pending in %d events); DROPPING an event of %d bytes "
                      "(%d dropped so far)", self.max_bytes, self._pending_bytes, self._pending, len(data), self.dropped)
            raise SpoolFull(f"spool cap of {self.max_bytes} bytes reached")
        try:
            if self._write_fh.tell() >= self.segment_bytes:
                self._roll()
            self._write_record(_HEADER.pack(len(data), zlib.crc32(data)) + data)
        except OSError as exc:  # ENOSPC, EDQUOT, EIO: this event is lost, loudly; the spool is intact
            self.dropped += 1
            self.metrics.spool_dropped.inc()
            log.error("spool: cannot write to %s (%s); DROPPING an event of %d bytes (%d dropped so far)",
                      self.dir, exc.strerror or exc, len(data), self.dropped)
            raise SpoolFull(f"spool {self.dir}: {exc.strerror or exc}") from None
        self._pending += 1
        self._pending_bytes += size
        self._update_metrics()

    def _write_record(self, record: bytes) -> None:
        """Write all of ``record`` or none of it (a failed write is truncated away)."""
        fh = self._write_fh
        start = os.fstat(fh.fileno()).st_size  # append mode writes at the end, whatever tell() says
        try:
            view = memoryview(record)
            while view:
                n = fh.write(view)
                view = view[n or 0:]
            if self.do_fsync:
                os.fsync(fh.fileno())
        except OSError:
            try:
                fh.truncate(start)
                fh.seek(start)
            except OSError:
                log.error("spool: could not cut a failed write off %s at %d", self.dir, start)
            raise

    def _roll(self) -> None:
        fh = open(self._seg_path(self._write_seg + 1), "ab", buffering=0)  # first: a failure leaves the old one open
        self._write_fh.close()
        self._write_seg += 1
        self._write_fh = fh
        if self.do_fsync:
            _fsync_dir(self.dir)

    # ---- reading ----
    def read_batch(self, max_records: int) -> list[tuple[bytes, Position]]:
        """Up to ``max_records`` pending records, oldest first, each with the position after it."""
        out: list[tuple[bytes, Position]] = []
        seg, off = self._cursor
        while len(out) < max_records and len(out) < self._pending:
            if self._read_seg != seg or self._read_fh is None:
                if self._read_fh is not None:
                    self._read_fh.close()
                try:
                    self._read_fh = open(self._seg_path(seg), "rb")
                except FileNotFoundError:
                    break
                self._read_seg = seg
            self._read_fh.seek(off)
            head = self._read_fh.read(_HEADER.size)
            if len(head) < _HEADER.size:
                if seg >= self._write_seg:
                    break
                seg, off = seg + 1, 0
                continue
            length, crc = _HEADER.unpack(head)
            data = self._read_fh.read(length)
            if len(data) != length or zlib.crc32(data) != crc:  # checked at start-up; a disk error since
                log.error("spool: record at %s:%d unreadable; skipping the rest of the segment", seg, off)
                seg, off = seg + 1, 0
                continue
            off += _HEADER.size + length
            out.append((data, (seg, off)))
        return out

    def commit(self, pos: Position, records: int) -> None:
        """Acknowledge everything before ``pos`` (``records`` of them were delivered)."""
        old_seg, old_off = self._cursor
        if pos[0] == old_seg:
            freed = pos[1] - old_off
        else:
            freed = self._seg_path(old_seg).stat().st_size - old_off + pos[1]
            for s in range(old_seg + 1, pos[0]):
                p = self._seg_path(s)
                freed += p.stat().st_size if p.exists() else 0
        self._cursor = pos
        self._write_cursor(pos)
        for s in range(old_seg, pos[0]):
            if s != self._write_seg:
                self._seg_path(s).unlink(missing_ok=True)
        self._pending = max(0, self._pending - records)
        self._pending_bytes = max(0, self._pending_bytes - freed)
        if self._pending == 0 and self._cursor == (self._write_seg, self._write_fh.tell()) and self._cursor[1] > 0:
            self._restart_empty()
        self._update_metrics()

    def _restart_empty(self) -> None:
        """Everything sent: start a fresh segment and delete the old one, so a full disk empties itself."""
        old = self._write_seg
        try:
            self._roll()
        except OSError:
            return  # no room even for an empty file: keep writing where we were
        self._cursor = (self._write_seg, 0)
        self._write_cursor(self._cursor)
        if self._read_fh is not None and self._read_seg == old:
            self._read_fh.close()  # an open handle would keep the deleted segment's blocks
            self._read_fh = None
        self._seg_path(old).unlink(missing_ok=True)

    # ---- state ----
    @property
    def pending(self) -> int:
        return self._pending

    @property
    def pending_bytes(self) -> int:
        return self._pending_bytes

    def _update_metrics(self) -> None:
        self.metrics.spool_messages.set(self._pending)
        self.metrics.spool_bytes.set(self._pending_bytes)

    def close(self) -> None:
        self._write_fh.close()
        if self._read_fh is not None:
            self._read_fh.close()


__all__ = ["Position", "Spool"]
