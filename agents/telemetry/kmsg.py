"""Kernel log line sources and the source that turns them into telemetry.

Three ways to read the kernel log, one per host setup:

* ``kmsg``: ``/dev/kmsg``, the kernel's own ring buffer, read non-blocking
  from its end (needs root or CAP_SYSLOG when ``dmesg_restrict=1``);
* ``journal``: ``journalctl -k -f -o cat``, for hosts where only journald
  may read the ring;
* ``logfile``: a text file (syslog, a saved dmesg), followed across
  rotation; also what tests and replays use.

Each reader returns whole lines per poll (bounded, so one poll never runs
long under a flood); :class:`KernelLogSource` parses them with the rules in
``agents/rules/kernel-log/``, dedups at the source and yields telemetry.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Protocol

import msgspec
from msgspec import Meta

from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.dedup import Deduplicator, crash_key
from fleetepi.agents.telemetry.logparse import MAX_LINE_CHARS, CrashLine, KernelLogParser, Parsed, Rejected
from fleetepi.agents.telemetry.rules import load_rules, reasons
from fleetepi.agents.telemetry.xid import RULES_DIR, load_catalog
from fleetepi.contract import Crash, Telemetry, ts_from_ms

log = logging.getLogger(__name__)

READ_CHUNK = 65536
JOURNAL_COMMAND = ("journalctl", "-k", "-f", "-o", "cat", "-n", "0")


class LineReader(Protocol):
    def read_lines(self, max_lines: int) -> list[str]:
        """Complete lines available now (without newline), at most ``max_lines``."""

    def close(self) -> None: ...


class _Splitter:
    """Bytes -> complete lines; keeps the unfinished tail for the next read.

    The tail is bounded: a "line" that never ends (a binary file, a writer
    without newlines) keeps only its first ``max_line_bytes + 1`` bytes, so it
    costs bounded memory and no quadratic re-joining, and reaches the parser
    over-long, where it is counted as ``too_long``.
    """

    def __init__(self, max_line_bytes: int = 4 * MAX_LINE_CHARS) -> None:
        self._tail = b""
        self._ready: list[bytes] = []
        self._max = max_line_bytes

    def feed(self, data: bytes) -> None:
        parts = data.split(b"\n")
        if len(parts) > 1:
            first = self._tail + parts[0] if len(self._tail) <= self._max else self._tail
            self._ready.append(first[: self._max + 1])
            self._ready.extend(p if len(p) <= self._max else p[: self._max + 1] for p in parts[1:-1])
            self._tail = b""
        last = parts[-1]
        if len(self._tail) <= self._max:
            self._tail = (self._tail + last)[: self._max + 1]

    def end(self) -> None:
        """The writer is gone (rotation, exit): an unterminated last line is still a line."""
        if self._tail:
            self._ready.append(self._tail)
            self._tail = b""

    def take(self, n: int) -> list[str]:
        out, self._ready = self._ready[:n], self._ready[n:]
        return [b.decode("utf-8", errors="replace") for b in out]

    @property
    def pending(self) -> int:
        return len(self._ready)


class KmsgReader:
    """``/dev/kmsg``: one record per ``read()``; EPIPE means records were overwritten.

    :param path: the device (a parameter so tests can point at a FIFO or file).
    :param from_start: read the whole ring first (default: only new records).
    """

    def __init__(self, path: str = "/dev/kmsg", from_start: bool = False) -> None:
        self.path = path
        self.lost = 0
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError:
            raise SourceUnavailable(
                f"no permission to read {path} (run as root, grant CAP_SYSLOG, or use kind: journal)"
            ) from None
        except OSError as exc:
            raise SourceUnavailable(f"cannot open {path}: {exc.strerror or exc}") from None
        if not from_start:
            try:
                os.lseek(self._fd, 0, os.SEEK_END)
            except OSError:
                pass

    def read_lines(self, max_lines: int) -> list[str]:
        out: list[str] = []
        while len(out) < max_lines:
            try:
                rec = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # ring wrapped past us: some records are gone
                    self.lost += 1
                    continue
                if exc.errno == errno.EINVAL:  # record larger than the buffer: skip it
                    continue
                raise
            if not rec:
                break
            # "prio,seq,usec,flags;text\n KEY=value\n..." : keep the first line.
            out.append(rec.split(b"\n", 1)[0].decode("utf-8", errors="replace"))
        return out

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


class JournalReader:
    """``journalctl -k -f -o cat -n 0`` as a child process, read non-blocking."""

    def __init__(self, command: Sequence[str] = JOURNAL_COMMAND) -> None:
        if shutil.which(command[0]) is None:
            raise SourceUnavailable(f"{command[0]} not found (no systemd journal on this host)")
        self.command = list(command)
        self._proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdout.fileno(), False)
        self._split = _Splitter()
        self._exited: str | None = None

    def read_lines(self, max_lines: int) -> list[str]:
        assert self._proc.stdout is not None
        if self._exited is not None and not self._split.pending:
            raise SourceUnavailable(self._exited)
        while self._exited is None and self._split.pending < max_lines:
            try:
                data = os.read(self._proc.stdout.fileno(), READ_CHUNK)
            except BlockingIOError:
                break
            if not data:
                rc = self._proc.wait(timeout=5)
                err = self._proc.stderr.read().decode(errors="replace").strip() if self._proc.stderr else ""
                self._exited = f"{' '.join(self.command)} exited with status {rc}: {err[:200]}"
                self._split.end()  # hand out what it wrote before it went
                break
            self._split.feed(data)
        return self._split.take(max_lines)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()


class FileReader:
    """A text log followed like ``tail -F``: reopened when rotated or truncated.

    :param path: the log file.
    :param from_start: read what is already there (default) or only what is appended.
    """

    def __init__(self, path: str | Path, from_start: bool = True) -> None:
        self.path = Path(path)
        self._fh = None
        self._ino: int | None = None
        self._split = _Splitter()
        if not self._open(from_start):
            raise SourceUnavailable(f"cannot read {self.path}")

    def _open(self, from_start: bool) -> bool:
        try:
            fh = open(self.path, "rb", buffering=0)
        except OSError:
            return False
        if self._fh is not None:
            self._fh.close()
        self._fh = fh
        st = os.fstat(fh.fileno())
        self._ino = st.st_ino
        if not from_start:
            fh.seek(0, os.SEEK_END)
        return True

    def _rotated(self) -> bool:
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        assert self._fh is not None
        return st.st_ino != self._ino or st.st_size < self._fh.tell()

    def read_lines(self, max_lines: int) -> list[str]:
        assert self._fh is not None
        while self._split.pending < max_lines:
            data = self._fh.read(READ_CHUNK)
            if data:
                self._split.feed(data)
                continue
            if self._rotated() and self._open(True):
                self._split.end()
                continue
            break
        return self._split.take(max_lines)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class KernelLogSource:
    """Kernel-log lines -> Xid / SXid / EDAC / MCE / PCIe telemetry, deduplicated.

    :param host: host name put on every event.
    :param reader: where lines come from (any :class:`LineReader`).
    :param rules_dir: directory of ``rules.json``, ``xid-catalog.tsv``, ``severity.tsv``.
    :param dedup_interval_s: counting interval of the deduplicator (seconds).
    :param max_lines_per_poll: bound on work per poll under a flood.
    """

    kind: ClassVar[str] = "kernel_log"

    def __init__(
        self,
        host: str,
        reader: LineReader,
        rules_dir: str | Path = RULES_DIR,
        dedup_interval_s: float = 10.0,
        max_lines_per_poll: int = 20000,
    ) -> None:
        self.host = host
        self.reader = reader
        self.parser = KernelLogParser(load_rules(rules_dir), load_catalog(rules_dir))
        self.dedup: Deduplicator[Telemetry] = Deduplicator(dedup_interval_s)
        self.crash_dedup: Deduplicator[Crash] = Deduplicator(dedup_interval_s, key=crash_key, overflow=None)
        self.max_lines_per_poll = max_lines_per_poll
        #: outcome -> lines ("event" or the rejection reason): what the agent exports.
        self.outcomes: Counter[str] = Counter()

    def poll(self, now_ms: int) -> Iterable[Telemetry | Crash]:
        out: list[Telemetry | Crash] = []
        ts = ts_from_ms(now_ms)
        for line in self.reader.read_lines(self.max_lines_per_poll):
            try:
                outcome = self.parser.parse(line)
            except Exception:  # a parser bug on one line must not lose the lines read with it
                self.outcomes["parse_error"] += 1
                if self.outcomes["parse_error"] in (1, 10, 100) or self.outcomes["parse_error"] % 1000 == 0:
                    log.exception("kernel-log line not parsed (%d so far): %.200r", self.outcomes["parse_error"], line)
                continue
            if isinstance(outcome, Rejected):
                self.outcomes[outcome.reason] += 1
                continue
            self.outcomes["event"] += 1
            if isinstance(outcome, CrashLine):
                crash = to_crash(outcome, self.host, ts)
                if self.crash_dedup.offer(crash, now_ms) is not None:
                    out.append(crash)
                continue
            ev = to_telemetry(outcome, self.host, ts)
            first = self.dedup.offer(ev, now_ms)
            if first is not None:
                out.append(first)
        out.extend(self.dedup.flush(now_ms))
        out.extend(self.crash_dedup.flush(now_ms))
        return out

    def known_outcomes(self) -> list[str]:
        """Every outcome a line can have, so their counters exist at 0 before the first line."""
        return ["event", "parse_error", *sorted(reasons(self.parser.rules))]

    def drain(self, now_ms: int) -> list[Telemetry | Crash]:
        """Counted repeats still open (called at shutdown and by ``--once``)."""
        return [*self.dedup.flush(now_ms, force=True), *self.crash_dedup.flush(now_ms, force=True)]

    def close(self) -> None:
        self.reader.close()


def to_crash(c: CrashLine, host: str, ts: object) -> Crash:
    """A kernel crash line as the contract's crash event (origin ``kernel_log`` or ``oom_kill``)."""
    f = c.fields
    return Crash(ts=ts, host=host, signature=f.signature, origin=c.origin, signal=f.signal,  # type: ignore[arg-type]
                 executable=f.executable, fault_address=f.fault_address, fault_class=f.fault_class,  # type: ignore[arg-type]
                 cpu=f.cpu, shape_flags=f.shape_flags or None, job=f.job, notes=[f"rule {c.rule}", *f.notes])


