"""The signature pipeline: an ordered list of small rules over the crash's frames.

Like socorro-siggen, each rule is a class with ``predicate(ctx, result)``
and ``action(ctx, result)``; rules run in the order of :data:`DEFAULT_RULES`,
and every change a rule makes is written to ``result.notes`` so the event
explains its own signature. Lists that change often (frames to skip) are
data files in ``agents/rules/signature/``, loaded and validated by
:func:`load_rules` with the directory as a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from fleetepi.agents.core.exceptions import BadRuleLine

#: Where the shipped lists live.
DEFAULT_RULES_DIR = Path(__file__).resolve().parent.parent / "rules" / "signature"
SKIP_FILE = "skip_frames.txt"
#: The contract's bound on ``signature`` (``maxLength`` 1024).
MAX_SIGNATURE = 1024
INTERPRETER_FILE = "interpreter_frames.txt"

_SITE = re.compile(r"^.*/(?:site-packages|dist-packages)/|^.*/lib/python\d+(?:\.\d+)*/")


# --- frames as the rules see them --------------------------------------------
@dataclass(frozen=True, slots=True)
class SigFrame:
    """A frame as the rules see it: only what is stable across hosts.

    :param module: module basename for native frames (``libc.so.6``), or the
        normalized file for Python frames (``ctypes/__init__.py``).
    :param function: the name shown (C++ demangled: ``svc::parse_header(int)``).
    :param offset: module-relative offset of native frames.
    :param unmapped: native pc outside every module (JIT code, corruption).
    """

    module: str
    function: str | None = None
    offset: int | None = None
    language: str = "native"
    unmapped: bool = False
    raw_function: str | None = None  # the symbol as in the file (mangled C++), when it differs

    def render(self) -> str:
        if self.language == "python":
            return f"python:{self.module}!{self.function or '?'}"
        if self.unmapped:
            return "NULL" if self.offset == 0 else "[unmapped]"
        if self.function:
            return f"{self.module}!{self.function}"
        return f"{self.module}!0x{self.offset or 0:x}"


def python_file_key(path: str) -> str:
    """A Python file as signatures show it: relative to site-packages or the
    stdlib (``torch/nn/modules/module.py``, ``ctypes/__init__.py``), else the
    basename (``train.py``), so install prefixes and home directories vanish."""
    stripped = _SITE.sub("", path)
    if stripped != path:
        return stripped
    return path.rsplit("/", 1)[-1]


# --- lists ---------------------------------------------------------------
class FrameList:
    """Regexes from one rules file, matched against ``function`` and ``module!function``."""

    def __init__(self, path: Path, patterns: list[tuple[int, str]]) -> None:
        self.path = path
        self.patterns = patterns
        self._re = re.compile("|".join(f"(?:{p})" for _n, p in patterns)) if patterns else None

    def matches(self, frame: SigFrame) -> bool:
        if self._re is None:
            return False
        for name in (frame.function, frame.raw_function):
            if name and (self._re.fullmatch(name) or self._re.fullmatch(f"{frame.module}!{name}")):
                return True
        return bool(self._re.fullmatch(frame.render()))


def load_list(path: Path) -> FrameList:
    """Load one list; every line must compile.

    :raises BadRuleLine: with ``path:lineno`` of the first bad line.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadRuleLine(str(path), 0, f"cannot read rules file ({exc.strerror})") from None
    patterns: list[tuple[int, str]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            re.compile(line)
        except re.error as exc:
            raise BadRuleLine(str(path), lineno, f"bad regular expression {line!r}: {exc}") from None
        patterns.append((lineno, line))
    return FrameList(path, patterns)


@dataclass(frozen=True, slots=True)
class SignatureRules:
    """The loaded lists and the knobs of the pipeline."""

    skip: FrameList
    interpreter: FrameList
    native_frames: int = 3
    python_frames: int = 3


def load_rules(rules_dir: str | Path | None = None, *, native_frames: int = 3, python_frames: int = 3) -> SignatureRules:
    """Load and validate the lists of ``rules_dir`` (default: the shipped ones)."""
    root = Path(rules_dir) if rules_dir is not None else DEFAULT_RULES_DIR
    if native_frames < 1 or python_frames < 0:
        raise BadRuleLine(str(root), 0, "native_frames must be >= 1 and python_frames >= 0")
    return SignatureRules(
        skip=load_list(root / SKIP_FILE),
        interpreter=load_list(root / INTERPRETER_FILE),
        native_frames=native_frames,
        python_frames=python_frames,
    )


# --- the pipeline ------------------------------------------------------------
@dataclass(slots=True)
class SignatureInput:
    """What the rules read: innermost-first frames and why the core was partial."""

    native: list[SigFrame]
    python: list[SigFrame]
    partial_reason: str | None = None


@dataclass(slots=True)
class SignatureResult:
    """The rules' working state, then their answer (siggen's ``Result``)."""

    native: list[SigFrame]
    python: list[SigFrame]
    parts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        return " | ".join(self.parts)[:MAX_SIGNATURE]


class Rule(Protocol):
    name: ClassVar[str]

    def predicate(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> bool: ...

    def action(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> None: ...


class DropInterpreterFrames:
    """When the Python stack is known, CPython's own native frames say nothing.

    A ``ctypes.string_at(0)`` crash unwinds through ``_PyEval_EvalFrameDefault``
    and ``cfunction_call`` a dozen times; the Python frames that lead the
    signature already say where the program was.
    """

    name: ClassVar[str] = "DropInterpreterFrames"

    def predicate(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> bool:
        return bool(result.python)

    def action(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> None:
        kept = [f for f in result.native if not rules.interpreter.matches(f)]
        dropped = len(result.native) - len(kept)
        if dropped:
            result.notes.append(f"{self.name}: dropped {dropped} native interpreter frames")
        result.native = kept


class SkipCrashMachinery:
    """Frames that say *how* the process died (``abort``, ``raise``,
    ``__restore_rt``, ``__assert_fail``, ``malloc_printerr``) are skipped, so
    that ``assert(x)`` in two functions gives two signatures, not one
    ``libc.so.6!__pthread_kill_implementation``.

    Leading *unsymbolized* frames of a module that also shows a machinery
    frame are skipped too: libc's ``.dynsym`` does not name static helpers
    such as ``__pthread_kill_implementation``, which would otherwise lead
    every ``abort()`` signature as ``libc.so.6!0x8eb2c``.
    """

    name: ClassVar[str] = "SkipCrashMachinery"

    def predicate(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> bool:
        return bool(result.native)

    def action(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> None:
        kept: list[SigFrame] = []
        skipped: list[str] = []
        machinery = {f.module for f in result.native if rules.skip.matches(f)}
        for f in result.native:
            leading_helper = not kept and not f.function and not f.unmapped and f.module in machinery
            if rules.skip.matches(f) or leading_helper:
                skipped.append(f.render())
            else:
                kept.append(f)
        if skipped and not kept:
            result.notes.append(f"{self.name}: every frame is crash machinery; keeping them")
            return
        if skipped:
            result.notes.append(f"{self.name}: skipped {', '.join(skipped[:8])}{' ...' if len(skipped) > 8 else ''}")
        result.native = kept


class TakeTopFrames:
    """Python frames first (where the program was), then the top native frames
    (where it died), joined with `` | ``."""

    name: ClassVar[str] = "TakeTopFrames"

    def predicate(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> bool:
        return True

    def action(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> None:
        py = [f.render() for f in result.python[: rules.python_frames]]
        native = [f.render() for f in result.native[: rules.native_frames]]
        result.parts = py + native


class UnknownFallback:
    """No frame at all (a cut core, a core without registers) still needs a
    signature: ``unknown!truncated-core`` or ``unknown!no-frames``."""

    name: ClassVar[str] = "UnknownFallback"

    def predicate(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> bool:
        return not result.parts

    def action(self, ctx: SignatureInput, result: SignatureResult, rules: SignatureRules) -> None:
        reason = "truncated-core" if ctx.partial_reason else "no-frames"
        result.parts = [f"unknown!{reason}"]
        result.notes.append(f"{self.name}: no frames; signature unknown!{reason}")


#: Order matters: interpreter frames go before the machinery test so that a
#: machinery frame called from the interpreter is judged among user frames;
#: TakeTopFrames needs the cleaned lists; the fallback comes last.
DEFAULT_RULES: tuple[Rule, ...] = (
    DropInterpreterFrames(),
    SkipCrashMachinery(),
    TakeTopFrames(),
    UnknownFallback(),
)


def generate(ctx: SignatureInput, rules: SignatureRules, pipeline: Sequence[Rule] = DEFAULT_RULES) -> SignatureResult:
    """Run the pipeline; a failing rule adds a note and the others still run."""
    result = SignatureResult(native=list(ctx.native), python=list(ctx.python))
    for rule in pipeline:
        try:
            if rule.predicate(ctx, result, rules):
                rule.action(ctx, result, rules)
        except Exception as exc:  # noqa: BLE001 - a rule bug must not lose the crash
            result.notes.append(f"{rule.name} failed: {type(exc).__name__}: {exc}"[:200])
    if not result.parts:
        result.parts = ["unknown!no-frames"]
    result.parts = [p[:200] for p in result.parts]
    return result


__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_RULES_DIR",
    "DropInterpreterFrames",
    "FrameList",
    "Rule",
    "SigFrame",
    "SignatureInput",
    "SignatureResult",
    "SignatureRules",
    "SkipCrashMachinery",
    "TakeTopFrames",
    "UnknownFallback",
    "generate",
    "load_list",
    "load_rules",
    "python_file_key",
]
