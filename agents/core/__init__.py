"""Core dumps to crash events: ELF notes, stack walk, symbols, Python frames, shape, signature.

Start at :class:`CoreAnalyzer` (one per agent, it caches symbol tables) or
``fleetepi signature CORE``. Design notes: ``docs/agents-core.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

#: name -> submodule, imported on first use: the kernel-log and application-output sources use
#: ``shape`` and ``rules`` alone and must not pay for pyelftools and the stack walker.
_LAZY = {
    "BadRuleLine": "exceptions", "NotACore": "exceptions", "UnsupportedCore": "exceptions", "CoreLimits": "limits",
    "DEFAULT_RULES": "rules", "SignatureRules": "rules", "load_rules": "rules",
    "CoreAnalyzer": "signature", "CoreReport": "signature", "analyze_core": "signature",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
