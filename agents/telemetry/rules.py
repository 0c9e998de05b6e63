"""Kernel-log rules as data: ``agents/rules/kernel-log/rules.json``.

A new kernel-log problem is one JSON rule plus one sample line
(node-problem-detector's system-log monitor); no code changes. Loading
compiles every pattern, checks every field and that every rule matches its
own ``samples``, and reports ``file:line`` of the offending rule, so a bad
edit stops the agent at start-up instead of silently missing errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleetepi.agents.applog.crashlines import LINE_EXTRACTORS
from fleetepi.agents.exceptions import RuleFileError
from fleetepi.agents.telemetry.xid import RULES_DIR, SEVERITIES
from fleetepi.contract import TELEMETRY_KINDS

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_KNOWN = {
    "name", "pattern", "reject", "kind", "code", "family", "catalog", "reason", "severity", "action",
    "device", "severity_from_text", "unless_recent", "samples", "comment", "crash", "remember", "device_from",
}
#: crash extractors a rule may name (``fleetepi.agents.applog.crashlines``) and the origin of their events
CRASH_EXTRACTORS = {**dict.fromkeys(LINE_EXTRACTORS, "kernel_log"), "oom_kill": "oom_kill", "oom_memcg": None}


#: Reasons the parser itself gives (the rules add theirs): blank, matched by
#: no rule, over ``MAX_LINE_CHARS``, a code or count too large for the contract.
PARSER_REASONS = ("empty", "no_rule", "too_long", "number_out_of_range")


@dataclass(frozen=True)
class UnlessRecent:
    """Reject the match when the same (family, code, device) was emitted within ``window_lines``."""

    reason: str
    window_lines: int


@dataclass(frozen=True)
class LogRule:
    name: str
    pattern: re.Pattern[str]
    line: int
    reject: str | None = None
    kind: str | None = None
    code: int | None = None
    family: str | None = None
    catalog: str | None = None
    reason: str | None = None
    severity: str | None = None
    action: str | None = None
    device: str | None = None
    severity_from_text: bool = False
    unless_recent: UnlessRecent | None = None
    samples: tuple[str, ...] = field(default_factory=tuple)
    #: a crash extractor: the line is a crash event (or, with ``reject``, state for one)
    crash: str | None = None
    #: remember this line's device under a name, for a later line of the same message
    remember: str | None = None
    #: take the device remembered under this name (a multi-line message's first line)
    device_from: str | None = None

    #: its outcome depends on earlier lines or changes later ones: never cached by text (set by the loader)
    stateful: bool = False


def _rule_lines(text: str) -> dict[str, int]:
    """Line number of each rule's ``"name"`` key, for file:line messages."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.search(r'"name"\s*:\s*"([^"]+)"', line)
        if m and m.group(1) not in out:
            out[m.group(1)] = lineno
    return out


def _check(cond: bool, path: str, line: int, reason: str) -> None:
    if not cond:
        raise RuleFileError(path, line, reason)


