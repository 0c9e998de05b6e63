"""Sources ``applog`` (log files) and ``appjournal`` (journald units): application output -> crash events.

Most failures of a training fleet never write a core: a rank dies of a
Python exception, a collective hangs until the NCCL watchdog aborts it, the
OOM killer ends the process. These sources read what the jobs print and turn
each failure into a ``fleetepi.crash/v1`` event with its ``origin``
(:mod:`fleetepi.agents.applog.parser`).

``applog`` follows every file matching its globs like ``tail -F``: across
rotation (the old file is read to its end first) and truncation, new files
found every ``rescan_s``, and the byte offset of each file kept in a small
JSON state file, so an agent restart resumes where it stopped instead of
reading everything again or skipping what came meanwhile.

``appjournal`` runs ``journalctl -o json --all -f -u UNIT...`` as a child
process (no python-systemd needed) and resumes from the last cursor it saw.

Config::

    - kind: applog
      paths: [/var/log/jobs/*/rank*.log]
      job_pattern: /var/log/jobs/(?P<job>[^/]+)/
    - kind: appjournal
      units: [train.service]
      job: train-a
"""

from __future__ import annotations

import glob
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import Meta

from fleetepi.agents.applog.job import compile_job_pattern, job_from_name
from fleetepi.agents.applog.parser import AppLogParser, Failure
from fleetepi.agents.applog.rules import shipped_rules
from fleetepi.agents.exceptions import SourceUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.dedup import Deduplicator, crash_key
from fleetepi.agents.telemetry.kmsg import JournalReader
from fleetepi.contract import Crash, ts_from_ms

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 16
#: a line longer than this is cut (a binary blob in a log must not hold memory)
MAX_LINE_BYTES = 1 << 16


