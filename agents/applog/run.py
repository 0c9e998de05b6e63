"""``fleetepi run -- CMD ...``: run a job, pass its output through unchanged, report its failures.

The wrapper for jobs whose output no agent source reads (a batch script, a
container entry point). It starts CMD with its stdout and stderr on pipes,
copies every byte to its own stdout and stderr as it arrives (nothing is
added, reordered within a stream, or held back), reads the same bytes line by
line with :class:`~fleetepi.agents.applog.parser.AppLogParser`, and
publishes each failure as a crash event. It exits with CMD's exit status,
128+N when CMD died of signal N (what a shell reports), 127 when CMD cannot
be found and 126 when it cannot be run. Signals the wrapper receives
(SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) are passed on to CMD,
except a Ctrl-C at the terminal, which the terminal already sent to CMD.

A CMD that dies of SIGSEGV, SIGBUS, SIGILL, SIGFPE or SIGABRT without a
failure in its output is reported too (``runtime_error``, signature
``PROGRAM!SIGNAL``): the core dump, where one is written, carries its stack.
Publishing never changes the job: a broker that is away, a full disk or a
bad line is logged on stderr once and the job goes on.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from fleetepi.agents.applog.crashlines import process_name
from fleetepi.agents.applog.parser import AppLogParser, Failure
from fleetepi.agents.applog.rules import shipped_rules
from fleetepi.agents.applog.sources import FailureSink
from fleetepi.agents.exceptions import PublishError
from fleetepi.agents.publish.base import Publisher

log = logging.getLogger(__name__)

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}
READ_CHUNK = 1 << 16


def _from_terminal(signum: int) -> bool:
    """A Ctrl-C / Ctrl-\\ at the terminal reaches the child already (it is in our foreground process
    group): passing it on as well would interrupt the job twice."""
    if signum not in (signal.SIGINT, signal.SIGQUIT):
        return False
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def exit_status(returncode: int) -> int:
    """A shell's exit status for a child's ``returncode`` (negative: killed by that signal)."""
    return 128 - returncode if returncode < 0 else returncode


class _Lines:
    """Bytes of one stream -> complete lines (the unterminated end is a line at EOF)."""

    def __init__(self) -> None:
        self.tail = b""

    def feed(self, data: bytes) -> list[str]:
        parts = (self.tail + data).split(b"\n")
        self.tail = parts.pop()
        if len(self.tail) > 1 << 16:
            parts.append(self.tail)
            self.tail = b""
        return [p.decode("utf-8", errors="replace") for p in parts]

    def end(self) -> list[str]:
        out = [self.tail.decode("utf-8", errors="replace")] if self.tail else []
        self.tail = b""
        return out


class JobRun:
    """One wrapped run: the child, its two pipes, the parser and where events go.

    :param cmd: the command and its arguments.
    :param publisher: where crash events go.
    :param host: host name of the events; :param job: job id of the events.
    :param clock_ms: wall clock in epoch ms (event time).
    :param out_fd: where the child's stdout is copied (default 1); :param err_fd: its stderr (default 2).
    """

    def __init__(self, cmd: Sequence[str], publisher: Publisher, host: str, job: str | None,
                 rules_dir: str | None = None, dedup_interval_s: float = 10.0, idle_s: float = 2.0,
                 clock_ms: Callable[[], int] | None = None, out_fd: int = 1, err_fd: int = 2) -> None:
        self.cmd = list(cmd)
        self.publisher = publisher
        self.host = host
        self.job = job
        self.parser = AppLogParser(shipped_rules(rules_dir), idle_ms=int(idle_s * 1000))
        self.sink = FailureSink(host, dedup_interval_s)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.fds = {"stdout": out_fd, "stderr": err_fd}
        self.published = 0
        self.failures = 0
        self._publish_failed = False
        self._broken: set[str] = set()

    # -- events -----------------------------------------------------------------
    def _publish(self, failures: Sequence[Failure], now_ms: int, flush_dedup: bool = False) -> None:
        self.failures += len(failures)
        events = self.sink.take(failures, now_ms, self.job)
        events += self.sink.flush(now_ms, force=flush_dedup)
        for ev in events:
            try:
                self.publisher.publish(ev)
                self.published += 1
            except PublishError as exc:
                if not self._publish_failed:
                    self._publish_failed = True
                    print(f"fleetepi run: cannot publish crash events: {exc}", file=sys.stderr, flush=True)

    def _copy(self, name: str, data: bytes) -> None:
        """Pass the child's bytes on, whole; a closed reader of ours is no reason to stop the job."""
        if name in self._broken:
            return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fds[name], view)
            except InterruptedError:
                continue
            except BrokenPipeError:
                self._broken.add(name)
                return
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    time.sleep(0.001)
                    continue
                self._broken.add(name)
                return
            view = view[n:]

    # -- the run --------------------------------------------------------------------
    def run(self) -> int:
        """Run to the end; returns the exit status the wrapper should exit with."""
        try:
            proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=None)
        except FileNotFoundError:
            print(f"fleetepi run: {self.cmd[0]}: command not found", file=sys.stderr)
            return 127
        except PermissionError:
            print(f"fleetepi run: {self.cmd[0]}: permission denied", file=sys.stderr)
            return 126
        def forward(signum: int, _frame: object) -> None:
            if not _from_terminal(signum):
                proc.send_signal(signum)

        previous = {s: signal.signal(s, forward) for s in FORWARDED}
        try:
            return self._pump(proc)
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _pump(self, proc: subprocess.Popen[bytes]) -> int:
        assert proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        lines = {"stdout": _Lines(), "stderr": _Lines()}
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            sel.register(pipe, selectors.EVENT_READ, name)
        open_streams = 2
        while open_streams:
            ready = sel.select(timeout=0.5)
            now = self.clock_ms()
            for key, _ in ready:
                name = key.data
                try:
                    data = os.read(key.fileobj.fileno(), READ_CHUNK)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    self._feed(name, lines[name].end(), now)
                    continue
                self._copy(name, data)
                self._feed(name, lines[name].feed(data), now)
            self._publish(self.parser.flush(now), now)
        sel.close()
        returncode = proc.wait()
        now = self.clock_ms()
        self._publish(self.parser.flush(now, force=True), now)
        if returncode < 0 and -returncode in CRASH_SIGNALS and self.failures == 0:
            sig = signal.Signals(-returncode).name
            name = process_name(os.path.basename(self.cmd[0]))
            self._publish([Failure("runtime_error", f"{name}!{sig}", signal=sig, executable=name,
                                   notes=[f"fleetepi run: the process died of {sig} without a failure in its output"])], now)
        self._publish([], now, flush_dedup=True)
        return exit_status(returncode)

    def _feed(self, name: str, lines: list[str], now_ms: int) -> None:
        failures: list[Failure] = []
        for line in lines:
            try:
                failures += self.parser.feed(line, now_ms, stream=name)
            except Exception as exc:  # noqa: BLE001 - a parser bug must never touch the job
                log.warning("fleetepi run: a line could not be read: %s", exc)
        if failures:
            self._publish(failures, now_ms)


def run_job(cmd: Sequence[str], publisher: Publisher, host: str, job: str | None, flush_timeout_s: float = 10.0,
            **kw: Any) -> int:
    """Run ``cmd`` wrapped; flush and close the publisher (at most ``flush_timeout_s``) and return the exit status."""
    run = JobRun(cmd, publisher, host, job, **kw)
    status = run.run()
    try:
        publisher.flush(timeout_s=flush_timeout_s)
        publisher.close()
    except PublishError as exc:
        print(f"fleetepi run: events not delivered yet ({exc}); they stay in the spool", file=sys.stderr)
    return status


__all__ = ["CRASH_SIGNALS", "FORWARDED", "JobRun", "exit_status", "run_job"]
