"""Kernel-log line -> telemetry fields, or a named reason for not being one.

Every line gets an outcome: a :class:`Parsed` (kind, code, device, message,
severity, action) or a :class:`Rejected` with a reason from the rules (e.g.
``nvrm_info``, ``ghes_detail``) or ``no_rule``. Nothing is dropped without a
name, which is what lets a test hold every real line in
``tests/agents/data/`` to an expected outcome.

Hostile or broken input costs bounded work: a line longer than
:data:`MAX_LINE_CHARS` (the kernel's own records stop at ~1 KiB) is rejected
as ``too_long`` before any regex sees it, a code or count too large for the
contract is ``number_out_of_range``, and each rule runs only when a literal
its pattern cannot match without is in the line (``literals.py``), so a
1 KiB line of ``a[`` costs one Aho-Corasick pass, not a regex per position.

The parser is stateful only in one bounded way: it remembers the last
``(family, code, device)`` it emitted per line window, because one GPU
falling off the bus is logged twice (``Xid 79`` and "GPU has fallen off the
bus") by some drivers and once by others, and must count once either way.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from fleetepi.agents.applog import crashlines
from fleetepi.agents.applog.crashlines import CrashFields
from fleetepi.agents.telemetry.literals import LiteralIndex, required
from fleetepi.agents.telemetry.rules import CRASH_EXTRACTORS, PARSER_REASONS, LogRule, load_rules
from fleetepi.agents.telemetry.xid import XidCatalog, load_catalog, normalize_pci

MAX_MESSAGE_CHARS = 1024
#: Longest line parsed: the kernel's records stop at 1 KiB of text (``LOG_LINE_MAX``);
#: syslog or journal prefixes add a few dozen characters. Longer lines are ``too_long``.
MAX_LINE_CHARS = 1152
#: Largest code or count taken from a line (the Xid/SXid catalogs stop in the
#: hundreds; the contract's integers are 64-bit). More digits: ``number_out_of_range``.
MAX_NUMBER_DIGITS = 9
#: Distinct stripped lines whose outcome is remembered (cleared when full).
CACHE_SIZE = 4096

#: kernel message prefixes that look like a syslog program name
_KERNEL_TAGS = r"(?:NVRM|mce|nvidia-nvswitch\d+|nvidia-peermem|EDAC\b[^:]*)[:\s]"

# Prefixes that loggers put before the kernel's text, tried repeatedly: a
# syslog line can wrap a dmesg timestamp.
# Every repeat is bounded: a prefix is a few dozen characters, and an
# unbounded one would rescan a hostile 1 KiB line once per attempt.
_PREFIXES = (
    re.compile(r"^\d{1,20},\d{1,20},\d{1,20},[^;]{0,64};"),  # /dev/kmsg record header
    re.compile(r"^\[\s{0,16}\d{1,20}\.\d{1,20}\]\s*"),  # dmesg [  12.345678]
    re.compile(r"^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ [\d:]+ \d{4}\]\s*"),  # dmesg -T
    re.compile(r"^kern\s{0,8}:\s{0,8}\w{1,16}\s{0,8}:\s{0,8}\S{1,64}\s+"),  # dmesg -x --time-format iso
    # syslog, any month language, with or without a host name; a "program" that is the kernel text's own
    # prefix (NVRM:, mce:, nvidia-nvswitchN:) is kept: a syslog without host names would swallow it.
    # Every repetition is bounded: a hostile line costs linear time.
    re.compile(r"^\S{1,32} {1,8}\d{1,2} \d\d:\d\d:\d\d {1,8}(?:(?!kernel:)(?!" + _KERNEL_TAGS + r")[\w.\-]{1,255} {1,8})?"
               r"(?:(?!" + _KERNEL_TAGS + r")[\w.\-]{1,255}(?:\[\d{1,20}\])?: )?"),
    re.compile(r"^\d{4}-\d\d-\d\dT[\d:.,]{1,32}(?:Z|[+-]\d\d:?\d\d)?\s{1,8}(?:(?!" + _KERNEL_TAGS + r")[\w.\-]{1,255}\s{1,8})?"
               r"(?:(?!" + _KERNEL_TAGS + r")[\w.\-]{1,255}(?:\[\d{1,20}\])?: )?"),  # ISO syslog
)
#: SXid lines say Fatal / Non-fatal right after the code (behind our prefixes): look no further.
SEVERITY_WITHIN_CHARS = 160
_SEV_TEXT = re.compile(r"\b(Fatal|Non-fatal|Nonfatal)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Parsed:
    rule: str
    kind: str
    code: int | None
    device: str | None
    message: str
    severity: str | None
    action: str | None
    count: int = 1


@dataclass(frozen=True)
class Rejected:
    rule: str | None
    reason: str


@dataclass(frozen=True)
class CrashLine:
    """A kernel line about a process that died (OOM kill, segfault, trap): a crash event, not telemetry."""

    rule: str
    origin: str
    fields: CrashFields


Outcome = Parsed | Rejected | CrashLine


def strip_prefix(line: str) -> str:
    """The kernel's own text, without kmsg/dmesg/syslog/journal prefixes."""
    text = line.rstrip("\r\n")
    for _ in range(4):
        for rx in _PREFIXES:
            m = rx.match(text)
            if m:
                text = text[m.end():]
                break
        else:
            break
    return text.strip(" ")


