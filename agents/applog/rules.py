"""Application-output rules as data: ``agents/rules/app-log/``.

Four files, each validated at load time with ``file:line`` on the first bad
line, so a bad edit stops the agent at start-up (the kernel-log rules' way):

* ``rules.json``: single-line failures (watchdog timeouts, NCCL warnings, C++
  terminate, glog FATAL, CUDA messages, the kernel's OOM-kill and segfault
  lines) and named rejections, each with sample lines it must match; a
  ``prefilter`` regex that every sample must also match lets ordinary output
  (most lines) skip the rules with one search;
* ``python_skip_frames.txt``: Python frames left out of signatures (framework
  wrappers, torch dispatch layers, runpy and thread/process bootstraps);
* ``message_classes.tsv``: message regex -> failure class (``cuda_oom``),
  which names the failure instead of the exception type;
* ``normalize.tsv``: what is removed from a message before it is a note
  (addresses, sizes, ranks, shapes, paths, numbers);
* ``ignored_exceptions.txt``: exception types whose traceback is no failure
  of its own (torchrun's ``ChildFailedError``, ``KeyboardInterrupt``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fleetepi.agents.applog.crashlines import LINE_EXTRACTORS
from fleetepi.agents.core.exceptions import BadRuleLine
from fleetepi.agents.core.rules import FrameList, load_list
from fleetepi.agents.exceptions import RuleFileError
from fleetepi.agents.telemetry.rules import _rule_lines

RULES_DIR = Path(__file__).resolve().parent.parent / "rules" / "app-log"
ORIGINS = ("python_traceback", "kernel_log", "watchdog", "oom_kill", "runtime_error")
EXTRACTORS = ("oom_kill", "oom_memcg", *LINE_EXTRACTORS)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_KNOWN = {"name", "pattern", "reject", "origin", "signature", "signal", "extract", "continuation", "samples", "comment", "needles"}
_TEMPLATE_FIELD = re.compile(r"{([\w|]+)}")


@dataclass(frozen=True)
class LineRule:
    name: str
    pattern: re.Pattern[str]
    line: int
    reject: str | None = None
    origin: str | None = None
    signature: str | None = None
    signal: str | None = None
    extract: str | None = None
    continuation: bool = False
    #: plain substrings, one of which a line must contain before the regex is tried (speed; checked on the samples)
    needles: tuple[str, ...] = ()

    def search(self, text: str) -> re.Match[str] | None:
        if self.needles:
            for n in self.needles:
                if n in text:
                    return self.pattern.search(text)
            return None
        return self.pattern.search(text)


@dataclass(frozen=True)
class Prefilter:
    """Cheap test run first on every line: one of ``contains``, or ``starts`` matching at the start."""

    contains: tuple[str, ...]
    starts: re.Pattern[str]

    def search(self, text: str) -> bool:
        for needle in self.contains:
            if needle in text:
                return True
        return self.starts.match(text) is not None


class Normalizer:
    """The rows of ``normalize.tsv`` as one regex pass: at each position the first row that matches
    wins and its text is not looked at again (what applying the rows in order would do, in one scan)."""

    def __init__(self, rows: tuple[tuple[re.Pattern[str], str], ...]) -> None:
        self.rows = rows
        self.replacements = [repl for _rx, repl in rows]
        self._rx = re.compile("|".join(f"(?P<r{i}>{rx.pattern})" for i, (rx, _r) in enumerate(rows))) if rows else None
        self.apply = lru_cache(maxsize=4096)(self._apply)

    def _replace(self, m: re.Match[str]) -> str:
        return self.replacements[int((m.lastgroup or "r0")[1:])]

    def _apply(self, text: str) -> str:
        return self._rx.sub(self._replace, text) if self._rx is not None else text


@dataclass(frozen=True)
class AppRules:
    prefilter: Prefilter
    lines: tuple[LineRule, ...]
    skip: FrameList
    classes: tuple[tuple[str, re.Pattern[str]], ...]
    normalizer: Normalizer
    ignored: FrameList

    def message_class(self, text: str) -> str | None:
        for name, rx in self.classes:
            if rx.search(text):
                return name
        return None

    def reasons(self) -> set[str]:
        """Every rejection reason a line can get."""
        return {r.reject for r in self.lines if r.reject} | {
            "other_output", "empty", "in_traceback", "ignored_exception"}

    def normalize_message(self, text: str, limit: int = 240) -> str:
        return self.normalizer.apply(text[:2048]).strip()[:limit]


def _check(cond: bool, path: str, line: int, reason: str) -> None:
    if not cond:
        raise RuleFileError(path, line, reason)


def _tsv(path: Path, columns: int) -> list[tuple[int, list[str]]]:
    """Rows of a TAB-separated file after its header, with line numbers; ``#`` lines are comments."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(str(path), 0, f"cannot read: {exc.strerror or exc}") from None
    rows: list[tuple[int, list[str]]] = []
    header = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        cols = raw.split("\t")
        _check(len(cols) == columns, str(path), lineno, f"expected {columns} tab-separated columns, got {len(cols)}")
        if not header:
            header = True
            continue
        rows.append((lineno, cols))
    return rows