def to_telemetry(p: Parsed, host: str, ts: object) -> Telemetry:
    return Telemetry(
        ts=ts, host=host, kind=p.kind, code=p.code, device=p.device,  # type: ignore[arg-type]
        message=p.message or None, severity=p.severity, action=p.action,
        count=p.count if p.count != 1 else None,
    )


class _KernelLogOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    #: directory of rules.json / xid-catalog.tsv / severity.tsv (default: the shipped ones)
    rules_dir: str | None = None
    #: counting interval of the deduplicator; default: the agent's ``dedup_interval_s``
    dedup_interval_s: Annotated[float, Meta(gt=0)] | None = None


class KmsgOptions(_KernelLogOptions, frozen=True, forbid_unknown_fields=True):
    path: str = "/dev/kmsg"
    from_start: bool = False


class JournalOptions(_KernelLogOptions, frozen=True, forbid_unknown_fields=True):
    command: Annotated[list[str], Meta(min_length=1)] = msgspec.field(default_factory=lambda: list(JOURNAL_COMMAND))


class LogFileOptions(_KernelLogOptions, frozen=True, forbid_unknown_fields=True):
    path: str
    from_start: bool = True


def _common(options: _KernelLogOptions, ctx: SourceContext) -> dict[str, Any]:
    return {"rules_dir": options.rules_dir or str(RULES_DIR),
            "dedup_interval_s": options.dedup_interval_s or ctx.dedup_interval_s}


