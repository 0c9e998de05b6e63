"""Imports run one way: contract -> detectors -> {embedded pipeline, stream} -> cli; the agent needs only the contract.

A detector that imports Kafka cannot run in replay; an agent that imports the
detectors drags scipy onto every GPU host. Read from the source (ast), so
a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The shared ground every layer may use: message types, errors, config loading, output helpers.
SHARED = {"fleetepi.contract", "fleetepi.exceptions", "fleetepi.config", "fleetepi.console", "fleetepi.brokers",
          "fleetepi.jsonl", "fleetepi.procs"}

#: folder -> (its package, the fleetepi modules it may import besides its own)
LAYERS = {
    "fleetepi/contract": ("fleetepi.contract", {"fleetepi.exceptions"}),
    "detectors": ("fleetepi.detectors", {"fleetepi.contract", "fleetepi.exceptions"}),
    "agents": ("fleetepi.agents", SHARED),
    "fleetepi/simulate": ("fleetepi.simulate", SHARED),
    "stream": ("fleetepi.stream", SHARED | {"fleetepi.detectors", "fleetepi.metrics", "fleetepi.maintenance"}),
}
#: third-party packages a layer must never import
FORBIDDEN = {
    "detectors": {"faust", "aiokafka", "kafka", "prometheus_client", "click", "httpx"},
    "fleetepi/contract": {"faust", "aiokafka", "kafka", "prometheus_client", "numpy", "scipy"},
    "agents": {"faust", "aiokafka", "scipy"},
}


def imports_of(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            if node.module == "fleetepi":
                out.update(f"fleetepi.{a.name}" for a in node.names)
    return out


def _within(module: str, allowed: set[str]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("folder", list(LAYERS))
def test_a_layer_imports_only_what_is_below_it(folder: str) -> None:
    own, allowed = LAYERS[folder]
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for mod in imports_of(path):
            top = mod.split(".")[0]
            if mod.startswith("fleetepi") and mod != "fleetepi" and not _within(mod, allowed | {own}):
                bad.append(f"{path.relative_to(ROOT)}: {mod}")
            if top in FORBIDDEN.get(folder, set()):
                bad.append(f"{path.relative_to(ROOT)}: {mod} (third-party, not for this layer)")
    assert not bad, "\n".join(bad)
