"""The embedded runner: JSON lines -> contract events -> detectors -> alerts.

One :class:`Pipeline` drives one :class:`fleetepi.detectors.Engine` in a single
thread. It is what ``fleetepi replay`` and ``fleetepi demo`` run, and what a
stream worker can reuse for its per-partition loop (``feed_event`` plus an
:class:`AlertSink` and :class:`fleetepi.metrics.PipelineMetrics`).

Bad input never stops a run: a line that does not decode is counted under
its reason (``fleetepi.contract.codec.REASONS``) with its line number and the
decoder's sentence kept as a sample for the summary; admission drops and
flags made by the engine (``out_of_order``, ``future_timestamp``,
``unknown_host``) reach the same counts through ``Engine.on_invalid``. Only
``strict=True`` turns the first of them into :class:`StrictModeError`, whose
message is ``line N: reason: detail``.

The hot loop (:meth:`Pipeline.run`) binds everything it calls to locals and
does nothing per line beyond decode + ``Engine.process``, unless metrics are
asked for: replay speed is a target (bench/replay.py).
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from fleetepi.contract import Alert, Crash, Event, Host, Telemetry, decode_event, encode, format_ts, ts_from_ms
from fleetepi.detectors import DetectorConfig, Engine
from fleetepi.detectors.maintenance import Window
from fleetepi.exceptions import FleetepiError, InvalidMessage
from fleetepi.maintenance import AlertGate
from fleetepi.metrics import PipelineMetrics

#: How many lines between two calls of the progress callback and metric gauges.
REPORT_EVERY = 4096

_KIND = {Host: "host", Crash: "crash", Telemetry: "telemetry"}


class StrictModeError(FleetepiError):
    """``--strict`` met bad input: ``line N: reason: detail``."""

    def __init__(self, line: int | None, reason: str, detail: str) -> None:
        where = f"line {line}" if line is not None else "input"
        super().__init__(f"{where}: {reason}: {detail}")
        self.line = line
        self.reason = reason
        self.detail = detail


class AlertSink(Protocol):
    """Where alerts go (a file, a terminal, a Kafka producer in the stream workers)."""

    def emit(self, alert: Alert) -> None: ...


class EventArchive(Protocol):
    """Where accepted events and alerts are kept for later (``fleetepi.archive.ArchiveWriter``).

    ``add`` is called once per event the engine admitted, with the JSON line
    it was decoded from when there is one; it must be cheap (one append).
    """

    def add(self, event: Event, raw: bytes | None = None) -> None: ...

    def add_alert(self, alert: Alert) -> None: ...


class JsonlAlertSink:
    """Alerts as contract JSON, one per line, flushed at once.

    Flushing per alert keeps ``fleetepi replay -o - | jq`` live; alerts are
    rare (a few per thousand hosts a day), so the syscalls do not matter.
    """

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.written = 0

    def emit(self, alert: Alert) -> None:
        self.fh.write(encode(alert) + b"\n")
        self.fh.flush()
        self.written += 1


class ListAlertSink:
    """Keeps alerts in memory (tests, the demo's outbreak scoring)."""

    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def emit(self, alert: Alert) -> None:
        self.alerts.append(alert)


class FanoutAlertSink:
    """Sends each alert to several sinks in order."""

    def __init__(self, *sinks: AlertSink) -> None:
        self.sinks = sinks

    def emit(self, alert: Alert) -> None:
        for s in self.sinks:
            s.emit(alert)


@dataclass
class InvalidSample:
    """Where a reason was first and last seen, and what the decoder said the first time."""

    reason: str
    count: int = 0
    first_line: int | None = None
    last_line: int | None = None
    detail: str = ""


@dataclass
class RunSummary:
    """What a run saw: the numbers of the summary table."""

    lines: int = 0
    events: Counter[str] = field(default_factory=Counter)
    invalid: dict[str, InvalidSample] = field(default_factory=dict)
    fired: Counter[str] = field(default_factory=Counter)
    resolved: Counter[str] = field(default_factory=Counter)
    elapsed_s: float = 0.0
    first_ts_ms: int | None = None
    watermark_ms: int | None = None
    hosts: int = 0
    #: firing alerts by severity, and the incidents the pages belong to
    pages: int = 0
    tickets: int = 0
    paged_incidents: set[str] = field(default_factory=set)
    #: planned work: events of hosts in maintenance (dropped by the engine), alerts held back by kind,
    #: windows in force (file, silences)
    in_maintenance: int = 0
    suppressed: Counter[str] = field(default_factory=Counter)
    maintenance_windows: int = 0

    @property
    def invalid_total(self) -> int:
        return sum(s.count for s in self.invalid.values())

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.elapsed_s if self.elapsed_s > 0 else 0.0


class Pipeline:
    """Decode, admit and detect, one line or event at a time.

    :param engine: the detectors; a fresh ``Engine(config)`` if None.
    :param config: detector settings for a fresh engine.
    :param sink: where alerts go (also returned by every ``feed_*`` call).
    :param metrics: Prometheus metrics to keep current; None costs nothing.
    :param strict: raise :class:`StrictModeError` on the first bad line or admission drop.
    :param archive: receives every admitted event and every alert (the caller closes it).
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        config: DetectorConfig | None = None,
        sink: AlertSink | None = None,
        metrics: PipelineMetrics | None = None,
        strict: bool = False,
        archive: EventArchive | None = None,
    ) -> None:
        self.engine = engine if engine is not None else Engine(config)
        self.archive = archive
        self.sink = sink
        self.metrics = metrics
        self.strict = strict
        self.summary = RunSummary()
        self._line: int | None = None
        self._dropped = False
        self._started: float | None = None
        self._next_hook = self.engine.on_invalid  # a hook the engine already had keeps working
        #: latest attributes per host as read (metrics labels only)
        self._attrs: dict[str, dict[str, str]] = {}
        self.engine.on_invalid = self._on_admission
        #: holds back alerts about hosts or places in maintenance (fleetepi.maintenance)
        self.gate = AlertGate()

    def set_maintenance(self, windows: list[Window]) -> None:
        """Maintenance windows (a file, Alertmanager's silences) besides the ``maintenance`` attribute."""
        self.engine.set_maintenance(windows)
        self.summary.maintenance_windows = len(windows)
        if self.metrics is not None:
            self.metrics.set_maintenance_windows(len(windows))

    # ------------------------------------------------------------------ bad input
    def _record_invalid(self, reason: str, detail: str) -> None:
        sample = self.summary.invalid.get(reason)
        if sample is None:
            sample = self.summary.invalid[reason] = InvalidSample(reason, first_line=self._line, detail=detail)
        sample.count += 1
        sample.last_line = self._line
        if self.metrics is not None:
            self.metrics.count_invalid(reason)
        if self.strict:
            raise StrictModeError(self._line, reason, detail)

    def _on_admission(self, reason: str, event: Event, ts_ms: int) -> None:
        if reason != "unknown_host":
            self._dropped = True
        if self._next_hook is not None:
            self._next_hook(reason, event, ts_ms)
        self._record_invalid(reason, self._admission_detail(reason, event, ts_ms))

    def _admission_detail(self, reason: str, event: Event, ts_ms: int) -> str:
        wm = self.engine.watermark_ms or 0
        cfg = self.engine.config
        when = format_ts(ts_from_ms(ts_ms))
        if reason == "out_of_order":
            return (f"event at {when} is {(wm - ts_ms) / 1000:.0f} s behind the watermark "
                    f"{format_ts(ts_from_ms(wm))} (allowed lateness {cfg.allowed_lateness_s:.0f} s)")
        if reason == "future_timestamp":
            return (f"event at {when} is more than {cfg.max_future_s:.0f} s ahead of both the watermark "
                    f"{format_ts(ts_from_ms(wm))} and the wall clock")
        host = getattr(event, "host", "?")
        return f"{_KIND.get(type(event), 'event')} from host {host!r}, never announced by a fleetepi.host/v1 message"

    # ------------------------------------------------------------------ feeding
    def feed_line(self, line: bytes | str, lineno: int | None = None) -> list[Alert]:
        """Decode and process one JSON line; bad lines are counted and give no alert."""
        self._start()
        self._line = lineno
        try:
            event = decode_event(line)
        except InvalidMessage as exc:
            self.summary.lines += 1
            self._record_invalid(exc.reason, exc.detail)
            return []
        self.summary.lines += 1
        return self._process(event, lineno, line if isinstance(line, bytes) else None)

    def feed_event(self, event: Event, lineno: int | None = None) -> list[Alert]:
        """Process one decoded event (a stream worker's or the demo's entry point); counts as a record read."""
        self._start()
        self.summary.lines += 1
        return self._process(event, lineno)

    def _process(self, event: Event, lineno: int | None, raw: bytes | None = None) -> list[Alert]:
        self._line = lineno
        self._dropped = False
        alerts = self.engine.process(event)
        if self.archive is not None and not self._dropped:
            self.archive.add(event, raw)
        m = self.metrics
        if m is not None:
            if not self._dropped:
                self._observe(event)
            # per event, not per report: a live stream may go idle right after this line
            wm = self.engine.newest_ms
            if wm != m.watermark_ms:
                m.set_watermark(wm)
        if alerts:
            self._emit(alerts)
        return alerts

    def _observe(self, event: Event) -> None:
        kind = _KIND[type(event)]
        m = self.metrics
        if m is None:
            return
        m.count_event(kind)
        if kind == "host":
            # the metrics' cohort labels follow announcements as they are read; the engine brings
            # them into force at its next step boundary (its decisions are in event time)
            self._attrs[event.host] = event.attributes  # type: ignore[union-attr]
            m.set_hosts(len(self._attrs))
        elif kind == "crash":
            m.observe_crash(event, event.ts_ms)  # type: ignore[arg-type]
        elif kind == "telemetry":
            m.observe_telemetry(event, self._attrs.get(event.host, {}))  # type: ignore[arg-type,union-attr]

    def _emit(self, alerts: list[Alert]) -> None:
        s = self.summary
        admit = self.gate.admit
        for a in alerts:
            firing = a.state != "resolved"
            if not admit(a, self.engine):
                if firing:
                    s.suppressed[a.kind] += 1
                    if self.metrics is not None:
                        self.metrics.count_suppressed(a.kind)
                continue
            (s.fired if firing else s.resolved)[a.kind] += 1
            if firing and a.is_page:
                s.pages += 1
                s.paged_incidents.add(a.incident or a.key)
            elif firing:
                s.tickets += 1
            if self.metrics is not None:
                self.metrics.observe_alert(a)
            if self.sink is not None:
                self.sink.emit(a)
            if self.archive is not None:
                self.archive.add_alert(a)

    def report(self) -> None:
        """Refresh the slow-moving numbers (watermark, hosts, event counts) in the summary and metrics."""
        eng = self.engine
        self.summary.events = Counter(eng.events)
        self.summary.watermark_ms = eng.newest_ms
        self.summary.hosts = len(eng.announced)
        self.summary.in_maintenance = eng.flags["in_maintenance"]
        if self.metrics is not None:
            self.metrics.set_watermark(eng.newest_ms)
            self.metrics.set_hosts(len(eng.announced))
            self.metrics.set_in_maintenance(eng.flags["in_maintenance"])

    def run(self, lines: Iterable[bytes], progress: Callable[[], None] | None = None) -> RunSummary:
        """Process every line; call ``progress()`` every :data:`REPORT_EVERY` lines.

        Does not call :meth:`finish`, so a caller can feed several inputs.
        """
        if self.metrics is not None or self.strict:
            return self._run_general(lines, progress)
        return self._run_fast(lines, progress)

    def _run_general(self, lines: Iterable[bytes], progress: Callable[[], None] | None) -> RunSummary:
        self._start()
        lineno = self._line or 0
        feed = self.feed_line
        clock = time.monotonic
        last = clock()
        for lineno, line in enumerate(lines, lineno + 1):  # noqa: B020 - lineno kept after the loop
            if not line.strip():
                continue
            feed(line, lineno)
            # by count for files, by time for a slow live stream (stdin from a recorder)
            if lineno % REPORT_EVERY == 0 or clock() - last >= 1.0:
                last = clock()
                self.report()
                if progress is not None:
                    progress()
        self._line = lineno
        self._stop()
        return self.summary

    def _run_fast(self, lines: Iterable[bytes], progress: Callable[[], None] | None) -> RunSummary:
        """The replay loop without metrics or strictness: decode and process, nothing else per line.

        Accepted events are counted by the engine (``Engine.events``, copied
        in :meth:`report`); blank lines are recognised only once the decoder
        has rejected them, so good lines pay nothing for them. With an
        archive, each admitted event's line is handed over as it was read
        (one flag reset and one append per line; without, one test).
        """
        self._start()
        summary = self.summary
        process = self.engine.process
        add = self.archive.add if self.archive is not None else None
        decode = decode_event
        mask = REPORT_EVERY - 1
        lineno = start = self._line or 0
        blank = 0
        try:
            for line in lines:
                lineno += 1
                try:
                    event = decode(line)
                except InvalidMessage as exc:
                    if not line.strip():
                        blank += 1
                        continue
                    self._line = lineno
                    self._record_invalid(exc.reason, exc.detail)
                    continue
                self._line = lineno
                if add is None:
                    alerts = process(event)
                else:
                    self._dropped = False
                    alerts = process(event)
                    if not self._dropped:
                        add(event, line)
                if alerts:
                    self._emit(alerts)
                if not lineno & mask and progress is not None:
                    progress()
        finally:  # also when the input breaks mid-way: the summary counts what was read
            summary.lines += lineno - start - blank
            self._line = lineno
            self._stop()
        return summary

    @property
    def last_line(self) -> int:
        """Number of the last line read (0 before the first)."""
        return self._line or 0

    def _start(self) -> None:
        if self._started is None:
            self._started = time.perf_counter()

    def _stop(self) -> None:
        if self._started is not None:
            self.summary.elapsed_s = time.perf_counter() - self._started
        self.report()

    def finish(self) -> list[Alert]:
        """End of input: let event time pass until every buffered event is folded and decided.

        The Engine folds an event at the first step boundary after it has
        settled (``settle_s``); at the end of a recording nothing moves event
        time past the last events, so this does (``Engine.flush``).
        """
        alerts = self.engine.flush()
        if alerts:
            self._emit(alerts)
        self._stop()
        return alerts


@contextmanager
def batch_gc(gen0_threshold: int = 50_000) -> Iterator[None]:
    """Fewer cyclic-GC passes while a batch replay runs (restored afterwards).

    The replay allocates a few short-lived containers per line (decoded
    structs, alert lists), none in cycles, so CPython's default gen-0
    threshold of 700 runs a collection every few hundred lines, and the
    older generations rescan the detectors' ever larger state: ~6 % of the
    replay's CPU time on the 2,000-host bench. Freezing the start-up objects
    and raising the threshold cuts it to ~1.5 %; garbage in cycles is still
    collected, only later. Applications only (``fleetepi replay``, the
    bench), never inside a long-lived worker's loop.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(gen0_threshold, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def replay_lines(
    lines: Iterable[bytes],
    *,
    config: DetectorConfig | None = None,
    sink: AlertSink | None = None,
    metrics: PipelineMetrics | None = None,
    strict: bool = False,
    progress: Callable[[], None] | None = None,
) -> RunSummary:
    """Whole replay of one input: run every line, then :meth:`Pipeline.finish`."""
    pipe = Pipeline(config=config, sink=sink, metrics=metrics, strict=strict)
    with batch_gc():
        pipe.run(lines, progress)
        pipe.finish()
    return pipe.summary


__all__ = [
    "AlertSink",
    "EventArchive",
    "FanoutAlertSink",
    "InvalidSample",
    "JsonlAlertSink",
    "ListAlertSink",
    "Pipeline",
    "RunSummary",
    "StrictModeError",
    "batch_gc",
    "replay_lines",
]
