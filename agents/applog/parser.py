"""Application output -> failures: tracebacks, watchdog hangs, CUDA and NCCL errors, OOM kills.

One parser per output (a log file, a journald unit, the wrapped job's
stderr). Each line gets an outcome, like the kernel-log parser's: it is part
of a traceback (``in_traceback``), the line of a failure (``event``), a
named rejection from the rules (``nccl_info``, ``launcher_summary``, ...),
or ``other_output`` (the program's ordinary output: most lines).

Lines are demultiplexed by their torchrun prefix (``[rank3]:``,
``[default0]:``) before anything else, so the tracebacks of eight ranks
printed into one file at once are eight tracebacks, not one garbled one.
Kernel-style prefixes (syslog, dmesg) are stripped where present, so the
same parser reads ``journalctl`` and syslog files.

Signatures (the contract's rule: equal failures give byte-identical
signatures on every host):

* traceback: the failure class (``cuda_oom``, from ``message_classes.tsv``)
  or the exception type, then the innermost meaningful frames as
  ``python:FILE!FUNCTION`` (files relative to site-packages or the stdlib,
  else their basename; framework wrappers, dispatch layers and bootstraps
  skipped by ``python_skip_frames.txt``), then the root cause of a chain
  (``cause KeyError@python:cfg.py!load``); the message, normalised, is a note;
* a worker process's traceback (``RemoteTraceback``) leads its chain: the
  worker's frames are where it failed, the pool's re-raise is not;
* a single-line failure: the rule's template (``watchdog_timeout!ALLREDUCE``,
  ``nccl_warn!NET/IB completion status=12``, ``oom_kill!python``), or, for a
  lone exception line with no frames, the class or ``Type: normalised message``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from fleetepi.agents.applog import crashlines
from fleetepi.agents.applog.rules import AppRules, LineRule, shipped_rules
from fleetepi.agents.applog.traceback import Chain, PyException, TracebackReader
from fleetepi.agents.core.rules import SigFrame, python_file_key
from fleetepi.agents.telemetry.logparse import strip_prefix
from fleetepi.contract import Crash, Frame

#: torchrun's per-rank prefixes (``--tee`` / ``--log-line-prefix-template``), after an optional ``[pid]``.
_RANK = re.compile(r"^(?:\[\d+\]\s*)?\[(?P<rank>(?:rank|default)\d+)\]:\s?")
#: a kernel / syslog / dmesg prefix is there (then :func:`strip_prefix` removes it; otherwise the line is kept
#: as it is, indentation included, which the traceback reader needs)
_KERNEL_PREFIX = re.compile(
    r"^(?:\d+,\d+,\d+,[^;]*;|\[\s*\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} |kern\s*:|\S+ +\d{1,2} \d\d:\d\d:\d\d "
    r"|\d{4}-\d\d-\d\dT[\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s+\S+\s+\S+: )")
_STANDALONE = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z_]\w*(?:Error|Exception|Failure|Fault))(?::\s?(?P<msg>.*))?$")
_FIELD = re.compile(r"{([\w|]+)}")
#: lines whose outcome is remembered by text (floods repeat the same text)
CACHE_SIZE = 4096
#: frames kept on an event (the contract allows 256)
MAX_EVENT_FRAMES = 64


@dataclass
class Failure:
    """One failure read from output: a crash event without host, time and (maybe) job."""

    origin: str
    signature: str
    frames: list[Frame] | None = None
    notes: list[str] = field(default_factory=list)
    signal: str | None = None
    executable: str | None = None
    fault_address: str | None = None
    fault_class: str | None = None
    cpu: int | None = None
    shape_flags: list[str] | None = None
    job: str | None = None
    stream: str = ""

    def to_crash(self, host: str, ts: object, job: str | None = None) -> Crash:
        """The contract's crash event (``job``: the source's, unless the line named its own)."""
        return Crash(ts=ts, host=host, signature=self.signature[:1024], origin=self.origin,  # type: ignore[arg-type]
                     frames=self.frames or None, job=self.job or job, signal=self.signal, executable=self.executable,
                     fault_address=self.fault_address, fault_class=self.fault_class,  # type: ignore[arg-type]
                     cpu=self.cpu, shape_flags=self.shape_flags or None, notes=self.notes[:16] or None)


class AppLogParser:
    """Lines of one output -> :class:`Failure`; keeps per-stream traceback state.

    :param rules: the loaded rules (default: the shipped ``agents/rules/app-log/``).
    :param python_frames: meaningful Python frames in a signature.
    :param idle_ms: a traceback with no new line for this long is complete (event time of :meth:`feed`).
    """

    def __init__(self, rules: AppRules | None = None, python_frames: int = 3, idle_ms: int = 2000) -> None:
        self.rules = rules if rules is not None else shipped_rules()
        self.python_frames = python_frames
        self.idle_ms = idle_ms
        cont = [r.pattern.pattern for r in self.rules.lines if r.continuation]
        self._continuation = re.compile("|".join(f"(?:{p})" for p in cont)) if cont else None
        self.readers: dict[str, TracebackReader] = {}
        self._memcg: dict[int, str] = {}
        self._cache: dict[str, str] = {}
        #: outcome -> lines ("event", "in_traceback" or a rejection reason)
        self.outcomes: Counter[str] = Counter()
        self.last_outcome = ""
        self._signatures: dict[tuple[object, ...], tuple[str, tuple[str, ...]]] = {}

    # -- lines -------------------------------------------------------------------
    def feed(self, line: str, now_ms: int = 0, stream: str = "") -> list[Failure]:
        """Failures this line completes (a traceback it closed, or the line's own); may be empty."""
        text = line.rstrip("\r\n")
        key = stream
        if text[:1] == "[":
            m = _RANK.match(text)
            if m is not None:
                key = f"{stream}[{m.group('rank')}]"
                text = text[m.end():]
        if _KERNEL_PREFIX.match(text):
            text = strip_prefix(text)
        reader = self.readers.get(key)
        if reader is None:
            reader = self.readers[key] = TracebackReader(self._continuation)
        out: list[Failure] = []
        consumed, closed = reader.feed(text, now_ms)
        if closed is not None:
            self._emit(closed, key, out)
            if not consumed:
                consumed, _ = reader.feed(text, now_ms)
        if consumed:
            self._count("in_traceback")
            return out
        outcome, failure = self._line(text)
        self._count(outcome)
        if failure is not None:
            failure.stream = key
            out.append(failure)
        return out

    def flush(self, now_ms: int, force: bool = False) -> list[Failure]:
        """Tracebacks complete by silence (``idle_ms`` without a line), or all of them (``force``: end of output)."""
        out: list[Failure] = []
        for key in list(self.readers):
            reader = self.readers[key]
            if force or now_ms - reader.last_ms >= self.idle_ms:
                chain = reader.idle()
                if chain is not None:
                    self._emit(chain, key, out)
                if not reader.pending:
                    del self.readers[key]
        return out

    def _count(self, outcome: str) -> None:
        self.last_outcome = outcome
        self.outcomes[outcome] += 1

    def _emit(self, chain: Chain, key: str, out: list[Failure]) -> None:
        failure = self.chain_failure(chain)
        if failure is None:
            self.outcomes["ignored_exception"] += 1
            return
        failure.stream = key
        self.outcomes["event"] += 1
        out.append(failure)

    def _line(self, text: str) -> tuple[str, Failure | None]:
        if not text.strip():
            return "empty", None
        cached = self._cache.get(text)
        if cached is not None:
            return cached, None
        if not self.rules.prefilter.search(text):
            return self._remember(text, "other_output"), None
        for rule in self.rules.lines:
            m = rule.search(text)
            if m is None:
                continue
            if rule.reject:
                if rule.extract == "oom_memcg":
                    got = crashlines.oom_memcg(text)
                    if got is not None:
                        if len(self._memcg) > 256:
                            self._memcg.clear()
                        self._memcg[got[0]] = got[1]
                    return rule.reject, None
                return self._remember(text, rule.reject), None
            failure = self._rule_failure(rule, m, text)
            return ("event", failure) if failure is not None else ("other_output", None)
        m = _STANDALONE.match(text.strip())
        if m is not None:
            etype, msg = m.group("type"), (m.group("msg") or "").strip()
            if self.rules.ignored.matches(SigFrame(module="", function=etype)):
                return self._remember(text, "ignored_exception"), None
            cls = self.rules.message_class(msg)
            norm = self.rules.normalize_message(msg)
            sig = cls or (f"{etype}: {norm[:120]}" if norm else etype)
            return "event", Failure("runtime_error", sig, notes=[f"exception {etype}: {norm}" if norm else f"exception {etype}",
                                                                 "no traceback: a lone exception line"])
        return self._remember(text, "other_output"), None

    def _remember(self, text: str, outcome: str) -> str:
        if outcome == "other_output" and text[:1].isdigit():
            return outcome  # a timestamped line is never seen twice: caching it only churns the cache
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[text] = outcome
        return outcome

    def _rule_failure(self, rule: LineRule, m: re.Match[str], text: str) -> Failure | None:
        if rule.extract == "oom_kill":
            fields = crashlines.oom_kill(text, self._memcg)
        else:
            one_line = crashlines.LINE_EXTRACTORS.get(rule.extract or "")
            fields = one_line(text) if one_line else None
        assert rule.origin is not None
        if rule.extract:
            if fields is None:
                return None
            return Failure(rule.origin, fields.signature, notes=[f"rule {rule.name}", *fields.notes], signal=fields.signal,
                           executable=fields.executable, fault_address=fields.fault_address,
                           fault_class=fields.fault_class, cpu=fields.cpu, shape_flags=fields.shape_flags or None,
                           job=fields.job)
        assert rule.signature is not None
        groups = m.groupdict()

        def field_value(match: re.Match[str]) -> str:
            for part in match.group(1).split("|"):
                if part == "class":
                    cls = self.rules.message_class(text)
                    if cls:
                        return cls
                    continue
                value = (groups.get(part) or "").strip()
                if value:
                    return self.rules.normalize_message(value, 160) if part == "msg" else value
            return self.rules.normalize_message(groups.get("msg") or text, 160)

        sig = _FIELD.sub(field_value, rule.signature)
        notes = [f"rule {rule.name}"]
        msg = groups.get("msg")
        if msg:
            notes.append(f"message: {self.rules.normalize_message(msg)}")
        return Failure(rule.origin, sig, notes=notes, signal=rule.signal)

    # -- tracebacks ------------------------------------------------------------------
    def _head(self, exc: PyException) -> str:
        cls = self.rules.message_class(" ".join([exc.type or "", exc.message, *exc.detail]))
        return cls or exc.type or "truncated-traceback"

    def _sigframes(self, exc: PyException) -> tuple[list[SigFrame], list[str]]:
        """Innermost-first frames, the skip list applied (all kept when all would go)."""
        frames = [SigFrame(module=python_file_key(f.file), function=f.function, language="python") for f in reversed(exc.frames)]
        kept = [f for f in frames if not self.rules.skip.matches(f)]
        skipped = [f.render() for f in frames if self.rules.skip.matches(f)]
        if not kept:
            return frames, []
        return kept, skipped

    def _chain_signature(self, chain: Chain) -> tuple[str, tuple[str, ...]]:
        excs = chain.exceptions
        primary = next((e for e in excs if e.link == "remote"), excs[-1])
        head = chain.fatal_signal if chain.fatal_signal else self._head(primary)
        kept, skipped = self._sigframes(primary)
        parts = [head, *(f.render() for f in kept[: self.python_frames])]
        notes: list[str] = []
        root = excs[0]
        if root is not primary and root.type:
            rkept, _ = self._sigframes(root)
            parts.append(f"cause {self._head(root)}" + (f"@{rkept[0].render()}" if rkept else ""))
        if len(excs) > 1:
            arrows = {"cause": " -(direct cause of)-> ", "context": " -(while handling it)-> ", "remote": " -(in a worker)-> "}
            notes.append("chain: " + "".join((arrows.get(e.link or "", " -> ") if i else "") + (e.type or "?")
                                             for i, e in enumerate(excs)))
        if primary.type:
            msg = self.rules.normalize_message(primary.message)
            notes.append(f"exception {primary.type}: {msg}" if msg else f"exception {primary.type}")
        if chain.fatal_signal:
            notes.append(f"faulthandler: Fatal Python error: {primary.message}")
        if skipped:
            notes.append(f"skipped {len(skipped)} frames: {', '.join(skipped[:6])}{' ...' if len(skipped) > 6 else ''}")
        return " | ".join(parts), tuple(notes)

    def chain_failure(self, chain: Chain) -> Failure | None:
        """The failure of one traceback chain, or None when its exception is on the ignored list."""
        excs = chain.exceptions
        primary_i = next((i for i, e in enumerate(excs) if e.link == "remote"), len(excs) - 1)
        primary = excs[primary_i]
        if primary.type and self.rules.ignored.matches(SigFrame(module="", function=primary.type)):
            return None
        key = (chain.fatal_signal, tuple((e.type, e.message, e.link, tuple(e.detail), tuple((f.file, f.function) for f in e.frames))
                                         for e in excs))
        got = self._signatures.get(key)
        if got is None:
            if len(self._signatures) >= 1024:
                self._signatures.clear()
            got = self._signatures[key] = self._chain_signature(chain)
        signature, notes = got
        extra = []
        if chain.thread:
            extra.append(f"in thread {self.rules.normalize_message(chain.thread, 80)}")
        if primary.link == "remote":
            extra.append("in a worker process (RemoteTraceback)")
        if chain.truncated:
            extra.append("truncated: the traceback was cut before its end")
        frames = [Frame(module=python_file_key(f.file), function=f.function, file=python_file_key(f.file), line=f.line,
                        language="python") for f in reversed(primary.frames)][:MAX_EVENT_FRAMES]
        return Failure("python_traceback", signature, frames=frames or None, notes=[*notes, *extra],
                       signal=chain.fatal_signal if chain.fatal_signal in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL") else None)


__all__ = ["AppLogParser", "CACHE_SIZE", "Failure"]
