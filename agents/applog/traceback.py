"""Python tracebacks read back from text, one stream at a time.

A small state machine per output stream (one rank's stderr): ``idle`` until
``Traceback (most recent call last):``, then ``frames`` (``File "...", line
N, in f`` lines and the indented source and caret lines Python prints under
them), then ``after`` once the exception line (``Type: message``) came. From
``after``, the chain goes on when Python says so (``The above exception was
the direct cause of the following exception:`` / ``During handling of the
above exception, another exception occurred:``) or when the exception was a
``RemoteTraceback`` whose text is the worker process's own traceback between
``\"\"\"`` lines (multiprocessing, concurrent.futures). Anything else closes
the chain; so does silence (:meth:`TracebackReader.idle`): a traceback is
the last thing a dying process writes.

A traceback cut short (the log rotated, a line limit, a rank killed while
printing) closes as ``truncated`` with the frames read so far. Python's
``faulthandler`` dump of a fatal signal (``Fatal Python error: Segmentation
fault`` and the ``Current thread ...`` frames) is read the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)(?:,? in (?P<func>.+?))?\s*$')
_EXC = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:<[\w.]+>)?)(?::(?P<msg>.*))?$")
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"
_THREAD = re.compile(r"^Exception in thread (?P<name>.+?):?$")
_REMOTE = re.compile(r"^(?P<type>[\w.]*RemoteTraceback):\s*(?:\"\"\")?$")
_REPEATED = re.compile(r"^\s*\[Previous line repeated \d+ more times?\]\s*$")
_FATAL = re.compile(r"^Fatal Python error: (?P<what>.+)$")
_FH_THREAD = re.compile(r"^(?P<current>Current thread|Thread) 0x[0-9a-f]+ (?:\[[^\]]*\] )?\(most recent call first\):$")
_FH_SIGNAL = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Aborted": "SIGABRT",
              "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
#: lines read into one chain at most; past it the chain closes as truncated (memory stays bounded)
MAX_LINES = 2000


@dataclass(slots=True)
class PyFrameText:
    file: str
    line: int
    function: str


@dataclass(slots=True)
class PyException:
    """One exception of a chain, as printed: frames outermost first (Python's order)."""

    type: str | None
    message: str = ""
    frames: list[PyFrameText] = field(default_factory=list)
    #: how it joins the one before it: "cause", "context", "remote" (a worker's traceback), None (first)
    link: str | None = None
    detail: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Chain:
    """One traceback as Python printed it: the exceptions in print order (the last one propagated)."""

    exceptions: list[PyException]
    thread: str | None = None
    truncated: bool = False
    fatal_signal: str | None = None
    lines: int = 0


class TracebackReader:
    """The state machine of one stream.

    :meth:`feed` returns ``(consumed, closed)``: whether the line belonged to
    a traceback, and a chain that this line closed (the line itself is then
    not consumed when it starts something else).
    """

    def __init__(self, continuation: re.Pattern[str] | None = None) -> None:
        self.state = "idle"
        self.chain: Chain | None = None
        self._link: str | None = None
        self._thread: str | None = None
        self.last_ms = 0
        self.continuation = continuation

    # -- helpers ----------------------------------------------------------------
    def _start(self, link: str | None = None) -> None:
        if self.chain is None:
            self.chain = Chain([], thread=self._thread)
            self._thread = None
        self.chain.exceptions.append(PyException(None, link=link))
        self.state = "frames"

    def _close(self, truncated: bool = False) -> Chain | None:
        chain, self.chain = self.chain, None
        self.state, self._link = "idle", None
        if chain is None:
            return None
        if truncated:
            chain.truncated = True
        chain.exceptions = [e for e in chain.exceptions
                            if e.frames or (e.type and not (e.type.endswith("RemoteTraceback") and not e.frames))]
        return chain if chain.exceptions else None

    @property
    def pending(self) -> bool:
        return self.chain is not None or self._thread is not None

    def idle(self) -> Chain | None:
        """Close what is open because nothing more came (end of output, or silence)."""
        self._thread = None
        if self.chain is None:
            return None
        return self._close(truncated=self.state == "frames")

    # -- the machine --------------------------------------------------------------
    def feed(self, text: str, now_ms: int) -> tuple[bool, Chain | None]:
        self.last_ms = now_ms
        if self.chain is not None:
            self.chain.lines += 1
            if self.chain.lines > MAX_LINES:
                return False, self._close(truncated=True)
        st = self.state
        if st == "idle":
            return self._idle(text), None
        if st == "frames":
            return self._frames(text)
        if st.startswith("fatal"):
            return self._fatal(text)
        return self._after(text)

    def _idle(self, text: str) -> bool:
        if "Traceback" not in text and "Exception in thread" not in text and "Fatal Python error" not in text:
            return False  # most lines: three substring tests instead of three regexes
        if text == HEADER or text.endswith(HEADER):
            self._start()
            return True
        m = _REMOTE.match(text)
        if m:  # a worker's traceback follows between \"\"\" lines, then the pool's re-raise
            self.chain = Chain([PyException(m.group("type"))], thread=self._thread)
            self._thread = None
            self.state = "after"
            if text.rstrip().endswith('"""'):
                self._link = "remote"
            return True
        m = _THREAD.match(text)
        if m and "thread" in text:
            self._thread = m.group("name")
            return True
        m = _FATAL.match(text)
        if m:
            self.chain = Chain([PyException(None)], fatal_signal=_FH_SIGNAL.get(m.group("what").strip(), "fatal_error"))
            self.chain.exceptions[0].message = m.group("what").strip()
            self.state = "fatal"
            return True
        return False

    def _frames(self, text: str) -> tuple[bool, Chain | None]:
        assert self.chain is not None
        exc = self.chain.exceptions[-1]
        m = _FRAME.match(text)
        if m:
            exc.frames.append(PyFrameText(m.group("file"), int(m.group("line")), (m.group("func") or "?").strip()))
            return True, None
        if not text.strip() or (text[:1] in " \t" and exc.frames) or _REPEATED.match(text):
            return True, None  # source line, caret line, recursion summary
        if text == HEADER:  # a new traceback while this one had no exception line: this one was cut
            closed = self._close(truncated=True)
            self._start()
            return True, closed
        m = _EXC.match(text)
        if m and (exc.frames or exc.link == "remote"):
            exc.type = m.group("type")
            exc.message = (m.group("msg") or "").strip()
            self.state = "after"
            return True, None
        return False, self._close(truncated=True)

    def _after(self, text: str) -> tuple[bool, Chain | None]:
        assert self.chain is not None
        last = self.chain.exceptions[-1]
        stripped = text.strip()
        if not stripped:
            return True, None
        if stripped == _CAUSE:
            self._link = "cause"
            return True, None
        if stripped == _CONTEXT:
            self._link = "context"
            return True, None
        if stripped == '"""':
            if last.type and last.type.endswith("RemoteTraceback"):
                self._link = "remote"
            return True, None
        if text == HEADER:
            if self._link is not None:
                link, self._link = self._link, None
                self._start(link)
                return True, None
            closed = self._close()
            self._start()
            return True, closed
        if self._link is None and self.continuation is not None and self.continuation.search(text):
            if len(last.detail) < 20:
                last.detail.append(stripped)
            return True, None
        if self._link == "remote" or (last.type and last.type.endswith("RemoteTraceback")):
            return True, None  # text of the remote block before its own traceback header
        return False, self._close()

    def _fatal(self, text: str) -> tuple[bool, Chain | None]:
        """faulthandler: frames of the current thread (most recent first), other threads ignored."""
        assert self.chain is not None
        exc = self.chain.exceptions[0]
        if not text.strip():
            if exc.frames:
                self.state = "fatal_done"
            return True, None
        m = _FH_THREAD.match(text.strip())
        if m:
            self.state = "fatal" if m.group("current") == "Current thread" and not exc.frames else "fatal_other"
            return True, None
        fm = _FRAME.match(text)
        if fm and self.state == "fatal":
            exc.frames.insert(0, PyFrameText(fm.group("file"), int(fm.group("line")), (fm.group("func") or "?").strip()))
            return True, None
        if fm or text.startswith("  ") or text.startswith("Extension modules:"):
            return True, None
        return False, self._close()


__all__ = ["HEADER", "MAX_LINES", "Chain", "PyException", "PyFrameText", "TracebackReader"]