def load_rules(rules_dir: Path | str = RULES_DIR, filename: str = "rules.json") -> tuple[LogRule, ...]:
    """Load, compile and self-test the kernel-log rules.

    :raises RuleFileError: naming the file and line of the first bad rule.
    """
    path = Path(rules_dir) / filename
    spath = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(spath, 0, f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuleFileError(spath, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    _check(isinstance(doc, dict) and isinstance(doc.get("rules"), list), spath, 1, 'top level must be {"rules": [...]}')
    lines = _rule_lines(text)
    rules: list[LogRule] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["rules"]):
        name = raw.get("name") if isinstance(raw, dict) else None
        line = lines.get(name, 0) if isinstance(name, str) else 0
        where = f"rule #{i}"
        _check(isinstance(raw, dict), spath, line, f"{where} is not an object")
        _check(isinstance(name, str) and bool(_NAME.match(name)), spath, line, f"{where}: name must be snake_case")
        _check(name not in seen, spath, line, f"duplicate rule name {name!r}")
        seen.add(name)
        unknown = sorted(set(raw) - _KNOWN)
        _check(not unknown, spath, line, f"rule {name!r}: unknown field(s) {', '.join(unknown)}")
        try:
            pattern = re.compile(raw.get("pattern", ""))
        except re.error as exc:
            raise RuleFileError(spath, line, f"rule {name!r}: bad regular expression: {exc}") from None
        _check(bool(raw.get("pattern")), spath, line, f"rule {name!r}: empty pattern")
        reject, kind, crash = raw.get("reject"), raw.get("kind"), raw.get("crash")
        _check(crash is None or crash in CRASH_EXTRACTORS, spath, line, f"rule {name!r}: crash must be one of {', '.join(CRASH_EXTRACTORS)}")
        if crash is not None and CRASH_EXTRACTORS[crash] is not None:
            _check(reject is None and kind is None, spath, line, f"rule {name!r}: a crash rule takes neither 'reject' nor 'kind'")
        else:
            _check((reject is None) != (kind is None), spath, line, f"rule {name!r}: needs exactly one of 'reject' or 'kind'")
        if kind is not None:
            _check(kind in TELEMETRY_KINDS, spath, line, f"rule {name!r}: kind {kind!r} is not one of {', '.join(TELEMETRY_KINDS)}")
        if reject is not None:
            _check(isinstance(reject, str) and bool(_NAME.match(reject)), spath, line, f"rule {name!r}: reject reason must be snake_case")
        sev = raw.get("severity")
        _check(sev is None or sev in SEVERITIES, spath, line, f"rule {name!r}: severity {sev!r} is not one of {', '.join(SEVERITIES)}")
        code = raw.get("code")
        _check(code is None or (isinstance(code, int) and code >= 0), spath, line, f"rule {name!r}: code must be a non-negative integer")
        _check(raw.get("catalog") in (None, "xid"), spath, line, f"rule {name!r}: catalog must be \"xid\"")
        device = raw.get("device")
        if device is not None:
            missing = [g for g in re.findall(r"{(\w+)}", device) if g not in pattern.groupindex]
            _check(not missing, spath, line, f"rule {name!r}: device template names unknown group(s) {missing}")
        ur = raw.get("unless_recent")
        unless = None
        if ur is not None:
            _check(isinstance(ur, dict) and isinstance(ur.get("reason"), str) and isinstance(ur.get("window_lines"), int),
                   spath, line, f"rule {name!r}: unless_recent needs reason and window_lines")
            _check(raw.get("family") is not None, spath, line, f"rule {name!r}: unless_recent needs a family")
            unless = UnlessRecent(ur["reason"], ur["window_lines"])
        samples = raw.get("samples") or []
        _check(isinstance(samples, list) and len(samples) > 0, spath, line, f"rule {name!r}: give at least one sample line")
        for s in samples:
            _check(isinstance(s, str) and pattern.search(s) is not None, spath, line, f"rule {name!r}: does not match its sample {s!r}")
        rules.append(LogRule(
            name=name, pattern=pattern, line=line, reject=reject, kind=kind, code=code,
            family=raw.get("family"), catalog=raw.get("catalog"), reason=raw.get("reason"),
            severity=sev, action=raw.get("action"), device=device,
            severity_from_text=bool(raw.get("severity_from_text", False)), unless_recent=unless,
            samples=tuple(samples), crash=crash, remember=raw.get("remember"), device_from=raw.get("device_from"),
            stateful=bool(crash or raw.get("remember") or raw.get("device_from") or unless),
        ))
    remembered = {r.remember for r in rules if r.remember}
    for r in rules:
        _check(r.device_from is None or r.device_from in remembered, spath, r.line,
               f"rule {r.name!r}: device_from {r.device_from!r} is remembered by no rule")
    return tuple(rules)


def reasons(rules: Sequence[LogRule]) -> set[str]:
    """Every rejection reason the rules (and the parser) can give."""
    out = {r.reject for r in rules if r.reject} | {r.unless_recent.reason for r in rules if r.unless_recent}
    return out | set(PARSER_REASONS) | {"unparsed_crash_line"}


__all__ = ["CRASH_EXTRACTORS", "PARSER_REASONS", "LogRule", "TELEMETRY_KINDS", "UnlessRecent", "load_rules", "reasons"]
