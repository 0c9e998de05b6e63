"""Literal text a regex cannot match without: the kernel-log parser's prefilter.

Most lines of a kernel log match no rule, and failing ~40 regexes on a
1 KiB line costs ~40 scans of it. So each rule is tried only when its
pattern's requirement holds, and every rule's literals are found in *one*
pass (Aho-Corasick, :class:`LiteralIndex`): a few microseconds a line,
whatever its content. A requirement is read from the compiled pattern itself
(never declared by hand, so it cannot drift from it): a set of literals of
which every match contains one, plus the prefixes of alternatives anchored at
``^`` (``^F\\d{4} ...`` needs a line starting with ``F``). It is conservative:
whatever this module cannot reason about (case-insensitive parts, an
alternative with neither a literal of :data:`MIN_LITERAL` characters nor an
anchor) gives "no requirement", and the rule then always runs.

``re._parser`` is CPython's own regex parser (``sre_parse`` before 3.11);
``tests/agents/test_kernel_log.py`` checks on every shipped rule, sample and
real line that the prefilter never hides a match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

try:  # CPython >= 3.11
    from re import _constants as _c  # type: ignore[attr-defined]
    from re import _parser as _p  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - another interpreter: no prefilter, every rule runs
    _p = None
    _c = None

try:
    import ahocorasick_rs
except ImportError:  # pragma: no cover - the [agent] extra installs it; plain substring tests otherwise
    ahocorasick_rs = None

#: Literals shorter than this select too little to be worth a test.
MIN_LITERAL = 3


@dataclass(frozen=True)
class Requirement:
    """A match needs one of ``literals`` somewhere, or a line starting with one of ``prefixes``."""

    literals: frozenset[str] = frozenset()
    prefixes: frozenset[str] = frozenset()

    def __or__(self, other: Requirement) -> Requirement:
        return Requirement(self.literals | other.literals, self.prefixes | other.prefixes)

    def holds(self, text: str) -> bool:
        """Direct check (the index does the literals in one pass; this is the reference)."""
        return any(lit in text for lit in self.literals) or text.startswith(tuple(self.prefixes))


def required(pattern: re.Pattern[str]) -> Requirement | None:
    """What every match of ``pattern`` needs; None when unknown (try the rule on every line)."""
    if _p is None or pattern.flags & (re.IGNORECASE | re.MULTILINE):
        return None
    try:
        parsed = _p.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - an odd pattern only loses the prefilter
        return None
    return _seq(list(parsed.data))


def _seq(items: list[tuple[Any, Any]]) -> Requirement | None:
    """Best requirement of a sequence of parsed items (None: none known)."""
    if items and items[0][0] is _c.AT and items[0][1] is _c.AT_BEGINNING:
        head = []
        for op, av in items[1:]:
            if op is not _c.LITERAL:
                break
            head.append(chr(av))
        if head:  # anchored: the line must start with this, whatever follows
            return Requirement(prefixes=frozenset({"".join(head)}))
    candidates: list[Requirement] = []
    run: list[str] = []

    def end_run() -> None:
        if len(run) >= MIN_LITERAL:
            candidates.append(Requirement(literals=frozenset({"".join(run)})))
        run.clear()

    for op, av in items:
        if op is _c.LITERAL:
            run.append(chr(av))
            continue
        end_run()
        inner: Requirement | None = None
        if op is _c.SUBPATTERN:
            _group, add_flags, _del_flags, sub = av
            if not add_flags & re.IGNORECASE:
                inner = _seq(list(sub.data))
        elif op is _c.BRANCH:
            inner = _branch(av[1])
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            low, _high, sub = av
            if low >= 1:
                inner = _seq(list(sub.data))
        if inner is not None:
            candidates.append(inner)
    end_run()
    if not candidates:
        return None
    # the most selective: a prefix test is the cheapest, else the longest shortest literal
    return max(candidates, key=_selectivity)


def _selectivity(req: Requirement) -> tuple[int, int]:
    shortest = min((len(x) for x in req.literals), default=1 << 16)
    return (shortest, -len(req.literals) - len(req.prefixes))


def _branch(alternatives: list[Any]) -> Requirement | None:
    out = Requirement()
    for alt in alternatives:
        got = _seq(list(alt.data))
        if got is None:
            return None
        out = out | got
    return out


class LiteralIndex:
    """Which rules a text can match, from one pass over it.

    :param requirements: per rule, its :class:`Requirement`, or None for a rule
        that must always be tried.
    """

    def __init__(self, requirements: Sequence[Requirement | None]) -> None:
        self.always = frozenset(i for i, req in enumerate(requirements) if req is None)
        literals = sorted({lit for req in requirements if req is not None for lit in req.literals})
        self._rules_of = [tuple(i for i, req in enumerate(requirements) if req is not None and lit in req.literals)
                          for lit in literals]
        self._literals = literals
        self._prefixed = [(i, tuple(sorted(req.prefixes))) for i, req in enumerate(requirements)
                          if req is not None and req.prefixes]
        self._ac = (ahocorasick_rs.BytesAhoCorasick([lit.encode() for lit in literals])
                    if ahocorasick_rs is not None and literals else None)

    def candidates(self, text: str) -> list[int]:
        """Indices of the rules worth trying on ``text``, ascending (rule order)."""
        found = set(self.always)
        rules_of = self._rules_of
        if self._ac is not None:
            hits = {m[0] for m in self._ac.find_matches_as_indexes(text.encode("utf-8", "replace"), overlapping=True)}
            for lit_i in hits:
                found.update(rules_of[lit_i])
        else:
            for lit_i, lit in enumerate(self._literals):
                if lit in text:
                    found.update(rules_of[lit_i])
        for i, prefixes in self._prefixed:
            if text.startswith(prefixes):
                found.add(i)
        return sorted(found)


__all__ = ["MIN_LITERAL", "LiteralIndex", "Requirement", "required"]