def _compile(path: Path, lineno: int, pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleFileError(str(path), lineno, f"bad regular expression {pattern!r}: {exc}") from None


def _line_rules(path: Path) -> tuple[Prefilter, tuple[LineRule, ...]]:
    spath = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(spath, 0, f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RuleFileError(spath, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    pf = doc.get("prefilter") if isinstance(doc, dict) else None
    _check(isinstance(doc, dict) and isinstance(doc.get("rules"), list) and isinstance(pf, dict)
           and isinstance(pf.get("contains"), list) and isinstance(pf.get("starts"), str),
           spath, 1, 'top level must be {"prefilter": {"contains": [...], "starts": "..."}, "rules": [...]}')
    assert isinstance(pf, dict)
    prefilter = Prefilter(tuple(str(c) for c in pf["contains"] if c), _compile(path, 1, pf["starts"]))
    where = _rule_lines(text)
    rules: list[LineRule] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["rules"]):
        name = raw.get("name") if isinstance(raw, dict) else None
        line = where.get(name, 0) if isinstance(name, str) else 0
        _check(isinstance(name, str) and bool(_NAME.match(name)), spath, line, f"rule #{i}: name must be snake_case")
        assert isinstance(name, str)
        _check(name not in seen, spath, line, f"duplicate rule name {name!r}")
        seen.add(name)
        unknown = sorted(set(raw) - _KNOWN)
        _check(not unknown, spath, line, f"rule {name!r}: unknown field(s) {', '.join(unknown)}")
        _check(bool(raw.get("pattern")), spath, line, f"rule {name!r}: empty pattern")
        pattern = _compile(path, line, raw["pattern"])
        reject, origin = raw.get("reject"), raw.get("origin")
        _check((reject is None) != (origin is None), spath, line, f"rule {name!r}: needs exactly one of 'reject' or 'origin'")
        if reject is not None:
            _check(isinstance(reject, str) and bool(_NAME.match(reject)), spath, line, f"rule {name!r}: reject reason must be snake_case")
        if origin is not None:
            _check(origin in ORIGINS, spath, line, f"rule {name!r}: origin {origin!r} is not one of {', '.join(ORIGINS)}")
            _check(bool(raw.get("signature")) or bool(raw.get("extract")), spath, line, f"rule {name!r}: an event needs a signature template or an extract")
        extract = raw.get("extract")
        _check(extract is None or extract in EXTRACTORS, spath, line, f"rule {name!r}: extract must be one of {', '.join(EXTRACTORS)}")
        sig = raw.get("signature")
        if sig is not None:
            for fld in _TEMPLATE_FIELD.findall(sig):
                for part in fld.split("|"):
                    _check(part in pattern.groupindex or part == "class", spath, line,
                           f"rule {name!r}: signature template names unknown group {part!r}")
        samples = raw.get("samples") or []
        _check(isinstance(samples, list) and len(samples) > 0, spath, line, f"rule {name!r}: give at least one sample line")
        for s in samples:
            _check(isinstance(s, str) and pattern.search(s) is not None, spath, line, f"rule {name!r}: does not match its sample {s!r}")
            _check(prefilter.search(s), spath, line, f"rule {name!r}: the prefilter does not let its sample {s!r} through")
        needles = raw.get("needles") or []
        _check(isinstance(needles, list) and all(isinstance(n, str) and n for n in needles), spath, line,
               f"rule {name!r}: needles must be a list of non-empty strings")
        for s in samples:
            _check(not needles or any(n in s for n in needles), spath, line, f"rule {name!r}: its sample {s!r} has none of its needles")
        rules.append(LineRule(name=name, pattern=pattern, line=line, reject=reject, origin=origin, signature=sig,
                              signal=raw.get("signal"), extract=extract, continuation=bool(raw.get("continuation", False)),
                              needles=tuple(needles)))
    return prefilter, tuple(rules)


def load_app_rules(rules_dir: str | Path | None = None) -> AppRules:
    """Load and validate the application-output rules of ``rules_dir`` (default: the shipped ones).

    :raises RuleFileError: naming the file and line of the first bad entry.
    """
    root = Path(rules_dir) if rules_dir is not None else RULES_DIR
    prefilter, lines = _line_rules(root / "rules.json")
    classes = tuple((cols[0], _compile(root / "message_classes.tsv", n, cols[1]))
                    for n, cols in _tsv(root / "message_classes.tsv", 2))
    for n, cols in _tsv(root / "message_classes.tsv", 2):
        _check(bool(_NAME.match(cols[0])), str(root / "message_classes.tsv"), n, f"class {cols[0]!r} must be snake_case")
    normalize = tuple((_compile(root / "normalize.tsv", n, cols[0]), cols[1]) for n, cols in _tsv(root / "normalize.tsv", 2))
    for (rx, _repl), (n, _cols) in zip(normalize, _tsv(root / "normalize.tsv", 2)):
        _check(rx.groups == 0, str(root / "normalize.tsv"), n, "use non-capturing groups (?:...) only")
    try:
        skip = load_list(root / "python_skip_frames.txt")
        ignored = load_list(root / "ignored_exceptions.txt")
    except BadRuleLine as exc:  # the same file:line message, as the agent's rule-file error
        raise RuleFileError(exc.path, exc.lineno, exc.detail) from None
    return AppRules(prefilter=prefilter, lines=lines, skip=skip, classes=classes, normalizer=Normalizer(normalize), ignored=ignored)


@lru_cache(maxsize=8)
def shipped_rules(rules_dir: str | None = None) -> AppRules:
    """The rules of ``rules_dir``, loaded once per process (parsers share them)."""
    return load_app_rules(rules_dir)


__all__ = ["EXTRACTORS", "ORIGINS", "RULES_DIR", "AppRules", "LineRule", "Normalizer", "Prefilter", "load_app_rules", "shipped_rules"]
