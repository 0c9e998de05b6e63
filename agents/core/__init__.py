"""Core dumps to crash events: ELF notes, stack walk, symbols, Python frames, shape, signature.

Start at :class:`CoreAnalyzer` (one per agent, it caches symbol tables) or
``fleetepi signature CORE``. Design notes: ``docs/agents-core.md``.
"""

from __future__ import annotations

from fleetepi.agents.core.exceptions import BadRuleLine, NotACore, UnsupportedCore
from fleetepi.agents.core.limits import CoreLimits
from fleetepi.agents.core.rules import DEFAULT_RULES, SignatureRules, load_rules
from fleetepi.agents.core.signature import CoreAnalyzer, CoreReport, analyze_core

__all__ = [
    "DEFAULT_RULES",
    "BadRuleLine",
    "CoreAnalyzer",
    "CoreLimits",
    "CoreReport",
    "NotACore",
    "SignatureRules",
    "UnsupportedCore",
    "analyze_core",
    "load_rules",
]