class _Common(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    #: job id of every event (default: ``job_pattern``, else none)
    job: str | None = None
    #: regex with a ``job`` group over the file path / unit name
    job_pattern: str | None = None
    #: directory of the app-log rules (default: the shipped ``agents/rules/app-log``)
    rules_dir: str | None = None
    #: counting interval for repeats of one failure; default: the agent's ``dedup_interval_s``
    dedup_interval_s: Annotated[float, Meta(gt=0)] | None = None
    #: meaningful Python frames in a signature
    python_frames: Annotated[int, Meta(ge=0, le=16)] = 3
    #: a traceback with no new line for this long is complete
    idle_s: Annotated[float, Meta(gt=0)] = 2.0
    #: where the source remembers its position (file offsets / journal cursor) across restarts
    state_path: str | None = None
    max_lines_per_poll: Annotated[int, Meta(ge=1)] = 50_000


class AppLogOptions(_Common, frozen=True, forbid_unknown_fields=True, kw_only=True):
    paths: Annotated[list[str], Meta(min_length=1)]
    #: read files that exist at the first start from their beginning (later files always are)
    from_start: bool = False
    rescan_s: Annotated[float, Meta(gt=0)] = 10.0


class AppJournalOptions(_Common, frozen=True, forbid_unknown_fields=True, kw_only=True):
    #: systemd units (``-u``); and/or
    units: list[str] = []
    #: syslog identifiers (``-t``: a container runtime's tag, ``systemd-cat -t``)
    identifiers: list[str] = []
    #: the journalctl program (a path, or a wrapper such as ``[ssh, node, journalctl]``)
    journalctl: Annotated[list[str], Meta(min_length=1)] = msgspec.field(default_factory=lambda: ["journalctl"])


class FailureSink:
    """Failures -> crash events: the job filled in, floods of one failure counted (not repeated)."""

    def __init__(self, host: str, dedup_interval_s: float) -> None:
        self.host = host
        self.dedup: Deduplicator[Crash] = Deduplicator(dedup_interval_s, key=crash_key, overflow=None)

    def take(self, failures: Iterable[Failure], now_ms: int, job: str | None, ts_ms: int | None = None) -> list[Crash]:
        out: list[Crash] = []
        for f in failures:
            # a repeat only adds to a count: no event is built for it
            if self.dedup.count_repeat((f.signature[:1024], f.origin, f.job or job), now_ms):
                continue
            crash = f.to_crash(self.host, ts_from_ms(ts_ms if ts_ms is not None else now_ms), job)
            if self.dedup.offer(crash, now_ms) is not None:
                out.append(crash)
        return out

    def flush(self, now_ms: int, force: bool = False) -> list[Crash]:
        return self.dedup.flush(now_ms, force=force)


# --- files -----------------------------------------------------------------------
@dataclass
class FollowedFile:
    """One file read line by line; ``offset`` is the byte after the last line handed out."""

    path: str
    fh: Any
    ino: int
    offset: int
    tail: bytes = b""
    gone: bool = False

    @classmethod
    def open(cls, path: str, offset: int | None, ino: int | None = None) -> FollowedFile | None:
        """Open ``path`` at ``offset`` (None: its end); a different inode or a shorter file starts at 0."""
        try:
            fh = open(path, "rb", buffering=0)
        except OSError:
            return None
        st = os.fstat(fh.fileno())
        if offset is None:
            offset = st.st_size
        elif (ino is not None and ino != st.st_ino) or offset > st.st_size:
            offset = 0
        fh.seek(offset)
        return cls(path, fh, st.st_ino, offset)

    def read_lines(self, budget: int) -> list[str]:
        out: list[str] = []
        while len(out) < budget:
            data = self.fh.read(READ_CHUNK)
            if not data:
                break
            parts = (self.tail + data).split(b"\n")
            self.tail = parts.pop()
            if len(self.tail) > MAX_LINE_BYTES:
                parts.append(self.tail[:MAX_LINE_BYTES])
                self.offset += len(self.tail) - MAX_LINE_BYTES
                self.tail = b""
            for p in parts:
                self.offset += len(p) + 1
                out.append(p.decode("utf-8", errors="replace"))
        return out

    def replaced(self) -> bool:
        """The path now names another file (rotated) or this one was truncated."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return st.st_ino != self.ino or st.st_size < self.offset + len(self.tail)

    def close(self) -> None:
        try:
            self.fh.close()
        except OSError:
            pass


class StateFile:
    """A small JSON document written atomically (tmp + rename); unreadable means starting afresh."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None

    def load(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("state file %s unreadable (%s): starting afresh", self.path, exc)
            return {}

    def save(self, data: dict[str, Any]) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only state dir must not stop failure reporting
            log.warning("cannot write state %s (%s)", self.path, exc)


@register("applog", AppLogOptions)
class AppLogSource:
    """Application log files (globs) -> crash events.

    :param host: host name of the events.
    :param paths: glob patterns of the files.
    :param job: job id of every event; :param job_pattern: regex with a ``job`` group over the path.
    :param from_start: files present at the first start are read from their beginning (default: their end).
    :param state_path: JSON file of the files' inode and offset, for restarts (None: no resume).
    :param parser: a prebuilt parser (default: from ``rules_dir``).
    """

    kind: ClassVar[str] = "applog"

    def __init__(self, host: str, paths: Sequence[str], job: str | None = None, job_pattern: str | None = None,
                 from_start: bool = False, state_path: str | None = None, rescan_s: float = 10.0,
                 dedup_interval_s: float = 10.0, idle_s: float = 2.0, python_frames: int = 3,
                 rules_dir: str | None = None, max_lines_per_poll: int = 50_000) -> None:
        self.host = host
        self.patterns = list(paths)
        self.job = job
        self.job_rx = compile_job_pattern(job_pattern)
        self.parser = AppLogParser(shipped_rules(rules_dir), python_frames=python_frames, idle_ms=int(idle_s * 1000))
        self.sink = FailureSink(host, dedup_interval_s)
        self.state = StateFile(state_path)
        self.rescan_ms = int(rescan_s * 1000)
        self.max_lines = max_lines_per_poll
        self.files: dict[str, FollowedFile] = {}
        self._next_scan_ms = 0
        self._dirty = False
        self._last_save_ms = 0
        saved = self.state.load().get("files", {})
        self._saved: dict[str, tuple[int, int]] = {
            p: (int(v[0]), int(v[1])) for p, v in saved.items() if isinstance(v, list) and len(v) == 2}
        self._first_scan = not self._saved
        self._from_start = from_start
        self._scan(0)
        if not self.files and not any(glob.has_magic(p) for p in self.patterns):
            raise SourceUnavailable(f"no log file at {', '.join(self.patterns)}")

    @classmethod
    def from_options(cls, options: AppLogOptions, ctx: SourceContext) -> AppLogSource:
        return cls(ctx.host, options.paths, options.job, options.job_pattern, options.from_start, options.state_path,
                   options.rescan_s, options.dedup_interval_s or ctx.dedup_interval_s, options.idle_s,
                   options.python_frames, options.rules_dir, options.max_lines_per_poll)

    @property
    def outcomes(self) -> Counter[str]:
        """Line outcomes for the agent's ``fleetepi_agent_log_lines_total``."""
        return self.parser.outcomes

    def known_outcomes(self) -> list[str]:
        return ["event", *sorted(self.parser.rules.reasons())]

    def _scan(self, now_ms: int) -> None:
        self._next_scan_ms = now_ms + self.rescan_ms
        found = sorted({p for pat in self.patterns for p in glob.glob(pat)})
        for path in found:
            if path in self.files or not os.path.isfile(path):
                continue
            saved = self._saved.pop(path, None)
            if saved is not None:
                f = FollowedFile.open(path, saved[1], saved[0])
            else:
                # at the first start, existing files begin at their end unless from_start; later ones at 0
                f = FollowedFile.open(path, None if self._first_scan and not self._from_start else 0)
            if f is not None:
                self.files[path] = f
                self._dirty = True
        self._first_scan = False

    def _job(self, path: str) -> str | None:
        return self.job or job_from_name(path, self.job_rx)

    def poll(self, now_ms: int) -> Iterable[Crash]:
        if now_ms >= self._next_scan_ms:
            self._scan(now_ms)
        out: list[Crash] = []
        budget = self.max_lines
        for path, f in list(self.files.items()):
            lines = f.read_lines(budget)
            if not lines and f.replaced():
                # rotated or truncated: what the old file still had was read above; the tail is a line
                if f.tail:
                    lines = [f.tail.decode("utf-8", errors="replace")]
                    f.tail = b""
                f.close()
                nf = FollowedFile.open(path, 0)
                if nf is None:
                    del self.files[path]
                else:
                    self.files[path] = nf
                    lines += nf.read_lines(budget)
            if lines:
                self._dirty = True
                budget -= len(lines)
                job = self._job(path)
                for line in lines:
                    out += self.sink.take(self.parser.feed(line, now_ms, stream=path), now_ms, job)
            if budget <= 0:
                break
        for f_ in self.parser.flush(now_ms):
            out += self.sink.take([f_], now_ms, self._job(f_.stream))
        out += self.sink.flush(now_ms)
        if self._dirty and now_ms - self._last_save_ms >= 5000:
            self._save(now_ms)
        return out

    def _save(self, now_ms: int) -> None:
        self._dirty = False
        self._last_save_ms = now_ms
        files = {p: [f.ino, f.offset] for p, f in self.files.items()}
        files.update({p: list(v) for p, v in self._saved.items()})  # remembered files not seen yet keep their place
        self.state.save({"files": files})

    def drain(self, now_ms: int) -> list[Crash]:
        """Open tracebacks and counted repeats (shutdown, ``--once``)."""
        out: list[Crash] = []
        for f in self.parser.flush(now_ms, force=True):
            out += self.sink.take([f], now_ms, self._job(f.stream))
        return out + self.sink.flush(now_ms, force=True)

    def close(self) -> None:
        self._save(0)
        for f in self.files.values():
            f.close()


# --- journald ----------------------------------------------------------------------------
class JournalEntry(msgspec.Struct):
    """The fields of one ``journalctl -o json`` entry this source reads (all values are strings there;
    MESSAGE is an array of bytes when it is not valid UTF-8, and null when too large without ``--all``)."""

    message: str | list[int] | None = msgspec.field(default=None, name="MESSAGE")
    unit: str = msgspec.field(default="", name="_SYSTEMD_UNIT")
    pid: str = msgspec.field(default="", name="_PID")
    identifier: str = msgspec.field(default="", name="SYSLOG_IDENTIFIER")
    cursor: str = msgspec.field(default="", name="__CURSOR")
    realtime_us: str = msgspec.field(default="", name="__REALTIME_TIMESTAMP")

    def text(self) -> str:
        if isinstance(self.message, list):
            return bytes(b & 0xFF for b in self.message).decode("utf-8", errors="replace")
        return self.message or ""


_entry = msgspec.json.Decoder(JournalEntry)


def journal_command(units: Sequence[str], cursor: str | None = None, journalctl: Sequence[str] = ("journalctl",),
                    identifiers: Sequence[str] = ()) -> list[str]:
    """``journalctl -o json --all -f -u UNIT... -t ID...``: from the saved cursor when there is one, else from now.

    ``--all`` because without it journalctl prints fields over 4096 bytes as null (a long traceback line).
    """
    cmd = [*journalctl, "--output=json", "--all", "--follow", "--no-pager", "--quiet"]
    cmd += [f"--unit={u}" for u in units]
    cmd += [f"--identifier={t}" for t in identifiers]
    cmd += [f"--after-cursor={cursor}"] if cursor else ["--lines=0"]
    return cmd


def parse_journal_line(line: str) -> JournalEntry | None:
    """One line of ``journalctl -o json`` output, or None when it is not an entry."""
    try:
        return _entry.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@register("appjournal", AppJournalOptions)
class AppJournalSource:
    """Application output of systemd units, through ``journalctl -o json -f`` -> crash events.

    Streams are kept apart by unit and pid, so two processes of one unit do
    not mix their tracebacks; event time is the entry's own timestamp.
    """

    kind: ClassVar[str] = "appjournal"

    def __init__(self, host: str, units: Sequence[str] = (), job: str | None = None, job_pattern: str | None = None,
                 state_path: str | None = None, dedup_interval_s: float = 10.0, idle_s: float = 2.0,
                 python_frames: int = 3, rules_dir: str | None = None, max_lines_per_poll: int = 50_000,
                 journalctl: Sequence[str] = ("journalctl",), reader: Any = None, identifiers: Sequence[str] = ()) -> None:
        if not units and not identifiers:
            raise ValueError("appjournal needs units and/or identifiers to follow (the whole journal is the kernel's and everyone's)")
        self.host = host
        self.units = list(units)
        self.identifiers = list(identifiers)
        self.job = job
        self.job_rx = compile_job_pattern(job_pattern)
        self.parser = AppLogParser(shipped_rules(rules_dir), python_frames=python_frames, idle_ms=int(idle_s * 1000))
        self.sink = FailureSink(host, dedup_interval_s)
        self.state = StateFile(state_path)
        self.cursor: str | None = self.state.load().get("cursor") or None
        self.command = journal_command(self.units, self.cursor, journalctl, self.identifiers)
        self.reader = reader if reader is not None else JournalReader(self.command)
        self.max_lines = max_lines_per_poll
        self.bad_lines = 0
        self._saved_cursor = self.cursor
        self._last_save_ms = 0

    @classmethod
    def from_options(cls, options: AppJournalOptions, ctx: SourceContext) -> AppJournalSource:
        return cls(ctx.host, options.units, options.job, options.job_pattern, options.state_path,
                   options.dedup_interval_s or ctx.dedup_interval_s, options.idle_s, options.python_frames,
                   options.rules_dir, options.max_lines_per_poll, options.journalctl, identifiers=options.identifiers)

    @property
    def outcomes(self) -> Counter[str]:
        return self.parser.outcomes

    def known_outcomes(self) -> list[str]:
        return ["event", *sorted(self.parser.rules.reasons())]

    def _job(self, unit: str) -> str | None:
        return self.job or job_from_name(unit, self.job_rx)

    def poll(self, now_ms: int) -> Iterable[Crash]:
        out: list[Crash] = []
        for line in self.reader.read_lines(self.max_lines):
            entry = parse_journal_line(line)
            if entry is None:
                self.bad_lines += 1
                continue
            if entry.cursor:
                self.cursor = entry.cursor
            unit = entry.unit or entry.identifier
            ts_ms = int(entry.realtime_us) // 1000 if entry.realtime_us.isdigit() else None
            for text in entry.text().split("\n"):
                out += self.sink.take(self.parser.feed(text, now_ms, stream=f"{unit}/{entry.pid}"), now_ms,
                                      self._job(unit), ts_ms)
        for f in self.parser.flush(now_ms):
            out += self.sink.take([f], now_ms, self._job(f.stream.split("/")[0]))
        out += self.sink.flush(now_ms)
        if self.cursor != self._saved_cursor and now_ms - self._last_save_ms >= 5000:
            self._save(now_ms)
        return out

    def _save(self, now_ms: int) -> None:
        self._saved_cursor, self._last_save_ms = self.cursor, now_ms
        self.state.save({"cursor": self.cursor})

    def drain(self, now_ms: int) -> list[Crash]:
        out: list[Crash] = []
        for f in self.parser.flush(now_ms, force=True):
            out += self.sink.take([f], now_ms, self._job(f.stream.split("/")[0]))
        return out + self.sink.flush(now_ms, force=True)

    def close(self) -> None:
        if self.cursor != self._saved_cursor:
            self._save(0)
        self.reader.close()


__all__ = ["AppJournalOptions", "AppJournalSource", "AppLogOptions", "AppLogSource", "FailureSink", "FollowedFile",
           "JournalEntry", "journal_command", "parse_journal_line"]
