"""Errors of the core dump reader, under fleetepi's one root.

::

    FleetepiError
     └── CoreParseError          (fleetepi.exceptions)
          ├── NotACore           the file is not an ELF core (wrong magic or e_type)
          ├── UnsupportedCore    an ELF core of a machine we cannot unwind (not x86-64)
          └── BadRuleLine        a rules file line that does not compile (file:line)

pyelftools' ``ELFError``/construct errors are translated in one place,
``fleetepi.agents.core.elfcore``; the signature pipeline turns a partly readable core
into a ``partial`` event with a note instead of raising, so only the
``NotACore`` family ever reaches a caller of :func:`fleetepi.agents.core.analyze_core`.
"""

from __future__ import annotations

from fleetepi.exceptions import ConfigError, CoreParseError


class NotACore(CoreParseError):
    """The file is not an ELF core dump (wrong magic, not ET_CORE, empty)."""


class UnsupportedCore(CoreParseError):
    """An ELF core for a machine whose registers we do not decode."""


class BadRuleLine(ConfigError):
    """A line of an ``agents/rules`` list that is not a valid regular expression.

    Carries ``path`` and ``lineno`` so the operator can fix the file at once.
    """

    def __init__(self, path: str, lineno: int, detail: str) -> None:
        super().__init__(f"{path}:{lineno}: {detail}")
        self.path = path
        self.lineno = lineno
        self.detail = detail


__all__ = ["BadRuleLine", "NotACore", "UnsupportedCore"]