@register("kmsg", KmsgOptions)
class KmsgSource(KernelLogSource):
    """Kernel log from ``/dev/kmsg`` (config: ``path``, ``from_start``, ``dedup_interval_s``)."""

    kind: ClassVar[str] = "kmsg"

    def __init__(self, host: str, path: str = "/dev/kmsg", from_start: bool = False,
                 rules_dir: str = str(RULES_DIR), dedup_interval_s: float = 10.0) -> None:
        super().__init__(host, KmsgReader(path, from_start), rules_dir, dedup_interval_s)

    @classmethod
    def from_options(cls, options: KmsgOptions, ctx: SourceContext) -> KmsgSource:
        return cls(ctx.host, options.path, options.from_start, **_common(options, ctx))


@register("journal", JournalOptions)
class JournalSource(KernelLogSource):
    """Kernel log through ``journalctl -k -f`` (config: ``command``, ``dedup_interval_s``)."""

    kind: ClassVar[str] = "journal"

    def __init__(self, host: str, command: Sequence[str] = JOURNAL_COMMAND,
                 rules_dir: str = str(RULES_DIR), dedup_interval_s: float = 10.0) -> None:
        super().__init__(host, JournalReader(command), rules_dir, dedup_interval_s)

    @classmethod
    def from_options(cls, options: JournalOptions, ctx: SourceContext) -> JournalSource:
        return cls(ctx.host, options.command, **_common(options, ctx))


@register("logfile", LogFileOptions)
class LogFileSource(KernelLogSource):
    """Kernel log lines from a file (config: ``path``, ``from_start``, ``dedup_interval_s``)."""

    kind: ClassVar[str] = "logfile"

    def __init__(self, host: str, path: str, from_start: bool = True,
                 rules_dir: str = str(RULES_DIR), dedup_interval_s: float = 10.0) -> None:
        super().__init__(host, FileReader(path, from_start), rules_dir, dedup_interval_s)

    @classmethod
    def from_options(cls, options: LogFileOptions, ctx: SourceContext) -> LogFileSource:
        return cls(ctx.host, options.path, options.from_start, **_common(options, ctx))


class FakeLogSource:
    """A line reader fed by the test or the benchmark (``feed(lines)``); shipped like httpx's MockTransport."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self._lines: list[str] = list(lines)

    def feed(self, lines: Iterable[str]) -> None:
        self._lines.extend(lines)

    def read_lines(self, max_lines: int) -> list[str]:
        out, self._lines = self._lines[:max_lines], self._lines[max_lines:]
        return out

    def close(self) -> None:
        self._lines.clear()


__all__ = [
    "FakeLogSource", "FileReader", "JournalOptions", "JournalReader", "JournalSource", "KernelLogSource", "KmsgOptions",
    "KmsgReader", "KmsgSource", "LineReader", "LogFileOptions", "LogFileSource", "to_crash", "to_telemetry",
]