class KernelLogParser:
    """Turns kernel-log lines into :class:`Outcome`; one instance per stream.

    :param rules: compiled rules (default: the shipped ``rules.json``).
    :param catalog: Xid catalog for severity and action (default: the shipped TSV).
    """

    def __init__(self, rules: Sequence[LogRule] | None = None, catalog: XidCatalog | None = None) -> None:
        self.rules = tuple(rules) if rules is not None else load_rules()
        self.catalog = catalog if catalog is not None else load_catalog()
        self._lineno = 0
        self._recent: deque[tuple[int, tuple[str, int | None, str | None]]] = deque(maxlen=256)
        # Floods repeat the same text with a new timestamp: remember outcomes by text.
        self._cache: dict[str, tuple[LogRule | None, Outcome]] = {}
        #: name -> (line number, device) of a multi-line message's first line (``remember`` / ``device_from``)
        self._remembered: dict[str, tuple[int, str | None]] = {}
        #: pid -> task_memcg of a pending OOM kill
        self._memcg: dict[int, str] = {}
        # Prefilter: a rule is tried only when a literal its pattern needs is in the line.
        self._index = LiteralIndex([required(rule.pattern) for rule in self.rules])

    def parse(self, line: str) -> Outcome:
        self._lineno += 1
        if len(line) > MAX_LINE_CHARS:
            return Rejected(None, "too_long")
        text = strip_prefix(line)
        if not text:
            return Rejected(None, "empty")
        hit = self._cache.get(text)
        if hit is not None:
            rule, outcome = hit
            if rule is None or not rule.stateful:
                if rule is not None and rule.family and isinstance(outcome, Parsed):
                    self._recent.append((self._lineno, (rule.family, outcome.code, outcome.device)))
                return outcome
        outcome, rule = self._classify(text)
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[text] = (rule, outcome)
        return outcome

    def _classify(self, text: str) -> tuple[Outcome, LogRule | None]:
        rules = self.rules
        for i in self._index.candidates(text):
            rule = rules[i]
            m = rule.pattern.search(text)
            if m is None:
                continue
            if rule.crash:
                return self._crash(rule, text), rule
            if rule.reject:
                if rule.remember:
                    self._remembered[rule.remember] = (self._lineno, self._device(rule, m.groupdict()))
                return Rejected(rule.name, rule.reject), rule
            return self._emit(rule, m, text), rule
        return Rejected(None, "no_rule"), None

    def _crash(self, rule: LogRule, text: str) -> Outcome:
        if rule.crash == "oom_memcg":
            got = crashlines.oom_memcg(text)
            if got is not None:
                if len(self._memcg) > 256:
                    self._memcg.clear()
                self._memcg[got[0]] = got[1]
            return Rejected(rule.name, rule.reject or "oom_kill_detail")
        fields = (crashlines.oom_kill(text, self._memcg) if rule.crash == "oom_kill"
                  else crashlines.LINE_EXTRACTORS[rule.crash or ""](text))
        if fields is None:
            return Rejected(rule.name, "unparsed_crash_line")
        return CrashLine(rule.name, CRASH_EXTRACTORS[rule.crash or ""] or "kernel_log", fields)

    @staticmethod
    def _device(rule: LogRule, groups: dict[str, str | None]) -> str | None:
        if rule.device:
            return rule.device.format(**{k: (v or "") for k, v in groups.items()})
        if groups.get("device"):
            return normalize_pci(groups["device"] or "")
        return None

    def _emit(self, rule: LogRule, m: re.Match[str], text: str) -> Outcome:
        groups = m.groupdict()
        code = rule.code
        digits = groups.get("code")
        if code is None and digits:
            if len(digits) > MAX_NUMBER_DIGITS:
                return Rejected(rule.name, "number_out_of_range")
            code = int(digits)
        raw_count = groups.get("count")
        if raw_count and len(raw_count) > MAX_NUMBER_DIGITS:
            return Rejected(rule.name, "number_out_of_range")
        device = self._device(rule, groups)
        if rule.device_from:
            lineno, remembered = self._remembered.pop(rule.device_from, (0, None))
            if remembered is not None and self._lineno - lineno <= 16:
                device = remembered
        msg = (groups.get("msg") or text).strip().rstrip(".")
        if rule.reason:
            msg = f"{rule.reason}: {msg}"
        if groups.get("switch"):
            msg = f"{groups['switch']}: {msg}"
        severity, action = rule.severity, rule.action
        if rule.catalog == "xid" and code is not None:
            info = self.catalog.get(code)
            if info is not None:
                severity = severity or info.severity
                action = action or info.action
                if not msg:
                    msg = info.description
        if rule.severity_from_text and severity is None:
            sm = _SEV_TEXT.search(msg, 0, SEVERITY_WITHIN_CHARS)
            if sm:
                severity = "critical" if sm.group(1).lower() == "fatal" else "warning"
        count = int(raw_count) if raw_count else 1
        if rule.family:
            key = (rule.family, code, device)
            if rule.unless_recent and any(
                k == key and self._lineno - n <= rule.unless_recent.window_lines for n, k in self._recent
            ):
                return Rejected(rule.name, rule.unless_recent.reason)
            self._recent.append((self._lineno, key))
        return Parsed(rule.name, rule.kind or "other", code, device, msg[:MAX_MESSAGE_CHARS], severity, action, count)


__all__ = ["MAX_LINE_CHARS", "PARSER_REASONS", "CrashLine", "KernelLogParser", "Outcome", "Parsed", "Rejected",
           "strip_prefix"]
